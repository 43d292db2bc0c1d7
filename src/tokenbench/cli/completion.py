"""`tokenbench completion SHELL`: the shell's completion script, Typer's own (the same as
``--show-completion`` prints for the shell it detects), for a shell named rather than detected."""

from __future__ import annotations

from typing import Annotated, Literal

import typer

Shell = Literal["bash", "zsh", "fish"]
PROG = "tokenbench"
COMPLETE_VAR = "_TOKENBENCH_COMPLETE"  # the variable the script sets when it asks tokenbench for completions


def completion(
    shell: Annotated[Shell, typer.Argument(help="bash, zsh or fish.", metavar="SHELL")],
) -> None:
    """Print the completion script of bash, zsh or fish: `eval "$(tokenbench completion bash)"` in
    ~/.bashrc (zsh: ~/.zshrc; fish: `tokenbench completion fish > ~/.config/fish/completions/tokenbench.fish`)."""
    # Typer's own scripts (typer.completion re-exports them without declaring it)
    from typer.completion import get_completion_script  # type: ignore[attr-defined]

    typer.echo(get_completion_script(prog_name=PROG, complete_var=COMPLETE_VAR, shell=shell))
