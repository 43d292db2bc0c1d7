"""Which model a run served (results.json target.served_model): the mock's /v1/models card and
the fingerprint of its greedy answers, known from its script; compare warns, one line, when two
runs did not serve the same model, and stays quiet when they did."""

from __future__ import annotations

import json

import pytest
from run_helpers import config, quiet
from typer.testing import CliRunner

from tokenbench.cli import app
from tokenbench.clients.served_model import FINGERPRINT_TOKENS, fingerprint_of
from tokenbench.compare.served_models import model_warnings, served_of
from tokenbench.config import StopConfig, UsersLoad
from tokenbench.run import run


def _run(url: str, out, **kw) -> object:
    c = config(url, out, [UsersLoad(users=1)], StopConfig(max_requests=2), output_tokens=4, **kw)
    return run(c, console=quiet()).run_dir


def _served(run_dir) -> dict:
    return json.loads((run_dir / "results.json").read_text())["target"].get("served_model")


@pytest.fixture
def runs(mock_server, tmp_path):
    def one(name: str, fingerprint: bool = True, **knobs) -> object:
        return _run(mock_server(ttft_ms=0, itl_ms=0, **knobs), tmp_path / name, fingerprint=fingerprint)

    return one


def test_a_run_records_the_card_and_the_fingerprint_of_the_scripted_answers(runs):
    run_dir = runs("a", model_root="/weights/a", max_model_len=2048)
    served = _served(run_dir)
    assert {k: served[k] for k in ("id", "root", "max_model_len", "owned_by")} == {
        "id": "mock-model",
        "root": "/weights/a",
        "max_model_len": 2048,
        "owned_by": "mock",
    }
    assert isinstance(served["created"], int)
    assert served["probes"] == [" hi" * FINGERPRINT_TOKENS] * 3  # three probes, 16 scripted tokens each
    assert served["fingerprint"] == fingerprint_of(served["probes"]) and served["fingerprint_tokens"] == 16
    records = (run_dir / "records.jsonl").read_text().splitlines()
    assert len(records) == 2 and {json.loads(r)["point"] for r in records} == {0}  # the probes are in no point


def test_no_fingerprint_is_taken_when_asked_not_to(runs):
    served = _served(runs("a", fingerprint=False))
    assert "fingerprint" not in served and "probes" not in served and served["id"] == "mock-model"


def test_compare_warns_once_per_run_that_served_another_model(runs):
    base = served_of(runs("base"))
    same = served_of(runs("same"))
    salted = served_of(runs("salted", fingerprint_salt="v2"))  # other weights, the same name
    rooted = served_of(runs("rooted", model_root="/weights/other"))
    renamed = served_of(runs("renamed", model="other-model"))
    assert model_warnings([base, same]) == []
    (line,) = model_warnings([base, salted])
    assert "both serve 'mock-model'" in line and "greedy answers differ" in line
    assert model_warnings([base, renamed]) == [
        f"model: {base.source} requested 'mock-model', {renamed.source} 'other-model': different models"
    ]
    other_root = served_of(runs("rooted2", model_root="/weights/b"))
    assert model_warnings([rooted, other_root]) == [
        f"model: {rooted.source} and {other_root.source} both serve 'mock-model' but the servers differ: "
        "root '/weights/other' vs '/weights/b'"
    ]
    assert len(model_warnings([base, same, salted, renamed])) == 2
    # only one side said: nothing to compare it with
    assert model_warnings([base, rooted]) == []


def test_compare_prints_the_warning_and_fails_only_when_asked(runs):
    a, b = runs("a"), runs("b", fingerprint_salt="v2")
    warned = CliRunner().invoke(app, ["compare", str(a), str(b)])
    assert warned.exit_code == 0 and warned.output.count("model: ") == 1
    strict = CliRunner().invoke(app, ["compare", str(a), str(b), "--fail-on-model-change"])
    assert strict.exit_code == 1
    assert CliRunner().invoke(app, ["compare", str(a), str(runs("c")), "--fail-on-model-change"]).exit_code == 0
