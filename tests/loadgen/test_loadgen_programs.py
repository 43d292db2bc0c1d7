"""Agent programs against the scripted mock (it logs each request's messages): a real Weka session
with sub-agents replays with every call sent no earlier than its parents allow, each child's
prompt holding its parent's prompt and the reply that streamed, and the session's latency and
critical path equal to what its calls' times imply; the recorded replies instead on request; a
failed call's children never sent; sessions started at a rate each keep their own graph."""

import json
import urllib.request
from collections import defaultdict
from pathlib import Path

import pytest
from run_helpers import mock_process, quiet, records_of

from tokenbench.config import DatasetConfig, RateLoad, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.datasets.programs import read_programs
from tokenbench.datasets.programs.model import Output, PromptOf, critical_path_s
from tokenbench.metrics.programs import sessions
from tokenbench.records import RequestRecord
from tokenbench.run import run

# Serial (the timed tier): the session's latency is compared with its script within a few ms a call
pytestmark = pytest.mark.serial

WEKA = Path(__file__).parents[1] / "fixtures" / "programs" / "weka"
SCALE = 0.001  # trace_0291's 1366 s of recorded waits in 1.4 s
TTFT_MS, ITL_MS, TOKENS = 20.0, 2.0, 4


def _config(url, out, path, loads, stop, **dataset) -> RunConfig:
    return RunConfig(
        target=TargetConfig(url=url, api="chat"),
        loads=loads,
        stop=stop,
        dataset=DatasetConfig(
            name="programs", path=path, output_tokens=TOKENS, **{"program_time_scale": SCALE, **dataset}
        ),
        live=False,
        keep_text=True,
        out_dir=out,
    )


def _deliveries(url: str) -> dict[str, dict]:
    with urllib.request.urlopen(url + "/mock/deliveries") as resp:
        return json.loads(resp.read())


@pytest.fixture(scope="module")
def weka_session(tmp_path_factory):
    """trace_0291 (32 calls, two sub-agents) once against a mock process of its own."""
    out = tmp_path_factory.mktemp("programs") / "run"
    with mock_process(ttft_ms=TTFT_MS, itl_ms=ITL_MS, record_requests=True) as url:
        cfg = _config(url, out, WEKA / "trace_0291.json", [UsersLoad(users=1)], StopConfig(max_requests=32))
        result = run(cfg, quiet())
        deliveries = _deliveries(url)
    [program] = read_programs(WEKA / "trace_0291.json")
    return result, records_of(result.run_dir), deliveries, program


def _anchor(r: dict, anchor: str) -> float:
    return {"start": r["sent_s"], "first_token": r["chunk_times_s"][0], "end": r["closed_s"]}[anchor]


def test_every_call_is_sent_when_its_parents_allow_and_no_sooner(weka_session):
    result, records, _, program = weka_session
    assert len(records) == 32 and all(r["outcome"] == "ok" for r in records)
    by_call = {r["program_call"]: r for r in records}
    assert set(by_call) == {c.id for c in program.calls}
    for call in program.calls:
        r = by_call[call.id]
        # what the parents allow, from their records: each anchor plus its (scaled) delay
        allowed = max(
            [r["program_start_s"] + call.not_before_s * SCALE]
            + [_anchor(by_call[e.parent], e.anchor) + e.delay_s * SCALE for e in call.parents]
        )
        assert r["program_ready_s"] == pytest.approx(allowed, abs=1e-9)
        assert r["scheduled_s"] == r["program_ready_s"] <= r["sent_s"]
        assert r["program_parents"] == [e.parent for e in call.parents]
    lag = result.results["points"][0]["programs"]["schedule_lag_s"]
    assert lag["count"] == 32 and lag["min"] >= 0
    counts = result.results["points"][0]["programs"]["sessions"]
    assert counts == {"started": 1, "completed": 1, "ended_by_error": 0, "ended_by_stop": 0, "calls_not_sent": 0}


def test_each_child_prompt_holds_its_parents_prompt_and_the_reply_that_streamed(weka_session):
    _, records, deliveries, program = weka_session
    by_call = {r["program_call"]: r for r in records}
    sent = {r["program_call"]: deliveries[r["response_id"]]["messages"] for r in records}
    checked = 0
    for call in program.calls:
        reply_of = [s.call for s in call.prompt if isinstance(s, Output)]
        prompt_of = [s.call for s in call.prompt if isinstance(s, PromptOf)]
        if not reply_of:
            continue
        [parent] = set(reply_of) | set(prompt_of)
        live = by_call[parent]["output_text"]
        assert live == " hi" * TOKENS  # the mock's reply, not the recording's
        n = len(sent[parent])
        # the parent's prompt as it was sent, then its reply, then the child's new tokens
        assert sent[call.id][:n] == sent[parent]
        assert sent[call.id][n] == {"role": "assistant", "content": live}
        checked += 1
    assert checked == 29  # every call but the session's root and the sub-agents' first calls


