"""The regression gate: ``tokenbench compare BASE NEW --fail-on 'ttft:p90:+5%,output_tokens_per_s:-3%'``.

Each gate (spec.py) is checked at every load the baseline and another input share (matched as
compare matches them: by load within a configuration, or by load alone when each input is one
configuration of its own). A gate FAILS at a load when the change is both

1. larger than its limit in the bad direction: (other - baseline) / |baseline| of the figures
   compare shows (the mean over trials; a single run's results.json value), and
2. significant: p < 0.05 after Holm-Bonferroni's step-down correction over every test of the
   gate family (each gate at each matched load of each input).

The test (``method`` on each result):
- both sides with >= 2 trials: Welch's t-test over the trial values (compare's own test);
- otherwise, the values behind the single figure (samples.py), pooled over a side's trials: a
  percentile by a z-test on the percentiles' difference with bootstrap standard errors, a mean by
  Welch's t-test over the per-request values (stats.py); a rate (output tokens/s, requests/s) by
  Welch's t-test over the time series' windows inside the measurement window (batch means);
- a proportion (accuracy) with one trial a side: the pooled two-proportion z-test on its
  correct / graded counts summed over each side's trials (metrics/accuracy.py). So
  ``accuracy:-2%`` fails where the new accuracy is more than 2% (relative) below the baseline's
  AND the drop is significant: the difference lies beyond what the two samples' sizes explain;
- any other metric with one trial, or too few values: UNTESTED (not a pass: the exit code says so).

An imported run (``tokenbench import``) is gated as any run: a tool that kept its requests (vLLM
bench, AIPerf, GuideLLM) gives records, and so tokenbench's figures and per-request values over
them. One that kept aggregates only (a Benchmark Report: results.json ``imported.aggregate_only``)
gives the tool's own figures (a statistic it did not report: "not measured"), and values to test
only as trials: several reports at one load, Welch's t over them; one report a load: UNTESTED.

Exit codes of ``compare --fail-on``: 0 every gate passed, 1 a gate failed (one FAIL line each),
2 bad input (the spec, the directories), 5 none failed but some gate could not be tested.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from tokenbench.compare import SIGNIFICANCE_P, holm, stats
from tokenbench.compare.samples import Cell, Samples, read_cells
from tokenbench.compare.spec import FLAG, STATS, Gate, parse_fail_on
from tokenbench.errors import BadInput
from tokenbench.metrics.accuracy import two_proportion_p
from tokenbench.metrics.catalogue import METRICS, Metric
from tokenbench.results import mean_ci95

__all__ = [
    "FLAG",
    "GATE_FAILED_EXIT",
    "GATE_UNTESTED_EXIT",
    "STATS",
    "Gate",
    "GateResult",
    "GateTest",
    "exit_code",
    "gate_dirs",
    "judge",
    "sample_test",
    "parse_fail_on",
]

# why a gate over an aggregate-only import (a Benchmark Report) of one trial a load has no test
AGGREGATES_ONLY = (
    "one trial and no per-request values: an imported Benchmark Report holds the tool's aggregates only; "
    "import 2 or more reports at this load (trials) to test"
)
GATE_FAILED_EXIT = 1
GATE_UNTESTED_EXIT = 5
Verdict = Literal["fail", "pass", "untested"]


@dataclass(frozen=True)
class GateTest:
    """One gate's test at one matched load, before the correction."""

    gate: Gate
    other_source: str
    config: str
    label: str
    baseline: float | None
    other: float | None
    p_value: float | None
    method: str  # the test and its sizes, or why there was none


@dataclass(frozen=True)
class GateResult(GateTest):
    p_adjusted: float | None
    verdict: Verdict

    @property
    def change(self) -> float | None:
        if self.baseline is None or self.other is None or self.baseline == 0:
            return None
        return (self.other - self.baseline) / abs(self.baseline)

    def line(self) -> str:
        """One line: FAIL/pass/untested, the gate, where, the figures, the change and the test."""
        m = self.gate.metric
        where = f"{self.label} ({self.config}) in {self.other_source}"
        head = {"fail": "FAIL", "pass": "pass", "untested": "UNTESTED"}[self.verdict]

        def show(v: float | None) -> str:
            return "–" if v is None else f"{v * m.scale:,.{m.digits}f}"

        figures = f"{show(self.baseline)} -> {show(self.other)}{' ' + m.unit if m.unit else ''}"
        change = self.change
        limit = f"{self.gate.signed_limit:+.1%}"
        if change is None:
            return f"{head} {self.gate.text} at {where}: {figures}: {self.method}"
        beyond = self.gate.breached(change)
        size = f"{change:+.1%} {'beyond' if beyond else 'within'} {limit}"
        if self.p_value is None or self.p_adjusted is None:
            return f"{head} {self.gate.text} at {where}: {figures} ({size}); {self.method}"
        sig = "significant" if self.p_adjusted < SIGNIFICANCE_P else "not significant"
        return (
            f"{head} {self.gate.text} at {where}: {figures} ({size}), {sig} "
            f"(p={self.p_value:.3g}, Holm {self.p_adjusted:.3g}; {self.method})"
        )


def _mean(values: Sequence[float | None]) -> float | None:
    return mean_ci95(values).mean


