"""Runs -> a ServerModel (issue 26): the step time by weighted least squares over every finished
request, the batch limits from the launch knobs or from what the runs show, and each fitted point
replayed through the model for its residuals.

The regression. Each gap between two chunks of a request is one engine step (a step row):
``base + per_seq * B + per_prefill_token * P + per_kv_token * K + per_prefill_context * C`` with B
the sequences decoding through it (itself included), P the prompt tokens of the requests whose first
token came out at its end (their prefill ran in this step: the stall a prefill puts on the decodes
beside it, measured where it happens rather than averaged over a decode), C those prompts' p * p / 2
and K the KV tokens in use. (Records without chunk times: one TPOT row per request instead, its
mean gap against the time-averaged B, P and K.) Each request that found a free slot gives a TTFT
row: the overhead, its own first-token cost per prompt token, the wait for the step in flight (half
a step when the engine was busy) and its own prefill step. The steps' rows pin the prefill's cost to
the decodes; the TTFT rows what the request's own first token pays beyond it. A term whose
column the runs never varied apart from the others is "not constrained": fixed at 0 and said so.
A negative fit of a cost is fixed at 0 (a cost is never negative). Standard errors from the
weighted fit's covariance; a run "constrained" a parameter when leaving it out raises the
parameter's variance by more than 10%.
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import BadInput
from .engine import Cluster, Seq
from .observe import FloatArray, PointObs, RunObs, read_run, run_dirs
from .params import LIMITS, OVERHEAD, OWN_PER_PROMPT_TOKEN, STEP_TERMS, Param, PointFit, ServerModel

COLUMNS = (*STEP_TERMS, OVERHEAD, OWN_PER_PROMPT_TOKEN)
BASE, PER_SEQ, PREFILL, KV, CONTEXT, CROSS, OVER, OWN = range(len(COLUMNS))
WHAT_VARIES = {
    "step_base_s": "always (the intercept)",
    "step_per_seq_s": "the batch size (sequences decoding at once)",
    "step_per_prefill_token_s": "the prompt tokens prefilled (prompt length, or arrivals during a decode)",
    "step_per_kv_token_s": "the KV tokens in use apart from the batch size (prompt lengths at one batch size)",
    "step_per_prefill_context_s": "the prompt length of the prefills (one length: its cost is the per-token one)",
    "step_per_prefill_token_per_seq_s": "the sequences beside a prefill (prefills only alone, or only beside one batch size)",
    OVERHEAD: "always (the TTFT rows' intercept)",
    OWN_PER_PROMPT_TOKEN: "the prompt length apart from the prefill step (one length, or no prefill during a decode)",
}
MAX_STEP_ROWS_PER_POINT = 4000  # the step rows' sums are (rows x requests) a point
# A cost is told from 0 at 3 standard errors: the step rows of one point are not independent (the
# gaps of requests decoding together share their steps), so the least-squares SE is too small; at 2,
# a mock's 0.2 ms of event-loop work when a request arrives passed for a prefill cost per token.
MIN_T = 3.0
MIN_INDEPENDENT = 0.02  # a column whose part apart from the others is under 2% of it: not constrained
MAX_ROWS_PER_POINT = 1500  # the overlap sums are N x N a point
MIN_IDLE = 5  # requests sent to an idle engine that the overhead is calibrated on (else: every free slot)
METRICS = ("ttft_mean_s", "ttft_p90_s", "tpot_mean_s", "output_tokens_per_s")


@dataclass
class _Rows:
    x: list[list[float]]
    y: list[float]
    kind: list[int]  # 0 TPOT or a step, 1 TTFT
    run: list[int]


def _chunk_tolerance(p: PointObs) -> float:
    """Chunks of two streams this close came out of one step: a quarter of the median gap (the
    client reads the streams of one step a few ms apart, more on a busy machine)."""
    gaps = np.concatenate([np.diff(t) for t in p.chunk_times if len(t) >= 2] or [np.zeros(0)])
    return 0.25 * float(np.median(gaps)) if len(gaps) else 1e-3


def step_rows(p: PointObs) -> FloatArray:
    """Each decode gap of the point's requests (at most MAX_STEP_ROWS_PER_POINT, evenly chosen) as
    (gap, B, P, K, C, X): the sequences decoding through it, the prompt tokens whose first token came
    out at its end (prefilled in this step), the KV tokens in use, the prefills' context (p * p / 2)
    and P times the other sequences in the step (B + the prefills - 1)."""
    owner = np.concatenate([np.full(max(len(t) - 1, 0), i) for i, t in enumerate(p.chunk_times)] or [np.zeros(0)])
    t0 = np.concatenate([t[:-1] for t in p.chunk_times] or [np.zeros(0)])
    t1 = np.concatenate([t[1:] for t in p.chunk_times] or [np.zeros(0)])
    if len(t0) > MAX_STEP_ROWS_PER_POINT:
        keep = np.linspace(0, len(t0) - 1, MAX_STEP_ROWS_PER_POINT).round().astype(np.intp)
        owner, t0, t1 = owner[keep], t0[keep], t1[keep]
    owner = owner.astype(np.intp)
    tol = _chunk_tolerance(p)
    first, last = p.first[None, :], p.last[None, :]
    decoding = (first <= t0[:, None] + tol) & (last >= t1[:, None] - tol)
    # a first token read at the gap's end (within the tolerance) came out of this step; one read
    # anywhere inside a gap is not counted, or a gap made long by jitter would gather unrelated first
    # tokens in proportion to its length (on the mock, whose first tokens keep no step, that alone
    # fitted a prefill cost)
    new = (first > t0[:, None] + tol) & (np.abs(first - t1[:, None]) <= tol)
    new[np.arange(len(owner)), owner] = False
    prompt = p.prompt[None, :]
    frac = np.clip((t0[:, None] - first) / np.maximum(last - first, 1e-9), 0.0, 1.0)
    kv = ((prompt + frac * p.output[None, :]) * decoding).sum(axis=1) + (new * prompt).sum(axis=1)
    b, pf = decoding.sum(axis=1), (new * prompt).sum(axis=1)
    others = np.maximum(b + new.sum(axis=1) - 1, 0)
    out: FloatArray = np.column_stack([t1 - t0, b, pf, kv, (new * prompt**2 / 2).sum(axis=1), pf * others])
    return out


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


def _in_flight_at_send(p: PointObs) -> FloatArray:
    """Other requests in flight (sent, last token not yet out) when each was sent."""
    s = p.sent
    out: FloatArray = ((s[None, :] < s[:, None]) & (s[:, None] < p.last[None, :])).sum(axis=1).astype(float)
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


def prefill_during_decode(p: PointObs) -> FloatArray:
    """Per request, the prompt tokens prefilled during its decode, per decode step: the prompts of
    the requests whose first token came out after its own first token's step and by its last. A
    request whose first token came out in the same step (users sent together, prefilled in one
    batch) was prefilled before this decode began, not during it: counting it (as a first token read
    a millisecond later) made lockstep users look like prefills that cost nothing."""
    same = _same_step(p)
    steps = np.maximum(p.chunks - 1, 1)
    during = (p.first[None, :] > p.first[:, None] + same) & (p.first[None, :] <= p.last[:, None])
    out: FloatArray = (during * p.prompt[None, :]).sum(axis=1) / steps
    return out


def _rows(p: PointObs, run: int, slots: float, rows: _Rows) -> None:
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
    )
    first, last, steps = sub.first, sub.last, np.maximum(sub.chunks - 1, 1)
    dur = last - first
    if p.chunk_times:
        for gap, b, pf, kv, ctx, cross in step_rows(p):
            rows.x.append([1.0, b, pf, kv, ctx, cross, 0.0, 0.0])
            rows.y.append(gap)
            rows.kind.append(0)
            rows.run.append(run)
    else:  # no chunk times: one TPOT row per request, its decode's averages
        ov = _overlap(first, last)
        prefilled = prefill_during_decode(sub)
        same = _same_step(sub)
        steps_of = np.maximum(sub.chunks - 1, 1)
        for i in np.flatnonzero((sub.chunks >= 3) & (dur > 0)):
            batch = ov[i].sum() / dur[i]
            during = (first > first[i] + same) & (first <= last[i])
            ctx = float((during * sub.prompt**2 / 2).sum() / steps_of[i])
            mid = (np.maximum(first, first[i]) + np.minimum(last, last[i])) / 2
            frac = np.clip((mid - first) / np.maximum(dur, 1e-9), 0, 1)
            kv = float(((sub.prompt + frac * sub.output) * ov[i]).sum() / dur[i])
            pf = float(prefilled[i])
            rows.x.append([1.0, batch, pf, kv, ctx, pf * max(batch, 0.0), 0.0, 0.0])
            rows.y.append(dur[i] / steps[i])
            rows.kind.append(0)
            rows.run.append(run)
    in_flight = _in_flight_at_send(sub)
    decoding = _decoding_at(sub.sent, sub)
    kv_at = _kv_at(sub.sent, sub)
    # the prompt tokens prefilled in a request's first step: its own and those of the requests whose
    # first token came out with it (one step, to within a tenth of the shortest decode gap)
    together = np.abs(first[:, None] - first[None, :]) <= _same_step(sub)
    step_prompt = (together * sub.prompt[None, :]).sum(axis=1)
    step_context = (together * sub.prompt[None, :] ** 2 / 2).sum(axis=1)
    step_seqs = together.sum(axis=1)
    # and the prompts ahead of it: sent no later, still without a first token when it was sent, and
    # prefilled in an earlier step (it waits for those steps)
    sent = sub.sent
    ahead = (sent[None, :] <= sent[:, None]) & (first[None, :] > sent[:, None]) & (first[None, :] < first[:, None])
    step_prompt = step_prompt + ((ahead & ~together) * sub.prompt[None, :]).sum(axis=1)
    step_context = step_context + ((ahead & ~together) * sub.prompt[None, :] ** 2 / 2).sum(axis=1)
    step_seqs = step_seqs + (ahead & ~together).sum(axis=1)
    for i in np.flatnonzero(in_flight < slots):
        h = 0.5 if decoding[i] > 0 else 0.0
        rows.x.append(
            [
                1 + h,
                (1 + h) * decoding[i],
                float(step_prompt[i]),
                (1 + h) * kv_at[i],
                float(step_context[i]),
                float(step_prompt[i]) * max(decoding[i] + step_seqs[i] - 1, 0),
                1.0,
                float(sub.prompt[i]),
            ]
        )
        rows.y.append(float(first[i] - sub.sent[i]))
        rows.kind.append(1)
        rows.run.append(run)


@dataclass(frozen=True)
class _Solution:
    beta: FloatArray
    cov: FloatArray
    active: list[int]
    notes: dict[int, str]
    sd: dict[int, float]


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
        notes[OVER] = "not constrained: no request found a free slot (every one queued)"
        notes[OWN] = notes[OVER]
    # relative scale per row kind, refined from the residuals
    sd = {k: max(float(np.std(y[kind == k])), 1e-6) for k in (0, 1) if (kind == k).any()}
    w = np.array([1.0 / sd[k] for k in kind])
    for j in (CONTEXT, CROSS, OWN, KV, PREFILL, PER_SEQ):  # the terms most often confounded first
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
    # a cost term within MIN_T standard errors of 0 is noise: fixed at 0, said so (never the intercepts)
    while True:
        costs = (PER_SEQ, PREFILL, KV, CONTEXT, CROSS, OWN)
        t = {j: beta[j] / math.sqrt(cov[j, j]) for j in active if j in costs and cov[j, j] > 0}
        weak = [j for j, tj in t.items() if tj < MIN_T]
        if not weak:
            break
        j = min(weak, key=lambda k: t[k])
        se = math.sqrt(cov[j, j])
        notes[j] = f"not constrained: fitted {beta[j] * 1e3:.3g} ± {se * 1e3:.2g} ms, not distinguishable from 0"
        active.remove(j)
        beta, cov = _wls(x, y, w, active)
    return _Solution(beta, cov, active, notes, sd)


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
            full = _in_flight_at_send(p) >= seen  # as many others sent and not done as ever decoded
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


KV_BLOCKS = (1, 16, 32, 64, 128, 256)  # the block sizes tried for a paged KV cache (1: no blocks)


def _kv_held_at(t: FloatArray, p: PointObs, block: int) -> FloatArray:
    """KV tokens the decoding requests hold at each time of ``t``, each rounded up to whole blocks."""
    dur = np.maximum(p.last - p.first, 1e-9)
    frac = np.clip((t[:, None] - p.first[None, :]) / dur[None, :], 0.0, 1.0)
    live = (p.first[None, :] <= t[:, None]) & (t[:, None] <= p.last[None, :])
    tokens = p.prompt[None, :] + frac * p.output[None, :]
    out: FloatArray = (np.ceil(tokens / block) * block * live).sum(axis=1)
    return out


def _kv_capacity(runs: list[RunObs]) -> tuple[Param, Param]:
    """KV capacity in tokens, and the block its cache is held in, from the server's KV-usage gauge
    against the tokens the records put in use at each scrape: of the block sizes KV_BLOCKS, the one
    whose capacity estimates agree best (a paged cache holds whole blocks: counting tokens alone made
    vLLM's 4,096-token cache of 128-token blocks look like 2,700 tokens at 64-token prompts). Without
    the gauge, neither is constrained (no KV limit is modelled)."""
    knob = next((r.knobs.get("kv_capacity_tokens") for r in runs if r.knobs.get("kv_capacity_tokens")), None)
    no_block = Param(value=1.0, constrained=False, note="not constrained: no KV-usage gauge above 5% in the runs")
    if knob is not None:
        return Param(value=float(knob), constrained=True, note="given (--knob)"), no_block
    found: dict[int, list[float]] = {b: [] for b in KV_BLOCKS}
    by = []
    for r in runs:
        for p in r.points:
            scrapes = [(t, u) for t, u in p.kv_scrapes if u >= 0.05]
            if not scrapes:
                continue
            t = np.array([s[0] for s in scrapes])
            usage = np.array([s[1] for s in scrapes])
            for block in KV_BLOCKS:
                tokens = _kv_held_at(t, p, block)
                ok = tokens > 0
                found[block] += list(tokens[ok] / usage[ok])
            by.append(r.name)
    if len(found[1]) < 3:
        return Param(
            value=None, constrained=False, note="not constrained: no KV-usage gauge above 5% in the runs"
        ), no_block

    def spread(block: int) -> float:
        ratios = np.array(found[block])
        return float(np.std(ratios) / np.mean(ratios))

    block = min(KV_BLOCKS, key=spread)
    if spread(block) > 0.9 * spread(1):  # blocks explain little: tokens, and the block not constrained
        block = 1
    ratios = found[block]
    value = float(np.median(ratios))
    se = float(np.std(ratios) / math.sqrt(len(ratios)))
    runs_by = sorted(set(by))
    capacity = Param(
        value=value,
        se=se,
        constrained=True,
        by=runs_by,
        note=f"KV-usage gauge vs the records' tokens in blocks of {block}",
    )
    if block == 1:
        held = Param(
            value=1.0,
            constrained=False,
            note="not constrained: whole blocks fit the gauge no better than tokens (one prompt length?)",
        )
    else:
        note = f"the block size of {', '.join(map(str, KV_BLOCKS))} whose capacities agree best ({spread(block):.1%} spread; tokens {spread(1):.1%})"
        held = Param(value=float(block), constrained=True, by=runs_by, note=note)
    return capacity, held


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


def replay(model: ServerModel, p: PointObs) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The point's own sends (times, prompt and output tokens) through the model: each request's
    first and last token and its chunks."""
    cluster = Cluster(model)
    seqs = [
        Seq(key=i, arrival_s=float(p.sent[i]), prompt_tokens=int(p.prompt[i]), output_tokens=max(1, int(p.chunks[i])))
        for i in range(p.n)
    ]
    for s in seqs:
        cluster.submit(s)
    cluster.run(lambda seq, t: None)
    first = np.array([s.token_times[0] for s in seqs])
    last = np.array([s.token_times[-1] for s in seqs])
    chunks = np.array([float(len(s.token_times)) for s in seqs])
    return first, last, chunks


def _calibrate_overhead(model: ServerModel, runs: list[RunObs], slots: float, own_too: bool = True) -> ServerModel:
    """The overhead set so that the simulated TTFT of the requests sent with nothing else in flight matches
    the measured on average (the regression's TTFT rows approximate the wait for the step in flight
    by half a step; the simulation has the real one); without MIN_IDLE such requests, of those that
    found a free slot. From the regression's value, until it moves less than 0.1 ms. Where the fit
    found an own first-token cost per prompt token, it is set the same way with the overhead: the
    simulated-minus-measured first tokens of the requests sent alone (else of those that found a free
    slot) against their prompt length (the TTFT rows' half-step wait misjudges it when prefill steps
    are long); where that does not settle, the regression's value is kept."""
    param, own = model.params[OVERHEAD], model.params.get(OWN_PER_PROMPT_TOKEN)
    if not param.constrained or param.value is None:
        return model
    with_own = own_too and own is not None and own.constrained and bool(own.value)
    converged = False
    value, per_token = param.value, (own.value or 0.0) if own is not None else 0.0
    for _ in range(12 if with_own else 8):
        params = {**model.params, OVERHEAD: param.model_copy(update={"value": value})}
        if with_own and own is not None:
            params[OWN_PER_PROMPT_TOKEN] = own.model_copy(update={"value": per_token})
        trial = model.model_copy(update={"params": params})
        idle_gaps, idle_prompts, free_gaps, free_prompts = [], [], [], []
        for r in runs:
            for p in r.points:
                first, _, _ = replay(trial, p)
                alone = _in_flight_at_send(p) == 0
                idle_gaps.append((first - p.first)[alone])
                idle_prompts.append(p.prompt[alone])
                free = _in_flight_at_send(p) < slots
                free_gaps.append((first - p.first)[free])
                free_prompts.append(p.prompt[free])
        idle = np.concatenate(idle_gaps) if idle_gaps else np.zeros(0)
        if with_own:
            gaps, prompts = np.concatenate(idle_gaps), np.concatenate(idle_prompts)
            if len(gaps) < MIN_IDLE or float(np.std(prompts)) == 0:  # too few alone: every free slot
                gaps, prompts = np.concatenate(free_gaps), np.concatenate(free_prompts)
            if len(gaps) < 3 or float(np.std(prompts)) == 0:
                break
            slope, shift = np.polyfit(prompts, gaps, 1)
            per_token = max(0.0, per_token - float(slope))
            shift = float(shift)
        else:
            joined = idle if len(idle) >= MIN_IDLE else np.concatenate(free_gaps) if free_gaps else np.zeros(0)
            if not len(joined):
                return model
            shift = float(joined.mean())
        value = max(0.0, value - shift)
        converged = abs(shift) < 1e-4 and (not with_own or abs(float(slope)) * float(np.mean(prompts)) < 1e-4)
        if converged:
            break
    if with_own and not converged:  # the own cost and the queueing it makes fed each other: not set so
        model = model.model_copy(update={"params": {**model.params, OWN_PER_PROMPT_TOKEN: own}})
        return _calibrate_overhead(model, runs, slots, own_too=False)
    note = f"regression {param.value * 1e3:.3g} ms, then set so the simulated TTFT matches the measured"
    params = {**model.params, OVERHEAD: param.model_copy(update={"value": value, "note": note})}
    if with_own and own is not None:
        was = (own.value or 0.0) * 1e3
        params[OWN_PER_PROMPT_TOKEN] = own.model_copy(
            update={"value": per_token, "note": f"regression {was:.3g} ms, then set with the overhead (simulated TTFT)"}
        )
    return model.model_copy(update={"params": params})


def _relative(sim: float | None, meas: float | None) -> float | None:
    if sim is None or meas is None or meas == 0:
        return None
    return (sim - meas) / meas


def fit(paths: list[Path], knobs: dict[str, float | None] | None = None) -> ServerModel:
    """The model of the runs' server; ``knobs``: batch limits known otherwise (fit --knob), taken
    as the launch knobs are."""
    dirs = run_dirs(paths)
    runs = [read_run(d) for d in dirs]
    runs = [r for r in runs if r.points]
    if knobs:
        runs = [replace(r, knobs={**r.knobs, **knobs}) for r in runs]
    if not runs:
        raise BadInput("the runs have no finished requests to fit")
    return fit_runs(runs)


def fit_runs(runs: list[RunObs]) -> ServerModel:
    """The model of runs already read (``fit`` reads them from disk; a test builds them)."""
    engines = {str(r.server.get("engine")) for r in runs}
    if len(engines) > 1:
        raise BadInput(f"the runs are of different servers ({', '.join(sorted(engines))}): fit one configuration")
    slots = _slots(runs)
    rows = _Rows([], [], [], [])
    names = [r.name for r in runs]
    for k, r in enumerate(runs):
        for p in r.points:
            _rows(p, k, slots.value if slots.value is not None else math.inf, rows)
    if not any(kind == 0 for kind in rows.kind):
        raise BadInput("no request had 3+ chunks: the step time needs replies of several tokens (--output-tokens)")
    sol = _solve(rows)
    by = _constrained_by(rows, sol, names)
    params: dict[str, Param] = {}
    for j, name in enumerate(COLUMNS):
        if j in sol.active:
            se = math.sqrt(max(float(sol.cov[j, j]), 0.0))
            params[name] = Param(value=float(sol.beta[j]), se=se, constrained=True, by=by.get(j, []))
        else:
            note = sol.notes.get(j, "not constrained")
            params[name] = Param(value=0.0, constrained=not note.startswith("not constrained"), note=note)
    params["max_num_seqs"] = slots
    params["kv_capacity_tokens"], params["kv_block_tokens"] = _kv_capacity(runs)
    params["max_batched_tokens"] = _batched_tokens(runs)
    assert set(LIMITS) <= params.keys()
    prompts = np.concatenate([p.prompt for r in runs for p in r.points])
    outputs = np.concatenate([p.output for r in runs for p in r.points])
    extra = np.concatenate([p.prompt_extra for r in runs for p in r.points])
    extra = extra[~np.isnan(extra)]
    server = {k: v for k, v in runs[0].server.items() if k in ("backend", "engine", "engine_version", "model", "knobs")}
    model = ServerModel(
        server=server,
        params=params,
        prompt_tokens_mean=float(prompts.mean()),
        output_tokens_mean=float(outputs.mean()),
        prompt_tokens_extra=float(np.median(extra)) if len(extra) else 0.0,
        runs=names,
        residual_sd={"tpot_s": sol.sd.get(0, 0.0), "ttft_s": sol.sd.get(1, 0.0)},
    )
    model = _calibrate_overhead(model, runs, slots.value if slots.value is not None else math.inf)
    fits = []
    for r in runs:
        fits += _point_fits(model, r)
    return model.model_copy(update={"points": fits})


def _point_fits(model: ServerModel, run: RunObs) -> list[PointFit]:
    """Each of the run's points predicted from its own settings (as validate does: a closed loop's
    users wait for the model's replies) and compared with its results.json; a run without one
    (killed), its requests' sends replayed through the model instead."""
    from .validate import compare_run

    if (Path(run.name) / "results.json").is_file():
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
