"""The determinism preset at ci scale on the embedded llama.cpp server (SmolLM2-135M, 8 slots):
the same 16 Dolly prompts greedy at 1 user, 8 users and 1 user again. What it asserts is what
must hold of any engine: every prompt's answer paired at every point, the comparisons written and
printed, and the served model named by its GGUF and fingerprinted; how many answers changed is
the engine's, measured (docs/experiments.md), not asserted."""

import json

import pytest
from preset_helpers import experiment

pytestmark = pytest.mark.e2e


def test_the_determinism_study_on_llamacpp(tmp_path_factory, embedded_gguf):
    out, state = experiment(tmp_path_factory, "determinism")
    (cell,) = state["cells"].values()
    run_dir = out / cell["run_dir"]
    loaded, floor = json.loads((run_dir / "agreement.json").read_text())["points"]
    for compared in (loaded, floor):
        assert compared["pairs"] == 16 and compared["unpaired_a"] == compared["unpaired_b"] == 0
        low, high = compared["share_ci95"]
        assert low <= compared["share_identical"] <= high
    served = json.loads((run_dir / "results.json").read_text())["target"]["served_model"]
    assert served["fingerprint"] and len(served["probes"]) == 3 and all(served["probes"])
    print(
        f"changed with load: {loaded['pairs'] - loaded['identical']} of 16; "
        f"noise floor: {floor['pairs'] - floor['identical']} of 16; served: "
        f"{ {k: v for k, v in served.items() if k != 'probes'} }"
    )
