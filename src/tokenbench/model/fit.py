"""Runs -> a ServerModel: the step time by weighted least squares over every finished
request, the batch limits from the launch knobs or from what the runs show, and each fitted point
replayed through the model for its residuals.

The regression. Each request with 3+ chunks gives a TPOT row: its mean gap between tokens is the
mean step time over its decode, ``base + per_seq * B + per_prefill_token * Pf + per_kv_token * K
+ per_prefill_attention * A`` with B the sequences decoding beside it (time-averaged, itself
included), Pf the prompt tokens prefilled for the requests whose first token came during its
decode, per step (a prompt less what the server said it reused from its cache), A those prefills'
attention pairs (each computed token times the tokens it attends to), and K the KV tokens in use
(time-averaged). Each request that found a free slot gives a TTFT row: the overhead, the wait for
the step in flight (half a step when the engine was busy) and its own prefill step, with the
prefills of the requests prefilled with or ahead of it. A term whose
column the runs never varied apart from the others is "not constrained": fixed at 0 and said so.
The overhead is then set by simulation (the unloaded requests' TTFT, far outliers left out: a
client's stall), and the share of the step in flight that a request waits for before its first
token (1: step-synchronous) from the TTFT of the requests that came while a step ran.
A negative fit of a cost is fixed at 0 (a cost is never negative). Standard errors from the
weighted fit's covariance; a run "constrained" a parameter when leaving it out raises the
parameter's variance by more than 10%.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tokenbench.errors import BadInput
from tokenbench.model.engine import Cluster, Seq
from tokenbench.model.observe import FloatArray, PointObs, RunObs, read_run, run_dirs
from tokenbench.model.params import LIMITS, OVERHEAD, STEP_TERMS, WAIT_SHARE, Param, PointFit, ServerModel
from tokenbench.results.layout import RESULTS

COLUMNS = (*STEP_TERMS, OVERHEAD)
WHAT_VARIES = {
    "step_base_s": "always (the intercept)",
    "step_per_seq_s": "the batch size (sequences decoding at once)",
    "step_per_prefill_token_s": "the prompt tokens prefilled (prompt length, or arrivals during a decode)",
    "step_per_kv_token_s": "the KV tokens in use apart from the batch size (prompt lengths at one batch size)",
    "step_per_prefill_attention_s": "the prompt lengths prefilled apart from their tokens (short and long prompts)",
    OVERHEAD: "always (the TTFT rows' intercept)",
}
# a column whose part apart from the others is under 5% of it: not constrained. At one prompt length the
# KV tokens in use are the batch size times a near-constant (2-3% apart): a KV cost of 4 µs a token
# fitted from that part (t 2.9) put +162% on a replay of 131-token prompts
MIN_INDEPENDENT = 0.05
MAX_ROWS_PER_POINT = 1500  # the overlap sums are N x N a point
MIN_IDLE = 5  # requests sent to an idle engine that the overhead is calibrated on (else: every free slot)
CLUSTER_S = 0.25  # rows within this long (or one median request, if longer) err together
BURST_S = 0.005  # requests sent this close together reach the server's slots in its own order
MIN_T = 3.0  # a cost within this many (cluster-robust) standard errors of 0 is noise: fixed at 0
OUTLIER_SDS = 5.0  # a TTFT gap further than this many robust SDs from the median: a client's stall
MIN_TTFT_ROWS = 20  # free-slot requests of points whose client kept up, before a limited one's TTFT is left out
MIN_WAIT_ROWS = 20  # free-slot requests (half of them ready during a step) that the wait share needs
MAX_WAIT_SHARE_SE = 0.2  # a wait share less certain than this is not constrained
WAIT_SHARE_SES = 3.0  # standard errors that tell a wait share from 1 (step-synchronous)
# a share fitted further outside 0..1 than this many standard errors (and WAIT_SHARE_SLACK) is a
# misfit, not a share: vLLM's TTFTs fell as the simulated wait grew (-0.51 ± 0.17), and clamped to 0
# the share put a 3 req/s point's TTFT p90 at -37%; the mock's flat TTFT fits -0.05 ± 0.015 (its 0)
WAIT_SHARE_MISFIT_SES = 2.0
WAIT_SHARE_SLACK = 0.1
METRICS = ("ttft_mean_s", "ttft_p90_s", "tpot_mean_s", "output_tokens_per_s")


@dataclass
class _Rows:
    x: list[list[float]]
    y: list[float]
    kind: list[int]  # 0 TPOT, 1 TTFT
    run: list[int]
    group: list[tuple[int, int, int]] = field(default_factory=list)  # (run, point, time window): see _cluster_cov


def _overlap(first: FloatArray, last: FloatArray) -> FloatArray:
    """overlap[i, j]: seconds request j decoded during request i's decode."""
    lo = np.maximum(first[:, None], first[None, :])
    hi = np.minimum(last[:, None], last[None, :])
    out: FloatArray = np.clip(hi - lo, 0.0, None)
    return out


