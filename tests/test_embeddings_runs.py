"""--api embeddings|rerank|score run top to bottom against the mock: an
answer with N inputs is written whole at admitted + TTFT + N x input_ms, so U closed-loop users
sending B inputs a request get U x B / (TTFT + B x input_ms) inputs/s, and prompt tokens are the
inputs' words (each prompt here is 5 words). Every load kind carries the requests: users, rates,
a trace's replay, a capacity search on an E2E objective, an experiment."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from replay_helpers import write_trace
from run_helpers import quiet, records_of

from tokenbench.capacity import CapacitySettings, parse_objectives, search
from tokenbench.capacity.objectives import ObjectiveError
from tokenbench.config import DatasetConfig, RateLoad, ReplayLoad, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.run import run

WORDS = 5  # each prompt's words: the mock's tokens


def _prompts(tmp_path, n=24):
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"text {i} of five words"}) + "\n" for i in range(n)))
    return path


def _config(url, tmp_path, api, batch, loads, stop, dataset=None, **kw) -> RunConfig:
    return RunConfig(
        target=TargetConfig(url=url, api=api, batch_size=batch),
        loads=loads,
        stop=stop,
        dataset=dataset or DatasetConfig(name="jsonl", path=_prompts(tmp_path)),
        live=False,
        out_dir=tmp_path / "run",
        **kw,
    )


def test_closed_loop_inputs_per_second_is_the_scripted_answer(start_mock, tmp_path):
    """2 users x 4 inputs against TTFT 20 ms + 4 x 10 ms: 8 / 0.060 = 133 inputs/s."""
    url = start_mock(ttft_ms=20, input_ms=10)
    cfg = _config(url, tmp_path, "embeddings", 4, [UsersLoad(users=2)], StopConfig(duration_s=2.0))
    result = run(cfg, quiet())
    point = result.results["points"][0]
    pooling = point["pooling"]
    assert pooling["inputs_per_s"] == pytest.approx(2 * 4 / 0.060, rel=0.15)
    assert pooling["inputs_per_s"] == pytest.approx(4 * point["requests_per_s"])  # same population and period
    assert pooling["prompt_tokens_per_s"] == pytest.approx(WORDS * pooling["inputs_per_s"])  # the server's usage
    assert pooling["prompt_tokens_source"] == {"server": pooling["requests"]} and pooling["inputs_per_request"] == 4
    assert point["e2e_s"]["p50"] == pytest.approx(0.060, abs=0.015)  # sent -> the answer complete
    # the streamed metrics are absent, not zero
    for key in ("ttft_s", "tpot_s", "itl_s", "decode_speed_tokens_per_s", "normalized_latency_s"):
        assert point[key]["count"] == 0 and point[key]["mean"] is None, key
    assert point["output_tokens_per_s"] is None and point["total_tokens_per_s"] is None
    records = records_of(result.run_dir)
    ok = [r for r in records if r["outcome"] == "ok"]
    assert ok and all(r["inputs"] == 4 and r["chunk_times_s"] == [] and r["output_tokens"] is None for r in ok)
    assert all(r["prompt_tokens"] == 4 * WORDS and r["end_s"] == r["closed_s"] for r in ok)


@pytest.mark.parametrize(("api", "tokens"), [("rerank", 3 * 2 * WORDS), ("score", 3 * 2 * WORDS)])
def test_rerank_and_score_send_a_query_and_documents(mock_server, tmp_path, api, tokens):
    """3 documents scored against one query: 3 pairs of 5 + 5 words each."""
    url = mock_server(ttft_ms=1, input_ms=1)
    cfg = _config(url, tmp_path, api, 3, [UsersLoad(users=1)], StopConfig(max_requests=5))
    console = quiet()
    result = run(cfg, console)
    records = records_of(result.run_dir)
    assert [(r["outcome"], r["inputs"], r["prompt_tokens"]) for r in records] == [("ok", 3, tokens)] * 5
    assert result.results["points"][0]["pooling"]["inputs"] == 15
    # the summary shows the pooling rates and leaves out what only a stream has
    summary = console.file.getvalue()
    assert "input rate (inputs/s)" in summary and "prompt throughput (tok/s)" in summary
    assert "E2E (ms)" in summary and "TTFT" not in summary and "ITL" not in summary


def test_open_loop_inputs_per_second_is_the_offered_rate_times_the_batch(mock_server, tmp_path):
    url = mock_server(ttft_ms=5, input_ms=2)
    load = RateLoad(rate_per_s=20, arrival="constant")
    result = run(_config(url, tmp_path, "embeddings", 2, [load], StopConfig(duration_s=1.5)), quiet())
    point = result.results["points"][0]
    assert point["requests_per_s"] == pytest.approx(20, rel=0.1)
    assert point["pooling"]["inputs_per_s"] == pytest.approx(2 * point["requests_per_s"])


def test_a_trace_replay_sends_one_pooling_request_per_row_at_its_time(mock_server, tmp_path):
    url = mock_server(ttft_ms=1, input_ms=1)
    trace = write_trace(tmp_path / "trace.jsonl")
    cfg = _config(
        url,
        tmp_path,
        "embeddings",
        2,
        [ReplayLoad()],
        StopConfig(schedule_ends=True, drain_timeout_s=10),
        dataset=DatasetConfig(name="trace", path=trace, block_size=10),
    )
    result = run(cfg, quiet())
    records = records_of(result.run_dir)
    assert [(r["trace_row"], r["outcome"], r["inputs"]) for r in records] == [(i, "ok", 2) for i in range(1, 5)]
    assert result.results["points"][0]["pooling"]["requests"] == 4


def test_capacity_search_on_an_e2e_objective_finds_the_servers_streams(start_mock, tmp_path):
    """2 answers at once, 60 ms each: 2 users meet E2E p90 <= 80 ms, a third waits (90 ms mean)."""
    url = start_mock(ttft_ms=20, input_ms=10, max_streams=2)
    cfg = _config(url, tmp_path, "embeddings", 4, [UsersLoad(users=1)], StopConfig(duration_s=2.0))
    settings = CapacitySettings(variable="users", saturate_users=6)
    result = search(cfg, parse_objectives("e2e:p90<=80ms"), settings, console=quiet())
    assert result.max_users == 2 and result.min_failing == 3, result.answer
    with pytest.raises(ObjectiveError, match="--slo ttft: --api embeddings answers whole"):
        search(cfg, parse_objectives("ttft:p90<=1s"), settings, console=quiet())


def test_an_experiment_runs_pooling_cells_with_a_batch_size_per_variant(mock_server, tmp_path):
    url = mock_server(ttft_ms=5, input_ms=5)
    spec = {
        "name": "emb",
        "backends": [{"label": "mock", "url": url}],
        "load": {"users": [2]},
        "stop": {"max_requests": 6},
        "dataset": {"name": "jsonl", "path": str(_prompts(tmp_path))},
        "api": "embeddings",
        "batch_size": 2,
        "variants": [{"label": "b2"}, {"label": "b4", "batch_size": 4}],
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "exp"
    proc = subprocess.run(
        [sys.executable, "-m", "tokenbench", "experiment", "run", str(path), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    state = json.loads((out / "experiment.json").read_text())
    inputs = {}
    for cell in state["cells"].values():
        point = json.loads((out / cell["run_dir"] / "results.json").read_text())["points"][0]
        inputs[cell["variant"]] = point["pooling"]["inputs_per_request"]
    assert inputs == {"b2": 2, "b4": 4}
    assert all(row["metrics"]["inputs_per_s"]["mean"] > 0 for row in state["aggregates"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--api", "chat", "--batch-size", "4"], "--batch-size 4 sets the inputs of a pooling request"),
        (["--api", "embeddings", "--multi-turn"], "--multi-turn sends conversations: drop it with --api embeddings"),
        (["--api", "score", "--slo", "ttft=1s"], "--api score answers whole, with no TTFT or TPOT"),
    ],
)
def test_a_pooling_setting_in_the_wrong_place_is_one_line_naming_the_flag(args, message):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tokenbench",
            "run",
            "--url",
            "http://127.0.0.1:9",
            "--users",
            "1",
            "--duration",
            "1",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_the_parquet_export_has_the_pooling_columns(mock_server, tmp_path):
    import pyarrow.parquet as pq

    from tokenbench.history.export import export

    url = mock_server(ttft_ms=1, input_ms=1)
    result = run(_config(url, tmp_path, "embeddings", 2, [UsersLoad(users=1)], StopConfig(max_requests=3)), quiet())
    files = export(result.run_dir, "parquet", tmp_path / "tables")
    records = pq.read_table(files["records"]).to_pylist()
    assert [(r["inputs"], r["prompt_tokens"], r["ttft_s"], r["chunks"]) for r in records] == [
        (2, 2 * WORDS, None, 0)
    ] * 3
    assert all(r["e2e_s"] is not None and r["api"] == "embeddings" for r in records)
    (point,) = pq.read_table(files["points"]).to_pylist()
    assert point["pooling_inputs"] == 6 and point["pooling_inputs_per_request"] == 2
    assert point["pooling_inputs_per_s"] > 0 and point["pooling_prompt_tokens_per_s"] == pytest.approx(
        WORDS * point["pooling_inputs_per_s"]
    )


def test_the_report_has_a_pooling_section_only_for_pooling_points(mock_server, tmp_path):
    url = mock_server(ttft_ms=1, itl_ms=1, input_ms=1)
    pooled = run(_config(url, tmp_path, "embeddings", 4, [UsersLoad(users=1)], StopConfig(max_requests=4)), quiet())
    plain_cfg = _config(url, tmp_path, "chat", None, [UsersLoad(users=1)], StopConfig(max_requests=2))
    plain = run(plain_cfg.model_copy(update={"out_dir": tmp_path / "plain"}), quiet())
    for run_dir, shown in ((pooled.run_dir, True), (plain.run_dir, False)):
        proc = subprocess.run(
            [sys.executable, "-m", "tokenbench", "report", str(run_dir), "--out", str(run_dir / "report")],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        md = (run_dir / "report" / "report.md").read_text()
        assert ("## Embeddings, rerank and score" in md) is shown
    md = (pooled.run_dir / "report" / "report.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| attached | 1 users | 4.0 |"))
    assert row  # inputs per request: inputs/s over requests/s
