"""A staged load's stages and the shapes that make them: one load point whose level (a rate, or a
number of users) changes while it runs.

A stage lasts ``duration_s`` at its level (``rate_per_s`` open loop, ``users`` closed loop: one
kind per point); with ``ramp_s`` its first seconds go linearly from the level before it (the
previous stage's; the point's ``start_level`` before the first) to its own. The level over the
point is thus piecewise linear (``level_at``); the schedules (loadgen/schedule.py) follow it.

Two ways to write stages, each parsed here with an error that names what to fix:
- ``--stages "rate=2:20s, rate=8:20s ramp=5s, rate=2:20s"`` (or ``users=4:30s``): explicit stages;
- ``--load-shape NAME:key=value,...``: ``steps``, ``spike``, ``burst-drain``, ``diurnal`` (below).
A trace's own rate curve (``trace:path=FILE,...``) is read from the file by the command line
(cli/run_flags.py) and turned into stages by ``trace_rate_stages``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import Field, field_validator, model_validator

from tokenbench.common.frozen import FrozenModel
from tokenbench.common.units import parse_duration_s, seconds
from tokenbench.errors import BadInput

LevelKind = Literal["rate", "users"]
SHAPES = ("steps", "spike", "burst-drain", "diurnal", "trace")
STAGES_SYNTAX = "rate=R:DURATION [ramp=DURATION], ... (or users=N:DURATION), e.g. 'rate=2:20s, rate=8:20s ramp=5s'"


class Stage(FrozenModel):
    """One stage: ``duration_s`` at its level, the first ``ramp_s`` of it a linear ramp from the
    level before."""

    duration_s: float = Field(gt=0, allow_inf_nan=False)
    rate_per_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)  # open loop
    users: int | None = Field(default=None, ge=0)  # closed loop
    ramp_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)

    _durations = field_validator("duration_s", "ramp_s", mode="before")(seconds)

    @model_validator(mode="after")
    def _one_level(self) -> Stage:
        if (self.rate_per_s is None) == (self.users is None):
            raise ValueError(f"a stage sets rate=R (requests/s) or users=N, exactly one: {STAGES_SYNTAX}")
        if self.ramp_s > self.duration_s:
            raise ValueError(
                f"a stage's ramp ({self.ramp_s:g}s) is part of it: make it at most its duration ({self.duration_s:g}s)"
            )
        return self

    @property
    def kind(self) -> LevelKind:
        return "rate" if self.rate_per_s is not None else "users"

    @property
    def level(self) -> float:
        return float(self.rate_per_s if self.rate_per_s is not None else self.users or 0)


def level_at(stages: Sequence[Stage], start_level: float, t_s: float) -> float:
    """The target level at ``t_s`` seconds from the point's start (piecewise linear; the last
    stage's level after the end)."""
    before, at = start_level, 0.0
    for stage in stages:
        if t_s < at + stage.duration_s:
            into = t_s - at
            if stage.ramp_s > 0 and into < stage.ramp_s:
                return before + (stage.level - before) * max(0.0, into) / stage.ramp_s
            return stage.level
        before, at = stage.level, at + stage.duration_s
    return before


def stage_starts_s(stages: Sequence[Stage]) -> list[float]:
    """Each stage's start from the point's start, and the point's end last."""
    starts, at = [0.0], 0.0
    for stage in stages:
        at += stage.duration_s
        starts.append(at)
    return starts


# --- --stages --------------------------------------------------------------------------------------


