"""--duration auto and --stop-oversaturated under each kind of load (the in-process mock: these
check behaviour, not timing): closed loop, open loop and multi-turn sessions stop as precise
once the (loose) precision is met; a closed-loop point is never judged over-saturated."""

from __future__ import annotations

import pytest
from run_helpers import config, quiet

from tokenbench.config import RateLoad, SessionConfig, StopConfig, UsersLoad
from tokenbench.run import run

LOOSE = StopConfig(duration_s=15, duration_auto=True, precision=0.25, min_requests=40, drain_timeout_s=5)


@pytest.mark.parametrize(
    ("load", "sessions"),
    [
        (UsersLoad(users=4), None),
        (RateLoad(rate_per_s=30, arrival="poisson"), None),
        (UsersLoad(users=4), SessionConfig(turns=3)),
    ],
    ids=["users", "rate", "sessions"],
)
def test_duration_auto_stops_precise_under_every_load(mock_server, tmp_path, load, sessions):
    url = mock_server(ttft_ms=10, itl_ms=1, ttft_jitter=0.5)
    result = run(config(url, tmp_path, [load], LOOSE, output_tokens=8, window_s=1.0, sessions=sessions), quiet())
    point = result.results["points"][0]
    stopped = point["auto_stop"]
    assert stopped["reason"] == "precise", stopped
    assert stopped["at_s"] < 15
    assert point["span"]["load_end_s"] - point["span"]["start_s"] == pytest.approx(stopped["at_s"])
    # results' precision is over the whole final window (the requests in flight at the stop
    # included), a little more than the monitor judged on: near the target, not always within it
    gated = ("ttft_mean", "tpot_mean", "output_tokens_per_s", "ttft_p90")
    assert all(stopped["precision"][k]["relative"] <= 2 * 0.25 for k in gated), stopped["precision"]
    assert point["requests_in_window"]["total"] >= 40
    assert "over_saturated" not in point and point["steady_state"]["windows"] == 4


def test_a_plain_point_says_where_steady_state_began_and_nothing_of_auto_stop(mock_server, tmp_path):
    url = mock_server(ttft_ms=10, itl_ms=1)
    stop = StopConfig(duration_s=1.5, stop_oversaturated=True)
    result = run(config(url, tmp_path, [UsersLoad(users=2)], stop, output_tokens=4, window_s=0.25), quiet())
    point = result.results["points"][0]
    steady = point["steady_state"]
    assert steady["window_s"] == 0.25 and steady["window_start"] is False
    # whether 1.5 s of an in-process mock beside other tests settles is the neighbours' doing (it
    # once read not reached under make check's side-by-side tier): the rule's answers are
    # test_steady.py's and test_autostop_runs.py's; here, only that a start is where a point is
    assert steady["reached"] == (steady["start_s"] is not None)
    assert steady["start_s"] is None or 0 <= steady["start_s"] <= 1.5
    assert "auto_stop" not in point  # closed loop: the backlog is not judged, so nothing judged itself