def _test(gate: Gate, base: Cell, other: Cell, samples: Samples, config: str) -> GateTest:
    metric = gate.metric
    b_vals = [t.value(metric) for t in base.trials]
    o_vals = [t.value(metric) for t in other.trials]
    b, o = _mean(b_vals), _mean(o_vals)

    def test(p: float | None, method: str) -> GateTest:
        return GateTest(gate, other.source, config, base.label, b, o, p, method)

    if b is None or o is None:
        return test(None, "not measured on " + ("either side" if b is None and o is None else "one side"))
    bt, ot = mean_ci95(b_vals), mean_ci95(o_vals)
    if bt.n >= 2 and ot.n >= 2:
        p = stats.welch_p(np.array(bt.values), np.array(ot.values))
        return test(p, f"Welch's t over trials, {bt.n}/{ot.n}" + ("" if p is not None else ": no variance"))
    if metric.counts is not None:  # a proportion (accuracy): its counts, pooled over each side's trials
        hb, ho = _counts(metric, base), _counts(metric, other)
        if hb is None or ho is None:
            side = "either side" if hb is None and ho is None else "one side"
            return test(None, "no correct/graded counts on " + side)
        p = two_proportion_p(*hb, *ho)
        return test(p, f"two-proportion z-test, {hb[0]}/{hb[1]} vs {ho[0]}/{ho[1]} correct/graded")
    bs, os_ = samples.of(metric, base.trials), samples.of(metric, other.trials)
    if bs is None or os_ is None:
        if any(t.aggregate_only for t in (*base.trials, *other.trials)):
            return test(None, AGGREGATES_ONLY)
        return test(None, "one trial and no per-request values for this metric: run --trials 3 (or more) on both")
    (a, unit), (c, _) = bs, os_
    p, method = sample_test(metric, a, c, unit)
    return test(p, method)


def _counts(metric: Metric, cell: Cell) -> tuple[int, int] | None:
    """A proportion's successes and trials summed over a cell's trials (None: none counted)."""
    assert metric.counts is not None
    hits_key, n_key = metric.counts
    hits = [METRICS[hits_key].get(t.point) for t in cell.trials]
    n = [METRICS[n_key].get(t.point) for t in cell.trials]
    pairs = [(h, k) for h, k in zip(hits, n) if h is not None and k is not None]
    if not pairs or sum(k for _, k in pairs) == 0:
        return None
    return round(sum(h for h, _ in pairs)), round(sum(k for _, k in pairs))


def sample_test(metric: Metric, a: np.ndarray, b: np.ndarray, unit: str = "requests") -> tuple[float | None, str]:
    """The test of one figure from the values behind it on each side (baseline ``a``, other
    ``b``): the percentile's z-test for a p50/p90/p99, else Welch's t; its p and how it was made."""
    sizes = f"{a.size}/{b.size} {unit}"
    if a.size < 2 or b.size < 2:
        return None, f"too few values to test ({sizes})"
    stat = metric.key.rsplit("_", 1)[-1] if metric.distribution is not None else "mean"
    if stat in ("p50", "p90", "p99"):
        return stats.percentile_p(a, b, float(stat[1:])), f"z-test of the {stat}s, bootstrap SE, {sizes}"
    return stats.welch_p(a, b), f"Welch's t over {sizes}"


def _by_load(base: list[Cell], other: list[Cell]) -> bool:
    a, b = {c.config for c in base}, {c.config for c in other}
    return len(a) == 1 and len(b) == 1 and not a & b


def tests(inputs: list[list[Cell]], gates: list[Gate]) -> list[GateTest]:
    """Every gate at every load the baseline (the first input) shares with each other input."""
    base, samples = inputs[0], Samples()
    out: list[GateTest] = []
    for other in inputs[1:]:
        by_load = _by_load(base, other)
        index = {(c.key if by_load else (c.config, c.key)): c for c in reversed(other)}
        pairs = [(c, index[k]) for c in base if (k := (c.key if by_load else (c.config, c.key))) in index]
        if not pairs:
            raise BadInput(f"{FLAG}: no load of {other[0].source if other else '?'} matches one of the baseline's")
        for b, o in pairs:
            config = b.config if b.config == o.config else f"{b.config} vs {o.config}"
            out += [_test(g, b, o, samples, config) for g in gates]
    return out


def judge(found: list[GateTest]) -> list[GateResult]:
    """Holm over the family, then each test's verdict."""
    adjusted = holm([t.p_value for t in found])
    results = []
    for t, q in zip(found, adjusted):
        change = (
            None
            if t.baseline is None or t.other is None or t.baseline == 0
            else (t.other - t.baseline) / abs(t.baseline)
        )
        verdict: Verdict
        if q is None or change is None:
            verdict = "untested"
        elif q < SIGNIFICANCE_P and t.gate.breached(change):
            verdict = "fail"
        else:
            verdict = "pass"
        results.append(GateResult(**vars(t), p_adjusted=q, verdict=verdict))
    return results


def gate_dirs(dirs: Sequence[Path], gates: list[Gate]) -> list[GateResult]:
    """The gates over directories: the first is the baseline."""
    if len(dirs) < 2:
        raise BadInput(f"{FLAG} needs a baseline and at least one other directory")
    return judge(tests([read_cells(Path(d)) for d in dirs], gates))


def exit_code(results: Sequence[GateResult]) -> int:
    if any(r.verdict == "fail" for r in results):
        return GATE_FAILED_EXIT
    if any(r.verdict == "untested" for r in results):
        return GATE_UNTESTED_EXIT
    return 0
