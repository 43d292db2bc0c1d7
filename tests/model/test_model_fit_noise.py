"""A busy client is not a server cost: the fit runs of two trace-test misses on a busy
machine (the mock: flat TTFT 20 ms, ITL 5 ms, no prefill cost, 64 streams, never saturated), as the
fit reads them (tests/fixtures/model/trace_fit_runs.json). Before, the first gave a prefill cost
of 18 µs a token at 4 plain standard errors (TPOT +54% on a replay with 131-token prompts), the
second 63 µs (+11,000%), the third a KV cost of 4 µs a token (+162%): the client's stalls, read as
the server's."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tokenbench.model.fit import fit_runs
from tokenbench.model.observe import PointObs, RunObs
from tokenbench.model.params import OVERHEAD, STEP_TERMS, ServerModel

FIXTURE = Path(__file__).parent.parent / "fixtures" / "model" / "trace_fit_runs.json"
ITL_S, TTFT_S = 0.005, 0.020


def _runs(name: str) -> list[RunObs]:
    runs = []
    for k, p in enumerate(json.loads(FIXTURE.read_text())[name]):
        n = len(p["sent_us"])
        point = PointObs(
            run=f"r{k}",
            index=0,
            label=p["label"],
            sent=np.array(p["sent_us"]) / 1e6,
            first=np.array(p["first_us"]) / 1e6,
            last=np.array(p["last_us"]) / 1e6,
            chunks=np.array(p["chunks"], dtype=float),
            prompt=np.array(p["prompt"], dtype=float),
            output=np.array(p["output"], dtype=float),
            kv_scrapes=[],
            prompt_extra=np.full(n, math.nan),
            client_limited=p["client_limited"],
        )
        runs.append(RunObs(f"r{k}", [point], {}, {}))
    return runs


def _assert_the_mock(model: ServerModel) -> None:
    for name in STEP_TERMS[1:]:  # per sequence, per prefill token, per KV token: none
        assert model.value(name) == 0.0, (name, model.params[name])
    assert model.value("step_base_s") == pytest.approx(ITL_S, rel=0.05)
    # an unloaded request's TTFT: the overhead and its step (the client reads it 1-2 ms late)
    assert model.value(OVERHEAD) + ITL_S == pytest.approx(TTFT_S, rel=0.10)


def test_rows_that_err_together_in_time_are_one_piece_of_evidence():
    # the client's stalls raise the TTFT and the prompts still waiting at once, over a few ms: the
    # cluster-robust standard error counts such a window once, and the prefill cost is noise
    model = fit_runs(_runs("stalls"))
    _assert_the_mock(model)
    note = model.params["step_per_prefill_token_s"].note or ""
    assert note.startswith(("not constrained", "fitted below 0")), note


def test_at_one_prompt_length_the_kv_tokens_are_the_batch_size_and_not_a_cost_of_their_own():
    model = fit_runs(_runs("one_prompt_length"))
    _assert_the_mock(model)
    note = model.params["step_per_kv_token_s"].note or ""
    assert note.startswith("not constrained: the runs never varied the KV tokens in use apart from the batch"), note


def test_a_point_whose_client_was_limited_gives_no_ttft_rows():
    runs = _runs("client_limited")
    model = fit_runs(runs)
    _assert_the_mock(model)
    assert "120 req/s poisson (r1) left out: its client was limited" in (model.params[OVERHEAD].note or "")
    # the same points read as if the client had kept up: its lag becomes a prefill cost
    unflagged = [replace(r, points=[replace(p, client_limited=False) for p in r.points]) for r in runs]
    assert fit_runs(unflagged).value("step_per_prefill_token_s") > 20e-6


def test_a_limited_points_ttft_is_read_when_the_others_have_too_few_free_requests():
    # a busy machine flags a 3 req/s point too, whose TTFT is sound: it is left out only when the
    # points whose client kept up have enough requests of their own
    runs = _runs("stalls")
    low, high = (replace(r.points[0], client_limited=True) for r in runs)
    model = fit_runs([replace(runs[0], points=[low]), replace(runs[1], points=[high])])
    assert "left out" not in (model.params[OVERHEAD].note or "")
    few = replace(high, sent=high.sent[:10], first=high.first[:10], last=high.last[:10], chunks=high.chunks[:10],
                  prompt=high.prompt[:10], output=high.output[:10], prompt_extra=high.prompt_extra[:10],
                  client_limited=False)  # fmt: skip
    model = fit_runs([replace(runs[0], points=[low]), replace(runs[1], points=[few])])
    assert "left out" not in (model.params[OVERHEAD].note or "")
