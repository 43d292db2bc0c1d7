"""The simulated server with known answers: step timing, slots, the chunked-prefill budget, KV
preemption and replicas (model/engine.py)."""

from __future__ import annotations

import pytest

from tokenbench.model.engine import Cluster, Seq
from tokenbench.model.params import Param, ServerModel


def _model(**values: float | None) -> ServerModel:
    defaults: dict[str, float | None] = {
        "step_base_s": 0.010,
        "step_per_seq_s": 0.0,
        "step_per_prefill_token_s": 0.0,
        "step_per_kv_token_s": 0.0,
        "first_token_overhead_s": 0.0,
        "max_num_seqs": None,
        "kv_capacity_tokens": None,
        "max_batched_tokens": None,
    }
    defaults.update(values)
    return ServerModel(params={k: Param(value=v, constrained=True) for k, v in defaults.items()})


def _run(model: ServerModel, seqs: list[Seq], replicas: int = 1, routing: str = "round-robin") -> Cluster:
    cluster = Cluster(model, replicas, routing)  # type: ignore[arg-type]
    for s in seqs:
        cluster.submit(s)
    cluster.run(lambda seq, t: None)
    return cluster


def test_one_request_first_token_after_overhead_and_its_prefill_step_then_one_per_step():
    seq = Seq(key=0, arrival_s=1.0, prompt_tokens=100, output_tokens=5)
    _run(_model(first_token_overhead_s=0.040, step_per_prefill_token_s=0.0001), [seq])
    # overhead 40 ms, then a prefill step of 10 + 100 * 0.1 = 20 ms, then 10 ms a token
    assert seq.token_times == pytest.approx([1.060, 1.070, 1.080, 1.090, 1.100])


def test_a_step_costs_per_decoding_sequence():
    seqs = [Seq(key=i, arrival_s=0.0, prompt_tokens=1, output_tokens=3) for i in range(4)]
    _run(_model(step_per_seq_s=0.005), seqs)
    # the four arrivals of one instant are prefilled in one step (10 ms); then four decode: 10 + 4 * 5 = 30 ms
    assert all(s.token_times == pytest.approx([0.010, 0.040, 0.070]) for s in seqs)
    later = Seq(key=9, arrival_s=0.015, prompt_tokens=1, output_tokens=2)
    again = [Seq(key=i, arrival_s=0.0, prompt_tokens=1, output_tokens=3) for i in range(4)]
    _run(_model(step_per_seq_s=0.005), [*again, later])
    # one arriving during the second step joins the third: four decodes and its prefill (30 ms);
    # then it decodes alone (15 ms)
    assert later.token_times == pytest.approx([0.070, 0.085])
    assert again[0].token_times == pytest.approx([0.010, 0.040, 0.070])


def test_arrivals_of_one_instant_are_prefilled_together_with_no_overhead():
    # llama.cpp's fits have no overhead: the first arrival of an instant started a step alone and
    # lockstep users drifted apart (a simulated ITL p99 of 335 ms where the real one was 19 ms)
    users = [Seq(key=i, arrival_s=0.5, prompt_tokens=10, output_tokens=4) for i in range(3)]
    _run(_model(step_base_s=0.0, step_per_seq_s=0.010, step_per_prefill_token_s=0.004), users)
    # one prefill of 30 tokens (120 ms), then three decode: 30 ms a step
    assert all(u.token_times == pytest.approx([0.620, 0.650, 0.680, 0.710]) for u in users)


def test_a_prompts_cached_tokens_are_not_prefilled_but_held_in_kv():
    # llama.cpp reuses the chat template's tokens from a slot's last prompt: 94 tokens, 24 of them cached
    seq = Seq(key=0, arrival_s=0.0, prompt_tokens=94, output_tokens=3, cached_tokens=24)
    _run(
        _model(step_base_s=0.0, step_per_seq_s=0.010, step_per_prefill_token_s=0.004, step_per_kv_token_s=0.0001), [seq]
    )
    # prefill: 70 tokens (280 ms) + the KV in use at its start (94 tokens: 9.4 ms)
    assert seq.token_times[0] == pytest.approx(0.280 + 0.0094)
    # a decode: 10 ms + 95 tokens in KV
    assert seq.token_times[1] - seq.token_times[0] == pytest.approx(0.010 + 0.0095)
    whole = Seq(key=1, arrival_s=0.0, prompt_tokens=5, output_tokens=1, cached_tokens=5)
    _run(_model(step_base_s=0.0, step_per_prefill_token_s=0.004), [whole])
    assert whole.token_times == pytest.approx([0.004])  # all of it cached: its last token is still run