def test_the_session_latency_and_critical_path_equal_what_its_calls_imply(weka_session):
    result, records, _, program = weka_session
    points = result.results["points"][0]["programs"]
    [path] = sessions([RequestRecord.from_json(r) for r in records])
    end = max(r["closed_s"] for r in records)
    start = records[0]["program_start_s"]
    assert path.latency_s == pytest.approx(end - start) == pytest.approx(points["session_s"]["max"])
    # the graph replayed at each call's measured times (its lag, first token and end from when
    # its parents allowed it): the same length
    measured = {
        r["program_call"]: (
            r["sent_s"] - r["program_ready_s"],
            r["chunk_times_s"][0] - r["program_ready_s"],
            r["closed_s"] - r["program_ready_s"],
        )
        for r in records
    }
    assert critical_path_s(program, measured, SCALE) == pytest.approx(path.latency_s, abs=1e-6)
    # the parts add up to it; the tool part is the scaled tool waits on the path
    assert sum(path.parts.values()) == pytest.approx(path.latency_s, abs=1e-9)
    on_path = [s.record for s in path.path]
    assert path.parts["tool"] == pytest.approx(sum(r.program.program_tool_s or 0 for r in on_path), abs=1e-9)
    # the script: each call 20 ms to its first token, 3 x 2 ms more to its last. The recorded waits
    # on the path are exactly the script's (scaled); each call took at least its scripted time;
    # what the replay adds over the script is the overhead on the path's calls, the schedule's lag
    # and the client's and the mock's time (its usage chunk counts a prompt of up to 100k words:
    # ~8 ms): a few ms a call alone (benchmarks/program_replay.py), bounded loosely here, where
    # the timed tier runs five tests at once on two cores
    waits = sum(r.program.program_delay_s or 0.0 for r in on_path)
    assert path.parts["tool"] + path.parts["think"] == pytest.approx(waits, abs=1e-9)
    model = (TTFT_MS + (TOKENS - 1) * ITL_MS) / 1000
    assert all(r.closed_s - r.sent_s >= model - 0.001 for r in on_path)
    scripted = {c.id: (0.0, TTFT_MS / 1000, model) for c in program.calls}
    ideal = critical_path_s(program, scripted, SCALE)
    assert ideal <= path.latency_s <= ideal + 0.040 * len(on_path), (ideal, path.latency_s, len(on_path))
    assert points["critical_path"]["calls"]["max"] == len(on_path)
    assert points["expected_reuse"] > 0.85  # each call repeats its parent's prompt and reply
    # the one session's tokens and reuse: the point's
    assert path.prompt_tokens == sum(r["prompt_tokens"] for r in records)
    assert path.output_tokens == TOKENS * 32 and path.expected_reuse == pytest.approx(points["expected_reuse"])


def test_recorded_replies_are_sent_instead_of_the_live_ones(tmp_path):
    with mock_process(ttft_ms=2, itl_ms=1, record_requests=True) as url:
        cfg = _config(
            url,
            tmp_path / "run",
            WEKA / "aiperf_subagent.json",
            [UsersLoad(users=1)],
            StopConfig(max_requests=4),
            program_output="recorded",
            program_time_scale=0.01,
        )
        result = run(cfg, quiet())
        deliveries = _deliveries(url)
    records = {r["program_call"]: r for r in records_of(result.run_dir)}
    child = deliveries[records["1.2"]["response_id"]]["messages"]
    reply = next(m for m in child if m["role"] == "assistant")["content"]
    assert "hi" not in reply.split() and len(reply.split()) >= 29  # the recording's 30 tokens, drawn as blocks


def test_a_failed_call_leaves_its_children_unsent_and_ends_its_session(tmp_path):
    # every 2nd request fails: the root goes, its follower fails, nothing after it is sent
    with mock_process(ttft_ms=2, itl_ms=1, fault="http_500", fault_every=2) as url:
        cfg = _config(url, tmp_path / "run", WEKA / "trace_0026.json", [UsersLoad(users=1)], StopConfig(max_requests=2))
        result = run(cfg, quiet())
    records = records_of(result.run_dir)
    assert [r["outcome"] for r in records] == ["ok", "http_error"]
    counts = result.results["points"][0]["programs"]["sessions"]
    assert counts["ended_by_error"] == 1 and counts["calls_not_sent"] == 1 and counts["completed"] == 0


def test_sessions_started_at_a_rate_each_run_their_own_graph(tmp_path):
    with mock_process(ttft_ms=2, itl_ms=1) as url:
        cfg = _config(
            url,
            tmp_path / "run",
            WEKA / "aiperf_subagent.json",
            [RateLoad(rate_per_s=20, arrival="constant")],
            StopConfig(duration_s=0.5, drain_timeout_s=10),
            program_time_scale=0.01,
        )
        result = run(cfg, quiet())
    by_session = defaultdict(list)
    for r in records_of(result.run_dir):
        by_session[r["program_session"]].append(r)
    assert len(by_session) == 10  # 20 a second for 0.5 s
    for rs in by_session.values():  # each session all four calls, ended after the deadline if it must
        assert sorted(r["program_call"] for r in rs) == ["0.0", "0.3", "1.1", "1.2"]
    starts = sorted(rs[0]["program_start_s"] for rs in by_session.values())
    assert [round(b - a, 3) for a, b in zip(starts, starts[1:])] == [0.05] * 9
    programs = result.results["points"][0]["programs"]
    assert programs["sessions"]["completed"] == 10 and programs["measured_sessions"] == 10