def _subsample(p: PointObs) -> np.ndarray[Any, np.dtype[np.intp]]:
    if p.n <= MAX_ROWS_PER_POINT:
        return np.arange(p.n)
    return np.linspace(0, p.n - 1, MAX_ROWS_PER_POINT).round().astype(np.intp)


def _decoding_at(t: FloatArray, p: PointObs) -> FloatArray:
    """Requests decoding (first token out, last not yet) at each time of ``t``."""
    out: FloatArray = ((p.first[None, :] <= t[:, None]) & (t[:, None] <= p.last[None, :])).sum(axis=1).astype(float)
    return out


def _kv_at(t: FloatArray, p: PointObs) -> FloatArray:
    """KV tokens of the decoding requests at each time of ``t``: prompt + tokens generated by then."""
    dur = np.maximum(p.last - p.first, 1e-9)
    frac = np.clip((t[:, None] - p.first[None, :]) / dur[None, :], 0.0, 1.0)
    live = (p.first[None, :] <= t[:, None]) & (t[:, None] <= p.last[None, :])
    out: FloatArray = ((p.prompt[None, :] + frac * p.output[None, :]) * live).sum(axis=1)
    return out


def in_flight_at_send(p: PointObs) -> FloatArray:
    """Other requests in flight (sent, last token not yet out) when each was sent, counting those
    sent up to BURST_S after it: a burst reaches the server's slots in the server's order, not
    the client's. Twelve users sent within 0.8 ms to vLLM's 8 slots: the first four sent got their
    first token last (1.0 s, where the last four sent got theirs in 0.24 s), and as "free slot"
    requests their TTFT put a 171 ms intercept and half the prefill cost a token in the fit."""
    s = p.sent
    others = ~np.eye(len(s), dtype=bool)
    sent_by = s[None, :] < s[:, None] + BURST_S
    out: FloatArray = (sent_by & (s[:, None] < p.last[None, :]) & others).sum(axis=1).astype(float)
    return out


def max_decoding(p: PointObs) -> int:
    """The most requests seen decoding at once: the 95th percentile over the first tokens' times
    (one request's chunks read late by the client must not add a slot)."""
    return int(round(float(np.percentile(_decoding_at(p.first, p), 95)))) if p.n else 0


def _same_step(p: PointObs) -> float:
    """First tokens this close came out of one engine step: a tenth of the shortest decode gap (the
    client reads two streams' chunks of one step a few ms apart)."""
    many = p.chunks >= 2
    gaps = (p.last - p.first)[many] / np.maximum(p.chunks - 1, 1)[many]
    return 0.1 * float(gaps.min()) if len(gaps) else 1e-3


def prefill_during_decode(p: PointObs, amounts: FloatArray | None = None) -> FloatArray:
    """Per request, the prompt tokens prefilled during its decode, per decode step: the prefills of
    the requests whose first token came out after its own first token's step and by its last. A
    request whose first token came out in the same step (users sent together, prefilled in one
    batch) was prefilled before this decode began, not during it: counting it (as a first token read
    a millisecond later) made lockstep users look like prefills that cost nothing. ``amounts``: another
    figure of each request's prefill to sum instead of its tokens (its attention pairs)."""
    same = _same_step(p)
    steps = np.maximum(p.chunks - 1, 1)
    during = (p.first[None, :] > p.first[:, None] + same) & (p.first[None, :] <= p.last[:, None])
    per_request = p.prefilled if amounts is None else amounts
    out: FloatArray = (during * per_request[None, :]).sum(axis=1) / steps
    return out


def attention_pairs(prefilled: FloatArray, prompt: FloatArray) -> FloatArray:
    """A prefill's attention pairs: each computed token times the tokens it attends to (those
    before it in the prompt, cached or not, and itself)."""
    before = prompt - prefilled
    out: FloatArray = prefilled * (before + prefilled / 2)
    return out


