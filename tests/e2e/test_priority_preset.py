"""The priority preset at ci scale on vLLM CPU (issue 23 routing): the same engine with and without
--scheduling-policy priority under the same overload; with it the high class's TTFT stays below
the low class's, and below the high class's without it."""

import json
import os

import pytest
from preset_helpers import ROOT, experiment

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    if not (ROOT / ".cache/vllm-venv/bin/python").exists():
        message = "vLLM CPU is not set up: run scripts/setup_vllm_cpu.sh (make test does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return experiment(tmp_path_factory, "priority")


def _by_class(out, cell) -> dict:
    results = json.loads((out / cell["run_dir"] / "results.json").read_text())
    return results["points"][0]["by_class"]


def test_priority_on_keeps_the_high_class_ttft_and_off_does_not(study):
    out, state = study
    cells = {c["server"]: c for c in state["cells"].values()}
    assert set(cells) == {"priority-on", "priority-off"} and all(c["status"] == "ok" for c in cells.values())
    on, off = _by_class(out, cells["priority-on"]), _by_class(out, cells["priority-off"])
    assert on["high"]["ttft_s"]["p90"] * 2 < on["low"]["ttft_s"]["p90"], on
    assert off["high"]["ttft_s"]["p90"] > on["high"]["ttft_s"]["p90"], (off, on)
