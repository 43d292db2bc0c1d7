"""tokenbench's own load definitions in virtual time: the same schedules a run sends (load.py's
user ramps, arrival times and trace replay offsets; loadgen.source's order of requests), sent to a
simulated Cluster, each request becoming a RequestRecord as a run would write it, and each point a
PointEnd as loadgen would log it. A closed-loop user sends its next request when its reply ends
(plus its think time); ``--max-concurrency`` holds open-loop arrivals on the client, as loadgen does.
"""

from __future__ import annotations

import math
from array import array
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import count

from tokenbench.config import LoadPoint, RateLoad, ReplayLoad, StagedLoad, StopConfig, UsersLoad
from tokenbench.datasets.sessions import estimate_tokens
from tokenbench.errors import BadInput
from tokenbench.loadgen.schedule import arrival_times, ramp_up_s, staged_arrival_times, user_start_times
from tokenbench.loadgen.source import RequestSource, TraceSource
from tokenbench.model.engine import Cluster, Routing, Seq
from tokenbench.model.params import ServerModel
from tokenbench.records import Outcome, Request, RequestRecord, TokenSource
from tokenbench.results.manifest import PointEnd

DEFAULT_OUTPUT_TOKENS = 128


@dataclass
class SimulatedPoint:
    records: list[RequestRecord]
    event: PointEnd
    preemptions: int


def prompt_tokens(request: Request) -> int:
    if request.expected_prompt_tokens is not None:
        return request.expected_prompt_tokens
    return estimate_tokens(request.as_prompt_text())  # the datasets' estimate without a tokenizer


