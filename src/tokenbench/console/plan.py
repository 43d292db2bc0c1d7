"""`tokenbench run --dry-run`'s plan as text: what the run resolved before its first request (the
server's checks, the dataset as built, each point's schedule and stop) and the files it would
write. ``RunPlan`` is made by run.dry_run; this module only writes it out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tokenbench.console.fmt import seconds


@dataclass(frozen=True)
class Lengths:
    """Token counts over the requests as built: the fewest, the mean, the most."""

    min: int
    mean: float
    max: int

    @classmethod
    def of(cls, values: Sequence[int]) -> Lengths | None:
        return cls(min(values), sum(values) / len(values), max(values)) if values else None

    def text(self) -> str:
        return f"min {self.min}, mean {self.mean:.1f}, max {self.max}"


@dataclass(frozen=True)
class PointPlan:
    """One load point as it would run: its schedule, how it stops, how long it would last
    (None: until its request count is reached, or a rule stops it), and a replay's rows."""

    label: str  # schedule.describe's
    schedule: str  # users and ramp, rate and arrivals, stages, the trace window
    stop: str
    duration_s: float | None
    requests: int | None = None  # the number it sends, where it is known before it runs
    prompt_tokens: Lengths | None = None  # a replay's rows in its window (else the dataset's)
    output_tokens: Lengths | None = None


@dataclass(frozen=True)
class RunPlan:
    """What `run` resolved before its first request; nothing was sent and nothing written."""

    target: str  # the URL, the model requests name, the API
    checks: tuple[str, ...]  # the server checks made, each with what it answered
    dataset: str  # the dataset as built: its name, how many prompts (or conversations, rows)
    prompt_tokens: Lengths | None
    output_tokens: Lengths | None
    points: tuple[PointPlan, ...]
    trials: int
    out_dir: str  # --out, or where a run without it would go (its name: the time it starts)
    files: tuple[str, ...]


def plan_lines(plan: RunPlan) -> list[str]:
    """The plan as plain lines (stdout: no markup)."""
    lines = ["dry run: nothing sent, nothing written", f"target: {plan.target}", "server checks:"]
    lines += [f"  {check}" for check in plan.checks]
    lines.append(f"dataset: {plan.dataset}")
    per_point = any(p.prompt_tokens is not None for p in plan.points)  # a replay's rows: each point's own
    unknown = "each point's, below" if per_point else "not known before the run"
    for name, lengths in (("prompt tokens", plan.prompt_tokens), ("output tokens", plan.output_tokens)):
        lines.append(f"  {name}: {lengths.text() if lengths else unknown}")
    repeat = f" ({plan.trials} trials each, in a row)" if plan.trials > 1 else ""
    lines.append(f"points: {len(plan.points)}{repeat}")
    for i, point in enumerate(plan.points):
        lines.append(f"  {i}: {point.label}")
        lines.append(f"     schedule: {point.schedule}")
        lines.append(f"     stop: {point.stop}")
        if point.requests is not None:
            lines.append(f"     requests: {point.requests}")
        if point.prompt_tokens is not None:
            lines.append(f"     prompt tokens: {point.prompt_tokens.text()}")
        if point.output_tokens is not None:
            lines.append(f"     output tokens: {point.output_tokens.text()}")
        lines.append(f"     expected duration: {_expected(point.duration_s)}")
    total = [p.duration_s for p in plan.points]
    known = None if any(d is None for d in total) else sum(d for d in total if d is not None) * plan.trials
    lines.append(f"expected duration: {_expected(known)} of load (plus the drain of requests in flight)")
    lines.append(f"would write: {plan.out_dir}/")
    lines += [f"  {name}" for name in plan.files]
    return lines


def _expected(duration_s: float | None) -> str:
    return seconds(duration_s) if duration_s is not None else "not known before the run (its stop rule ends it)"
