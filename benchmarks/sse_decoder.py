"""Cost of the SSE decoder per event (a program, not a test): typical chat chunks, one event per
read and 16 events per read, and one 4 MB event split into 64 KB reads."""

from __future__ import annotations

import json
import time

from tokenbench.clients.sse import SSEDecoder


def per_event_us(reads: list[bytes], events_expected: int, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        dec = SSEDecoder()
        t0 = time.perf_counter()
        n = 0
        for r in reads:
            n += len(dec.feed(r))
        best = min(best, time.perf_counter() - t0)
        assert n == events_expected
    return best / events_expected * 1e6


def main() -> None:
    chunk = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": {"content": " hi"}, "finish_reason": None}],
    }
    event = b"data: " + json.dumps(chunk).encode() + b"\n\n"
    n = 100_000
    print(f"{'case':<32}{'µs/event':>10}")
    print(f"{'1 event per read':<32}{per_event_us([event] * n, n):>10.2f}")
    batch = event * 16
    print(f"{'16 events per read':<32}{per_event_us([batch] * (n // 16), (n // 16) * 16):>10.2f}")
    big = b"data: " + b"x" * (4 << 20) + b"\n\n"
    reads = [big[i : i + 65536] for i in range(0, len(big), 65536)]
    print(f"{'4 MB event in 64 KB reads':<32}{per_event_us(reads, 1) / 1e3:>10.2f} ms")


if __name__ == "__main__":
    main()
