"""What every command shares: the error console, the one error formatter (a pydantic error as the
flags to fix), the exit code of each kind of failure (errors.py), and flag parsing helpers."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NoReturn

import typer
from pydantic import ValidationError

from tokenbench.cli.flags import RUN_FLAGS
from tokenbench.console.terminal import console
from tokenbench.errors import BAD_INPUT_EXIT, BUG_EXIT, BadInput

err = console(stderr=True, soft_wrap=True)  # wide when piped: tables are not cut to 80 columns


class UsageError(BadInput):
    """Bad input found by a command: the message names the flags to change."""


def fail(message: str, code: int) -> NoReturn:
    """The one way a command reports bad input or a failure: a red line (credentials masked), then
    the exit code (2: bad input, 3: the server)."""
    from tokenbench.common.redact import mask_text

    err.print(f"[bold red]error:[/] {mask_text(message)}")
    raise typer.Exit(code)


def validation_message(exc: ValidationError, flags: Mapping[str, str] = RUN_FLAGS) -> str:
    """A pydantic error as the flags to fix (``flags``: ``Model.field`` -> flag, cli/flags.py)."""
    parts = []
    for e in exc.errors():
        field = ".".join(str(x) for x in e["loc"])
        flag = flags.get(f"{exc.title}.{field}" if field else exc.title, field or exc.title)
        parts.append(f"{flag}: {e['msg'].removeprefix('Value error, ')}")
    return "invalid settings: " + "; ".join(parts)


def given(**values: Any) -> dict[str, Any]:
    """The options the user gave: None means not given, so the settings' own default applies
    (pydantic holds the only defaults; the options default to None)."""
    return {k: v for k, v in values.items() if v is not None}


def numbers(text: str | None, flag: str, cast: Callable[[str], Any] = float) -> list[Any]:
    if text is None:
        return []
    try:
        values = [cast(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UsageError(f"{flag} takes a comma-separated list of numbers, got {text!r}") from None
    if not values:
        raise UsageError(f"{flag} is empty")
    return values


@contextlib.contextmanager
def exit_codes(interrupted: str) -> Iterator[None]:
    """A benchmark's expected failures as exit codes (4, the server failed a point, is the run's own:
    cli/run.py): 3 the server (unreachable, did not start), 2
    bad input (a path that is not there, or is in the way, included), 1 every worker lost
    (--workers); an interrupt before the work finished says ``interrupted`` and exits with its
    signal's code (130, 143): what was measured is on disk. Anything else is a bug (cli/__init__)."""
    from tokenbench.clients.stream import TargetUnreachable
    from tokenbench.common.procs import Interrupts
    from tokenbench.errors import BackendError
    from tokenbench.workers.pool import AllWorkersLost

    try:
        yield
    except (TargetUnreachable, BackendError) as exc:
        fail(str(exc), 3)
    except (BadInput, FileNotFoundError, FileExistsError) as exc:
        fail(str(exc), BAD_INPUT_EXIT)
    except AllWorkersLost as exc:
        fail(f"{exc}; what was measured is on disk", 1)
    except KeyboardInterrupt:
        err.print(f"[yellow]{interrupted}; what was measured is on disk[/]")
        raise typer.Exit(Interrupts.exit_code()) from None


def bad_input(exc: BaseException) -> NoReturn:
    """Bad input found anywhere in a command (errors.BadInput, or a pydantic error: the flags to
    fix): one red line, exit 2."""
    fail(validation_message(exc) if isinstance(exc, ValidationError) else str(exc), BAD_INPUT_EXIT)


def bug(exc: BaseException) -> NoReturn:
    """Anything a command did not expect is a bug in tokenbench: the traceback, a line asking for
    a report, and EX_SOFTWARE (never 2: the user's input was not the problem)."""
    from tokenbench import __version__

    err.print_exception(show_locals=False)
    err.print(
        f"[bold red]internal error ({type(exc).__name__}):[/] this is a bug in tokenbench {__version__}, not your "
        "input: please report it with the traceback above and the command you ran"
    )
    raise typer.Exit(BUG_EXIT)
