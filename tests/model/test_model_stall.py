"""A prefill's stall of the decodes beside it and a request's own first-token cost, told apart by the
fit from per-chunk times (issue 26, the live misses of open-loop points). The known answers come from
the simulated engine itself with set costs: its requests' chunk times are the records a fit reads.
Also: which step a first token belongs to (the gap it ends, not one it falls inside), a paged KV
cache's block size and capacity from the usage gauge, and the engine's new terms."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tokenbench.model.engine import Cluster, Seq
from tokenbench.model.fit import fit_runs, step_rows
from tokenbench.model.observe import PointObs, RunObs
from tokenbench.model.params import Param, ServerModel

TRUE = {
    "step_base_s": 0.020,
    "step_per_seq_s": 0.002,
    "step_per_prefill_token_s": 0.0010,  # what a prompt token costs the decodes beside it (the stall)
    "first_token_per_prompt_token_s": 0.0005,  # and what it costs its own first token on top
    "first_token_overhead_s": 0.010,
}


def _model(**values: float | None) -> ServerModel:
    params: dict[str, float | None] = {
        "step_base_s": 0.010,
        "max_num_seqs": None,
        "kv_capacity_tokens": None,
        "max_batched_tokens": None,
    }
    params.update(values)
    return ServerModel(params={k: Param(value=v, constrained=True) for k, v in params.items()})


def _simulate(model: ServerModel, seqs: list[Seq]) -> list[Seq]:
    cluster = Cluster(model)
    for s in seqs:
        cluster.submit(s)
    cluster.run(lambda seq, t: None)
    return seqs


def _open_loop(seed: int, rate: float = 3.0, n: int = 150) -> list[Seq]:
    """Poisson arrivals with prompts of 32 to 256 tokens, 16 tokens out: prompts land mid-decode."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / rate, n))
    prompts = rng.integers(32, 257, n)
    return [Seq(key=i, arrival_s=float(a), prompt_tokens=int(p), output_tokens=16) for i, (a, p) in enumerate(zip(arrivals, prompts))]  # fmt: skip


def _point(seqs: list[Seq], kv_scrapes: list[tuple[float, float]] | None = None) -> PointObs:
    seqs = sorted(seqs, key=lambda s: s.arrival_s)
    times = tuple(np.array(s.token_times) for s in seqs)
    return PointObs(
        run="synthetic", index=0, label="synthetic", sent=np.array([s.arrival_s for s in seqs]),
        first=np.array([t[0] for t in times]), last=np.array([t[-1] for t in times]),
        chunks=np.array([float(len(t)) for t in times]), prompt=np.array([float(s.prompt_tokens) for s in seqs]),
        output=np.array([float(s.output_tokens) for s in seqs]), kv_scrapes=kv_scrapes or [],
        prompt_extra=np.full(len(seqs), math.nan), chunk_times=times,
    )  # fmt: skip


def _runs(*points: PointObs) -> list[RunObs]:
    return [RunObs(name=f"synthetic-{i}", points=[p], server={"engine": "sim"}, knobs={}) for i, p in enumerate(points)]


def test_the_stall_and_the_own_first_token_cost_are_recovered_within_5_percent():
    truth = _model(**TRUE)
    points = [_point(_simulate(truth, _open_loop(seed))) for seed in (1, 2)]
    model = fit_runs(_runs(*points))
    for name in ("step_base_s", "step_per_seq_s", "step_per_prefill_token_s", "first_token_per_prompt_token_s"):
        assert model.params[name].constrained, (name, model.params[name].note)
        assert model.value(name) == pytest.approx(TRUE[name], rel=0.05), name
    # and the TTFT the recovered model gives is the truth's
    fitted = {p.run: p for p in model.points}
    for p in fitted.values():
        assert p.error["ttft_mean_s"] == pytest.approx(0, abs=0.05)
        assert p.error["tpot_mean_s"] == pytest.approx(0, abs=0.05)


def test_no_own_first_token_cost_is_invented_when_the_first_token_pays_only_the_stall():
    truth = _model(**{**TRUE, "first_token_per_prompt_token_s": 0.0})
    model = fit_runs(_runs(_point(_simulate(truth, _open_loop(3)))))
    own = model.params["first_token_per_prompt_token_s"]
    assert own.value == 0.0 and own.note is not None  # fixed at 0, saying why
    assert model.value("step_per_prefill_token_s") == pytest.approx(0.0010, rel=0.05)


