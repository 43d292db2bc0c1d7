"""`tokenbench backends`: the profiles, and the exact command one would launch."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from tokenbench.cli.common import err, fail
from tokenbench.cli.engine import SHOW_OPTIONS, knobs
from tokenbench.cli.flags import FlagCommand
from tokenbench.cli.help import GroupedCommand
from tokenbench.config import BackendConfig

SHOWN_REPLICA_PORT = 8080  # `show` of a router: its replicas as if on the embedded llama.cpp server's port and the next

app = typer.Typer(help="Backend profiles: list them, or show the exact launch command.", invoke_without_command=True)


@app.callback()
def backends_list(ctx: typer.Context) -> None:
    """List the backend profiles."""
    if ctx.invoked_subcommand is not None:
        return
    from tokenbench.backends import PROFILES
    from tokenbench.console.tables import backends_table

    Console().print(backends_table(PROFILES.values()))


def backends_show(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Profile name (tokenbench backends).")],
    model: Annotated[str, typer.Option(help="What the engine loads: hub id or local path.")] = "MODEL",
    port: Annotated[int | None, typer.Option(help="Port (default: the engine's usual one).")] = None,
    container: Annotated[bool, typer.Option(help="Show the container command instead of the local one.")] = False,
    served_model_name: Annotated[str | None, typer.Option(help="The model name requests use.")] = None,
) -> None:
    """Print the exact launch command (an argument list) and what the profile knows; the engine
    options are `run`'s."""
    import shlex
    from dataclasses import replace

    from tokenbench.backends import get_profile
    from tokenbench.backends.server import launch_spec
    from tokenbench.console.tables import profile_panel
    from tokenbench.errors import BackendError

    try:
        profile = get_profile(name)
        config = BackendConfig(
            name=name,
            model=model,
            served_model_name=served_model_name,
            knobs=knobs(ctx.params),
            executable=ctx.params.get("engine_bin"),
            port=port,
        )
        spec = launch_spec(profile, config)
        if profile.router:  # its replicas' URLs are known once they run: two shown on the engine's ports
            spec = replace(spec, upstream_urls=tuple(f"http://{spec.host}:{SHOWN_REPLICA_PORT + k}" for k in range(2)))
        launch = (profile.container if container else profile.local)(spec)
    except BackendError as exc:  # here only the profile's refusal of these options: bad input
        fail(str(exc), 2)
    from tokenbench.common.redact import mask, mask_argv

    # credentials masked here too: the command is for reading and copying, not for leaking
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in mask(dict(launch.env)).items())
    typer.echo((env + " " if env else "") + shlex.join(mask_argv(launch.argv)))
    err.print(profile_panel(profile, spec))


app.command("show", cls=GroupedCommand)(FlagCommand(backends_show, SHOW_OPTIONS))