class PointDriver:
    """One load point against a fresh cluster, from virtual time ``start_s``."""

    def __init__(
        self,
        model: ServerModel,
        index: int,
        load: LoadPoint,
        stop: StopConfig,
        source: RequestSource | TraceSource,
        seed: int,
        start_s: float,
        replicas: int = 1,
        routing: Routing = "round-robin",
    ) -> None:
        self.model, self.index, self.load, self.stop, self.source = model, index, load, stop, source
        self.seed, self.start_s = seed, start_s
        self.cluster = Cluster(model, replicas, routing)
        self.deadline = start_s + stop.duration_s if stop.duration_s is not None else math.inf
        self.budget = stop.max_requests if stop.max_requests is not None else math.inf
        self.issued = 0
        self.records: dict[int, RequestRecord] = {}
        self._keys = count()
        self._user_of: dict[int, int] = {}
        self._user_began: dict[int, float] = {}
        self.user_spans: list[tuple[float, float]] = []
        self._users_ended: set[int] = set()
        self.last_arrival_s: float | None = None
        cap = load.max_concurrency if isinstance(load, RateLoad | ReplayLoad) else None
        self._client_slots = cap if cap is not None else math.inf
        self._in_flight = 0
        self._held: deque[tuple[int, tuple[int, Request], float]] = deque()
        default_out = model.output_tokens_mean or DEFAULT_OUTPUT_TOKENS
        self._default_out = max(1, round(default_out))

    def _send(self, issued: tuple[int, Request], scheduled_s: float, sent_s: float, user: int | None = None) -> None:
        key = next(self._keys)
        rid, request = issued
        out = request.max_tokens or self._default_out
        prompt = max(1, prompt_tokens(request) + round(self.model.prompt_tokens_extra))
        self.records[key] = RequestRecord(
            point=self.index,
            id=rid,
            scheduled_s=scheduled_s,
            sent_s=sent_s,
            prompt_tokens=prompt,
            dataset_prompt_tokens=request.expected_prompt_tokens,
            trace_row=request.trace_row,
            user=user,
        )
        if user is not None:
            self._user_of[key] = user
        self._in_flight += 1
        cached = round(self.model.prompt_tokens_cached)  # what its server reuses (Seq keeps one token to prefill)
        self.cluster.submit(
            Seq(key=key, arrival_s=sent_s, prompt_tokens=prompt, output_tokens=out, cached_tokens=cached)
        )

    def _take(self) -> tuple[int, Request] | None:
        if self.issued >= self.budget:
            return None
        self.issued += 1
        assert isinstance(self.source, RequestSource), "closed loop draws from a list"
        return self.source.take()

    def _open_loop(self, offsets: Sequence[tuple[float, Request | None]]) -> None:
        for offset, given in offsets:
            t = self.start_s + offset
            if t >= self.deadline or self.issued >= self.budget:
                break
            self.issued += 1
            if given is not None:
                request = self.source.issue(given)
            else:
                assert isinstance(self.source, RequestSource), "a rate's arrivals draw from a list"
                request = self.source.take()
            self.last_arrival_s = t
            self.cluster.run(self._done, until_s=t)  # earlier replies free client slots first
            if self._in_flight < self._client_slots:
                self._send(request, t, t)
            else:
                self._held.append((len(self._held), request, t))

    def _done(self, seq: Seq, t: float) -> None:
        record = self.records[seq.key]
        record.chunk_times_s = array("d", seq.token_times)
        record.end_s = record.closed_s = t - seq.read_early_s  # as its stream read its last token
        record.outcome = Outcome.OK
        record.output_tokens = seq.generated
        record.output_tokens_source = TokenSource.SERVER
        record.finish_reason = "length"
        record.end_marker = True
        self._in_flight -= 1
        if self._held and t < self.deadline:
            _, request, scheduled = self._held.popleft()
            self._send(request, scheduled, t)
        user = self._user_of.get(seq.key)
        if user is not None:
            self._next_of_user(user, t + (self.load.think_time_s if isinstance(self.load, UsersLoad) else 0.0))

    def _next_of_user(self, user: int, t: float) -> None:
        if t >= self.deadline:
            self.user_spans.append((self._user_began[user], min(t, self.deadline)))
            self._users_ended.add(user)
            return
        request = self._take()
        if request is None:
            self.user_spans.append((self._user_began[user], t))
            self._users_ended.add(user)
            return
        self._send(request, t, t, user)

    def run(self) -> SimulatedPoint:
        load, stop = self.load, self.stop
        if isinstance(load, UsersLoad):
            for u, offset in enumerate(user_start_times(load)):
                self._user_began[u] = self.start_s + offset
                self._next_of_user(u, self.start_s + offset)
        elif isinstance(load, RateLoad):
            self._open_loop([(t, None) for t in arrival_times(load, self.seed, stop)])
        elif isinstance(load, StagedLoad):
            if not load.open_loop:
                raise BadInput("the server model predicts a staged open loop (rate stages), not users stages")
            self._open_loop([(t, None) for t in staged_arrival_times(load, self.seed, stop)])
        else:
            assert isinstance(self.source, TraceSource), "a trace replay draws from a TraceSource"
            source = self.source
            self._open_loop([(s.offset_s, s.request) for s in source.items(load, self.seed, stop)])
        drain_until = self.deadline + stop.drain_timeout_s if self.deadline != math.inf else math.inf
        self.cluster.run(self._done, until_s=drain_until)
        return self._point()

    def _point(self) -> SimulatedPoint:
        load, stop = self.load, self.stop
        records = sorted(self.records.values(), key=lambda r: (r.sent_s or 0.0, r.id))
        ends = [r.end_s for r in records if r.end_s is not None]
        last_end = max(ends, default=self.start_s)
        if self.deadline != math.inf:
            load_end = self.deadline
        elif isinstance(load, RateLoad) and self.last_arrival_s is not None:
            load_end = self.last_arrival_s + 1.0 / load.rate_per_s
        elif isinstance(load, ReplayLoad) and self.last_arrival_s is not None:
            load_end = self.last_arrival_s
        else:
            load_end = last_end
        end_s = max(last_end, load_end)
        if self.deadline != math.inf:
            cut = self.deadline + stop.drain_timeout_s
            end_s = min(end_s, cut)
            for r in records:
                if r.end_s is None:
                    r.outcome, r.closed_s = Outcome.CANCELLED, cut
                    r.error = "cancelled: the point ended first"
        for _, _, scheduled in self._held:
            records.append(
                RequestRecord(
                    point=self.index,
                    id=-1,
                    scheduled_s=scheduled,
                    outcome=Outcome.NOT_SENT,
                    closed_s=end_s,
                    error="not sent: the point ended first",
                )
            )
        for user, began in self._user_began.items():
            if user not in self._users_ended:  # still sending when the drain was cut
                self.user_spans.append((began, end_s))
        ramp_end = self.start_s + ramp_up_s(load)
        event = PointEnd(
            index=self.index,
            load=load,
            start_s=self.start_s,
            ramp_end_s=ramp_end,
            window_start_s=min(ramp_end + stop.warmup_s, load_end),
            load_end_s=load_end,
            end_s=end_s,
            user_spans=sorted(self.user_spans),
            interrupted=False,
            num_records=len(records),
            last_arrival_s=self.last_arrival_s,
        )
        preemptions = sum(e.preemptions for e in self.cluster.engines)
        return SimulatedPoint(records, event, preemptions)
