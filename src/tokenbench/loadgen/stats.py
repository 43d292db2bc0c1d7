"""The load's running counts (LiveStats): written by the load generator and the pool of workers,
read by the live view (console/live.py) from its own timer."""

from __future__ import annotations

from dataclasses import dataclass, field

from tokenbench.records import Outcome, RequestRecord


@dataclass
class LiveStats:
    """Counters for the live view. Written by the load only (the pool, from its workers' polls);
    read by the display."""

    point: int = 0
    label: str = ""
    started_s: float = 0.0
    planned_s: float | None = None
    active_users: int = 0
    in_flight: int = 0
    done: int = 0
    errors: int = 0
    output_chunks: int = 0
    last_ttfts_s: list[float] = field(default_factory=list)

    def record_done(self, record: RequestRecord) -> None:
        self.done += 1
        if record.outcome is not Outcome.OK:
            self.errors += 1
        self.output_chunks += len(record.chunk_times_s)
        ttft = record.ttft_s
        if ttft is not None:
            self.last_ttfts_s.append(ttft)
            if len(self.last_ttfts_s) > 200:
                del self.last_ttfts_s[:100]
