"""`tokenbench backends`: the profiles, and the exact command one would launch."""

from __future__ import annotations

from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console

from ..config import BackendConfig
from .common import (
    UsageError,
    err,
    fail,
    validation_message,
)
from .engine import (
    EngineArg,
    EngineBin,
    EngineEnv,
    KVMemory,
    MaxModelLen,
    MaxNumSeqs,
    PrefixCaching,
    Quantization,
    TensorParallel,
    knobs,
)

app = typer.Typer(help="Backend profiles: list them, or show the exact launch command.", invoke_without_command=True)


@app.callback()
def backends_list(ctx: typer.Context) -> None:
    """List the backend profiles."""
    if ctx.invoked_subcommand is not None:
        return
    from ..backends import PROFILES
    from ..report.console import backends_table

    Console().print(backends_table(PROFILES.values()))


@app.command("show")
def backends_show(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Profile name (tokenbench backends).")],
    model: Annotated[str, typer.Option(help="What the engine loads: hub id or local path.")] = "MODEL",
    port: Annotated[int | None, typer.Option(help="Port (default: the engine's usual one).")] = None,
    container: Annotated[bool, typer.Option(help="Show the container command instead of the local one.")] = False,
    served_model_name: Annotated[str | None, typer.Option(help="The model name requests use.")] = None,
    max_num_seqs: MaxNumSeqs = None,
    kv_memory: KVMemory = None,
    max_model_len: MaxModelLen = None,
    prefix_caching: PrefixCaching = None,
    quantization: Quantization = None,
    tensor_parallel: TensorParallel = None,
    engine_arg: EngineArg = None,
    engine_env: EngineEnv = None,
    engine_bin: EngineBin = None,
) -> None:
    """Print the exact launch command (an argument list) and what the profile knows."""
    import shlex

    from ..backends import BackendError, get_profile
    from ..backends.server import launch_spec
    from ..report.console import profile_panel

    try:
        profile = get_profile(name)
        config = BackendConfig(
            name=name,
            model=model,
            served_model_name=served_model_name,
            knobs=knobs(ctx.params),
            executable=engine_bin,
            port=port,
        )
        spec = launch_spec(profile, config)
        launch = (profile.container if container else profile.local)(spec)
    except UsageError as exc:
        fail(str(exc), 2)
    except ValidationError as exc:
        fail(validation_message(exc), 2)
    except BackendError as exc:
        fail(str(exc), 2)
    from ..redact import mask, mask_argv

    # credentials masked here too: the command is for reading and copying, not for leaking
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in mask(dict(launch.env)).items())
    typer.echo((env + " " if env else "") + shlex.join(mask_argv(launch.argv)))
    err.print(profile_panel(profile, spec))
