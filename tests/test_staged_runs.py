"""A staged point against the scripted mock (a process of its own: these time it, so serial).

Open loop, low -> high -> low, against 2 generation slots of 20 ms + 9 x 5 ms = 65 ms each: a
capacity of 30.8 req/s. 10 req/s for 3 s, 50 req/s for 3 s (over capacity: the backlog grows by
about 50 - 30.8 a second), then 10 req/s for 6 s, in which it drains at about 30.8 - 10 a second.
Constant arrivals, so each stage's count is its integral of the rate exactly, and every request's
scheduled time is the schedule's whatever the server did. A timer never fires early and a loaded
machine overshoots, so the script bounds service times from below only (capacity from above);
the backlog's accounting is checked against the mock's own log of when it finished each stream.

Closed loop, 1 -> 4 -> 1 users: the three added users start at the step up, and retire at the step
down: none of them has a request scheduled after it.
"""

from __future__ import annotations

import io
import json
import urllib.request

import pytest
from rich.console import Console

from tokenbench.config import DatasetConfig, LoadSweep, RunConfig, StagedLoad, StopConfig, TargetConfig
from tokenbench.config.slo import SLOConfig
from tokenbench.loadgen.schedule import staged_arrival_times
from tokenbench.report import write_report
from tokenbench.run import run

pytestmark = pytest.mark.serial

TTFT_S, ITL_S, TOKENS, SLOTS = 0.020, 0.005, 10, 2
SERVICE_S = TTFT_S + (TOKENS - 1) * ITL_S  # 65 ms a request, by the script
CAPACITY_PER_S = SLOTS / SERVICE_S  # 30.8 req/s
LOW, HIGH = 10.0, 50.0


def _staged(text: str, **kw) -> StagedLoad:
    (load,) = LoadSweep(stages=text, **kw).points()
    assert isinstance(load, StagedLoad)
    return load


