"""The server in virtual time: step-synchronous continuous batching, as vLLM and llama.cpp run it.

An engine runs one step at a time. A step takes every running sequence whose prefill is done (one
decode token each) and, FCFS, the prefill of the sequences admitted next, up to the chunked-prefill
budget (``max_batched_tokens``: a long prompt is prefilled over several steps). It lasts

    base + per_seq * decode sequences + per_prefill_token * prefill tokens + per_kv_token * KV in use
         + per_prefill_attention * attention pairs (each prefill token times the tokens it attends to)

and at its end each decode emits a token and each sequence whose prefill completed emits its first.
A prompt's prefill computes its tokens less those the server reuses from its cache (``cached_tokens``:
the fit's median of what the runs' server said); its KV holds them all. Arrivals of one instant are
all queued before the next step is composed.
Admission (on arrival, or at a step's start once a slot frees) is FCFS into at most ``max_num_seqs`` slots while the KV budget (prompt + generated tokens
of the running sequences) has room; when the decodes would overflow it, the youngest running
sequence is preempted (recompute: it goes back to the head of the queue and prefills its prompt and
what it had generated again). An admitted request waits ``first_token_overhead_s`` in its slot before
its prefill is scheduled. A request that became ready while a step was in flight waits for that
step's end in the engine; its stream reads its tokens ``1 - first_token_wait_share`` of that wait
earlier (a server whose streams run on their own clocks, as the mock's, has no such wait; a
step-synchronous engine's share is 1: its token times are the steps' ends). Replicas are
independent engines behind a router (round-robin or the one with the fewest requests). Nothing
here is on the wall clock.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from tokenbench.model.params import OVERHEAD, WAIT_SHARE, ServerModel

Routing = Literal["round-robin", "least-loaded"]
ROUTINGS: tuple[Routing, ...] = ("round-robin", "least-loaded")


@dataclass
class Seq:
    """One request inside the simulated server."""

    key: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    priority: int = 0
    cached_tokens: int = 0  # prompt tokens the server reuses from its cache: not prefilled (held in KV)
    ready_s: float = 0.0  # admitted + overhead: when its prefill may be scheduled
    prefill_left: int = 0  # prompt (plus recomputed output after a preemption) still to prefill
    generated: int = 0
    token_times: list[float] = field(default_factory=list)
    preemptions: int = 0
    step_wait_s: float = 0.0  # from ready to its first prefill step: the step in flight's rest
    read_early_s: float = 0.0  # its stream reads each token this long before the step's end

    @property
    def kv_tokens(self) -> int:
        return self.prompt_tokens + self.generated

    @property
    def prefill_tokens(self) -> int:
        """The prompt tokens its first prefill computes (at least one: the last is always run)."""
        return max(1, self.prompt_tokens - self.cached_tokens)


@dataclass(frozen=True)
class Costs:
    """A step's cost terms and the limits (math.inf: none), from a ServerModel."""

    base: float
    per_seq: float
    per_prefill_token: float
    per_kv_token: float
    per_prefill_attention: float
    overhead: float
    max_num_seqs: float
    kv_capacity: float
    max_batched_tokens: float
    wait_share: float = 1.0

    @classmethod
    def of(cls, model: ServerModel) -> Costs:
        def v(name: str, default: float) -> float:
            value = model.value(name)
            return default if value is None else float(value)

        return cls(
            base=v("step_base_s", 0.0),  # the fitted intercept as fitted, even below 0 (the step is kept above 0)
            per_seq=v("step_per_seq_s", 0.0),
            per_prefill_token=v("step_per_prefill_token_s", 0.0),
            per_kv_token=v("step_per_kv_token_s", 0.0),
            per_prefill_attention=v("step_per_prefill_attention_s", 0.0),
            overhead=v(OVERHEAD, 0.0),
            max_num_seqs=v("max_num_seqs", math.inf),
            kv_capacity=v("kv_capacity_tokens", math.inf),
            max_batched_tokens=v("max_batched_tokens", math.inf),
            wait_share=min(1.0, max(0.0, v(WAIT_SHARE, 1.0))),
        )


