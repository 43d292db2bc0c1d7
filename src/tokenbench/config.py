"""One typed tree of settings and the one home of every default.

The CLI only turns flags into these models; everything downstream receives typed config.
Validation errors name the field to fix.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from .cost import CostConfig
from .frozen import FrozenModel as _Model
from .workers.settings import WorkersConfig

Api = Literal["chat", "completions", "tgi", "triton", "ollama"]  # the values of --api (clients.WIRES)
Arrival = Literal["constant", "poisson", "gamma"]
# --prefix-cache: "reset" empties the server's prefix cache before every load point through the
# engine's own control (backends/cache_control.py); "keep" leaves it as the last point left it.
PrefixCacheMode = Literal["reset", "keep"]
DatasetName = Literal["synthetic", "sharegpt", "dolly", "jsonl", "trace"]
# The trace formats datasets.traces reads (its TraceFormat; config cannot import datasets: a cycle).
TraceFormatName = Literal["mooncake", "azure", "burstgpt", "bailian"]

SYNTHETIC_OUTPUT_TOKENS = 128  # when --output-tokens is not given for synthetic prompts


class TargetConfig(_Model):
    """The server under test. ``url`` None means: start the embedded default backend."""

    url: str | None = None
    model: str | None = None  # model name sent in requests; for the embedded backend, a .gguf path
    api: Api | None = None  # None: the backend profile's first API, else chat
    api_key_env: str = "OPENAI_API_KEY"  # read at send time; the key itself is never stored
    request_timeout_s: float = 600.0  # whole request, first byte to end of stream
    read_timeout_s: float = 120.0  # longest silence between two reads of one stream
    connect_timeout_s: float = 10.0
    ignore_eos: bool = False
    include_usage: bool = True
    continuous_usage: bool | None = None  # usage on every chunk; None: as the backend profile says
    temperature: float | None = 0.0
    extra_body: dict = Field(default_factory=dict)
    # sent with every request (--header "Name: value"); values are masked in every file written
    headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^https?://[^/]+", v):
            raise ValueError(f"--url must look like http://HOST:PORT, got {v!r}")
        return v.rstrip("/") if v else v

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) or None


class EngineKnobs(_Model):
    """The settings every backend profile maps to its own native flags (backends/*.py). None means
    "the engine's default"; a knob an engine has no flag for is an error naming --engine-arg."""

    max_num_seqs: int | None = Field(default=None, gt=0)  # max concurrent sequences / batch size
    kv_memory: float | None = Field(default=None, gt=0, le=1)  # accelerator memory fraction: weights + KV
    max_model_len: int | None = Field(default=None, gt=0)
    prefix_caching: bool | None = None
    quantization: str | None = None
    tensor_parallel: int | None = Field(default=None, gt=0)
    engine_args: tuple[str, ...] = ()  # passed through verbatim after the mapped flags
    engine_env: dict[str, str] = Field(default_factory=dict)


class BackendConfig(_Model):
    """A server tokenbench launches (``--backend NAME --model M``) or attaches to (``--url`` with
    ``--backend NAME``: only its metric names and quirks are used)."""

    name: str | None = None  # a profile in backends.PROFILES; None: unknown engine (raw samples only)
    model: str | None = None  # what the engine loads: hub id or local path
    served_model_name: str | None = None  # name sent in requests; defaults per engine
    knobs: EngineKnobs = Field(default_factory=EngineKnobs)
    executable: str | None = None  # overrides the engine's command (e.g. a venv's bin/vllm)
    port: int | None = Field(default=None, gt=0, lt=65536)  # None: a free port on 127.0.0.1
    ready_timeout_s: float = Field(default=900.0, gt=0)  # includes downloads/conversion/compilation
    metrics_interval_s: float = Field(default=1.0, gt=0)  # /metrics scrape period
    metrics_url: str | None = None  # default: the target URL + the profile's metrics path
    # A serving layer (triton, ray) in front of an engine: the engine profile it serves from
    # (llamacpp, vllm), launched first on its own port.
    upstream: str | None = None
    # A serving layer's own settings (--layer-arg KEY=VALUE; its profile says which), apart from
    # the engine's knobs (which go to the upstream engine).
    layer_args: tuple[str, ...] = ()


class UsersLoad(_Model):
    """Closed loop: ``users`` users spawned evenly over ``ramp_up_s``; each sends its next request
    ``think_time_s`` after the previous one ends."""

    kind: Literal["users"] = "users"
    users: int = Field(gt=0)
    ramp_up_s: float = Field(default=0.0, ge=0)
    think_time_s: float = Field(default=0.0, ge=0)


class RateLoad(_Model):
    """Open loop: arrivals at ``rate_per_s`` regardless of responses."""

    kind: Literal["rate"] = "rate"
    rate_per_s: float = Field(gt=0)
    arrival: Arrival = "poisson"
    burstiness: float = Field(default=1.0, gt=0)  # gamma shape; 1.0 = poisson
    max_concurrency: int | None = Field(default=None, gt=0)


class ReplayLoad(_Model):
    """Open loop from a trace (``--dataset trace``): each row is sent at its trace time divided by
    ``speed`` (2 = twice as fast), from the first row in ``[start_s, end_s)`` of trace time,
    whatever the responses; ``jitter_s`` (trace seconds, opt-in) spreads a gridded trace's bursts
    (load.replay_offsets). ``max_concurrency`` caps it as for a rate: the wait is queue delay."""

    kind: Literal["replay"] = "replay"
    speed: float = Field(default=1.0, gt=0)
    start_s: float | None = Field(default=None, ge=0)
    end_s: float | None = Field(default=None, gt=0)
    jitter_s: float = Field(default=0.0, ge=0)
    max_concurrency: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _window(self) -> ReplayLoad:
        if self.start_s is not None and self.end_s is not None and self.end_s <= self.start_s:
            raise ValueError(f"--replay-end {self.end_s:g} must be after --replay-start {self.start_s:g}")
        return self


LoadPoint = UsersLoad | RateLoad | ReplayLoad


class ReplaySweep(_Model):
    """``load: {replay: ...}`` of an experiment file: the trace (``dataset: {name: trace}``)
    replayed once per speed, over the same window of trace time (ReplayLoad's fields)."""

    speeds: list[float] = Field(default_factory=lambda: [1.0], min_length=1)
    start_s: float | None = Field(default=None, ge=0)
    end_s: float | None = Field(default=None, gt=0)
    jitter_s: float = Field(default=0.0, ge=0)

    @field_validator("speeds")
    @classmethod
    def _positive(cls, v: list[float]) -> list[float]:
        if any(s <= 0 for s in v):
            raise ValueError(f"replay speeds must be > 0, got {v}")
        return v


class LoadSweep(_Model):
    """The load points of a run, one per value, everything else equal: ``--users 10,50`` (or
    ``--rate 1,2,4``) on the command line and ``load:`` in an experiment file (where ``replay:``
    replays a trace at one or more speeds). Defaults are the load types' own."""

    users: list[int] | None = None
    rates: list[float] | None = None
    replay: ReplaySweep | None = None
    ramp_up_s: float = Field(default=UsersLoad.model_fields["ramp_up_s"].default, ge=0)
    think_time_s: float = Field(default=UsersLoad.model_fields["think_time_s"].default, ge=0)
    arrival: Arrival = RateLoad.model_fields["arrival"].default
    burstiness: float = Field(default=RateLoad.model_fields["burstiness"].default, gt=0)
    max_concurrency: int | None = Field(default=None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _gamma_when_bursty(cls, data: object) -> object:
        """A burstiness other than 1 means gamma arrivals (vllm bench serve's meaning); with
        another arrival process named it would be ignored: an error."""
        if isinstance(data, dict) and data.get("burstiness") not in (None, 1, 1.0):
            arrival = data.get("arrival")
            if arrival is None:
                return {**data, "arrival": "gamma"}
            if arrival != "gamma":
                raise ValueError(
                    f"burstiness {data['burstiness']} shapes gamma arrivals; with arrival {arrival} it would be "
                    f"ignored: drop one, or use --arrival gamma (in a file, arrival: gamma)"
                )
        return data

    @model_validator(mode="after")
    def _one(self) -> LoadSweep:
        if self.users and self.rates:
            raise ValueError("give users (closed loop) or rates (open loop), not both")
        if sum(bool(x) for x in (self.users, self.rates, self.replay)) != 1:
            raise ValueError("give users (closed loop), rates (open loop) or replay (a trace): exactly one")
        return self

    def points(self) -> list[LoadPoint]:
        if self.users:
            return [UsersLoad(users=u, ramp_up_s=self.ramp_up_s, think_time_s=self.think_time_s) for u in self.users]
        if self.replay is not None:
            r = self.replay
            return [
                ReplayLoad(
                    speed=s, start_s=r.start_s, end_s=r.end_s, jitter_s=r.jitter_s, max_concurrency=self.max_concurrency
                )
                for s in r.speeds
            ]
        return [
            RateLoad(
                rate_per_s=r, arrival=self.arrival, burstiness=self.burstiness, max_concurrency=self.max_concurrency
            )
            for r in self.rates or []
        ]


class StopConfig(_Model):
    duration_s: float | None = Field(default=None, gt=0)
    max_requests: int | None = Field(default=None, gt=0)
    warmup_s: float = Field(default=0.0, ge=0)  # after ramp-up; excluded from metrics
    drain_timeout_s: float = Field(default=60.0, ge=0)  # wait for in-flight requests at the end
    # The loads' own schedule ends each point (trace replay: its last row), so neither a duration
    # nor a request count is needed; RunConfig allows it only when every load is a replay.
    schedule_ends: bool = False

    @model_validator(mode="after")
    def _some_stop(self) -> StopConfig:
        if self.duration_s is None and self.max_requests is None and not self.schedule_ends:
            raise ValueError("set --duration and/or --max-requests so the load stops by itself")
        return self


class DatasetConfig(_Model):
    name: DatasetName = "synthetic"
    path: Path | None = None
    input_tokens: int = Field(default=128, gt=0)  # synthetic prompt length
    # None: the reply's length (sharegpt, dolly), SYNTHETIC_OUTPUT_TOKENS, or the jsonl line's
    output_tokens: int | None = Field(default=None, gt=0)
    num_prompts: int = Field(default=1000, gt=0)  # prompts loaded, then cycled
    min_prompt_tokens: int | None = None  # filter (dolly, sharegpt)
    max_prompt_tokens: int | None = None
    system_prompt: str | None = None
    unique_prefix: bool = False
    tokenizer: str | None = None  # HF tokenizer.json path or folder; default: the target's /tokenize
    # --dataset trace: the file's format (None: detected), tokens per hash id (None: the format's),
    # BurstGPT's Model and Log Type filters
    trace_format: TraceFormatName | None = None
    block_size: int | None = Field(default=None, gt=0)
    trace_model: str | None = None
    trace_log_type: str | None = None
    # --dataset synthetic in shared-prefix groups (datasets.shared_prefix): G prefixes of P tokens
    # before each request's own input_tokens; the group drawn uniformly or by a Zipf exponent
    prefix_groups: int | None = Field(default=None, gt=0)
    prefix_tokens: int | None = Field(default=None, gt=0)
    prefix_skew: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _range(self) -> DatasetConfig:
        lo, hi = self.min_prompt_tokens, self.max_prompt_tokens
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"--min-prompt-tokens {lo} is above --max-prompt-tokens {hi}")
        return self

    @model_validator(mode="after")
    def _trace(self) -> DatasetConfig:
        if self.name == "trace" and self.path is None:
            raise ValueError("--dataset trace needs --dataset-path FILE (a Mooncake, Azure, BurstGPT or Bailian trace)")
        trace_only = [f for f in ("trace_format", "block_size", "trace_model", "trace_log_type") if getattr(self, f)]
        if self.name != "trace" and trace_only:
            flags = ", ".join("--" + f.replace("_", "-") for f in trace_only)
            raise ValueError(f"{flags} describe a trace: use them with --dataset trace")
        if self.name == "trace" and self.unique_prefix:
            # A prefix no other request has would defeat the trace's shared prefixes, and the
            # expected reuse results state (from its hash ids) would no longer be the workload's.
            raise ValueError("--unique-prefix would break the trace's shared prefixes: drop it with --dataset trace")
        return self

    @model_validator(mode="after")
    def _shared_prefix(self) -> DatasetConfig:
        groups, tokens = self.prefix_groups is not None, self.prefix_tokens is not None
        if groups != tokens:
            raise ValueError("--prefix-groups and --prefix-tokens go together: give both")
        if self.prefix_skew is not None and not groups:
            raise ValueError("--prefix-skew needs --prefix-groups G --prefix-tokens P")
        if groups and self.name != "synthetic":
            raise ValueError(f"--prefix-groups builds synthetic prompts: drop it with --dataset {self.name}")
        if groups and self.unique_prefix:
            # A prefix no other request has, in front of the user text, would defeat the groups'
            # shared prefixes and the expected reuse results state.
            raise ValueError("--unique-prefix would break the shared prefixes: drop it with --prefix-groups")
        return self


class SessionConfig(_Model):
    """Multi-turn sessions (``--multi-turn``): each conversation's turns are sent one after another,
    turn k carrying the whole history (earlier user turns and the server's own replies). Closed
    loop: a user runs one conversation at a time, ``think_time_s`` between its conversations;
    open loop: ``--rate`` is the rate at which new conversations start. ``turn_think_time_s``:
    the pause between a reply and the next turn (fixed, or exponential with that mean)."""

    turns: int | None = Field(default=None, gt=0)  # synthetic conversations: turns each
    turn_think_time_s: float = Field(default=0.0, ge=0)
    turn_think_dist: Literal["fixed", "exponential"] = "fixed"
    # a turn whose prompt (history + new user text) would exceed this ends its conversation
    max_history_tokens: int | None = Field(default=None, gt=0)
    header: str = "X-Session-ID"  # carries the conversation's id on each of its requests

    @field_validator("header")
    @classmethod
    def _header(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+", v):
            raise ValueError(f"--session-header {v!r} is not an HTTP header name (e.g. X-Session-ID)")
        return v


class SLOConfig(_Model):
    ttft_s: float | None = Field(default=None, gt=0)
    tpot_s: float | None = Field(default=None, gt=0)
    e2e_s: float | None = Field(default=None, gt=0)

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.ttft_s, self.tpot_s, self.e2e_s))


class DeadlinesConfig(_Model):  # --deadlines: the fluidity index's (metrics/fluidity.py), Etalon's defaults
    ttft_s: float = Field(default=0.1, gt=0)  # the first token, from the request's send
    tbt_s: float = Field(default=0.05, gt=0)  # each later token, after the one before


class RunConfig(_Model):
    target: TargetConfig = TargetConfig()
    loads: list[LoadPoint] = Field(min_length=1)
    stop: StopConfig
    dataset: DatasetConfig = DatasetConfig()
    backend: BackendConfig | None = None
    slo: SLOConfig = SLOConfig()
    deadlines: DeadlinesConfig = DeadlinesConfig()  # --deadlines: the fluidity index's
    seed: int = 0
    window_s: float = Field(default=5.0, gt=0)  # time-series window
    out_dir: Path | None = None  # default runs/<timestamp>
    keep_text: bool = False  # store generated text in records.jsonl
    live: bool = True
    sessions: SessionConfig | None = None  # --multi-turn: conversations instead of single prompts
    prefix_cache: PrefixCacheMode = "keep"  # before every point: reset the server's cache, or keep it
    cost: CostConfig | None = None  # --cost-per-hour, --gpus: each point's cost per million tokens
    workers: WorkersConfig = WorkersConfig()  # --workers, --ray, --ray-address

    @model_validator(mode="after")
    def _replay_needs_trace(self) -> RunConfig:
        """A trace is a schedule: it is replayed, and only a trace is; the schedule may end a point."""
        replays = [isinstance(load, ReplayLoad) for load in self.loads]
        if self.dataset.name == "trace" and not all(replays):
            raise ValueError("--dataset trace replays the trace's own schedule: drop --users/--rate")
        if any(replays) and self.dataset.name != "trace":
            raise ValueError("a replay load needs a trace: --dataset trace --dataset-path FILE")
        if self.stop.schedule_ends and not all(replays):
            raise ValueError("only a trace replay ends by its schedule: set --duration and/or --max-requests")
        return self

    @model_validator(mode="after")
    def _sessions(self) -> RunConfig:
        if self.sessions is None:
            return self
        if any(isinstance(load, ReplayLoad) for load in self.loads):
            raise ValueError("--multi-turn runs conversations under --users or --rate: not with a trace replay")
        if self.dataset.name not in ("synthetic", "sharegpt", "jsonl"):
            raise ValueError(
                f"--multi-turn reads conversations from synthetic, sharegpt or jsonl, not {self.dataset.name}"
            )
        if self.dataset.unique_prefix:
            raise ValueError(
                "--unique-prefix would break each conversation's shared history: drop it with --multi-turn"
            )
        if self.sessions.turns is not None and self.dataset.name != "synthetic":
            raise ValueError("--turns sets synthetic conversations' length: the dataset's conversations have theirs")
        return self

    def redacted(self) -> dict:
        """The settings with every credential masked (redact.py): engine environment values and
        arguments named like credentials, header values, extra_body keys like ``api_key``. The
        API key itself is never in the settings (read from the env var ``api_key_env`` names)."""
        from .redact import MASK, mask

        data = self.model_dump(mode="json")
        data["target"]["headers"] = {k: MASK for k in self.target.headers}
        return mask(data)
