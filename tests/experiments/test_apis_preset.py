"""The apis preset (chat vs Messages vs Responses on one launch) at both scales, and its study run
against the mock: each API is a variant of the same server, its cells send the same prompts, and
the aggregates hold every API's TTFT and TPOT beside the others."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from tokenbench.experiments.presets import preset, preset_data
from tokenbench.experiments.spec import expand

APIS = ["chat", "messages", "responses"]


def _apis_by_variant(scale: str) -> dict[str, str | None]:
    (plan,) = expand(preset("apis", scale))
    return {c.variant: c.config.target.api for c in plan.cells}


def test_each_api_is_a_variant_of_one_launch():
    assert _apis_by_variant("small") == dict(zip(APIS, APIS))
    assert _apis_by_variant("full") == dict(zip(APIS, APIS))
    (small,) = expand(preset("apis", "small"))
    assert small.backend.name == "xllamacpp" and {c.trial for c in small.cells} == {1, 2}
    # the same prompts on every API: the dataset and seed are the experiment's, not the variant's
    assert len({(c.config.dataset, c.trial, c.config.seed) for c in small.cells}) == 2
    assert all(c.config.target.ignore_eos for c in small.cells)  # llama.cpp takes it on every route
    # the same prompts on every API: each point starts with the prefix cache emptied
    assert all(c.config.prefix_cache == "reset" for c in small.cells)


def test_the_full_study_leaves_ignore_eos_off_for_vllms_messages_route():
    (plan,) = expand(preset("apis", "full"))
    assert plan.backend.name == "vllm" and not any(c.config.target.ignore_eos for c in plan.cells)
    assert [p.users for p in plan.cells[0].config.loads] == [1, 8, 32]


@pytest.mark.serial  # TTFT to 15 ms of the mock's 30 on every API
def test_the_study_against_the_mock_aggregates_every_api(mock_server, tmp_path):
    url = mock_server(ttft_ms=30, itl_ms=5)
    doc = preset_data("apis", "ci")
    doc = {
        **doc,
        "backends": [{"url": url, "label": "mock", "backend": "vllm"}],
        "stop": {"duration_s": 1.5, "drain_timeout_s": 5},
        "ignore_eos": False,
        "trials": 1,
    }
    spec = tmp_path / "apis.yaml"
    spec.write_text(yaml.safe_dump(doc))
    out = tmp_path / "exp"
    cmd = [sys.executable, "-m", "tokenbench", "experiment", "run", str(spec), "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads((out / "experiment.json").read_text())["aggregates"]
    assert sorted(r["variant"] for r in rows) == APIS
    for row in rows:
        assert row["metrics"]["ttft_s_mean"]["mean"] == pytest.approx(0.030, abs=0.015), row["variant"]
        assert row["metrics"]["tpot_s_mean"]["mean"] == pytest.approx(0.005, abs=0.002), row["variant"]
        assert row["metrics"]["client_cpu_util_mean"]["mean"] > 0
    # the report reads each row's API from its cells and compares Messages and Responses with chat
    from tokenbench.report.read.load import load_inputs
    from tokenbench.report.sections.apis import api_costs

    data = load_inputs([out])
    assert sorted(r.api for r in data.rows) == APIS
    costs = api_costs(data)
    assert {c.api for c in costs} == {"messages", "responses"} and {c.base for c in costs} == {"mock · chat"}
    assert "server_cpu_cores_mean" not in {c.metric for c in costs}  # an attached server: none measured