def test_a_first_token_belongs_to_the_step_whose_end_it_is_read_at():
    # A decodes at 0.1, 0.2, 0.3, then a step that also prefilled B's 100 tokens (B's first token read
    # 1 ms after A's chunk at 0.8), then 0.9. C's first token read at 0.55, inside a gap and at no
    # step's end, is not a prefill of any of A's steps (a gap made long by jitter would otherwise
    # gather unrelated first tokens in proportion to its length).
    a = np.array([0.1, 0.2, 0.3, 0.8, 0.9])
    b = np.array([0.801, 0.9])
    c = np.array([0.55, 0.65])
    p = PointObs(
        run="r", index=0, label="x", sent=np.array([0.0, 0.35, 0.5]), first=np.array([a[0], b[0], c[0]]),
        last=np.array([a[-1], b[-1], c[-1]]), chunks=np.array([5.0, 2.0, 2.0]), prompt=np.array([10.0, 100.0, 40.0]),
        output=np.array([5.0, 2.0, 2.0]), kv_scrapes=[], prompt_extra=np.zeros(3), chunk_times=(a, b, c),
    )  # fmt: skip
    rows = step_rows(p)
    a_rows = rows[:4]  # A's four gaps come first
    assert a_rows[:, 0] == pytest.approx([0.1, 0.1, 0.5, 0.1])
    assert a_rows[:, 2].tolist() == [0.0, 0.0, 100.0, 0.0]  # only the 0.3 -> 0.8 step prefilled B
    assert a_rows[2, 4] == pytest.approx(100 * 100 / 2)  # its context: p * p / 2


def test_a_paged_caches_block_and_capacity_from_the_usage_gauge():
    capacity, block = 4096, 64
    seqs = _simulate(_model(**TRUE), _open_loop(4))
    p = _point(seqs)
    scrapes = []
    for t in np.arange(1.0, float(p.last.max()), 0.5):
        live = (p.first <= t) & (t <= p.last)
        frac = np.clip((t - p.first) / np.maximum(p.last - p.first, 1e-9), 0, 1)
        held = (np.ceil((p.prompt + frac * p.output) / block) * block * live).sum()
        if held / capacity >= 0.05:
            scrapes.append((float(t), float(held / capacity)))
    model = fit_runs(_runs(_point(seqs, scrapes)))
    assert model.value("kv_block_tokens") == block and model.params["kv_block_tokens"].constrained
    assert model.value("kv_capacity_tokens") == pytest.approx(capacity, rel=0.05)


def test_the_engine_holds_whole_blocks():
    # 256 tokens in blocks of 64: prompts of 65 tokens hold 128 each, so two run at once (three by tokens)
    seqs = [Seq(key=i, arrival_s=0.0, prompt_tokens=65, output_tokens=4) for i in range(3)]
    _simulate(_model(kv_capacity_tokens=256, kv_block_tokens=64), seqs)
    assert seqs[2].token_times[0] > seqs[0].token_times[-1]  # the third waited for a free block
    seqs = [Seq(key=i, arrival_s=0.0, prompt_tokens=65, output_tokens=4) for i in range(3)]
    _simulate(_model(kv_capacity_tokens=256), seqs)
    assert seqs[2].token_times[0] == seqs[1].token_times[0]  # by tokens, the second and third in one step


def test_the_own_cost_delays_the_first_token_not_the_decodes_beside_it():
    # A decodes alone (10 ms steps); B arrives with 100 tokens: its prefill step stalls A by the
    # stall's 100 x 0.1 ms; its own 0.5 ms a token delays B's first token by 50 ms more, not A
    a = Seq(key=0, arrival_s=0.0, prompt_tokens=10, output_tokens=20)
    b = Seq(key=1, arrival_s=0.0301, prompt_tokens=100, output_tokens=2)
    _simulate(_model(step_per_prefill_token_s=0.0001, first_token_per_prompt_token_s=0.0005), [a, b])
    gaps = np.diff(a.token_times)
    assert sorted(gaps)[-1] == pytest.approx(0.010 + 100 * 0.0001)  # one stalled step of 20 ms
    assert np.isclose(gaps, 0.010).sum() == len(gaps) - 1
    assert b.token_times[0] - b.arrival_s >= 0.050 + 0.020 - 1e-9