def _rows(p: PointObs, run: int, slots: float, rows: _Rows, ttft: bool = True) -> None:
    keep = _subsample(p)
    sub = replace(
        p,
        sent=p.sent[keep],
        first=p.first[keep],
        last=p.last[keep],
        chunks=p.chunks[keep],
        prompt=p.prompt[keep],
        output=p.output[keep],
        kv_scrapes=[],
        prompt_extra=p.prompt_extra[keep],
        cached=p.cached[keep] if p.cached is not None else None,
    )
    first, last, steps = sub.first, sub.last, np.maximum(sub.chunks - 1, 1)
    dur = last - first
    # rows this close in time share the server's steps and the client's stalls: one cluster each
    window = max(CLUSTER_S, float(np.median(last - sub.sent)))
    ov = _overlap(first, last)
    during = prefill_during_decode(sub)
    pairs = attention_pairs(sub.prefilled, sub.prompt)
    pairs_during = prefill_during_decode(sub, pairs)
    for i in np.flatnonzero((sub.chunks >= 3) & (dur > 0)):
        batch = ov[i].sum() / dur[i]
        pf = float(during[i])
        mid = (np.maximum(first, first[i]) + np.minimum(last, last[i])) / 2
        frac = np.clip((mid - first) / np.maximum(dur, 1e-9), 0, 1)
        kv = float(((sub.prompt + frac * sub.output) * ov[i]).sum() / dur[i])
        rows.x.append([1.0, batch, pf, kv, float(pairs_during[i]), 0.0])
        rows.y.append(dur[i] / steps[i])
        rows.kind.append(0)
        rows.run.append(run)
        rows.group.append((run, p.index, int(first[i] // window)))
    if not ttft:
        return
    in_flight = in_flight_at_send(sub)
    decoding = _decoding_at(sub.sent, sub)
    kv_at = _kv_at(sub.sent, sub)
    # the prompt tokens prefilled in a request's first step (less what the server reused from its
    # cache): its own and those of the requests whose first token came out with it (one step, to
    # within a tenth of the shortest decode gap)
    together = np.abs(first[:, None] - first[None, :]) <= _same_step(sub)
    prefilled = sub.prefilled
    step_prompt = (together * prefilled[None, :]).sum(axis=1)
    # and the prompts ahead of it: sent no later, still without a first token when it was sent, and
    # prefilled in an earlier step (it waits for those steps)
    sent = sub.sent
    ahead = (sent[None, :] <= sent[:, None]) & (first[None, :] > sent[:, None]) & (first[None, :] < first[:, None])
    step_prompt = step_prompt + ((ahead & ~together) * prefilled[None, :]).sum(axis=1)
    step_pairs = ((together | ahead) * pairs[None, :]).sum(axis=1)
    for i in np.flatnonzero(in_flight < slots):
        h = 0.5 if decoding[i] > 0 else 0.0
        rows.x.append(
            [1 + h, (1 + h) * decoding[i], float(step_prompt[i]), (1 + h) * kv_at[i], float(step_pairs[i]), 1.0]
        )
        rows.y.append(float(first[i] - sub.sent[i]))
        rows.kind.append(1)
        rows.run.append(run)
        rows.group.append((run, p.index, int(sub.sent[i] // window)))


@dataclass(frozen=True)
class _Solution:
    beta: FloatArray
    cov: FloatArray
    active: list[int]
    notes: dict[int, str]
    sd: dict[int, float]
    se: FloatArray  # per column: the larger of the fit's and the cluster-robust standard error


def _wls(x: FloatArray, y: FloatArray, w: FloatArray, active: list[int]) -> tuple[FloatArray, FloatArray]:
    xa = x[:, active] * w[:, None]
    ya = y * w
    beta_a, *_ = np.linalg.lstsq(xa, ya, rcond=None)
    dof = max(1, len(ya) - len(active))
    sigma2 = float(((ya - xa @ beta_a) ** 2).sum()) / dof
    cov_a = np.linalg.pinv(xa.T @ xa) * sigma2
    beta = np.zeros(x.shape[1])
    beta[active] = beta_a
    cov = np.zeros((x.shape[1], x.shape[1]))
    cov[np.ix_(active, active)] = cov_a
    return beta, cov


def _cluster_se(
    x: FloatArray,
    y: FloatArray,
    w: FloatArray,
    active: list[int],
    beta: FloatArray,
    cov: FloatArray,
    groups: FloatArray,
) -> FloatArray:
    """Each column's standard error, the larger of the weighted fit's and the cluster-robust one
    (sandwich, the rows of one cluster summed before they are squared). Rows of one time window
    share the server's steps and the client's stalls: a stall that delays every stream at 120 req/s
    raised the TTFT and the prompts still waiting together, and the plain SE, which takes each row
    as new evidence, put a prefill cost the mock does not have at 4 SEs (18 µs a token: +54% on a
    replay's TPOT with 131-token prompts)."""
    se: FloatArray = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    _, ids = np.unique(groups, axis=0, return_inverse=True)
    ids = ids.reshape(-1)
    g = int(ids.max()) + 1 if len(ids) else 0
    if g < 2:
        return se
    xa = x[:, active] * w[:, None]
    score = xa * ((y - x @ beta) * w)[:, None]
    summed = np.zeros((g, len(active)))
    np.add.at(summed, ids, score)
    bread = np.linalg.pinv(xa.T @ xa)
    robust = bread @ (summed.T @ summed) @ bread * g / (g - 1)
    out = se.copy()
    out[active] = np.maximum(se[active], np.sqrt(np.clip(np.diag(robust), 0.0, None)))
    return out


def _independent_part(x: FloatArray, w: FloatArray, j: int, active: list[int]) -> float:
    """How much of column j the other active columns do not explain (0: none, 1: all of it)."""
    col = x[:, j] * w
    norm = float(np.linalg.norm(col))
    if norm == 0:
        return 0.0
    others = [k for k in active if k != j]
    if not others:
        return 1.0
    xo = x[:, others] * w[:, None]
    coef, *_ = np.linalg.lstsq(xo, col, rcond=None)
    return float(np.linalg.norm(col - xo @ coef)) / norm


def _solve(rows: _Rows) -> _Solution:
    x, y = np.array(rows.x), np.array(rows.y)
    kind = np.array(rows.kind)
    has_ttft = bool((kind == 1).any())
    active = list(range(len(COLUMNS))) if has_ttft else list(range(len(STEP_TERMS)))
    notes: dict[int, str] = {}
    if not has_ttft:
        notes[COLUMNS.index(OVERHEAD)] = "not constrained: no request found a free slot (every one queued)"
    # relative scale per row kind, refined from the residuals
    sd = {k: max(float(np.std(y[kind == k])), 1e-6) for k in (0, 1) if (kind == k).any()}
    w = np.array([1.0 / sd[k] for k in kind])
    for j in (4, 3, 2, 1):  # the terms most often confounded first
        if _independent_part(x, w, j, active) < MIN_INDEPENDENT:
            active.remove(j)
            notes[j] = f"not constrained: the runs never varied {WHAT_VARIES[COLUMNS[j]]}"
    beta, cov = _wls(x, y, w, active)
    for _ in range(3):
        resid = y - x @ beta
        sd = {k: max(float(np.std(resid[kind == k])), 1e-7) for k in sd}
        w = np.array([1.0 / sd[k] for k in kind])
        beta, cov = _wls(x, y, w, active)
        while True:
            negative = [j for j in active if j != 0 and beta[j] < 0]
            if not negative:
                break
            j = min(negative, key=lambda k: beta[k])
            active.remove(j)
            notes[j] = "fitted below 0 (no cost seen): fixed at 0"
            beta, cov = _wls(x, y, w, active)
    # a cost term within MIN_T standard errors (cluster-robust) of 0 is noise: fixed at 0, said so
    # (never the intercepts)
    groups = np.array(rows.group, dtype=float).reshape(len(y), -1)
    while True:
        se = _cluster_se(x, y, w, active, beta, cov, groups)
        t = {j: beta[j] / se[j] for j in active if j in (1, 2, 3, 4) and se[j] > 0}
        weak = [j for j, tj in t.items() if tj < MIN_T]
        if 4 in active:  # the cost per prefill token stays while its square's term does (that goes first)
            weak = [j for j in weak if j != 2]
        if not weak:
            break
        j = min(weak, key=lambda k: t[k])
        notes[j] = f"not constrained: fitted {beta[j] * 1e3:.3g} ± {se[j] * 1e3:.2g} ms, not distinguishable from 0"
        active.remove(j)
        beta, cov = _wls(x, y, w, active)
    return _Solution(beta, cov, active, notes, sd, se)


def _constrained_by(rows: _Rows, sol: _Solution, names: list[str]) -> dict[int, list[str]]:
    x = np.array(rows.x)
    w = np.array([1.0 / sol.sd[k] for k in rows.kind])
    run = np.array(rows.run)
    act = sol.active
    xa = x[:, act] * w[:, None]
    full = np.linalg.pinv(xa.T @ xa)
    by: dict[int, list[str]] = {j: [] for j in act}
    for r, name in enumerate(names):
        rest = xa[run != r]
        info = rest.T @ rest
        for pos, j in enumerate(act):
            if np.linalg.matrix_rank(info) < len(act):
                by[j].append(name)
                continue
            var = float(np.linalg.pinv(info)[pos, pos])
            if var > 1.1 * float(full[pos, pos]):
                by[j].append(name)
    return by


def _slots(runs: list[RunObs]) -> Param:
    """max_num_seqs: the launch knob when the runs say it; else the most requests ever seen decoding
    at once, when some point made requests wait with every slot busy: 5% or more of its requests
    had a TTFT over 3x the unloaded one plus 10 steps, sent while that many others were in flight,
    and that many were decoding half its time (else a lower bound: not constrained)."""
    knob = next((r.knobs.get("max_num_seqs") for r in runs if r.knobs.get("max_num_seqs")), None)
    if knob is not None:
        return Param(value=float(knob), constrained=True, by=[r.name for r in runs], note="the launch knob")
    points = [p for r in runs for p in r.points if p.n]
    seen = max((max_decoding(p) for p in points), default=0)
    ttfts = np.concatenate([p.first - p.sent for p in points])
    many = [p for p in points if (p.chunks >= 2).any()]
    step = (
        min(float(np.median(((p.last - p.first) / np.maximum(p.chunks - 1, 1))[p.chunks >= 2])) for p in many)
        if many
        else 0.0
    )
    waited_over = 3 * float(np.percentile(ttfts, 10)) + 10 * step
    queued_runs = []
    for r in runs:
        for p in r.points:
            full = in_flight_at_send(p) >= seen  # as many others sent and not done as ever decoded
            waited = ((p.first - p.sent) > waited_over) & full
            # and the point ran at the limit: `seen - 1` or more decoding half its time (a stalled
            # client or server makes TTFTs spike without a limit, never this plateau)
            grid = np.linspace(float(p.first.min()), float(p.last.max()), 200) if p.n else np.zeros(0)
            plateau = float(np.median(_decoding_at(grid, p))) >= seen - 1 if p.n else False
            if p.n and waited.mean() >= 0.05 and plateau:
                queued_runs.append(r.name)
                break
    if queued_runs:
        return Param(
            value=float(seen),
            constrained=True,
            by=queued_runs,
            note="the most requests seen decoding at once, with requests queued beyond it",
        )
    return Param(value=None, constrained=False, note=f"not constrained: never saturated (at least {seen})")


def _kv_capacity(runs: list[RunObs]) -> Param:
    """KV capacity in tokens from the server's KV-usage gauge against the tokens the records put
    in use at each scrape; without the gauge, not constrained (no KV limit is modelled)."""
    knob = next((r.knobs.get("kv_capacity_tokens") for r in runs if r.knobs.get("kv_capacity_tokens")), None)
    if knob is not None:
        return Param(value=float(knob), constrained=True, note="given (--knob)")
    ratios, by = [], []
    for r in runs:
        for p in r.points:
            scrapes = [(t, u) for t, u in p.kv_scrapes if u >= 0.05]
            if not scrapes:
                continue
            t = np.array([s[0] for s in scrapes])
            tokens = _kv_at(t, p)
            ok = tokens > 0
            ratios += list(tokens[ok] / np.array([s[1] for s in scrapes])[ok])
            by.append(r.name)
    if len(ratios) < 3:
        return Param(value=None, constrained=False, note="not constrained: no KV-usage gauge above 5% in the runs")
    value = float(np.median(ratios))
    se = float(np.std(ratios) / math.sqrt(len(ratios)))
    return Param(value=value, se=se, constrained=True, by=sorted(set(by)), note="KV-usage gauge vs the records' tokens")


def _batched_tokens(runs: list[RunObs]) -> Param:
    names = ("max_num_batched_tokens", "max_batched_tokens")
    knob = next((r.knobs[n] for r in runs for n in names if r.knobs.get(n)), None)
    if knob is not None:
        return Param(value=float(knob), constrained=True, note="the launch knob")
    return Param(value=None, constrained=False, note="not constrained: no chunked-prefill budget in the launch knobs")


def point_stats(sent: FloatArray, first: FloatArray, last: FloatArray, chunks: FloatArray) -> dict[str, float | None]:
    """The means a fitted point is judged on, the same way for measured and simulated requests."""
    ttft = first - sent
    many = chunks >= 2
    tpot = (last[many] - first[many]) / (chunks[many] - 1)
    span = float(last.max() - sent.min()) if len(sent) else 0.0
    return {
        "ttft_mean_s": float(ttft.mean()) if len(ttft) else None,
        "ttft_p90_s": float(np.percentile(ttft, 90)) if len(ttft) else None,
        "tpot_mean_s": float(tpot.mean()) if len(tpot) else None,
        "output_tokens_per_s": float(chunks.sum()) / span if span > 0 else None,
    }


def _simulate(model: ServerModel, p: PointObs) -> list[Seq]:
    """The point's own sends (times, prompt and output tokens) through the model, in send order."""
    cluster = Cluster(model)
    cached = p.prompt - p.prefilled
    seqs = [
        Seq(
            key=i,
            arrival_s=float(p.sent[i]),
            prompt_tokens=int(p.prompt[i]),
            output_tokens=max(1, int(p.chunks[i])),
            cached_tokens=int(cached[i]),
        )
        for i in range(p.n)
    ]
    for s in seqs:
        cluster.submit(s)
    cluster.run(lambda seq, t: None)
    return seqs


def replay(model: ServerModel, p: PointObs) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The point's own sends (times, prompt and output tokens) through the model: each request's
    first and last token and its chunks."""
    seqs = _simulate(model, p)
    first = np.array([s.token_times[0] for s in seqs])
    last = np.array([s.token_times[-1] for s in seqs])
    chunks = np.array([float(len(s.token_times)) for s in seqs])
    return first, last, chunks


def _calibrate_overhead(model: ServerModel, runs: list[RunObs], slots: float) -> ServerModel:
    """The overhead set so that the simulated TTFT of the requests sent with nothing else in flight matches
    the measured on average (the regression's TTFT rows approximate the wait for the step in flight
    by half a step; the simulation has the real one); without MIN_IDLE such requests, of those that
    found a free slot. From the regression's value, until it moves less than 0.1 ms. The average
    leaves out far outliers (robust_mean)."""
    param = model.params[OVERHEAD]
    if not param.constrained or param.value is None:
        return model
    value = param.value
    points = [p for r in runs for p in r.points]
    in_flight = [in_flight_at_send(p) for p in points]  # the same each round: counted once
    for _ in range(8):
        trial = model.model_copy(
            update={"params": {**model.params, OVERHEAD: param.model_copy(update={"value": value})}}
        )
        idle_gaps, free_gaps = [], []
        for p, others in zip(points, in_flight, strict=True):
            first, _, _ = replay(trial, p)
            idle_gaps.append((first - p.first)[others == 0])
            free_gaps.append((first - p.first)[others < slots])
        idle = np.concatenate(idle_gaps) if idle_gaps else np.zeros(0)
        joined = idle if len(idle) >= MIN_IDLE else np.concatenate(free_gaps) if free_gaps else np.zeros(0)
        if not len(joined):
            return model
        shift = robust_mean(joined)
        value = max(0.0, value - shift)
        if abs(shift) < 1e-4:  # within 0.1 ms
            break
    note = f"regression {param.value * 1e3:.3g} ms, then set so the simulated TTFT matches the measured"
    return model.model_copy(
        update={"params": {**model.params, OVERHEAD: param.model_copy(update={"value": value, "note": note})}}
    )


def robust_mean(x: FloatArray) -> float:
    """The mean of ``x`` without its far outliers: values more than OUTLIER_SDS robust standard
    deviations (1.4826 x the median absolute deviation, at least 0.1 ms) from the median. One
    request that a busy client read a second late is the client's stall, not the server's cost:
    in the mean of a handful of unloaded requests it set the overhead 0.166 s for a 0.05 s TTFT."""
    if not len(x):
        return 0.0
    return float(x[_inliers(x)].mean())


def _inliers(x: FloatArray) -> npt.NDArray[np.bool_]:
    """Which of ``x`` lie within OUTLIER_SDS robust standard deviations (1.4826 x the median
    absolute deviation, at least 0.1 ms) of its median."""
    mid = float(np.median(x))
    sd = max(1.4826 * float(np.median(np.abs(x - mid))), 1e-4)
    keep: npt.NDArray[np.bool_] = np.abs(x - mid) <= OUTLIER_SDS * sd
    return keep


def _wait_share(model: ServerModel, runs: list[RunObs], slots: float) -> Param:
    """The share of the step in flight that a request ready during it waits for before its first
    token's step (WAIT_SHARE), from the requests that found a free slot: each one's measured TTFT
    less the simulated (the model step-synchronous, its overhead calibrated) against the simulated
    wait for the step in flight, ``d = a + (share - 1) * wait``. A step-synchronous engine's
    requests that came while a step ran wait as the simulation says (share 1); a server whose streams
    run on their own clocks does not (the mock: its TTFT is flat beside any load, and the simulated
    wait put +15% on the TTFT of a replay at 150 req/s). The share is moved from 1 only when the data
    tell it from 1 by WAIT_SHARE_SES standard errors and pin it within MAX_WAIT_SHARE_SE."""
    gaps, waits = [], []
    for r in runs:
        for p in r.points:
            seqs = _simulate(model, p)
            free = in_flight_at_send(p) < slots
            gaps.append((p.first - np.array([s.token_times[0] for s in seqs]))[free])
            waits.append(np.array([s.step_wait_s for s in seqs])[free])
    d = np.concatenate(gaps) if gaps else np.zeros(0)
    w = np.concatenate(waits) if waits else np.zeros(0)
    if len(d):
        keep = _inliers(d)  # a client's stall is not a server's phase
        d, w = d[keep], w[keep]
    step = model.value("step_base_s") or 0.0
    waited = int((w > 0.05 * step).sum())
    if len(d) < MIN_WAIT_ROWS or waited < MIN_WAIT_ROWS // 2 or float(np.std(w)) < 0.05 * step:
        note = f"not constrained: {waited} requests came while a step was in flight (step-synchronous assumed)"
        return Param(value=1.0, constrained=False, note=note)
    x = np.column_stack([np.ones(len(w)), w])
    coef, *_ = np.linalg.lstsq(x, d, rcond=None)
    resid = d - x @ coef
    cov = np.linalg.pinv(x.T @ x) * float((resid**2).sum()) / max(1, len(d) - 2)
    share, se = 1.0 + float(coef[1]), math.sqrt(max(float(cov[1, 1]), 0.0))
    fitted = f"fitted {share:.2f} ± {se:.2g} over {len(d)} requests"
    if se > MAX_WAIT_SHARE_SE:
        return Param(value=1.0, constrained=False, note=f"not constrained: {fitted} (step-synchronous assumed)")
    slack = max(WAIT_SHARE_MISFIT_SES * se, WAIT_SHARE_SLACK)
    if share < -slack or share > 1.0 + slack:
        note = f"not constrained: {fitted}, outside 0-1: the TTFTs do not follow the wait (step-synchronous assumed)"
        return Param(value=1.0, constrained=False, note=note)
    if abs(share - 1.0) < WAIT_SHARE_SES * se:
        return Param(value=1.0, se=se, constrained=True, note=f"{fitted}: not told from 1 (step-synchronous)")
    value = min(1.0, max(0.0, share))
    note = f"{fitted}: TTFT against the simulated wait for the step in flight"
    return Param(value=value, se=se, constrained=True, by=[r.name for r in runs], note=note)


def _relative(sim: float | None, meas: float | None) -> float | None:
    if sim is None or meas is None or meas == 0:
        return None
    return (sim - meas) / meas


def _ttft_runs(runs: list[RunObs], slots: float) -> tuple[list[RunObs], list[str]]:
    """The runs with only the points whose TTFT the fit reads, and the points left out: a point
    whose client was limited (results.json) may have measured its own lag in every TTFT, sends and
    reads late together; one such point at 120 req/s beside three other runs put a prefill cost of
    63 µs a token on the mock, which has none. Its TPOT rows stay. Left out only when the points
    whose client kept up have MIN_TTFT_ROWS requests that found a free slot: a busy machine flags a
    3 req/s point too, whose TTFT is sound, and without it the overhead rested on 4 requests."""
    kept = [replace(r, points=[p for p in r.points if not p.client_limited]) for r in runs]
    free = sum(int((in_flight_at_send(p) < slots).sum()) for r in kept for p in r.points)
    if free < MIN_TTFT_ROWS:
        return runs, []
    left_out = [f"{p.label} ({r.name})" for r in runs for p in r.points if p.client_limited]
    return kept, left_out


def fit(paths: list[Path], knobs: dict[str, float | None] | None = None) -> ServerModel:
    """The model of the runs' server; ``knobs``: batch limits known otherwise (fit --knob), taken
    as the launch knobs are."""
    return fit_runs([read_run(d) for d in run_dirs(paths)], knobs)


def fit_runs(runs: list[RunObs], knobs: dict[str, float | None] | None = None) -> ServerModel:
    """``fit`` of runs already read (a test's RunObs made by the engine itself)."""
    runs = [r for r in runs if r.points]
    if knobs:
        runs = [replace(r, knobs={**r.knobs, **knobs}) for r in runs]
    if not runs:
        raise BadInput("the runs have no finished requests to fit")
    engines = {str(r.server.get("engine")) for r in runs}
    if len(engines) > 1:
        raise BadInput(f"the runs are of different servers ({', '.join(sorted(engines))}): fit one configuration")
    slots = _slots(runs)
    rows = _Rows([], [], [], [])
    names = [r.name for r in runs]
    ttft_runs, left_out = _ttft_runs(runs, slots.value if slots.value is not None else math.inf)
    for k, r in enumerate(runs):
        for p in r.points:
            read = any(q is p for q in ttft_runs[k].points)
            _rows(p, k, slots.value if slots.value is not None else math.inf, rows, ttft=read)
    if not any(kind == 0 for kind in rows.kind):
        raise BadInput("no request had 3+ chunks: the step time needs replies of several tokens (--output-tokens)")
    sol = _solve(rows)
    by = _constrained_by(rows, sol, names)
    params: dict[str, Param] = {}
    for j, name in enumerate(COLUMNS):
        if j in sol.active:
            se = float(sol.se[j])
            params[name] = Param(value=float(sol.beta[j]), se=se, constrained=True, by=by.get(j, []))
        else:
            note = sol.notes.get(j, "not constrained")
            params[name] = Param(value=0.0, constrained=not note.startswith("not constrained"), note=note)
    params["max_num_seqs"] = slots
    params["kv_capacity_tokens"] = _kv_capacity(runs)
    params["max_batched_tokens"] = _batched_tokens(runs)
    assert set(LIMITS) <= params.keys()
    prompts = np.concatenate([p.prompt for r in runs for p in r.points])
    outputs = np.concatenate([p.output for r in runs for p in r.points])
    extra = np.concatenate([p.prompt_extra for r in runs for p in r.points])
    extra = extra[~np.isnan(extra)]
    reported = [p.cached for r in runs for p in r.points if p.cached is not None]
    cached = np.concatenate(reported) if reported else np.zeros(0)
    cached = cached[~np.isnan(cached)]
    server = {k: v for k, v in runs[0].server.items() if k in ("backend", "engine", "engine_version", "model", "knobs")}
    model = ServerModel(
        server=server,
        params=params,
        prompt_tokens_mean=float(prompts.mean()),
        output_tokens_mean=float(outputs.mean()),
        prompt_tokens_extra=float(np.median(extra)) if len(extra) else 0.0,
        prompt_tokens_cached=float(np.median(cached)) if len(cached) else 0.0,
        runs=names,
        residual_sd={"tpot_s": sol.sd.get(0, 0.0), "ttft_s": sol.sd.get(1, 0.0)},
    )
    free = slots.value if slots.value is not None else math.inf
    calibrated = _calibrate_overhead(model, ttft_runs, free)
    share = Param(value=1.0, constrained=False, note="not constrained: no request found a free slot")
    if calibrated.params[OVERHEAD].constrained:
        share = _wait_share(calibrated, ttft_runs, free)
    if share.value == 1.0:
        model = calibrated.model_copy(update={"params": {**calibrated.params, WAIT_SHARE: share}})
    else:  # the overhead calibrated again, the streams read that much earlier
        model = _calibrate_overhead(
            model.model_copy(update={"params": {**model.params, WAIT_SHARE: share}}), ttft_runs, free
        )
    if left_out and model.params[OVERHEAD].constrained:
        overhead = model.params[OVERHEAD]
        said = f"{overhead.note}; " if overhead.note else ""
        note = f"{said}the TTFT of {', '.join(left_out)} left out: its client was limited"
        model = model.model_copy(
            update={"params": {**model.params, OVERHEAD: overhead.model_copy(update={"note": note})}}
        )
    fits = []
    for r in runs:
        fits += _point_fits(model, r)
    return model.model_copy(update={"points": fits})


def _point_fits(model: ServerModel, run: RunObs) -> list[PointFit]:
    """Each of the run's points predicted from its own settings (as validate does: a closed loop's
    users wait for the model's replies) and compared with its results.json; a run without one
    (killed), its requests' sends replayed through the model instead."""
    from tokenbench.model.validate import compare_run

    if (Path(run.name) / RESULTS).is_file():
        with tempfile.TemporaryDirectory() as tmp:
            checks = compare_run(model, "fit", Path(run.name), Path(tmp) / "predicted")
        return [
            PointFit(
                run=run.name,
                point=c.index,
                label=c.label,
                requests=c.requests,
                measured=c.measured,
                simulated=c.predicted,
                error=c.error,
            )  # fmt: skip
            for c in checks
        ]
    fits = []
    for p in run.points:
        measured = point_stats(p.sent, p.first, p.last, p.chunks)
        first, last, chunks = replay(model, p)
        simulated = point_stats(p.sent, first, last, chunks)
        error = {m: _relative(simulated[m], measured[m]) for m in METRICS}
        fits.append(PointFit(run=run.name, point=p.index, label=p.label, requests=p.n, measured=measured,
                             simulated=simulated, error=error))  # fmt: skip
    return fits
