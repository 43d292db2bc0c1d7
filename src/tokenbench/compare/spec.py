"""``compare --fail-on``'s grammar: which changes fail a regression gate (pure).

    SPEC  := GATE ("," GATE)*
    GATE  := METRIC ":" LIMIT                 a catalogue metric: output_tokens_per_s:-3%
           | DIST ":" STAT ":" LIMIT          a statistic of a per-request distribution: ttft:p90:+5%
    STAT  := p50 | p90 | p99 | mean
    LIMIT := [+|-] NUMBER "%"                 the change, relative to the baseline, that fails

METRIC is a key of ``catalogue.METRICS`` (output_tokens_per_s, requests_per_s, ttft_s_p99, ...);
DIST a distribution by its short name or its results.json key (ttft or ttft_s, tpot, e2e, queue,
decode_speed, ttfo, itl; session or session_s: an agent-programs session's latency,
``programs.session_s``). The sign names the bad direction and must agree with the metric's (a
latency gets worse upwards: +5%; a throughput downwards: -3%); without a sign the metric's bad
direction is taken. Anything else is bad input naming ``--fail-on`` and what to write instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tokenbench.errors import BadInput
from tokenbench.metrics.catalogue import (
    DECODE_SPEED,
    E2E,
    ITL,
    METRICS,
    QUEUE,
    SESSION,
    TPOT,
    TTFO,
    TTFT,
    Distribution,
    Metric,
)

FLAG = "--fail-on"
STATS = ("p50", "p90", "p99", "mean")
DISTRIBUTIONS: dict[str, Distribution] = {
    "ttft": TTFT,
    "ttfo": TTFO,
    "tpot": TPOT,
    "itl": ITL,
    "e2e": E2E,
    "queue": QUEUE,
    "decode_speed": DECODE_SPEED,
    "session": SESSION,  # agent programs: a session's latency (programs.session_s)
}
for _d in tuple(DISTRIBUTIONS.values()):
    DISTRIBUTIONS[_d.key] = _d  # "ttft_s" as well as "ttft"

_LIMIT = re.compile(r"^([+-]?)(\d+(?:\.\d*)?|\.\d+)\s*%$")


@dataclass(frozen=True)
class Gate:
    """One gate: a metric, and the relative change in its bad direction that fails it."""

    text: str  # as written: "ttft:p90:+5%"
    metric: Metric
    limit: float  # >= 0, a fraction: 0.05

    @property
    def worse_up(self) -> bool:
        """The metric gets worse as it grows (a latency)."""
        return not self.metric.higher_is_better

    @property
    def signed_limit(self) -> float:
        """The limit with the bad direction's sign: +0.05 for TTFT, -0.03 for throughput."""
        return self.limit if self.worse_up else -self.limit

    def breached(self, change: float) -> bool:
        """The relative change is larger than the limit in the bad direction."""
        return change > self.limit if self.worse_up else change < -self.limit


def _metric(name: str, stat: str | None, text: str) -> Metric:
    if stat is not None:
        dist = DISTRIBUTIONS.get(name)
        if dist is None:
            raise BadInput(
                f"{FLAG} {text!r}: {name!r} is not a distribution; a statistic goes with one of "
                f"{', '.join(k for k in DISTRIBUTIONS if not k.endswith('_s'))} (e.g. ttft:p90:+5%)"
            )
        if stat not in STATS:
            raise BadInput(f"{FLAG} {text!r}: statistic {stat!r} is not one of {', '.join(STATS)}")
        return METRICS.get(f"{dist.key}_{stat}") or dist.stat(stat, 2, frozenset())
    if name in METRICS:
        return METRICS[name]
    if name in DISTRIBUTIONS:
        raise BadInput(f"{FLAG} {text!r}: {name} is a distribution: name a statistic, e.g. {name}:p90:+5%")
    raise BadInput(
        f"{FLAG} {text!r}: unknown metric {name!r}: use a catalogue key (e.g. output_tokens_per_s, requests_per_s, "
        f"ttft_s_p99) or a distribution with a statistic (e.g. ttft:p90:+5%)"
    )


def parse_gate(text: str) -> Gate:
    """One ``METRIC[:STAT]:LIMIT``."""
    parts = [p.strip() for p in text.split(":")]
    if len(parts) not in (2, 3) or not all(parts):
        raise BadInput(f"{FLAG} {text!r}: write METRIC:LIMIT or DISTRIBUTION:STAT:LIMIT, e.g. ttft:p90:+5%")
    name, stat, limit_text = (parts[0], None, parts[1]) if len(parts) == 2 else parts
    metric = _metric(name.lower(), None if stat is None else stat.lower(), text)
    match = _LIMIT.match(limit_text)
    if match is None:
        raise BadInput(f"{FLAG} {text!r}: the limit {limit_text!r} is not a signed percent such as +5% or -3%")
    sign, number = match.groups()
    limit = float(number) / 100
    gate = Gate(text=text, metric=metric, limit=limit)
    if sign and (sign == "+") != gate.worse_up and limit > 0:
        bad = "+" if gate.worse_up else "-"
        better = "lower" if gate.worse_up else "higher"
        raise BadInput(
            f"{FLAG} {text!r}: {metric.title} is better {better}, so a regression is a change of "
            f"{bad}{number}%: write {name}{'' if stat is None else ':' + stat}:{bad}{number}%"
        )
    return gate


def parse_fail_on(text: str) -> list[Gate]:
    """Every gate of a ``--fail-on`` value (comma-separated); one metric at most once."""
    items = [t.strip() for t in text.split(",")]
    if not any(items):
        raise BadInput(f"{FLAG} is empty: give gates such as 'ttft:p90:+5%,output_tokens_per_s:-3%'")
    if not all(items):
        raise BadInput(f"{FLAG} {text!r}: an empty gate between commas")
    gates = [parse_gate(t) for t in items]
    keys = [g.metric.key for g in gates]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise BadInput(f"{FLAG} {text!r}: {', '.join(twice)} gated twice: keep one limit per metric")
    return gates
