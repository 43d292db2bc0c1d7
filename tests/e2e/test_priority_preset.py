"""The priority preset at ci scale on vLLM CPU: the same engine with and without
--scheduling-policy priority under the same overload; with it the high class's TTFT stays below
the low class's, and below the high class's without it. (What test_priority_live.py asserted on
two launches of its own, folded in here: one pair of vLLM starts in make test, not two.)"""

import json

import pytest
from preset_helpers import experiment

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def study(tmp_path_factory, vllm_cpu):
    """Its own two launches: the scheduling policy, a launch argument, is what it compares."""
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
    assert on["high"]["good_fraction"] > on["low"]["good_fraction"], on
    # without priority scheduling the high class queues with the rest
    assert off["high"]["ttft_s"]["p90"] > off["low"]["ttft_s"]["p90"] / 2, off
    assert off["high"]["ttft_s"]["p90"] > 1.5 * on["high"]["ttft_s"]["p90"], (off, on)
    point = json.loads((out / cells["priority-on"]["run_dir"] / "results.json").read_text())["points"][0]
    assert point["fairness"]["tenants"] == 2 and point["fairness"]["jain_index"] < 1
