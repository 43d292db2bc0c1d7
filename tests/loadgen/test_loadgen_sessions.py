"""Multi-turn sessions against the scripted mock (it logs each request's X-* headers and messages):
turn k carries exactly the earlier user turns and the replies that were streamed, X-Session-ID is
sent, a user runs one conversation at a time, conversations start at the rate, a failed turn and
the history limit end a conversation, and results count them (by_turn, sessions)."""

import json
import urllib.request
from collections import defaultdict

import pytest
from run_helpers import quiet, records_of

from tokenbench.config import DatasetConfig, RateLoad, RunConfig, SessionConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.run import run


def _config(url, tmp_path, loads, stop, sessions: SessionConfig, api="chat", **dataset) -> RunConfig:
    return RunConfig(
        target=TargetConfig(url=url, api=api),
        loads=loads,
        stop=stop,
        dataset=DatasetConfig(**{"input_tokens": 8, "output_tokens": 5, "num_prompts": 20, **dataset}),
        sessions=sessions,
        live=False,
        keep_text=True,
        out_dir=tmp_path / "run",
    )


def _deliveries(url: str) -> list[dict]:
    with urllib.request.urlopen(url + "/mock/deliveries") as resp:
        data = json.loads(resp.read())
    return [data[k] for k in sorted(data, key=lambda k: int(k.split("-")[1]))]


def _by_session(records: list[dict]) -> dict[str, list[dict]]:
    sessions = defaultdict(list)
    for r in sorted(records, key=lambda r: r["id"]):
        sessions[r["session_id"]].append(r)
    return sessions


@pytest.fixture
def closed_loop(mock_server, tmp_path):
    url = mock_server(ttft_ms=2, itl_ms=1, record_requests=True)
    cfg = _config(url, tmp_path, [UsersLoad(users=2)], StopConfig(max_requests=12), SessionConfig(turns=3))
    result = run(cfg, quiet())
    return url, result, records_of(result.run_dir)


def test_each_turn_sends_the_earlier_turns_and_the_servers_own_replies(closed_loop):
    url, _, records = closed_loop
    sessions = _by_session(records)
    turns = {(r["session_id"], r["turn_index"]): r for r in records}
    deliveries = _deliveries(url)
    assert len(deliveries) == len(records) == 12
    for d in deliveries:
        sid = d["headers"]["X-Session-ID"]  # every request carries its conversation's id
        k = (len(d["messages"]) - 1) // 2
        assert turns[sid, k]["turn_index"] == k
        # the history: each earlier turn's user text as it was sent, then the reply that streamed
        expected = []
        for j in range(k):
            earlier = next(
                e for e in deliveries if e["headers"]["X-Session-ID"] == sid and len(e["messages"]) == 2 * j + 1
            )
            expected += [earlier["messages"][-1], {"role": "assistant", "content": turns[sid, j]["output_text"]}]
        assert d["messages"][:-1] == expected and d["messages"][-1]["role"] == "user"
    assert all(r["output_text"] == " hi" * 5 for r in records)  # the mock's reply, not the dataset's
    assert len(sessions) >= 4 and all(s[0]["turn_index"] == 0 for s in sessions.values())


def test_history_tokens_count_the_system_prompt_user_turns_and_replies(closed_loop):
    _, _, records = closed_loop
    for r in records:
        # the mock's /tokenize counts words: 8 per user turn, 5 per reply ("hi" x 5)
        assert r["history_tokens"] == 13 * r["turn_index"]
        assert r["dataset_prompt_tokens"] == 13 * r["turn_index"] + 8


def test_a_user_runs_one_conversation_at_a_time(closed_loop):
    _, _, records = closed_loop
    by_user = defaultdict(list)
    for r in records:
        by_user[r["user"]].append(r)
    assert set(by_user) == {0, 1}
    for mine in by_user.values():
        mine.sort(key=lambda r: r["sent_s"])
        assert all(a["closed_s"] <= b["sent_s"] for a, b in zip(mine, mine[1:]))  # one request at a time
        order = [(r["session_id"], r["turn_index"]) for r in mine]
        for (sid, k), (next_sid, next_k) in zip(order, order[1:]):
            # the same conversation's next turn, or (after its last turn) a new conversation's first
            assert (next_sid, next_k) == (sid, k + 1) or (k == 2 and next_k == 0 and next_sid != sid)