def parse_stages(text: str) -> list[Stage]:
    """``--stages``' text -> stages: comma-separated ``rate=R:DURATION`` or ``users=N:DURATION``,
    each optionally followed by ``ramp=DURATION``."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise BadInput(f"--stages is empty: write {STAGES_SYNTAX}")
    return [_stage(part) for part in parts]


def _stage(part: str) -> Stage:
    head, *rest = part.split()
    name, eq, value = head.partition("=")
    level, colon, duration = value.partition(":")
    if not eq or not colon or name.strip() not in ("rate", "users"):
        raise BadInput(f"--stages part {part!r}: write {STAGES_SYNTAX}")
    fields: dict[str, object] = {"duration_s": _duration(duration, part)}
    fields["rate_per_s" if name == "rate" else "users"] = _number(level, part, integer=name == "users")
    for extra in rest:
        key, eq, value = extra.partition("=")
        if key != "ramp" or not eq:
            raise BadInput(f"--stages part {part!r}: after the level and duration only ramp=DURATION may follow")
        fields["ramp_s"] = _duration(value, part)
    try:
        return Stage.model_validate(fields)
    except ValueError as exc:
        raise BadInput(f"--stages part {part!r}: {_first_error(exc)}") from None


# --- --load-shape ----------------------------------------------------------------------------------


def parse_shape(text: str) -> tuple[list[Stage], float]:
    """``--load-shape NAME:key=value,...`` -> its stages and the level before the first (the
    sinusoid of ``diurnal`` starts at its minimum). ``of=users`` makes the levels users (closed
    loop); by default they are requests/s.

    - ``steps:levels=2/8/2,each=20s[,ramp=5s]``: one stage per level, each ``each`` long;
    - ``spike:base=2,peak=10,at=20s,for=10s[,after=20s][,ramp=0s]``: base until ``at``, the peak
      for ``for`` (reached over ``ramp``), base again for ``after`` (default: as long as ``at``);
    - ``burst-drain:burst=20,for=10s,drain=30s[,low=0]``: a burst, then a low (default zero) rate
      for ``drain`` so the backlog drains;
    - ``diurnal:min=1,max=9,period=120s[,levels=8][,cycles=1]``: the sinusoid min + (max - min) x
      (1 - cos(2 pi t / period)) / 2 sampled at ``levels`` points a period, a ramp between each.
    """
    name, colon, rest = text.partition(":")
    name = name.strip()
    if name not in _SHAPES:
        known = ", ".join(SHAPES)
        raise BadInput(f"--load-shape {text!r}: the shape is one of {known}, e.g. spike:base=2,peak=10,at=20s,for=10s")
    keys = _keys(rest, text) if colon else {}
    kind = keys.pop("of", "rate")
    if kind not in ("rate", "users"):
        raise BadInput(f"--load-shape {text!r}: of= is rate (requests/s, the default) or users")
    args = _ShapeArgs(text, keys, kind == "users")
    stages, start = _SHAPES[name](args)
    args.done()
    return stages, start


class _ShapeArgs:
    """A shape's key=value pairs, read one by one; one left unread is an error naming it."""

    def __init__(self, text: str, keys: dict[str, str], users: bool) -> None:
        self.text, self.keys, self.users = text, keys, users

    def level(self, key: str, default: float | None = None) -> float:
        return self._take(key, default, lambda v: _number(v, self.text, integer=self.users))

    def duration(self, key: str, default: float | None = None) -> float:
        return self._take(key, default, lambda v: _duration(v, self.text))

    def count(self, key: str, default: int) -> int:
        n = self._take(key, float(default), lambda v: _number(v, self.text, integer=True))
        if n < 1:
            raise BadInput(f"--load-shape {self.text!r}: {key}= must be at least 1")
        return int(n)

    def levels(self, key: str) -> list[float]:
        raw = self.keys.pop(key, None)
        if raw is None:
            raise BadInput(f"--load-shape {self.text!r}: give {key}=A/B/C (the levels, in order)")
        return [_number(v, self.text, integer=self.users) for v in raw.split("/")]

    def stage(self, duration_s: float, level: float, ramp_s: float = 0.0) -> Stage:
        field = "users" if self.users else "rate_per_s"
        value: float | int = int(level) if self.users else level
        try:
            return Stage.model_validate({"duration_s": duration_s, field: value, "ramp_s": min(ramp_s, duration_s)})
        except ValueError as exc:
            raise BadInput(f"--load-shape {self.text!r}: {_first_error(exc)}") from None

    def done(self) -> None:
        if self.keys:
            raise BadInput(f"--load-shape {self.text!r}: unknown key(s) {', '.join(sorted(self.keys))}")

    def _take(self, key: str, default: float | None, read: Callable[[str], float]) -> float:
        raw = self.keys.pop(key, None)
        if raw is None:
            if default is None:
                raise BadInput(f"--load-shape {self.text!r}: give {key}=")
            return default
        return read(raw)