class Engine:
    """One replica. ``step_end_s`` is when its step in flight ends (math.inf: idle)."""

    def __init__(self, costs: Costs) -> None:
        self.c = costs
        self.waiting: deque[Seq] = deque()
        self.running: list[Seq] = []
        self.kv_in_use = 0
        self.step_end_s = math.inf
        self.step_start_s = math.inf  # when the step in flight (or the last) began
        self._decodes: list[Seq] = []
        self._prefills: list[tuple[Seq, int]] = []
        self.preemptions = 0
        self.steps = 0

    @property
    def load(self) -> int:
        return len(self.waiting) + len(self.running)

    def add(self, seq: Seq, now: float) -> None:
        """Queue an arrival; ``wake`` then starts a step if the engine is idle (after every arrival
        of the instant is in: users answered by one step send together and are prefilled together)."""
        seq.prefill_left = seq.prefill_tokens
        self.waiting.append(seq)
        self._admit(now)  # a free slot takes it at once: its overhead runs while a step is in flight

    def wake(self, now: float) -> None:
        if not self._decodes and not self._prefills:  # idle, or only waiting out an overhead
            self.start_step(now)

    def _admit(self, now: float) -> None:
        c = self.c
        while self.waiting and len(self.running) < c.max_num_seqs:
            seq = self.waiting[0]
            need = seq.kv_tokens + 1
            if self.running and self.kv_in_use + need > c.kv_capacity:
                break  # FCFS: the head waits for room, the rest behind it
            self.waiting.popleft()
            seq.ready_s = now + c.overhead if seq.preemptions == 0 else now
            self.running.append(seq)
            self.kv_in_use += seq.kv_tokens

    def _preempt_for_decodes(self, decodes: int) -> None:
        """Recompute preemption: the youngest running sequences go back to the queue's head until
        this step's decodes fit the KV budget."""
        while self.running and self.kv_in_use + decodes > self.c.kv_capacity and len(self.running) > 1:
            victim = self.running.pop()
            self.kv_in_use -= victim.kv_tokens
            decodes -= 1 if victim.prefill_left == 0 and victim.generated > 0 else 0
            victim.prefill_left = victim.kv_tokens
            victim.preemptions += 1
            self.preemptions += 1
            self.waiting.appendleft(victim)

    def start_step(self, now: float) -> None:
        """Compose and start the next step at ``now`` (idle when there is nothing to do)."""
        self._admit(now)
        c = self.c
        ready = [s for s in self.running if s.ready_s <= now]
        decodes = [s for s in ready if s.prefill_left == 0]
        self._preempt_for_decodes(len(decodes))
        running = set(map(id, self.running))
        decodes = [s for s in decodes if id(s) in running]
        budget = c.max_batched_tokens - len(decodes)
        prefills: list[tuple[Seq, int]] = []
        for s in ready:
            if s.prefill_left > 0 and id(s) in running and budget > 0:
                chunk = int(min(s.prefill_left, budget))
                prefills.append((s, chunk))
                budget -= chunk
        if not decodes and not prefills:
            pending = [s.ready_s for s in self.running if s.ready_s > now]
            self.step_end_s = min(pending) if pending else math.inf  # wake when an overhead ends
            self._decodes, self._prefills = [], []
            return
        prefill_tokens = sum(n for _, n in prefills)
        # each chunk's tokens attend to the prompt before them (cached or prefilled) and to each other
        pairs = sum(n * (s.kv_tokens - s.prefill_left + n / 2) for s, n in prefills) if c.per_prefill_attention else 0.0
        duration = max(  # a step takes time, or virtual time never moves
            c.base
            + c.per_seq * len(decodes)
            + c.per_prefill_token * prefill_tokens
            + c.per_kv_token * self.kv_in_use
            + c.per_prefill_attention * pairs,
            1e-6,
        )
        for s, _ in prefills:
            if s.preemptions == 0 and not s.token_times and s.prefill_left == s.prefill_tokens:
                # its first prefill step: the wait for the step that was in flight when it became
                # ready (a wait for the prefill budget is a queue, not this step's phase)
                s.step_wait_s = now - s.ready_s if s.ready_s >= self.step_start_s else 0.0
                s.read_early_s = (1.0 - c.wait_share) * s.step_wait_s
        self._decodes, self._prefills = decodes, prefills
        self.step_start_s = now
        self.step_end_s = now + duration
        self.steps += 1

    def end_step(self) -> tuple[float, list[Seq]]:
        """The step in flight ends: tokens are emitted; returns its end time and the sequences done."""
        now = self.step_end_s
        done: list[Seq] = []
        emitting = list(self._decodes)
        for s, n in self._prefills:
            s.prefill_left -= n
            if s.prefill_left == 0:
                emitting.append(s)
        for s in emitting:
            s.generated += 1
            self.kv_in_use += 1
            if len(s.token_times) < s.generated:  # a recomputed token is not streamed twice
                s.token_times.append(now - s.read_early_s)
            if s.generated >= s.output_tokens:
                done.append(s)
        if done:
            finished = set(map(id, done))
            self.running = [s for s in self.running if id(s) not in finished]
            self.kv_in_use -= sum(s.kv_tokens for s in done)
        self._decodes, self._prefills = [], []
        self.start_step(now)
        return now, done


class Cluster:
    """N replicas behind a router, driven by arrivals: ``submit`` at a time, ``run`` until quiet.
    ``on_done(seq, t)`` may submit follow-up requests (a closed-loop user's next)."""

    def __init__(self, model: ServerModel, replicas: int = 1, routing: Routing = "round-robin") -> None:
        costs = Costs.of(model)
        self.engines = [Engine(costs) for _ in range(max(1, replicas))]
        self.routing = routing
        self._next_replica = 0
        self._arrivals: list[tuple[float, int, Seq]] = []
        self._count = 0

    def submit(self, seq: Seq) -> None:
        heapq.heappush(self._arrivals, (seq.arrival_s, self._count, seq))
        self._count += 1

    def _route(self) -> Engine:
        if self.routing == "least-loaded":
            return min(self.engines, key=lambda e: e.load)
        engine = self.engines[self._next_replica % len(self.engines)]
        self._next_replica += 1
        return engine

    def run(self, on_done: Callable[[Seq, float], None], until_s: float = math.inf) -> None:
        """Advance virtual time, event by event, until nothing is left (or ``until_s``)."""
        engines = self.engines
        while True:
            next_arrival = self._arrivals[0][0] if self._arrivals else math.inf
            engine = min(engines, key=lambda e: e.step_end_s)
            if min(next_arrival, engine.step_end_s) > until_s or (next_arrival == engine.step_end_s == math.inf):
                return
            if next_arrival <= engine.step_end_s:
                # every arrival of this instant before a step is composed: taking the first alone
                # (an overhead of 0, as llama.cpp's fits) split lockstep users, and each one's
                # prompt then stalled the others' decode (+47% TPOT on a fitted 2-user point)
                woken: dict[int, Engine] = {}
                while self._arrivals and self._arrivals[0][0] == next_arrival:
                    _, _, seq = heapq.heappop(self._arrivals)
                    routed = self._route()
                    routed.add(seq, next_arrival)
                    woken[id(routed)] = routed
                for routed in woken.values():
                    routed.wake(next_arrival)
                continue
            t, done = engine.end_step()
            for seq in done:
                on_done(seq, t)
