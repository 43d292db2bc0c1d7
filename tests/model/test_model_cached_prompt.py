"""Prompt tokens the server reuses from its cache: llama.cpp reuses the chat template's
~24 tokens from a slot's last prompt and says so (``timings.cache_n``). A prefill costs its computed
tokens: fitted on whole prompts, one prompt a step looked 24 tokens dearer than it was and three
prompts prefilled together 48 tokens cheaper than the fit said (a held-out 3-user TTFT +22%).
Known answers from points the simulated engine itself made, read back by the fit."""

from __future__ import annotations

import pytest
from model_helpers import engine_point
from run_helpers import config

from tokenbench.config import StopConfig, UsersLoad
from tokenbench.model.engine import Seq
from tokenbench.model.fit import fit_runs
from tokenbench.model.observe import PointObs, RunObs
from tokenbench.model.params import Param, ServerModel
from tokenbench.model.predict import predict

PER_TOKEN_S, PER_SEQ_S, CACHED, OUT = 0.004, 0.010, 24, 8


def _truth() -> ServerModel:
    values: dict[str, float | None] = {
        "step_base_s": 0.002,
        "step_per_seq_s": PER_SEQ_S,
        "step_per_prefill_token_s": PER_TOKEN_S,
        "step_per_kv_token_s": 0.0,
        "first_token_overhead_s": 0.0,
        "max_num_seqs": None,
        "kv_capacity_tokens": None,
        "max_batched_tokens": None,
    }
    return ServerModel(params={k: Param(value=v, constrained=True) for k, v in values.items()})


def _point(index: int, prompt: int, together: int, gap_s: float, said: bool = True) -> PointObs:
    """``together`` requests sent at once every ``gap_s`` (the engine idle in between), the first of
    each slot with nothing cached."""
    seqs = [
        Seq(key=i, arrival_s=(i // together) * gap_s, prompt_tokens=prompt, output_tokens=OUT,
            cached_tokens=0 if i < together else CACHED)
        for i in range(12 * together)
    ]  # fmt: skip
    return engine_point(_truth(), seqs, index, f"{together} users", cached=said)


def _fit(said: bool = True) -> ServerModel:
    points = [_point(0, 94, 1, 1.0, said), _point(1, 94, 2, 1.5, said), _point(2, 286, 1, 2.0, said)]
    return fit_runs([RunObs(f"run{k}", [p], {}, {}) for k, p in enumerate(points)])


def test_the_prefill_cost_of_computed_tokens_and_the_cached_count_are_recovered():
    model = _fit()
    assert model.prompt_tokens_cached == CACHED
    assert model.value("step_per_prefill_token_s") == pytest.approx(PER_TOKEN_S, rel=0.05)
    assert model.value("step_per_seq_s") == pytest.approx(PER_SEQ_S, rel=0.05)
    for p in model.points:  # each fitted point replayed with its requests' own cached tokens
        assert abs(p.error["ttft_mean_s"] or 0) < 0.03, (p.label, p.error)
        assert abs(p.error["tpot_mean_s"] or 0) < 0.03, (p.label, p.error)


def test_a_server_that_says_nothing_cached_is_fitted_on_whole_prompts():
    model = _fit(said=False)
    assert model.prompt_tokens_cached == 0.0
    # the 24 reused tokens are then a saving the fit cannot see: the per-token cost comes out off
    assert model.value("step_per_prefill_token_s") != pytest.approx(PER_TOKEN_S, rel=0.05)


def test_a_prediction_prefills_the_prompt_less_what_the_server_reuses(tmp_path):
    # one user, 8-token prompts, 1 output token: a request is its prefill step alone
    cfg = config("http://model", tmp_path, [UsersLoad(users=1)], StopConfig(max_requests=5), output_tokens=1)
    truth = _truth()
    whole = predict(cfg, truth, "m.json", tmp_path / "whole").results.points[0]
    reused = truth.model_copy(update={"prompt_tokens_cached": 5.0})
    less = predict(cfg, reused, "m.json", tmp_path / "less").results.points[0]
    assert whole.ttft_s.mean == pytest.approx(0.002 + 8 * PER_TOKEN_S)
    assert less.ttft_s.mean == pytest.approx(0.002 + 3 * PER_TOKEN_S)
