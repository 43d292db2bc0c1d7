"""server spans: parts 1 and 4: the join key every request carries, and the HTTP phases on its record."""

import io
import json
import re
import urllib.request

from rich.console import Console

from tokenbench.config import DatasetConfig, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.report import write_report
from tokenbench.run import run
from tokenbench.spans.keys import JoinKeys, parse_trace_id, run_key

TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-01$")


def test_keys_are_unique_reproducible_and_name_their_record():
    run = run_key(1764200000.123456)
    assert run == run_key(1764200000.123456) and run != run_key(1764200000.123457)
    keys = JoinKeys(run)
    seen = set()
    for point in range(3):
        for worker in (None, 0, 1):
            for id in range(50):
                traceparent, request_id = keys.headers(point, id, worker)
                m = TRACEPARENT.match(traceparent)
                assert m is not None and m.group(1) == request_id
                assert m.group(1).strip("0") and m.group(2).strip("0")  # W3C: never all zeros
                assert parse_trace_id(request_id, run) == (point, id, worker)
                seen.add(request_id)
    assert len(seen) == 3 * 3 * 50
    assert parse_trace_id(keys.trace_id(0, 1, None), run_key(2.0)) is None  # another run's
    assert parse_trace_id("z" * 32, "z" * 16) is None


def _run(url, tmp_path, users=2, requests=6):
    cfg = RunConfig(
        target=TargetConfig(url=url),
        loads=[UsersLoad(users=users)],
        stop=StopConfig(max_requests=requests, drain_timeout_s=5),
        dataset=DatasetConfig(input_tokens=4, output_tokens=5, num_prompts=4),
        live=False,
        out_dir=tmp_path / "run",
    )
    result = run(cfg, Console(file=io.StringIO()))
    records = [json.loads(line) for line in (result.run_dir / "records.jsonl").read_text().splitlines()]
    return result, records


def test_every_request_carries_its_key_and_the_server_sees_it(mock_server, tmp_path):
    url = mock_server(ttft_ms=20, itl_ms=2, record_requests=True)
    result, records = _run(url, tmp_path)
    assert len(records) == 6
    with urllib.request.urlopen(url + "/mock/deliveries") as resp:
        deliveries = json.load(resp)
    seen = {
        d["traceparent"]: {k.lower(): v for k, v in d["headers"].items()}["x-request-id"] for d in deliveries.values()
    }
    run = run_key(result.results["clock"]["origin_unix_s"])  # reproducible from the run's own clock
    keys = JoinKeys(run)
    for r in records:
        assert (r["traceparent"], r["x_request_id"]) == keys.headers(r["point"], r["id"], r["worker"])
        assert seen[r["traceparent"]] == r["x_request_id"]
    assert len(seen) == 6
    point = result.results["points"][0]
    assert "server_phases" not in point and point["http_phases"]["ttfb"]["count"] == 6  # no --server-traces
    md = write_report([result.run_dir], tmp_path / "report").markdown.read_text()
    assert "Where the time went" not in md


def test_http_phases_on_every_record(mock_server, tmp_path):
    # a 150 ms first token, bounds at 75 ms: the in-process mock (a thread beside the run) under a
    # loaded machine once answered its headers over 25 ms late, which the old 30 ms / 25 ms split
    # could not tell from a late first token
    url = mock_server(ttft_ms=150, itl_ms=2)
    _, records = _run(url, tmp_path)
    for r in records:
        assert r["outcome"] == "ok"
        assert r["pool_wait_s"] == 0.0  # no pool ceiling (limit=0): nothing waits
        assert r["conn_reused"] in (True, False)
        assert (r["connect_s"] is None) == r["conn_reused"]
        assert r["http_start_s"] <= r["headers_sent_s"] <= r["sent_s"] <= r["response_headers_s"]
        assert r["response_headers_s"] <= r["first_body_s"] <= r["chunk_times_s"][0]
        # the mock answers its headers at once and its first content 150 ms later
        assert r["chunk_times_s"][0] - r["response_headers_s"] >= 0.075
        assert r["response_headers_s"] - r["sent_s"] < 0.075


def test_a_requests_key_is_its_own_whatever_key_came_before():
    # the compiled client: the run/point/worker part is made once per (point, worker), then reused
    keys = JoinKeys(run_key(1.0))
    for point, id, worker in [(0, 1, None), (0, 2, 0), (1, 2, 0), (0, 2, 0), (0, 0xFFFFFFFF + 3, None)]:
        traceparent, request_id = keys.headers(point, id, worker)
        assert request_id == keys.trace_id(point, id, worker)
        assert traceparent == f"00-{request_id}-{keys.run[:8]}{id & 0xFFFFFFFF:08x}-01"
