"""The sampler process and the telemetry path end to end against the mock (which speaks vLLM's
metric names with scripted values)."""

import json
import subprocess
import sys
import time

import pytest

from tokenbench.common.procs import free_port
from tokenbench.telemetry.sampler import Sampler, SamplesFile


async def test_a_failed_scrape_is_noted_and_sampling_goes_on(tmp_path):
    dead = f"http://127.0.0.1:{free_port()}/metrics"
    out = tmp_path / "samples.jsonl"
    with Sampler(out, time.perf_counter(), dead, "vllm", 0.2) as sampler:
        await sampler.wait_past(0.0, timeout_s=10)
        first = SamplesFile(out).scrapes()[0]["t_s"]
        await sampler.wait_past(first + 0.4, timeout_s=10)  # two intervals later
    scrapes = SamplesFile(out).scrapes()
    assert len(scrapes) >= 3
    assert all(s["ok"] is False and "URLError" in s["error"] for s in scrapes)
    header = SamplesFile(out).header()
    assert header["backend"] == "vllm" and header["gpu"]["available"] is False and header["gpu"]["reason"]


async def test_a_points_end_is_bracketed_by_a_scrape_at_once_not_at_the_next_interval(tmp_path):
    """The runner waits for a scrape after each point (its counters bracketed): the point's end
    event wakes the sampler for one, where the 5 s grid would have made it wait up to 5 s. The
    grid goes on where it was: no second extra scrape, and the next grid one 5 s after the first."""
    dead = f"http://127.0.0.1:{free_port()}/metrics"
    out = tmp_path / "samples.jsonl"
    origin = time.perf_counter()
    with Sampler(out, origin, dead, "vllm", 5.0) as sampler:
        await sampler.wait_past(0.0, timeout_s=10)
        first = SamplesFile(out).scrapes()[0]["t_s"]
        end_s = time.perf_counter() - origin
        sampler.event({"kind": "point_start", "index": 0})  # not a point's end: wakes nothing
        sampler.event({"kind": "point", "index": 0, "end_s": end_s})
        await sampler.wait_past(end_s, timeout_s=10)
        waited = time.perf_counter() - origin - end_s
        scrapes = SamplesFile(out).scrapes()
        assert waited < 1.0 and len(scrapes) == 2, (waited, scrapes)
        await sampler.wait_past(first + 5.0, timeout_s=10)
    times = [s["t_s"] for s in SamplesFile(out).scrapes()]
    assert len(times) == 3 and times[2] - first == pytest.approx(5.0, abs=0.5), times


def _run(url, out, *extra):
    proc = subprocess.run(
        [sys.executable, "-m", "tokenbench", "run", "--url", url, *extra, "--out", str(out), "--no-live"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((out / "results.json").read_text())


def test_attached_backend_reports_server_metrics_with_known_answers(start_mock, tmp_path):
    url = start_mock(ttft_ms=80, itl_ms=10, kv_slots=2)
    results = _run(
        url,
        tmp_path / "run",
        "--backend",
        "vllm",
        "--api",
        "chat",
        "--users",
        "2,4",
        "--duration",
        "3",
        "--output-tokens",
        "20",
        "--metrics-interval",
        "0.25",
    )
    records = [json.loads(line) for line in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    low, high = results["points"]
    for point in (low, high):
        mine = [r for r in records if r["point"] == point["index"]]
        # over the whole point, the server generated exactly what the records received
        assert point["server_whole_point"]["generated_tokens"] == sum(r["output_tokens"] for r in mine)
        # over the window (no ramp here), every user had a request in flight all the time; a
        # scrape at the very start of the window may see the first requests not yet arrived
        # (seen: one of 12 scrapes at 0, mean 3.67 for 4 users)
        assert point["server"]["running"]["mean"] == pytest.approx(point["load"]["users"], abs=0.5)
        assert point["server"]["running"]["max"] == point["load"]["users"]
        assert point["server"]["bracketed"] is True
        # the mock's histogram holds its scripted 80 ms TTFT; the client measured about the same
        assert point["server"]["ttft_s_mean"] == pytest.approx(0.080, abs=0.01)
        assert point["ttft_s"]["mean"] == pytest.approx(point["server"]["ttft_s_mean"], abs=0.02)
        matched = point["server"]["client_ttft_s_matched"]
        # the very same requests, but for the first chunks that reached the client within 0.1 s of a
        # bracketing scrape's answer (uncertain: the mock counts one before the client reads it).
        # Five serial tests at a time: 44 matched of the server's 46, 2 uncertain
        assert abs(matched["count"] - point["server"]["ttft_count"]) <= matched["uncertain"] <= point["load"]["users"]
        assert matched["mean"] == pytest.approx(point["server"]["ttft_s_mean"], abs=0.01)
    assert low["server"]["preemptions"] == 0  # 2 users never exceed 2 slots
    assert high["server"]["preemptions"] > 0  # 4 users do
    assert high["server"]["running"]["max"] == 4 and low["server"]["running"]["max"] <= 2
    assert results["telemetry"]["metrics_url"] == f"{url}/metrics"


def test_unreachable_metrics_do_not_stop_the_run(mock_server, tmp_path):
    url = mock_server(ttft_ms=20, itl_ms=5)
    dead = f"http://127.0.0.1:{free_port()}/metrics"
    results = _run(
        url, tmp_path / "run", "--metrics-url", dead, "--users", "1", "--duration", "2", "--output-tokens", "5"
    )
    point = results["points"][0]
    assert point["requests"]["ok"] == point["requests"]["total"] > 0
    assert point["server"]["failed_scrapes"] > 0 and point["server"]["generated_tokens"] is None


async def test_the_child_normalizes_with_the_names_it_was_given_and_imports_no_backend(tmp_path, mock_server):
    """The parent hands the profile's metric names to the child on its command line: the child
    reads the mock's vLLM names into normalized values without importing the backends (their
    launch code and config cost every run's sampler ~0.4 s of CPU, 135 times in make check)."""
    from tokenbench.backends import get_profile

    names = get_profile("vllm").metrics
    assert names is not None
    url = f"{mock_server()}/metrics"
    out = tmp_path / "samples.jsonl"
    with Sampler(out, time.perf_counter(), url, "vllm", 0.2, names) as sampler:
        await sampler.wait_past(0.0, timeout_s=10)
    scrape = SamplesFile(out).scrapes()[0]
    assert scrape["ok"] is True and {"running", "waiting", "generated_tokens"} <= set(scrape["values"])
    bare = tmp_path / "bare.jsonl"
    with Sampler(bare, time.perf_counter(), url, "vllm", 0.2) as sampler:  # no names
        await sampler.wait_past(0.0, timeout_s=10)
    assert [s["ok"] for s in SamplesFile(bare).scrapes()][:1] == [True]
    assert SamplesFile(bare).scrapes()[0]["values"] == {}
    probe = "import sys, tokenbench.telemetry.sampler; print(sorted(m for m in sys.modules if m.startswith(('tokenbench.backends', 'tokenbench.config'))))"
    imported = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert imported.strip() == "[]"