def test_a_fitted_intercept_below_zero_is_simulated_as_fitted():
    # a fit may put the intercept below 0 (llama.cpp here: -4 ms with 10.2 ms a sequence): the
    # simulated step is the fitted line, kept above 0, not the line with its intercept raised to 0
    # (that had the fit's own 1-user points at +60% TPOT)
    seq = Seq(key=0, arrival_s=0.0, prompt_tokens=10, output_tokens=4)
    _run(_model(step_base_s=-0.004, step_per_seq_s=0.010, step_per_prefill_token_s=0.001), [seq])
    # prefill: -4 + 10 * 1 = 6 ms; then a decode of one sequence: -4 + 10 = 6 ms a token
    assert seq.token_times == pytest.approx([0.006, 0.012, 0.018, 0.024])
    alone = Seq(key=1, arrival_s=0.0, prompt_tokens=1, output_tokens=1)
    _run(_model(step_base_s=-0.004, step_per_prefill_token_s=0.001), [alone])
    assert 0.0 < alone.token_times[0] < 1e-5  # -4 + 1 ms: a step still takes some time


def test_slots_queue_the_rest_fcfs():
    seqs = [Seq(key=i, arrival_s=0.0, prompt_tokens=1, output_tokens=2) for i in range(4)]
    _run(_model(max_num_seqs=2), seqs)
    # the first two take the slots and are prefilled together; the other two wait for them to end (20 ms)
    assert seqs[0].token_times == pytest.approx([0.010, 0.020])
    assert seqs[1].token_times == pytest.approx([0.010, 0.020])
    assert seqs[2].token_times == pytest.approx([0.030, 0.040])
    assert seqs[3].token_times == pytest.approx([0.030, 0.040])


def test_the_chunked_prefill_budget_splits_a_long_prompt_over_steps():
    seq = Seq(key=0, arrival_s=0.0, prompt_tokens=1000, output_tokens=1)
    _run(_model(max_batched_tokens=256, step_per_prefill_token_s=0.00001), [seq])
    # four steps: 256, 256, 256, 232 tokens, each 10 ms + its tokens
    assert seq.token_times == pytest.approx([0.040 + 1000 * 0.00001])


def test_kv_overflow_preempts_the_youngest_and_every_request_still_finishes():
    seqs = [Seq(key=i, arrival_s=0.0, prompt_tokens=40, output_tokens=30) for i in range(3)]
    cluster = _run(_model(kv_capacity_tokens=150), seqs)
    assert sum(e.preemptions for e in cluster.engines) >= 1
    assert all(len(s.token_times) == 30 for s in seqs)
    assert seqs[2].preemptions >= 1 and seqs[0].preemptions == 0  # the youngest goes back


def test_least_loaded_routing_spreads_what_round_robin_piles_up():
    # long requests at even indices, short at odd: round-robin sends every long one to replica 0
    seqs = [Seq(key=i, arrival_s=i * 0.05, prompt_tokens=1, output_tokens=50 if i % 2 == 0 else 1) for i in range(8)]
    again = [Seq(key=s.key, arrival_s=s.arrival_s, prompt_tokens=1, output_tokens=s.output_tokens) for s in seqs]
    _run(_model(max_num_seqs=1), seqs, 2, "round-robin")
    _run(_model(max_num_seqs=1), again, 2, "least-loaded")
    rr, ll = max(s.token_times[-1] for s in seqs), max(s.token_times[-1] for s in again)
    assert rr == pytest.approx(4 * 50 * 0.010, abs=0.01)  # replica 0 serves all four long ones
    # least-loaded: the long ones go 0, 1, 1, 1 (a short one holds replica 0 each time): 3 after
    # the first on replica 1, from 0.1 s: 0.1 + 3 * 0.5
    assert ll == pytest.approx(0.1 + 3 * 0.5, abs=0.02)
