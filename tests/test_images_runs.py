"""Images end to end against the scripted mock: each image_url part costs the
mock ``image_ms`` of prefill before the first chunk and ``image_tokens`` of prompt, so a known
answer holds per request: TTFT = ttft + images x image_ms, prompt tokens = the text run's +
images x image_tokens. Timed to the millisecond: the mock runs in its own process (start_mock)."""

import json
import urllib.request

import pyarrow.parquet as pq
import pytest
from run_helpers import config, quiet, records_of

from tokenbench.config import DatasetConfig, RateLoad, SessionConfig, StopConfig, UsersLoad
from tokenbench.history.export import export
from tokenbench.report import write_report
from tokenbench.report.read.run_dir import image_rows
from tokenbench.results import RunResults
from tokenbench.run import run

MOCK = {"ttft_ms": 20, "itl_ms": 5, "image_ms": 80, "image_tokens": 50}
TOL_S = 0.025  # client and scheduling slack on a shared 2-core machine


def run_with(url, tmp_path, name, loads, **dataset):
    cfg = config(url, tmp_path / name, loads, StopConfig(max_requests=8), output_tokens=5)
    cfg = cfg.model_copy(
        update={"dataset": DatasetConfig(input_tokens=8, output_tokens=5, num_prompts=8, **dataset), "seed": 5}
    )
    result = run(cfg, quiet())
    return result, {r["id"]: r for r in records_of(result.run_dir)}


def test_ttft_rises_by_the_scripted_cost_of_each_image_and_prompt_tokens_by_its_tokens(start_mock, tmp_path):
    url = start_mock(**MOCK)
    _, text = run_with(url, tmp_path, "text", [UsersLoad(users=1)])
    result, recs = run_with(url, tmp_path, "images", [UsersLoad(users=1)], images="1-3", image_size="64x32,16x16")
    by_prompt = {r["dataset_prompt_tokens"]: r for r in text.values()}  # (all 8: one per prompt)
    assert len(recs) == 8 and all(r["outcome"] == "ok" for r in recs.values())
    assert {r["images"] for r in recs.values()} <= {1, 2, 3} and len({r["images"] for r in recs.values()}) > 1
    for r in recs.values():
        n = r["images"]
        assert r["image_pixels"] in {a * 2048 + (n - a) * 256 for a in range(n + 1)}
        ttft = r["chunk_times_s"][0] - r["sent_s"]
        assert ttft == pytest.approx(0.020 + n * 0.080, abs=TOL_S), r
    # the same prompts in the same order (same seed): the text run's prompt tokens + 50 an image
    text_tokens = sorted(r["prompt_tokens"] for r in text.values())
    assert sorted(r["prompt_tokens"] - 50 * r["images"] for r in recs.values()) == text_tokens
    assert all(r["images"] is None and r["image_pixels"] is None for r in text.values())
    assert by_prompt  # text records exist
    point = result.results["points"][0]
    images = point["images"]
    total = sum(r["images"] for r in recs.values())
    assert images["requests"] == 8 and images["images"] == total and images["ok_requests"] == 8
    assert images["images_per_request"] == total / 8
    assert images["image_pixels"] == sum(r["image_pixels"] for r in recs.values())
    assert images["images_per_s"] == pytest.approx(point["requests_per_s"] * total / 8)
    assert images["prompt_tokens"]["count"] == 8

    # the Parquet export has the per-request and per-point columns, the report its section
    files = export(result.run_dir, "parquet", tmp_path / "export")
    rec_cols = pq.read_table(files["records"]).column_names
    assert {"images", "image_pixels"} <= set(rec_cols)
    pts = pq.read_table(files["points"]).to_pylist()
    assert pts[0]["images_images"] == total and pts[0]["images_images_per_s"] == pytest.approx(images["images_per_s"])
    write_report([result.run_dir], result.run_dir)
    md = (result.run_dir / "report.md").read_text()
    assert "## Images" in md and "images/s" in md


def test_a_text_run_has_no_images_keys_in_results_or_report(start_mock, tmp_path):
    url = start_mock(**MOCK)
    result, _ = run_with(url, tmp_path, "text", [RateLoad(rate_per_s=20)])
    assert "images" not in result.results["points"][0]
    assert all(r["images"] is None for r in records_of(result.run_dir))
    assert image_rows(RunResults.from_json(result.results), "run") == []  # no report section


# Two default 512x512 PNGs of noise make a ~2 MB body: aiohttp warns (a ResourceWarning, ignored
# outside tests) that it sends bytes over 1 MB in one write; it sends them all the same.
@pytest.mark.filterwarnings("ignore:Sending a large body directly:ResourceWarning")
def test_open_loop_carries_images_too_at_the_default_size(start_mock, tmp_path):
    url = start_mock(**MOCK)
    result, recs = run_with(url, tmp_path, "rate", [RateLoad(rate_per_s=20, arrival="constant")], images="2")
    assert {r["images"] for r in recs.values()} == {2}
    for r in recs.values():  # (the ~2 MB upload and its parse add to TTFT here: a lower bound)
        assert r["outcome"] == "ok" and r["chunk_times_s"][0] - r["sent_s"] >= 0.020 + 0.160 - 0.002
    images = result.results["points"][0]["images"]
    assert images["images"] == 16 and images["pixels_per_image"] == 512 * 512


def test_each_turn_of_a_session_carries_its_own_images_and_the_history_their_text(mock_server, tmp_path):
    """--multi-turn: turn k's new user message has its own image parts; the earlier turns in its
    history are sent as the text they were (their images are not re-sent)."""
    url = mock_server(ttft_ms=2, itl_ms=1, record_requests=True, image_tokens=7)
    cfg = config(url, tmp_path, [UsersLoad(users=1)], StopConfig(max_requests=6), output_tokens=5)
    dataset = DatasetConfig(input_tokens=8, output_tokens=5, num_prompts=2, images="1", image_size="8x8")
    cfg = cfg.model_copy(update={"dataset": dataset, "sessions": SessionConfig(turns=3)})
    result = run(cfg, quiet())
    recs = records_of(result.run_dir)
    assert len(recs) == 6 and {r["images"] for r in recs} == {1} and {r["image_pixels"] for r in recs} == {64}
    with urllib.request.urlopen(url + "/mock/deliveries") as resp:
        deliveries = list(json.loads(resp.read()).values())
    urls = set()
    for d in deliveries:
        *history, last = d["messages"]
        assert [p["type"] for p in last["content"]] == ["text", "image_url"]
        urls.add(last["content"][1]["image_url"]["url"])
        assert all(isinstance(m["content"], str) for m in history)
        assert d["images"] == 1
    assert len(urls) == 6  # every turn's image is its own
    assert result.results["points"][0]["images"]["images"] == 6
