"""`tokenbench run`'s options for where the load comes from (processes, Ray) and what it costs."""

from __future__ import annotations

from typing import Annotated

import typer

from ..config import WorkersConfig
from ..cost import CostConfig

_SCALE = "Scale-out"

Workers = Annotated[
    int | None,
    typer.Option(
        help="Send the load from N processes (each its own event loop and connections; with --ray, N Ray "
        "actors). One global schedule is dealt to them: the same load whatever N. \\[default: 1]",
        rich_help_panel=_SCALE,
    ),
]
UseRay = Annotated[
    bool | None,
    typer.Option(
        "--ray/--no-ray",
        help="Run the --workers as Ray actors on a local Ray instance (pip install 'tokenbench[ray]').",
        rich_help_panel=_SCALE,
    ),
]
RayAddress = Annotated[
    str | None,
    typer.Option(help="Attach to a Ray cluster (ADDR or 'auto'); implies --ray.", rich_help_panel=_SCALE),
]
RayCpusPerWorker = Annotated[
    float | None,
    typer.Option(
        help="Ray CPUs each worker actor reserves (0: place more actors than cores)."
        f" \\[default: {WorkersConfig.model_fields['cpus_per_worker'].default:g}]",
        rich_help_panel=_SCALE,
    ),
]
CostPerHour = Annotated[
    float | None,
    typer.Option(
        help="USD per GPU-hour of the server's hardware (an instance's price: with --gpus 1): each point's "
        "cost per million tokens at its throughput.",
        rich_help_panel="Cost",
    ),
]
Gpus = Annotated[
    int | None,
    typer.Option(
        help=f"GPUs --cost-per-hour pays for (default {CostConfig.model_fields['gpus'].default}).",
        rich_help_panel="Cost",
    ),
]