def test_results_count_turns_and_conversations(closed_loop):
    _, result, records = closed_loop
    point = result.results["points"][0]
    per_turn = defaultdict(int)
    for r in records:
        per_turn[r["turn_index"]] += 1
    assert [(t["turn_index"], t["count"]) for t in point["by_turn"]] == sorted(per_turn.items())
    assert point["by_turn"][1]["prompt_tokens"]["count"] == per_turn[1]
    sessions = _by_session(records)
    full = sum(1 for s in sessions.values() if len(s) == 3)
    assert point["sessions"] == {
        "started": len(sessions),
        "completed": full,
        "ended_by_error": 0,
        "ended_by_history_limit": 0,
        "ended_by_stop": len(sessions) - full,
    }
    assert result.results["dataset"]["sessions"]["history_tokens"] == "tokenizer"


def test_open_loop_starts_conversations_at_the_rate(mock_server, tmp_path):
    url = mock_server(ttft_ms=2, itl_ms=1)
    load = RateLoad(rate_per_s=10, arrival="constant")
    cfg = _config(url, tmp_path, [load], StopConfig(duration_s=1.0), SessionConfig(turns=2, turn_think_time_s=0.05))
    result = run(cfg, quiet())
    records = records_of(result.run_dir)
    firsts = sorted(r["scheduled_s"] for r in records if r["turn_index"] == 0)
    assert len(firsts) == 10
    assert firsts[1:] == pytest.approx([firsts[0] + 0.1 * i for i in range(1, 10)], abs=1e-9)
    sessions = _by_session(records)
    for first, second in (s for s in sessions.values() if len(s) == 2):
        # the next turn waits for the reply, then the turn think time
        assert second["scheduled_s"] >= first["closed_s"] + 0.05
    assert result.results["points"][0]["sessions"]["started"] == 10


def test_an_open_loop_point_lasts_its_duration_when_its_conversations_end_sooner(mock_server, tmp_path):
    url = mock_server(ttft_ms=1, itl_ms=1)
    load = RateLoad(rate_per_s=2, arrival="constant")  # starts at 0, 0.5, 1.0, 1.5 s; each ~10 ms
    result = run(_config(url, tmp_path, [load], StopConfig(duration_s=2.0), SessionConfig(turns=1)), quiet())
    point = result.results["points"][0]
    assert point["sessions"]["completed"] == 4
    span = point["span"]
    assert span["load_end_s"] - span["start_s"] == pytest.approx(2.0)
    assert span["end_s"] >= span["load_end_s"]  # the point (and its scrapes) ran to the window's end


def test_the_history_limit_ends_a_conversation_and_is_counted(mock_server, tmp_path):
    url = mock_server(ttft_ms=1, itl_ms=1)
    # prompts by turn: 8, 8+5+8 = 21, 21+5+8 = 34 > 30: the third turn is never sent
    sessions = SessionConfig(turns=3, max_history_tokens=30)
    result = run(_config(url, tmp_path, [UsersLoad(users=1)], StopConfig(max_requests=4), sessions), quiet())
    records = records_of(result.run_dir)
    assert [(r["turn_index"], r["history_tokens"]) for r in records] == [(0, 0), (1, 13)] * 2
    point = result.results["points"][0]
    # the second conversation's third turn meets the request budget first: cut by the stop rules
    assert point["sessions"] == {
        "started": 2,
        "completed": 0,
        "ended_by_error": 0,
        "ended_by_history_limit": 1,
        "ended_by_stop": 1,
    }
    assert [t["count"] for t in point["by_turn"]] == [2, 2]


def test_the_servers_max_model_len_limits_prompt_and_reply(mock_server, tmp_path):
    url = mock_server(ttft_ms=1, itl_ms=1, max_model_len=30)  # listed in /v1/models, as vLLM does
    # prompt + max_tokens by turn: 8 + 5, 21 + 5, 34 + 5 > 30: the third turn is never sent
    cfg = _config(url, tmp_path, [UsersLoad(users=1)], StopConfig(max_requests=5), SessionConfig(turns=3))
    point = run(cfg, quiet()).results["points"][0]
    assert [t["count"] for t in point["by_turn"]] == [3, 2]
    assert point["sessions"]["ended_by_history_limit"] == 2 and point["sessions"]["ended_by_stop"] == 1


def test_a_failed_turn_ends_its_conversation(mock_server, tmp_path):
    url = mock_server(ttft_ms=1, itl_ms=1, fault="http_500", fault_every=2)
    result = run(
        _config(url, tmp_path, [UsersLoad(users=1)], StopConfig(max_requests=4), SessionConfig(turns=3)), quiet()
    )
    records = records_of(result.run_dir)
    assert [(r["turn_index"], r["outcome"]) for r in records] == [(0, "ok"), (1, "http_error")] * 2
    assert result.results["points"][0]["sessions"]["ended_by_error"] == 2