def _run(url: str, tmp_path, load: StagedLoad, slo: SLOConfig = SLOConfig()):
    cfg = RunConfig(
        target=TargetConfig(url=url, api="chat"),
        loads=[load],
        stop=StopConfig(duration_s=load.duration_s, drain_timeout_s=10),
        dataset=DatasetConfig(input_tokens=8, output_tokens=TOKENS, num_prompts=10),
        slo=slo,
        window_s=1.0,
        live=False,
        keep_text=False,
        out_dir=tmp_path / "run",
    )
    out = io.StringIO()
    result = run(cfg, Console(file=out, width=200))
    with urllib.request.urlopen(url + "/mock/deliveries") as resp:
        log = json.loads(resp.read())
    records = [json.loads(line) for line in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    return result, log, records, out.getvalue()


def test_an_overload_stage_grows_the_backlog_and_the_next_one_drains_it(start_mock, tmp_path):
    url = start_mock(ttft_ms=TTFT_S * 1e3, itl_ms=ITL_S * 1e3, max_streams=SLOTS)
    load = _staged(f"rate={LOW:g}:3s, rate={HIGH:g}:3s, rate={LOW:g}:6s", arrival="constant")
    result, log, records, _ = _run(url, tmp_path, load, SLOConfig(ttft_s=0.2))
    point = result.results["points"][0]
    start, origin = point["span"]["start_s"], result.results["clock"]["origin_monotonic_s"]
    low, high, after = point["stages"]

    # the schedule is the rate curve's, and no request's scheduled time moved for the server
    assert [s["requests"] for s in point["stages"]] == [30, 150, 60]
    schedule = list(staged_arrival_times(load, 0, StopConfig(duration_s=load.duration_s)))
    assert sorted(r["scheduled_s"] - start for r in records) == pytest.approx(schedule, abs=1e-6)
    assert all(r["outcome"] == "ok" for r in records)

    # the overload: the server completes at most its capacity, the backlog grows by the rest
    assert high["requests_per_s"] <= CAPACITY_PER_S + 1.0
    assert high["backlog"]["growth_per_s"] >= HIGH - CAPACITY_PER_S - 1.0
    # ... and by what arrived less what the mock's log says it finished streaming in the stage
    # (the client closes each a moment after: a little lag at each edge)
    finished = sorted(d["finished_s"] - origin - start for d in log.values())
    in_high = sum(1 for t in finished if high["start_s"] <= t < high["end_s"])
    assert high["backlog"]["growth_per_s"] == pytest.approx(HIGH - in_high / 3.0, abs=2.0)
    assert low["backlog"]["peak"] <= SLOTS + 1 and low["backlog"]["drain_s"] is None

    # the drain: no faster than the capacity the low rate leaves allows ...
    backlog, level = after["backlog"]["at_start"], high["backlog"]["at_start"]
    assert backlog > 40
    drain_s = after["backlog"]["drain_s"]
    assert drain_s is not None and drain_s >= (backlog - level) / (CAPACITY_PER_S - LOW) - 0.3
    # ... and where the mock's log has the backlog back at its level (scheduled less finished)
    scheduled = sorted(r["scheduled_s"] - start for r in records)

    def logged_backlog(t: float) -> int:
        return sum(1 for x in scheduled if x <= t) - sum(1 for x in finished if x <= t)

    back = next(t for t in finished if t >= after["start_s"] and logged_backlog(t) <= level)
    assert back - after["start_s"] - 0.01 <= drain_s <= back - after["start_s"] + 0.5

    # SLO attainment (TTFT <= 200 ms from the scheduled time): met below capacity, lost above it
    assert low["good_fraction"] >= 0.9
    assert high["good_fraction"] <= 0.5
    assert after["good_fraction"] > high["good_fraction"]

    # the time series carries the target: each window its stage's rate
    targets = {round(w["start_s"] - start): w["target_level"] for w in point["timeseries"]}
    assert [targets[t] for t in range(12)] == [LOW] * 3 + [HIGH] * 3 + [LOW] * 6

    # and the report shows a row per stage
    md = write_report([tmp_path / "run"], tmp_path / "report").markdown.read_text()
    section = md.split("## Stages\n", 1)[1].split("\n## ", 1)[0]
    assert sum(1 for line in section.splitlines() if line.startswith("| ") and "staged 10 → 50 → 10" in line) == 3


def test_users_added_at_a_step_up_retire_at_the_step_down(start_mock, tmp_path):
    url = start_mock(ttft_ms=TTFT_S * 1e3, itl_ms=ITL_S * 1e3)
    load = _staged("users=1:2s, users=4:2s, users=1:2s")
    result, _, records, printed = _run(url, tmp_path, load)
    point = result.results["points"][0]
    start = point["span"]["start_s"]
    one, four, back = point["stages"]
    assert [s["target_users"] for s in (one, four, back)] == [1, 4, 1]

    def scheduled(r: dict) -> float:
        return r["scheduled_s"] - start

    # the added users' first requests are scheduled at the step up, on the schedule
    firsts = {u: min(scheduled(r) for r in records if r["user"] == u) for u in (1, 2, 3)}
    assert firsts == pytest.approx({1: 2.0, 2: 2.0, 3: 2.0})
    # in the second stage all four send; after the step down only user 0 has a request scheduled
    assert {r["user"] for r in records if 2.0 <= scheduled(r) < 4.0} == {0, 1, 2, 3}
    assert {r["user"] for r in records if scheduled(r) >= 4.0} == {0}
    # a user's requests take at least the script's 65 ms each: counts bounded from above
    assert one["requests"] <= 2.0 / SERVICE_S + 1
    assert four["requests"] <= 4 * (2.0 / SERVICE_S + 1)
    assert four["requests"] >= 2 * one["requests"]
    assert point["timeseries"][2]["active_users"] == 4  # the window [2, 3) s: four users at its end
    # the console prints the stages after the summary, one row each
    assert "stage by stage" in printed and sum(" users" in line and "→" in line for line in printed.splitlines()) >= 3
