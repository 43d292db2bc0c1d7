"""The routing preset at ci scale: the same shared-prefix traffic (4 groups of a 192-token prefix,
4 users) through 2 embedded llama.cpp replicas behind vllm-router, once round robin and once
cache-aware (a fleet launch each). Known answers: each policy's point has both replicas with the
router's counts summing to the window's requests and each replica's generated tokens 8 per request
it was sent, up to the requests in flight at the window's edges (4 users); each replica's prefix-cache hit rate comes from its own counters; the
imbalance is stated over the router's counts; and the report's fleet section has a row per
(policy, replica). The policies' hit rates are compared in the test's output (not asserted: see the
measured note in docs/backends.md)."""

import json

import pytest
from preset_helpers import experiment

pytestmark = pytest.mark.e2e

POLICIES = ["round-robin", "cache-aware"]
OUTPUT_TOKENS = 8


@pytest.fixture(scope="module")
def study(tmp_path_factory, embedded_gguf, router_venv):
    out, state = experiment(tmp_path_factory, "routing")
    return out, state


def _point(out, cell):
    return json.loads((out / cell["run_dir"] / "results.json").read_text())["points"][0]


def test_each_policy_ran_its_fleet_and_counts_agree(study):
    out, state = study
    assert [(s["label"], s["status"]) for s in state["servers"]] == [(p, "ok") for p in POLICIES]
    rates = {}
    for cell in state["cells"].values():
        point = _point(out, cell)
        fleet = point["fleet"]
        assert len(fleet["replicas"]) == 2 and fleet["imbalance_over"] == "routed_requests"
        window = point["requests_in_window"]["ok"]
        # routed when sent: the window's ok requests, and up to the 4 users' still in flight at its end
        routed = sum(r["routed_requests"] for r in fleet["replicas"])
        assert window > 0 and window <= routed <= window + 4
        for r in fleet["replicas"]:
            # routed when sent, decoded after: the window's edges hold at most the 4 users' requests
            assert abs(r["server"]["generated_tokens"] - OUTPUT_TOKENS * r["routed_requests"]) <= OUTPUT_TOKENS * 4, r
            assert r["prefix_cache_hit_rate"] is not None
        hits = sum(r["server"]["prefix_cache_hits"] for r in fleet["replicas"])
        computed = sum(r["server"]["prompt_tokens_computed"] for r in fleet["replicas"])
        rates[cell["server"]] = hits / (hits + computed)
    print(f"prefix-cache hit rate by policy (replicas' counters over the window): {rates}")


def test_the_report_has_a_fleet_row_per_policy_and_replica(study, tmp_path):
    from tokenbench.report import write_report

    out, _ = study
    md = write_report([out], tmp_path / "report").markdown.read_text()
    section = md[md.index("## Fleet: by replica") :]
    rows = [line for line in section.splitlines()[1:] if line.startswith("|")][2:]
    assert sum(1 for line in rows if any(p in line for p in POLICIES)) >= 2 * len(POLICIES)