@pytest.mark.serial  # the backoff's waits to 30 ms: beside a make check's serial tier one "at once" came 34 ms late
def test_a_user_whose_conversations_fail_at_once_backs_off_as_a_single_turn_user_does(mock_server, tmp_path):
    """Every first turn fails (HTTP 400): the user starts its next conversation at once three
    times, then after 0.1, 0.2, 0.4 s; the next (0.8 s later) would start past the 1 s deadline."""
    url = mock_server(ttft_ms=1, itl_ms=1, fault="http_400")
    cfg = _config(url, tmp_path, [UsersLoad(users=1)], StopConfig(duration_s=1.0), SessionConfig(turns=3))
    result = run(cfg, quiet())
    starts = sorted(r["scheduled_s"] for r in records_of(result.run_dir))
    assert len(starts) == 6
    assert [b - a for a, b in zip(starts, starts[1:])] == pytest.approx([0, 0, 0.1, 0.2, 0.4], abs=0.03)
    assert result.results["points"][0]["sessions"]["ended_by_error"] == 6 and result.failed == ("1 users",)


def test_completions_api_sends_the_history_as_one_prompt(mock_server, tmp_path):
    url = mock_server(ttft_ms=1, itl_ms=1, record_requests=True)
    sessions = SessionConfig(turns=2, header="X-Affinity")
    cfg = _config(url, tmp_path, [UsersLoad(users=1)], StopConfig(max_requests=2), sessions, api="completions")
    run(cfg, quiet())
    first, second = _deliveries(url)
    # the session's header, the same on both turns (X-Request-Id: each request's own)
    affinity = [{k: v for k, v in d["headers"].items() if k.lower() != "x-request-id"} for d in (first, second)]
    assert affinity[0] == affinity[1] and set(affinity[0]) == {"X-Affinity"}
    user_1 = second["prompt"].split("\n\n")[-1]
    assert second["prompt"] == f"{first['prompt']}\n\n{' hi' * 5}\n\n{user_1}"


def test_session_flags_need_multi_turn():
    import typer.main

    from tokenbench.cli.common import UsageError
    from tokenbench.cli.run import run as run_command
    from tokenbench.cli.run_flags import run_config

    params = {p.name: None for p in typer.main.get_params_from_function(run_command).values()}
    with pytest.raises(UsageError, match="--turns, --session-header shape multi-turn sessions: add --multi-turn"):
        run_config({**params, "url": "http://127.0.0.1:1", "turns": 3, "session_header": "X-A"})
    given = {**params, "url": "http://127.0.0.1:1", "multi_turn": True, "turns": 3, "users": "2", "num_prompts": 4}
    cfg = run_config(given)
    assert cfg.sessions == SessionConfig(turns=3)
    assert cfg.stop.max_requests == 12  # --num-prompts counts conversations: each of their turns is sent


def test_recompute_derives_the_same_session_results(closed_loop):
    from tokenbench.rundir.derive import recompute_run

    _, result, _ = closed_loop
    again = recompute_run(result.run_dir).to_json()
    for before, after in zip(result.results["points"], again["points"]):
        assert (after["by_turn"], after["sessions"]) == (before["by_turn"], before["sessions"])


def test_a_bad_session_setting_names_its_flag():
    from pydantic import ValidationError

    from tokenbench.cli.common import validation_message

    with pytest.raises(ValidationError) as exc:
        SessionConfig(turn_think_dist="gauss", header="no spaces allowed")
    message = validation_message(exc.value)
    assert "--turn-think-dist: Input should be 'fixed' or 'exponential'" in message
    assert "--session-header 'no spaces allowed' is not an HTTP header name" in message


def test_a_reasoning_reply_goes_back_into_the_history_without_its_reasoning(mock_server, tmp_path):
    """The mock streams 2 reasoning chunks then 3 answer chunks: the next turn's assistant message
    is the answer alone (as a chat client sends it back), and the record's text is that answer."""
    url = mock_server(ttft_ms=2, itl_ms=1, record_requests=True, reasoning_chunks=2)
    cfg = _config(url, tmp_path, [UsersLoad(users=1)], StopConfig(max_requests=2), SessionConfig(turns=2))
    records = records_of(run(cfg, quiet()).run_dir)
    assert [r["reasoning_chunks"] for r in records] == [2, 2]
    assert all(r["output_text"] == " hi" * 3 for r in records)
    second = next(d for d in _deliveries(url) if len(d["messages"]) == 3)
    assert second["messages"][1] == {"role": "assistant", "content": " hi" * 3}