def _steps(a: _ShapeArgs) -> tuple[list[Stage], float]:
    levels, each, ramp = a.levels("levels"), a.duration("each"), a.duration("ramp", 0.0)
    return [a.stage(each, level, ramp if i else 0.0) for i, level in enumerate(levels)], 0.0


def _spike(a: _ShapeArgs) -> tuple[list[Stage], float]:
    base, peak, at, length = a.level("base"), a.level("peak"), a.duration("at"), a.duration("for")
    after, ramp = a.duration("after", at), a.duration("ramp", 0.0)
    stages = [a.stage(at, base)] if at > 0 else []
    return [*stages, a.stage(length, peak, ramp), a.stage(after, base, ramp)], base


def _burst_drain(a: _ShapeArgs) -> tuple[list[Stage], float]:
    burst, length, drain, low = a.level("burst"), a.duration("for"), a.duration("drain"), a.level("low", 0.0)
    return [a.stage(length, burst), a.stage(drain, low)], burst


def _diurnal(a: _ShapeArgs) -> tuple[list[Stage], float]:
    low, high, period = a.level("min"), a.level("max"), a.duration("period")
    n, cycles = a.count("levels", 8), a.count("cycles", 1)
    if high < low:
        raise BadInput(f"--load-shape {a.text!r}: max= must be at least min=")

    def at(k: int) -> float:
        value = low + (high - low) * (1 - math.cos(2 * math.pi * k / n)) / 2
        return float(round(value)) if a.users else value

    step = period / n
    return [a.stage(step, at(k), step) for k in range(1, n * cycles + 1)], low


def _trace(a: _ShapeArgs) -> tuple[list[Stage], float]:
    raise BadInput(f"--load-shape {a.text!r}: a trace's rate curve is read by `tokenbench run` (not in this file)")


_SHAPES: dict[str, Callable[[_ShapeArgs], tuple[list[Stage], float]]] = {
    "steps": _steps,
    "spike": _spike,
    "burst-drain": _burst_drain,
    "diurnal": _diurnal,
    "trace": _trace,
}


def trace_shape_keys(text: str) -> dict[str, str] | None:
    """``trace:path=FILE[,format=F][,window=10s][,scale=1]``'s keys; None: not a trace shape."""
    name, _, rest = text.partition(":")
    return _keys(rest, text) if name.strip() == "trace" else None


def trace_rate_stages(arrivals_s: Sequence[float], window_s: float, scale: float) -> list[Stage]:
    """A trace's own rate curve as stages: its arrivals (seconds from its first) counted per
    ``window_s``, each window one stage at count / window x ``scale`` requests/s. Every window is
    whole (the last one's count over its whole length: a partial window cut at the last arrival
    would read one late arrival as a spike); an arrival on the last boundary counts in the last."""
    if window_s <= 0 or scale <= 0:
        raise BadInput(f"a trace's rate curve needs window > 0 and scale > 0 (got {window_s:g}, {scale:g})")
    if not arrivals_s:
        raise BadInput("the trace has no rows to take a rate curve from")
    end = max(arrivals_s)
    n = max(1, math.ceil(end / window_s)) if end > 0 else 1
    counts = [0] * n
    for t in arrivals_s:
        counts[min(n - 1, int(t // window_s))] += 1
    return [Stage(duration_s=window_s, rate_per_s=c / window_s * scale) for c in counts]


# --- text -------------------------------------------------------------------------------------------


def _keys(text: str, whole: str) -> dict[str, str]:
    keys: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise BadInput(f"--load-shape {whole!r}: part {part!r} is not key=value")
        keys[key.strip()] = value.strip()
    return keys


def _number(text: str, where: str, integer: bool = False) -> float:
    try:
        value = float(text)
    except ValueError:
        raise BadInput(f"{where!r}: {text.strip()!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise BadInput(f"{where!r}: a level is a finite number >= 0, not {text.strip()!r}")
    if integer and value != int(value):
        raise BadInput(f"{where!r}: users are a whole number, not {text.strip()!r}")
    return value


def _duration(text: str, where: str) -> float:
    try:
        return parse_duration_s(text)
    except BadInput as exc:
        raise BadInput(f"{where!r}: {exc}") from None


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        return (f"{where}: " if where else "") + str(first["msg"]).removeprefix("Value error, ")
    return str(exc)
