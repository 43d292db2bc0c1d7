"""results.json's types (results/run.py) on known values: a time-series window joins the client's,
the server's and the client health's figures with the keys each set; the run's results grow a point
at a time and keep the shape they were given (tests/test_results.py checks whole runs' files)."""

from __future__ import annotations

from tokenbench.results import SCHEMA_VERSION, RunResults, Server, TimeWindow, WindowHealth
from tokenbench.results.run import MatchedTtft, WindowClient, WindowServer

CLIENT = WindowClient(
    start_s=0.0,
    end_s=5.0,
    ramp=True,
    active_users=4,
    in_flight=3.5,
    requests_per_s=2,
    output_tokens_per_s=250.0,
    ttft_s_mean=0.1,
    ttft_s_p90=None,
    errors=0,
    cancelled=1,
)

RUN = {
    "tool": {"name": "tokenbench", "version": "0.1.0"},
    "computed_by": {"name": "tokenbench", "version": "0.1.0", "how": "run"},
    "target": {"url": "http://127.0.0.1:8000", "model": "m", "api": "chat", "ignore_eos": False},
    "dataset": None,
    "slo": {"ttft_s": None, "tpot_s": None, "e2e_s": None},
    "clock": None,
    "telemetry": None,
    "points": [],
}


def test_a_window_holds_the_keys_each_part_set():
    alone = TimeWindow.of(CLIENT, None)
    assert alone.model_dump(exclude_unset=True) == CLIENT.model_dump(exclude_unset=True)  # no server keys at all
    server = WindowServer(server_running=3, gpu_util_pct=None)
    health = WindowHealth(client_cpu_util=0.4)
    joined = TimeWindow.of(CLIENT, server, health).model_dump(exclude_unset=True)
    assert joined == {
        **CLIENT.model_dump(exclude_unset=True),
        "server_running": 3,
        "gpu_util_pct": None,
        "client_cpu_util": 0.4,
    }
    assert list(joined)[:3] == ["start_s", "end_s", "ramp"]  # the client's figures first


def test_an_old_file_reads_as_version_1_and_keeps_its_shape():
    results = RunResults.from_json(RUN)
    assert results.schema_version == SCHEMA_VERSION == 1
    assert results.to_json() == {"schema_version": 1, **RUN}  # no key it was not given
    assert "interrupted" not in results.to_json() and "workers" not in results.to_json()


def test_a_run_ends_with_interrupted_set():
    results = RunResults.from_json(RUN)
    assert results.finished(True).to_json()["interrupted"] is True
    assert results.finished(False).to_json()["interrupted"] is False
    assert results.interrupted is None  # frozen: the original is unchanged


def test_with_matched_ttft_adds_the_clients_ttft_beside_the_servers():
    server = Server.model_validate(
        {
            "period_s": [0, 10],
            "scrapes": 11,
            "failed_scrapes": 0,
            "first_scrape_error": None,
            "bracket_s": [0, 10],
            "bracketed": True,
            **dict.fromkeys(
                [
                    "preemptions",
                    "generated_tokens",
                    "prefix_cache_hits",
                    "prefix_cache_queries",
                    "prefix_cache_hit_rate",
                    "running",
                    "waiting",
                    "kv_usage",
                    "ttft_s_mean",
                    "ttft_count",
                    "itl_s_mean",
                    "itl_count",
                ]
            ),
        }
    )
    matched = MatchedTtft(mean=0.12, count=40)
    got = server.with_matched_ttft(matched)
    assert got.client_ttft_s_matched == matched and server.client_ttft_s_matched is None
    assert got.model_dump(exclude_unset=True)["client_ttft_s_matched"] == {"mean": 0.12, "count": 40}


def test_an_optional_part_built_as_none_is_absent_but_a_file_read_keeps_its_nulls():
    """A run or a point built with an optional part as None has no key for it (a part only some
    have); ``from_json`` keeps the keys the file has, a null one too, so a file read is written back
    as it was. A required part that is None stays (``dataset``, ``clock``: null)."""
    built = RunResults(**dict(RunResults.from_json(RUN)))  # every field: workers, interrupted, predicted None
    assert built.to_json() == {"schema_version": 1, **RUN}
    assert "workers" not in built.model_fields_set and "dataset" in built.model_fields_set
    read = RunResults.from_json({**RUN, "workers": None})
    assert read.to_json() == {"schema_version": 1, **RUN, "workers": None}
