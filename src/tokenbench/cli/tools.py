"""The scripted mock server (its options: MockSettings' flags, mock/settings.py) and the
client-overhead calibration."""

from __future__ import annotations

from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console

from tokenbench.cli.common import UsageError, err, fail, validation_message
from tokenbench.cli.flags import FlagCommand, Params, flag_of, given_fields, options
from tokenbench.mock.settings import MockSettings

# MockSettings' fields that `tokenbench mock` sets, and the flag each names in an error.
MOCK_OPTIONS = options(MockSettings)
MOCK_FLAGS = flag_of(MOCK_OPTIONS)


def _mock(
    ctx: typer.Context,
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1.")] = 9000,
) -> None:
    """Serve a scripted OpenAI-compatible streaming endpoint on 127.0.0.1."""
    from tokenbench.mock import serve

    settings = mock_settings(ctx.params)
    err.print(f"mock server on http://127.0.0.1:{port} (TTFT {settings.ttft_ms} ms, ITL {settings.itl_ms} ms)")
    serve(settings, port=port)


def mock_settings(a: Params) -> MockSettings:
    """The flags given as MockSettings (every other field its default); bad input raises, naming
    the flag to fix."""
    try:
        return MockSettings(**given_fields(MOCK_OPTIONS, a))
    except ValidationError as exc:
        raise UsageError(validation_message(exc, MOCK_FLAGS)) from None


# `tokenbench mock`: the port, then MockSettings' flags (settings.py declares them and their defaults).
mock = FlagCommand(_mock, MOCK_OPTIONS, name="mock")


def calibrate(
    users: Annotated[int, typer.Option(help="Concurrent streams.")] = 32,
    requests: Annotated[int | None, typer.Option(help="Requests in all (default 8 per user).")] = None,
    ttft_ms: Annotated[float, typer.Option()] = 50.0,
    itl_ms: Annotated[float, typer.Option()] = 10.0,
    output_tokens: Annotated[int, typer.Option()] = 128,
    pin: Annotated[bool, typer.Option(help="Pin the mock to one core and the client to another.")] = True,
    api: Annotated[
        str, typer.Option(help="chat (streamed replies of --output-tokens) or embeddings (whole answers).")
    ] = "chat",
    target_rate: Annotated[
        float | None,
        typer.Option(help="Requests/s you mean to offer: how many client processes (--workers) it needs."),
    ] = None,
) -> None:
    """Measure the client's own overhead floor at a load, against the mock server: its error, its
    CPU per token and per request, and the highest request rate one client process sustains."""
    from tokenbench.run.calibrate import CalibrationSpec, calibration_table, ceiling_text, request_ceiling
    from tokenbench.run.calibrate import calibrate as run_calibration

    if api not in ("chat", "embeddings"):
        fail(f"--api {api}: calibrate runs chat or embeddings against the mock", 2)
    if target_rate is not None and not target_rate > 0:
        fail(f"--target-rate {target_rate}: give the requests/s you mean to offer (more than 0)", 2)
    spec = CalibrationSpec(
        users=users,
        requests=requests or users * 8,
        ttft_ms=ttft_ms,
        itl_ms=itl_ms,
        output_tokens=output_tokens,
        pin_cores=pin,
        api="chat" if api == "chat" else "embeddings",
    )
    result = run_calibration(spec)
    console = Console()
    console.print(calibration_table([result]))
    ceiling = request_ceiling(result.cost, target_rate) if result.cost is not None else None
    if ceiling is not None:
        console.print(ceiling_text(spec, ceiling))
