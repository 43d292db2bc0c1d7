"""live.py: the live row drawn from LiveStats (elapsed and remaining from the run's clock, counts,
the median of recent TTFTs, the chunk rate), and the view staying silent off a terminal."""

from __future__ import annotations

import io
import re
import time

from rich.console import Console

from tokenbench.console.live import LiveView
from tokenbench.loadgen import LiveStats
from tokenbench.records import Outcome, RequestRecord


def _text(view: LiveView) -> str:
    out = io.StringIO()
    Console(file=out, width=300).print(view._render())
    return " ".join(out.getvalue().split())


def _stats(**fields) -> LiveStats:
    stats = LiveStats(label="users=4", started_s=10.0, planned_s=60.0, active_users=4, in_flight=3)
    for key, value in fields.items():
        setattr(stats, key, value)
    return stats


def test_row_from_hand_made_stats():
    stats = _stats()
    for i, ttft in enumerate([0.3, 0.1, 0.2]):  # through the load generator's own bookkeeping
        chunks = [1.0 + ttft + k * 0.01 for k in range(5)]
        stats.record_done(
            RequestRecord(point=0, id=i, scheduled_s=1.0, sent_s=1.0, chunk_times_s=chunks, outcome=Outcome.OK)
        )
    stats.record_done(RequestRecord(point=0, id=3, scheduled_s=1.0, sent_s=1.0, outcome=Outcome.HTTP_ERROR))
    text = _text(LiveView(stats, lambda: 25.0, Console(file=io.StringIO()), enabled=True))
    for cell in (
        "users=4",
        "elapsed 15s",
        "remaining 45s",
        "users 4",
        "in flight 3",
        "done 4",
        "errors 1",
        "TTFT p50 200.0 ms",  # median of 300, 100, 200 ms
    ):
        assert cell in text, (cell, text)


def test_before_any_ttft_and_without_a_plan():
    text = _text(LiveView(_stats(planned_s=None), lambda: 12.0, Console(file=io.StringIO()), enabled=True))
    assert "remaining -" in text and "TTFT p50 - ms" in text and "done 0" in text


def test_remaining_never_negative():
    text = _text(LiveView(_stats(planned_s=5.0), lambda: 100.0, Console(file=io.StringIO()), enabled=True))
    assert "elapsed 90s" in text and "remaining 0s" in text


def test_chunk_rate_since_the_last_sample():
    view = LiveView(_stats(output_chunks=10_000), lambda: 20.0, Console(file=io.StringIO()), enabled=True)
    view._last = (time.perf_counter() - 100.0, 0)  # 10 000 chunks over the last 100 s
    rate = int(re.search(r"~(\d+) chunks/s", _text(view)).group(1))
    assert 95 <= rate <= 100


def test_off_a_terminal_nothing_is_drawn():
    out = io.StringIO()
    with LiveView(_stats(), lambda: 11.0, Console(file=out), enabled=True) as view:
        assert view._live is None
    assert out.getvalue() == ""


def test_on_a_terminal_it_draws_the_row():
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=300)
    with LiveView(_stats(), lambda: 11.0, console, enabled=True) as view:
        assert view._live is not None
    assert "users=4" in out.getvalue()
    with LiveView(_stats(), lambda: 11.0, Console(file=io.StringIO(), force_terminal=True), enabled=False) as view:
        assert view._live is None  # --no-live
