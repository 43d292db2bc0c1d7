"""Samples -> per-point and per-window server figures: known answers, None never 0."""

import pytest

from tokenbench.results import Gauge
from tokenbench.telemetry.summary import matched_client_ttft, point_gpu, point_server, window_server


def scrape(t, **values):
    return {"kind": "scrape", "t_s": t, "ok": True, "values": values, "raw": {}, "gpu": None}


SAMPLES = [
    scrape(0.5, running=0, preemptions=2, generated_tokens=100, ttft_sum_s=1.0, ttft_count=10),
    scrape(1.5, running=4, preemptions=3, generated_tokens=200, ttft_sum_s=2.0, ttft_count=14),
    {"kind": "scrape", "t_s": 2.5, "ok": False, "error": "URLError: refused", "gpu": None},
    scrape(3.5, running=2, preemptions=6, generated_tokens=500, ttft_sum_s=4.0, ttft_count=20),
    scrape(4.5, running=0, preemptions=6, generated_tokens=520, ttft_sum_s=4.2, ttft_count=21),
]


def test_counters_are_differenced_between_the_bracketing_scrapes():
    s = point_server(SAMPLES, 1.0, 4.0)  # bracketed by the scrapes at 0.5 and 4.5
    assert s.bracket_s == [0.5, 4.5]
    assert s.preemptions == 4 and s.generated_tokens == 420
    assert s.ttft_s_mean == pytest.approx(3.2 / 11) and s.ttft_count == 11
    assert s.running == Gauge(mean=3.0, max=4)  # the scrapes inside: 1.5 and 3.5
    assert s.scrapes == 2 and s.failed_scrapes == 1 and "refused" in s.first_scrape_error


def test_fields_the_server_does_not_expose_are_none():
    s = point_server(SAMPLES, 1.0, 4.0)
    assert s.kv_usage is None and s.waiting is None
    assert s.prefix_cache_hits is None and s.prefix_cache_hit_rate is None
    assert s.itl_s_mean is None


def test_no_scrapes_means_no_server_summary():
    assert point_server([], 0, 1) is None
    only_gpu = [{"kind": "scrape", "t_s": 0.5, "gpu": None}]  # no metrics URL: GPU lines only
    assert point_server(only_gpu, 0, 1) is None


def test_window_takes_inside_mean_or_nearest_and_counts_preemptions():
    w = window_server(SAMPLES, 1.0, 4.0)
    assert (
        w.server_running == 3.0 and w.server_preemptions == 4
    )  # 6 (3.5) minus 2 (0.5): the scrapes at or before its edges
    empty = window_server(SAMPLES, 5.0, 6.0)  # no scrape inside: the nearest (4.5)
    assert empty.server_running == 0 and empty.server_preemptions == 0


def test_gpu_unavailable_is_said_not_zeroed():
    header = {"gpu": {"available": False, "reason": "NVMLError_LibraryNotFound"}}
    assert point_gpu(SAMPLES, header, 0, 5).model_dump(exclude_unset=True) == {
        "available": False,
        "reason": "NVMLError_LibraryNotFound",
    }
    gpu_samples = [
        dict(scrape(t), gpu=[{"index": 0, "util_pct": u, "power_w": 100.0 + u, "mem_used_bytes": 1000 * u}])
        for t, u in ((0.5, 50), (1.5, 70))
    ]
    g = point_gpu(gpu_samples, {"gpu": {"available": True}}, 0, 2)
    assert g.util_pct == Gauge(mean=60.0, max=70) and g.mem_used_bytes_max == 70000


def test_matched_client_ttft_uses_the_servers_bracket():
    server = point_server(SAMPLES, 1.0, 4.0)  # bracket 0.5 .. 4.5
    first_chunks = [(0.4, 9.0), (1.0, 0.2), (4.4, 0.4), (4.6, 9.0)]  # outside, in, in, outside
    assert matched_client_ttft(first_chunks, server).model_dump() == {
        "mean": pytest.approx(0.3),
        "count": 2,
        "period_s": [0.5, 4.5],
        "uncertain": 1,
    }
    assert matched_client_ttft(first_chunks, None) is None


def test_matched_client_ttft_brackets_by_the_scrapes_answers():
    """A busy server answers a scrape late; its snapshot is nearer the answer than the send. First
    chunks between the closing scrape's send and its answer were counted by the server: the
    client counts them too. Those within the margin of either bracketing answer are uncertain."""
    samples = [
        dict(scrape(0.5, ttft_sum_s=1.0, ttft_count=10), scrape_s=0.05),
        dict(scrape(2.0, ttft_sum_s=1.5, ttft_count=11), scrape_s=0.02),
        dict(scrape(4.0, ttft_sum_s=3.0, ttft_count=14), scrape_s=0.6),
    ]
    server = point_server(samples, 1.0, 3.5)
    assert server.bracket_s == [0.5, 4.0] and server.bracket_received_s == [0.55, 4.6]
    first_chunks = [(0.52, 9.0), (1.0, 0.5), (3.9, 0.5), (4.3, 0.5), (4.3, 0.5), (4.65, 9.0), (4.8, 9.0)]
    matched = matched_client_ttft(first_chunks, server)
    # before: 0.52 (sent before it, answered after); in: 1.0, 3.9 and the two at 4.3, whose
    # scrape was sent at 4.0 and answered at 4.6; after: 4.65 and 4.8
    assert matched.count == 4 == server.ttft_count and matched.mean == pytest.approx(0.5)
    assert matched.period_s == [0.55, 4.6]
    assert matched.uncertain == 4  # 0.52 (0.5..0.65), 4.3, 4.3, 4.65 (4.0..4.7)


def test_a_counter_created_during_the_point_counts_from_zero():
    samples = [scrape(0.5, running=0), scrape(2.5, running=1, preemptions=3)]
    assert point_server(samples, 1.0, 2.0).preemptions == 3
    assert point_server([scrape(0.5), scrape(2.5)], 1.0, 2.0).preemptions is None  # never exposed


def test_a_counter_reset_counts_from_zero_not_negative():
    """Audit 8: preemptions 500, the engine restarts, the counter reads 3: increase >= 3, not -497."""
    samples = [
        scrape(0.5, preemptions=490),
        scrape(1.5, preemptions=500),
        scrape(2.5, preemptions=1),
        scrape(3.5, preemptions=3),
    ]
    s = point_server(samples, 1.0, 3.5)
    assert s.preemptions == 10 + 1 + 2
    assert window_server(samples, 1.0, 3.5).server_preemptions == 13


def test_a_period_no_scrape_brackets_is_said():
    s = point_server(SAMPLES, 0.0, 4.0)  # the first scrape is at 0.5, after the start
    assert s.bracketed is False
    assert point_server(SAMPLES, 1.0, 4.0).bracketed is True
