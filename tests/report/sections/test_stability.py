"""Degradation over time (report/stability.py): head vs tail of the steady state, with known answers."""

from __future__ import annotations

import pytest
from report_synthetic import WINDOW_S, windows

from tokenbench.report.read.data import PointSpan
from tokenbench.report.sections.stability import stability
from tokenbench.results import TimeWindow


def _span(rates: list[float], ramp_s: float = 10.0, drain: int = 1) -> PointSpan:
    ws = windows(0.0, ramp_s, rates, drain=drain)
    load_end = ramp_s + WINDOW_S * len(rates)
    return PointSpan(
        index=0,
        label="4 users",
        load_kind="users",
        start_s=0.0,
        ramp_end_s=ramp_s,
        measure_start_s=ramp_s,
        load_end_s=load_end,
        end_s=load_end + WINDOW_S * drain,
        windows=tuple(TimeWindow.model_validate(w) for w in ws),
    )


def test_degradation_first_vs_last_minute() -> None:
    # 5 minutes steady: first minute 100 tok/s, last minute 90 tok/s -> -10%, flagged
    rates = [100.0] * 12 + [95.0] * 36 + [90.0] * 12
    s = stability(_span(rates))
    assert s is not None and s.basis == "first vs last minute"
    assert s.head_tokens_per_s == pytest.approx(100.0) and s.tail_tokens_per_s == pytest.approx(90.0)
    assert s.change == pytest.approx(-0.10)
    assert s.degraded


def test_degradation_thirds_for_short_runs_and_threshold() -> None:
    s = stability(_span([100.0, 100.0, 98.0, 97.0, 96.0, 95.0]))
    assert s is not None and s.basis == "first vs last third"
    assert s.change == pytest.approx(-0.045)
    assert not s.degraded  # 4.5% is within the 5% tolerance
    assert s.cv == pytest.approx(0.0191, abs=1e-3)


def test_degradation_ignores_ramp_and_drain() -> None:
    # ramp windows (5 tok/s) and the drain window (2 tok/s) would make a flat run look degraded
    s = stability(_span([100.0] * 6, ramp_s=20.0, drain=2))
    assert s is not None and s.change == pytest.approx(0.0) and not s.degraded and s.cv == pytest.approx(0.0)


def test_degradation_needs_three_windows() -> None:
    assert stability(_span([100.0, 50.0])) is None
