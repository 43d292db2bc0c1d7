"""A prefill's cost that grows with the prompt's square: vLLM CPU's prompt tokens cost
~0.26 ms each in 64-token prompts, ~0.33 in 256 and ~0.42 in 448 (the attention inside a prompt).
One cost a token fitted on 64 and 256 put a held-out 448-token TTFT at -34%. Known answers from
the simulated engine and from points it made, read back by the fit."""

from __future__ import annotations

import pytest
from model_helpers import engine_point, run_seqs

from tokenbench.model.engine import Seq
from tokenbench.model.fit import fit_runs
from tokenbench.model.observe import PointObs, RunObs
from tokenbench.model.params import Param, ServerModel

PER_TOKEN_S, PER_PAIR_S, OUT = 0.0002, 1e-6, 6


def _model(**values: float | None) -> ServerModel:
    params: dict[str, float | None] = {
        "step_base_s": 0.015,
        "step_per_seq_s": 0.001,
        "step_per_prefill_token_s": PER_TOKEN_S,
        "step_per_kv_token_s": 0.0,
        "step_per_prefill_attention_s": PER_PAIR_S,
        "first_token_overhead_s": 0.005,
        "max_num_seqs": None,
        "kv_capacity_tokens": None,
        "max_batched_tokens": None,
    }
    params.update(values)
    return ServerModel(params={k: Param(value=v, constrained=True) for k, v in params.items()})


def _first_token(model: ServerModel, seq: Seq) -> float:
    run_seqs(model, [seq])
    return seq.token_times[0]


def test_a_prefill_pays_each_token_times_the_tokens_it_attends_to():
    # 100 tokens: 100 * 0.2 ms, and 100 * 50 pairs * 1 µs
    whole = _first_token(_model(), Seq(key=0, arrival_s=0.0, prompt_tokens=100, output_tokens=1))
    assert whole == pytest.approx(0.005 + 0.015 + 0.020 + 0.005)
    # 20 of them cached: 80 computed, each attending to the 20 before and half the 80
    cached = _first_token(_model(), Seq(key=0, arrival_s=0.0, prompt_tokens=100, output_tokens=1, cached_tokens=20))
    assert cached == pytest.approx(0.005 + 0.015 + 0.016 + 80 * 60 * PER_PAIR_S)
    # in two chunks of 50: 50 * 25 then 50 * 75 pairs, the same 5,000 as one, and a step more
    chunked = _first_token(_model(max_batched_tokens=50), Seq(key=0, arrival_s=0.0, prompt_tokens=100, output_tokens=1))
    assert chunked == pytest.approx(0.005 + 2 * 0.015 + 0.020 + 0.005)


def _point(index: int, prompt: int, every_s: float) -> PointObs:
    """One request every ``every_s`` (the engine idle between), and a pair sent together at each."""
    sends = sorted([every_s * k for k in range(10)] * 2)
    seqs = [Seq(key=i, arrival_s=t, prompt_tokens=prompt, output_tokens=OUT) for i, t in enumerate(sends)]
    return engine_point(_model(), seqs, index, f"{prompt} tokens")


def test_the_cost_a_token_and_a_pair_are_recovered_from_short_and_long_prompts():
    points = [_point(0, 64, 1.0), _point(1, 256, 1.0), _point(2, 448, 2.0)]
    model = fit_runs([RunObs(f"run{k}", [p], {}, {}) for k, p in enumerate(points)])
    assert model.value("step_per_prefill_attention_s") == pytest.approx(PER_PAIR_S, rel=0.1)
    assert model.value("step_per_prefill_token_s") == pytest.approx(PER_TOKEN_S, rel=0.1)
    for p in model.points:
        assert abs(p.error["ttft_mean_s"] or 0) < 0.03, (p.label, p.error)


def test_one_prompt_length_leaves_the_square_not_constrained():
    model = fit_runs([RunObs("run", [_point(0, 256, 1.0)], {}, {})])
    found = model.params["step_per_prefill_attention_s"]
    assert not found.constrained and found.value == 0.0
