"""The capacity search's decisions, pure: given the ceiling and the verdicts so far, the next load
value to probe or why the search stops. No I/O, no clock: testable with known sequences.

The search (docs/capacity.md):
1. The first guess is the ceiling (the saturating probe's estimate).
2. Bracket: while nothing failed, grow the highest passing value by GROWTH (the ceiling is a
   measured maximum throughput, so a pass above it is rare: small steps), up to ALL_PASSING x the
   ceiling (then: ``all_passing``); while nothing passed, halve the lowest failing value, down to
   the floor (rate: the ceiling / 2**MAX_HALVINGS, users: 1; then ``no_passing``).
3. Bisect between the highest passing value and the lowest failing value above it until
   ``(min_failing - max_passing) / max_passing <= tolerance`` (users: or the gap is 1 user).
The probe budget (distinct values probed, the saturating probe not counted) stops it first
when it runs out (``budget``). A non-monotone outcome (a value fails below one that passed) is
taken as noise: the bracket is the highest pass and the lowest failure above it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tokenbench.results.capacity import StoppedBy, Variable

GROWTH = 1.25
ALL_PASSING = 2.0
MAX_HALVINGS = 5


@dataclass(frozen=True)
class Verdict:
    """A probed value and whether it met every objective (trial means)."""

    value: float
    passed: bool


@dataclass(frozen=True)
class Step:
    """The next value to probe, or (``value`` None) why the search stopped."""

    value: float | None = None
    stopped_by: StoppedBy | None = None


@dataclass(frozen=True)
class Bracket:
    """The highest passing value and the lowest failing value above it (None: none yet)."""

    max_passing: float | None
    min_failing: float | None

    @classmethod
    def of(cls, verdicts: Sequence[Verdict]) -> Bracket:
        passing = [v.value for v in verdicts if v.passed]
        lo = max(passing, default=None)
        failing = [v.value for v in verdicts if not v.passed and (lo is None or v.value > lo)]
        return cls(lo, min(failing, default=None))


def next_step(
    ceiling: float, verdicts: Sequence[Verdict], variable: Variable, tolerance: float, max_probes: int
) -> Step:
    """The next value to probe after ``verdicts`` (in probe order), or the reason to stop."""
    b = Bracket.of(verdicts)
    lo, hi = b.max_passing, b.min_failing
    if lo is not None and hi is not None and _converged(lo, hi, variable, tolerance):
        return Step(stopped_by="tolerance")
    if lo is None and hi is not None and hi <= _floor(ceiling, variable):
        return Step(stopped_by="no_passing")
    if lo is not None and hi is None and lo >= ALL_PASSING * ceiling:
        return Step(stopped_by="all_passing")
    if len(verdicts) >= max_probes:
        return Step(stopped_by="budget")
    value = _candidate(ceiling, lo, hi, variable)
    tried = {v.value for v in verdicts}
    if value in tried:  # rounding met a value already probed: nothing finer to learn
        return Step(stopped_by="tolerance")
    return Step(value=value)


def _candidate(ceiling: float, lo: float | None, hi: float | None, variable: Variable) -> float:
    if lo is None and hi is None:
        raw = ceiling
    elif lo is None:
        assert hi is not None
        raw = max(hi / 2, _floor(ceiling, variable))
    elif hi is None:
        raw = min(lo * GROWTH, ALL_PASSING * ceiling)
        if variable == "users":
            return float(max(lo + 1, math.ceil(raw)))
    else:
        raw = (lo + hi) / 2
    return _round(raw, variable)


def _converged(lo: float, hi: float, variable: Variable, tolerance: float) -> bool:
    if variable == "users" and hi - lo <= 1:
        return True
    return (hi - lo) / lo <= tolerance


def _floor(ceiling: float, variable: Variable) -> float:
    """The lowest value the search goes down to before it says no load meets the SLO."""
    return 1.0 if variable == "users" else _round(ceiling / 2**MAX_HALVINGS, variable)


def _round(value: float, variable: Variable) -> float:
    """Users are whole (at least 1); a rate keeps 3 significant digits (readable probe labels)."""
    if variable == "users":
        return float(max(1, math.floor(value)))
    return float(f"{value:.3g}")