def test_with_two_workers_each_session_stays_on_the_worker_that_started_it(tmp_path):
    from tokenbench.config import WorkersConfig

    with mock_process(ttft_ms=2, itl_ms=1, record_requests=True) as url:
        cfg = _config(
            url,
            tmp_path / "run",
            WEKA / "aiperf_subagent.json",
            [RateLoad(rate_per_s=20, arrival="constant")],
            StopConfig(duration_s=0.5, drain_timeout_s=10),
            program_time_scale=0.01,
        ).model_copy(update={"workers": WorkersConfig(count=2)})
        result = run(cfg, quiet())
        deliveries = _deliveries(url)
    by_session = defaultdict(list)
    for r in records_of(result.run_dir):
        by_session[r["program_session"]].append(r)
    assert len(by_session) == 10  # the same global schedule, dealt to two workers
    workers = {sid: {r["worker"] for r in rs} for sid, rs in by_session.items()}
    assert all(len(w) == 1 for w in workers.values()) and set().union(*workers.values()) == {0, 1}
    for rs in by_session.values():  # the router's affinity header: every call of a session carries its id
        assert {deliveries[r["response_id"]]["headers"]["X-Session-ID"] for r in rs} == {rs[0]["program_session"]}
    assert result.results["points"][0]["programs"]["sessions"]["completed"] == 10


def test_a_replay_starts_each_session_once_at_its_own_time(tmp_path):
    from tokenbench.config import ReplayLoad

    csv = WEKA.parent / "tracelab" / "multi_session_example.csv"  # sessions at 0, 200 and 500 ms
    with mock_process(ttft_ms=2, itl_ms=1) as url:
        cfg = _config(
            url, tmp_path / "run", csv, [ReplayLoad(speed=2.0)], StopConfig(schedule_ends=True), program_time_scale=1.0
        )
        result = run(cfg, quiet())
    by_session = defaultdict(list)
    for r in records_of(result.run_dir):
        by_session[r["program_id"]].append(r)
    assert {k: len(v) for k, v in by_session.items()} == {"0": 3, "1": 2, "2": 3}
    starts = {k: v[0]["program_start_s"] for k, v in by_session.items()}
    assert starts["1"] - starts["0"] == pytest.approx(0.1, abs=1e-6)  # 200 ms at twice the speed
    assert starts["2"] - starts["0"] == pytest.approx(0.25, abs=1e-6)
    # a round after a tool waits its 100 ms (the recording's waits are not sped: --program-time-scale is)
    second = next(r for r in by_session["0"] if r["program_call"] == "1")
    assert second["program_delay_s"] == pytest.approx(0.1) and second["program_tool_s"] == pytest.approx(0.1)
    assert result.results["points"][0]["programs"]["sessions"]["completed"] == 3


def test_with_server_spans_the_critical_path_splits_into_the_servers_phases(start_mock, tmp_path):
    from tokenbench.common.procs import free_port

    port = free_port()
    url = start_mock(ttft_ms=20, itl_ms=2, max_streams=1, otlp_endpoint=f"http://127.0.0.1:{port}/v1/traces")
    cfg = _config(
        url, tmp_path / "run", WEKA / "aiperf_subagent.json", [UsersLoad(users=2)], StopConfig(max_requests=8),
        program_time_scale=0.01,
    ).model_copy(update={"server_traces": True, "server_traces_port": port})  # fmt: skip
    result = run(cfg, quiet())
    programs = result.results["points"][0]["programs"]
    parts = programs["critical_path"]["mean_s"]
    # one stream: two sessions queue in the server; every path call's TTFT is split by its span
    assert parts["ttft"] == 0 and parts["queue"] > 0 and parts["prefill"] > 0.015
    assert sum(parts.values()) == pytest.approx(programs["session_s"]["mean"], abs=1e-6)
    assert result.results["points"][0]["server_phases"]["joined"] == 8


def test_a_directory_of_sessions_runs_each_in_turn(tmp_path):
    otel = WEKA.parent / "otel" / "simple"  # two inference-perf traces: 3 chat spans each
    with mock_process(ttft_ms=2, itl_ms=1) as url:
        cfg = _config(url, tmp_path / "run", otel, [UsersLoad(users=1)], StopConfig(max_requests=6))
        result = run(cfg, quiet())
    records = records_of(result.run_dir)
    assert len(records) == 6 and all(r["outcome"] == "ok" for r in records)
    assert len({r["program_id"] for r in records}) == 2  # one session of each file
    assert result.results["dataset"]["programs"]["programs"] == 2
