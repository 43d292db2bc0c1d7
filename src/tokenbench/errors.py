"""The kinds of failure a command ends with, and the exit code of each (cli/ turns them into
one red line and an exit; every other exception is a bug: traceback, EX_SOFTWARE, a report line).

- ``BadInput`` (exit 2): a flag, a file or a setting the user can fix; the message says what to
  change. It subclasses ValueError so that a pydantic validator raising it still yields a
  ValidationError (which the CLI reads as bad input too).
- Expected run failures keep their own types and codes: the server (``TargetUnreachable``,
  ``BackendError``: 3), every worker lost (``AllWorkersLost``: 1), an interrupt (130, 143).
- A run that finished but whose server failed a point (more than half of a point's finished
  requests failed, or the circuit breaker stopped it: results.failures): ``SERVER_FAILED_EXIT``
  (4), after results.json is written and the server's errors are shown.
"""

from __future__ import annotations

BAD_INPUT_EXIT = 2
SERVER_FAILED_EXIT = 4  # the run finished, but the server failed a point (results.failures)
BUG_EXIT = 70  # EX_SOFTWARE (sysexits.h): an internal error, not the user's input


class BadInput(ValueError):
    """Bad input: the message names what to change (exit 2, one line)."""


class BackendError(Exception):
    """A backend could not be launched as asked; the message says what to change (exit 3)."""
