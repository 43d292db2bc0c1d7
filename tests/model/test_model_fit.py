"""A model fitted on short runs against the mock, whose capacity model is known (slots
``max_streams``, a scripted TTFT and ITL): its parameters and its capacity recovered within 5%, a
parameter no run reached said to be "not constrained", and a held-out run predicted."""

from __future__ import annotations

import json
import time

import pytest
from run_helpers import config, mock_process, quiet

from tokenbench.config import RateLoad, StopConfig, UsersLoad
from tokenbench.model.fit import fit
from tokenbench.model.observe import lag_in_ttft
from tokenbench.model.params import ServerModel
from tokenbench.model.predict import predict
from tokenbench.model.validate import validate
from tokenbench.results import RunResults
from tokenbench.run import run

# Serial (run alone, never beside other tests): a model fitted on mock runs recovers their step time
# and slots within 5%.
pytestmark = pytest.mark.serial

TTFT_S, ITL_S, SLOTS, OUT = 0.050, 0.010, 4, 32
# a slot is held from admission to the last chunk: TTFT + (OUT - 1) * ITL
CAPACITY_PER_S = SLOTS / (TTFT_S + (OUT - 1) * ITL_S)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three 2-second runs: below capacity, a held-out rate, and saturated (8 users, 4 slots)."""
    base = tmp_path_factory.mktemp("model")
    dirs = {}
    with mock_process(ttft_ms=TTFT_S * 1e3, itl_ms=ITL_S * 1e3, max_streams=SLOTS) as url:
        for name, load in (
            ("low", RateLoad(rate_per_s=3)),
            ("held", RateLoad(rate_per_s=8)),
            ("sat", UsersLoad(users=8)),
        ):
            for attempt in range(3):
                cfg = config(url, base / f"{name}{attempt}", [load], StopConfig(duration_s=2), output_tokens=OUT)
                done = run(cfg, quiet())
                dirs[name] = done.run_dir
                # The unloaded TTFT below needs the low run's TTFT rows, which the fit drops where the
                # client's lag may be in them (lag_in_ttft). In make check's serial tier a neighbour
                # stalled this process 54 ms once: 6 requests, send lag p99 40 ms, and a fit from the
                # saturated run alone put overhead + step at 45.9 ms.
                if name != "low" or not lag_in_ttft(RunResults.from_json(done.results).points[0]):
                    break
    return dirs


@pytest.fixture(scope="module")
def model(runs):
    return fit([runs["low"], runs["sat"]])


def test_the_mocks_step_and_slots_are_recovered_within_5_percent(runs, model):
    assert model.value("step_base_s") == pytest.approx(ITL_S, rel=0.05)
    assert model.value("max_num_seqs") == SLOTS
    assert model.params["max_num_seqs"].by == [str(runs["sat"])]  # only the saturated run showed them
    # an unloaded request's TTFT: the overhead, then its prefill step. The client measures it, with
    # its own overhead on top (1-3 ms idle; a busy 2-core machine made it 53 ms once): 8%
    assert model.value("first_token_overhead_s") + model.value("step_base_s") == pytest.approx(TTFT_S, rel=0.08)
    assert model.params["step_base_s"].se < 0.05 * ITL_S


def test_what_no_run_reached_is_not_constrained(runs, model):
    assert not model.params["kv_capacity_tokens"].constrained and model.value("kv_capacity_tokens") is None
    below = fit([runs["low"]])
    slots = below.params["max_num_seqs"]
    assert not slots.constrained and slots.value is None and slots.note.startswith("not constrained: never saturated")


def test_the_capacity_predicted_within_5_percent_from_a_load_10x_longer_than_any_run(model, tmp_path):
    cfg = config("http://model", tmp_path, [UsersLoad(users=16)], StopConfig(duration_s=20), output_tokens=OUT)
    began = time.perf_counter()
    prediction = predict(cfg, model, "m.json", tmp_path / "pred")
    assert time.perf_counter() - began < 20  # virtual time: a 20 s point in well under its length
    point = prediction.results.points[0]
    assert point.requests_per_s == pytest.approx(CAPACITY_PER_S, rel=0.05)
    on_disk = RunResults.from_json(json.loads((tmp_path / "pred" / "results.json").read_text()))
    assert on_disk.predicted is not None and on_disk.predicted.knobs["max_num_seqs"] == SLOTS


def test_a_knob_changes_the_prediction(model, tmp_path):
    cfg = config("http://model", tmp_path, [UsersLoad(users=16)], StopConfig(duration_s=10), output_tokens=OUT)
    doubled = predict(cfg, model.with_knobs({"max_num_seqs": 8}), "m.json", tmp_path / "pred")
    assert doubled.results.points[0].requests_per_s == pytest.approx(2 * CAPACITY_PER_S, rel=0.05)


def test_a_held_out_rate_is_predicted_and_the_model_carries_its_validation(model, runs, tmp_path):
    result = validate(model, "m.json", runs["held"], tmp_path / "val")
    (check,) = result.points
    assert check.error["tpot_mean_s"] == pytest.approx(0, abs=0.05)
    assert check.error["output_tokens_per_s"] == pytest.approx(0, abs=0.10)
    assert check.error["ttft_mean_s"] == pytest.approx(0, abs=0.25)  # the mock is not step-synchronous
    validated = model.model_copy(update={"validation": result.validation})
    path = tmp_path / "m.json"
    validated.save(path)
    cfg = config("http://model", tmp_path, [RateLoad(rate_per_s=5)], StopConfig(duration_s=2), output_tokens=OUT)
    predicted = predict(cfg, ServerModel.load(path), str(path), tmp_path / "pred").results.predicted
    assert predicted is not None and predicted.validation_error == result.validation.max_abs_error
    assert predicted.validation_run == str(runs["held"])


def test_a_prediction_below_a_directory_is_never_fitted_on(runs, model, tmp_path):
    validate(model, "m.json", runs["held"], runs["held"] / "predicted")  # RUN/predicted, as the CLI writes it
    from tokenbench.model.observe import run_dirs

    assert run_dirs([runs["held"].parent]) == [runs["held"]]
