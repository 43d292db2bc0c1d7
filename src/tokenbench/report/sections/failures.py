"""A failed point in words (results.failures' rule): how many of its requests failed, whether the
circuit breaker stopped it, and what the server said. The console after a run, the run's exit
line and the report's verdict say the same sentences."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tokenbench.report.read.data import PointRow
from tokenbench.results import ErrorSeen, PointResult, StoppedEarly, point_failed
from tokenbench.results.failures import FAILED_SHARE, UNFINISHED_OUTCOMES


@dataclass(frozen=True)
class FailedPoint:
    """A point that failed: which, its outcomes, the server's errors and the breaker's trip."""

    label: str
    outcomes: Mapping[str, int]
    errors: Sequence[ErrorSeen] = ()
    stopped_early: StoppedEarly | None = None

    @classmethod
    def of(cls, point: PointResult) -> FailedPoint | None:
        """``point`` if it failed, else None."""
        if not point_failed(point.requests.by_outcome, point.stopped_early):
            return None
        return cls(point.label, dict(point.requests.by_outcome), point.errors_seen or (), point.stopped_early)

    @classmethod
    def of_row(cls, row: PointRow, named: bool = True) -> FailedPoint | None:
        """A report's row if it failed (its outcomes summed over trials), else None; ``named``: its
        configuration is said (a report of several)."""
        if not point_failed(row.outcomes, row.stopped_early):
            return None
        label = f"{row.config} at {row.label}" if named else row.label
        return cls(label, row.outcomes, row.errors_seen, row.stopped_early)

    def headline(self) -> str:
        """'4 users failed: 20 of 20 finished requests failed (http_error 20); stopped early: ...'."""
        finished = {k: n for k, n in self.outcomes.items() if k not in UNFINISHED_OUTCOMES}
        failures = {k: n for k, n in finished.items() if k != "ok" and n}
        kinds = ", ".join(f"{k} {n}" for k, n in failures.items())
        text = f"{self.label} failed: {sum(failures.values())} of {sum(finished.values())} finished requests failed"
        text += f" ({kinds})" if kinds else ""
        if self.stopped_early is not None:
            text += f"; stopped early by the {self.stopped_early.by.replace('_', ' ')}: {self.stopped_early.reason}"
        return text

    def error_lines(self) -> list[str]:
        """What the server said, one line per distinct error: '[http_error 400] ×20: HTTP 400: ...'."""
        return [f"[{e.outcome}{'' if e.status is None else f' {e.status}'}] ×{e.count}: {e.text}" for e in self.errors]

    def sentence(self) -> str:
        """The headline and the first error text, one sentence (the report's verdict)."""
        first = f"; the server said: {self.errors[0].text}" if self.errors else ""
        return self.headline() + first + "."


def failed_points(points: Sequence[PointResult]) -> list[FailedPoint]:
    return [f for p in points if (f := FailedPoint.of(p)) is not None]


def failure_lines(points: Sequence[PointResult]) -> list[str]:
    """The console's lines after a run's summary: each failed point and its errors (none: [])."""
    lines = []
    for f in failed_points(points):
        lines.append("FAILED: " + f.headline())
        lines += ["  " + line for line in f.error_lines()]
    if lines:
        lines.append(
            f"(a point fails when more than {FAILED_SHARE:.0%} of its finished requests failed, "
            "or when the circuit breaker stopped it)"
        )
    return lines
