"""autostop: in results: when a point's figures stopped drifting (``steady_state``), how and why it
stopped when it judged itself (``auto_stop``: --duration auto, --warmup auto, --stop-oversaturated)
with the precision its window reached, and the evidence of a backlog growing without bound
(``over_saturated``). The rules are autostop.py's and metrics/steady.py's, metrics/precision.py's."""

from __future__ import annotations

from tokenbench.common.frozen import FrozenModel
from tokenbench.results.base import Number


class FigurePrecision(FrozenModel):
    """A figure over the point's window and its 95% interval; ``relative``: half-width / value."""

    value: Number
    low: Number
    high: Number
    relative: Number | None  # None: the value is 0


class Backlog(FrozenModel):
    """The backlog's growth over its last ``span_s``: slope (requests/s) and its 95% interval."""

    slope_per_s: Number
    ci95_low: Number
    ci95_high: Number
    span_s: Number
    mean_backlog: Number


class AutoStopFacts(FrozenModel):
    """samples.jsonl's point event ``auto_stop`` (run clock): why the point's load ended, its
    figures' precision over its window (--duration auto) and the backlog's evidence (over-saturated)."""

    reason: str  # precise, over_saturated, ceiling, max_requests, circuit_breaker, interrupted, schedule
    at_s: Number
    precision_target: Number | None = None
    precision: dict[str, FigurePrecision | None] | None = None
    backlog: Backlog | None = None


class AutoStop(FrozenModel):
    """results.json's ``auto_stop``: only on a point that judged itself (--duration auto, --warmup
    auto, --stop-oversaturated). ``at_s``: seconds from the point's start; ``precise``: every gated
    figure (autostop.GATED) within ``precision_target``."""

    reason: str
    at_s: Number
    precision_target: Number | None = None
    precision: dict[str, FigurePrecision | None] | None = None
    precise: bool | None = None


class OverSaturated(FrozenModel):
    """results.json's ``over_saturated``: only on a point stopped because its backlog grew without
    bound; ``at_s`` (from the point's start) is when that was detected."""

    at_s: Number
    backlog: Backlog


class SteadyState(FrozenModel):
    """results.json's ``steady_state``: where the point's figures stopped drifting (metrics.steady:
    no significant drift in TTFT and output tok/s over ``windows`` windows of ``window_s``).
    ``start_s``: seconds from the point's start (None: never within the point); ``window_start``:
    the measured window starts there (--warmup auto)."""

    reached: bool
    start_s: Number | None
    windows: int
    window_s: Number
    window_start: bool = False
