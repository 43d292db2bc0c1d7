"""One typed tree of settings and the one home of every default, and of every flag.

A field the command line sets says so once, in its annotation: ``Annotated[T, Flag("--name",
"help")]`` (the option's name, help and help panel; its type, default and choices come from the
field). ``cli/flags.py`` builds `run`'s and `capacity`'s options from these and names the flag
in a validation error; a field set from another field's flag (a sweep's ``--users`` becomes each
``UsersLoad.users``) says ``SetBy("--users")``. Everything downstream receives typed config.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import Field, field_validator, model_validator

from tokenbench.common.frozen import FrozenModel as _Model
from tokenbench.common.redact import MASK, mask
from tokenbench.common.replica_states import ScalerKind
from tokenbench.common.units import fraction, parse_duration_s, seconds
from tokenbench.config.constraints import (
    TOOL_CHOICES,
    ConstraintKind,
    Dialect,
    check_schema,
    load_tools,
    parse_constraint,
    tool_names,
)
from tokenbench.config.cost import CostConfig
from tokenbench.config.flags import (
    DATASET,
    ENGINE,
    IMAGES,
    LOAD,
    OUTPUT,
    PREFIXES,
    PROGRAMS,
    REQUESTS,
    SCALE,
    SESSIONS,
    STOPPING,
    TARGET,
    TELEMETRY,
    TRACE,
    Flag,
    SetBy,
)
from tokenbench.config.images import parse_image_count, parse_image_sizes
from tokenbench.config.mix import DEFAULT_TENANT_HEADER, WorkloadMix, check_header, check_weights
from tokenbench.config.slo import SLOConfig
from tokenbench.config.stages import Stage, level_at, parse_shape, parse_stages, stage_starts_s, trace_shape_keys

# The pooling APIs: they send inputs and get one non-streamed answer (clients/embeddings.py).
PoolingApi = Literal["embeddings", "rerank", "score"]
POOLING_APIS: tuple[PoolingApi, ...] = get_args(PoolingApi)
# The conversation APIs: each sends a list of turns (a system prompt, images, tools, tool results)
# and streams typed content: OpenAI's chat completions, Anthropic's Messages, OpenAI's Responses.
ConversationApi = Literal["chat", "messages", "responses"]
CONVERSATION_APIS: tuple[ConversationApi, ...] = get_args(ConversationApi)
# The values of --api (clients.WIRES has one Wire each): the streamed APIs, then the pooling ones.
Api = Literal[ConversationApi, "completions", "tgi", "triton", "ollama", PoolingApi]
# Other tools' names for these APIs, read as ours: vLLM bench's --backend and AIPerf's
# --endpoint-type (``openai-chat``, ``chat``, ``responses``), inference-perf's ``api.type``
# (``anthropic_messages``) and the agent frameworks' provider names (``anthropic-messages``,
# ``openai-responses``).
API_SPELLINGS: dict[str, Api] = {
    "openai-chat": "chat",
    "openai-completions": "completions",
    "anthropic": "messages",
    "anthropic-messages": "messages",
    "anthropic_messages": "messages",
    "openai-responses": "responses",
    "openai_responses": "responses",
}
Arrival = Literal["constant", "poisson", "gamma"]
# --prefix-cache: "reset" empties the server's prefix cache before every load point through the
# engine's own control (backends/cache_control.py); "keep" leaves it as the last point left it.
PrefixCacheMode = Literal["reset", "keep"]
DatasetName = Literal["synthetic", "sharegpt", "dolly", "jsonl", "trace", "programs"]
# --sharegpt-sampling: whose way of drawing ShareGPT prompts (datasets/sharegpt.py): tokenbench's
# own (human-first conversations), or vllm bench serve's or SGLang bench_serving's (the first two
# turns whoever speaks them, their shuffle and their length filters).
ShareGPTSampling = Literal["tokenbench", "vllm", "sglang"]
# The trace formats datasets.traces reads (--trace-format).
TraceFormat = Literal["mooncake", "azure", "burstgpt", "bailian"]
# --spec-method: speculative decoding in common words, each engine's own name in
# backends/speculation.py: n-gram lookup in the context, a draft model, an EAGLE or EAGLE-3 head, the
# model's own multi-token-prediction layers.
SpecMethod = Literal["ngram", "draft", "eagle", "eagle3", "mtp"]
SPEC_METHODS: tuple[SpecMethod, ...] = get_args(SpecMethod)
DRAFT_MODEL_METHODS: tuple[SpecMethod, ...] = ("draft", "eagle", "eagle3")  # need --spec-draft-model

SYNTHETIC_OUTPUT_TOKENS = 128  # when --output-tokens is not given for synthetic prompts


def multi_turn_sampling_error(sampling: ShareGPTSampling) -> str:
    """Why --multi-turn refuses a peer's ShareGPT sampling (the settings and datasets.sessions say it)."""
    # vllm bench serve and SGLang's bench_serving send each conversation's first two turns as one
    # prompt; --multi-turn sends every human turn of a conversation with its history: no draw of theirs.
    return (
        f"--sharegpt-sampling {sampling} draws single prompts as that tool does; --multi-turn sends every "
        "human turn of each conversation: drop one of them"
    )


# structured output: --response-format as the settings hold it (clients/structured.py sends and checks it)
class OutputConstraint(_Model):
    """What a reply must be: ``json_object``, ``json_schema`` (the schema itself, read from its file),
    ``choice``, ``regex`` or ``grammar`` (its text). Written as ``--response-format``'s text
    (``json_schema:FILE``) on the command line and in an experiment file, or as these fields."""

    kind: ConstraintKind
    json_schema: dict[str, Any] | None = None
    choices: list[str] | None = None
    pattern: str | None = None
    grammar: str | None = None
    source: str | None = None  # the file the schema or grammar was read from

    @model_validator(mode="before")
    @classmethod
    def _text(cls, value: object) -> object:
        if isinstance(value, str):
            return parse_constraint(value)
        return value

    @model_validator(mode="after")
    def _complete(self) -> OutputConstraint:
        need = {"json_schema": self.json_schema, "choice": self.choices, "regex": self.pattern, "grammar": self.grammar}
        if self.kind in need and not need[self.kind]:
            raise ValueError(f"--response-format {self.kind} needs its argument (json_schema:FILE, choice:A,B, ...)")
        if self.json_schema is not None:
            check_schema(self.json_schema)
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"--response-format regex:{self.pattern}: {exc}") from None
        return self


class TargetConfig(_Model):
    """The server under test. ``url`` None means: start the embedded default backend."""

    url: Annotated[
        str | None,
        Flag(
            "--url",
            "Server base URL, e.g. http://127.0.0.1:8000. Omit to start the embedded llama.cpp backend.",
            TARGET,
        ),
    ] = None
    # model name sent in requests; for the embedded backend, a .gguf path
    model: Annotated[
        str | None,
        Flag(
            "--model",
            "Model name to request (default: the first of /v1/models). Without --url: a .gguf path for the embedded server.",
            TARGET,
        ),
    ] = None
    api: Annotated[
        Api | None,
        Flag(
            "--api",
            "chat, completions, responses (OpenAI), messages (Anthropic), or native: tgi, triton, ollama; "
            "embeddings, rerank, score (pooling: non-streamed, --batch-size inputs a request). Default: the "
            "backend's first API, else chat.",
            TARGET,
            aliases=("--endpoint-type",),  # AIPerf's name for it
        ),
    ] = None  # None: the backend profile's first API, else chat
    # read at send time; the key itself is never stored
    api_key_env: Annotated[
        str, Flag("--api-key-env", "Environment variable holding the API key.", TARGET, default=True)
    ] = "OPENAI_API_KEY"
    # whole request, first byte to end of stream
    request_timeout_s: Annotated[
        float,
        Flag(
            "--request-timeout",
            "Seconds a whole request may take, from its send to the end of its stream; one that takes longer is "
            "recorded with outcome timeout.",
            TARGET,
            default=True,
            aliases=("--timeout",),
        ),
    ] = 600.0
    # longest silence between two reads of one stream
    read_timeout_s: Annotated[
        float, Flag("--read-timeout", "Seconds of silence allowed within a stream.", TARGET, default=True)
    ] = 120.0
    connect_timeout_s: Annotated[
        float, Flag("--connect-timeout", "Seconds to open a connection to the server.", TARGET, default=True)
    ] = Field(default=10.0, gt=0)
    ignore_eos: Annotated[
        bool, Flag("--ignore-eos", "Ask the server to ignore EOS (fixed output lengths).", REQUESTS)
    ] = False
    include_usage: bool = True
    # usage on every chunk; None: as the backend profile says
    continuous_usage: Annotated[
        bool | None,
        Flag(
            "--continuous-usage",
            "Ask for usage on every chunk (per-token ITL).",
            REQUESTS,
            default="where the --backend gives it",
        ),
    ] = None
    temperature: float | None = 0.0
    extra_body: Annotated[
        dict[str, Any],
        Flag(
            "--extra-body",
            "JSON object merged into every request body (sampling parameters, e.g. '{\"temperature\": 0}').",
            REQUESTS,
        ),
    ] = Field(default_factory=dict)
    # sent with every request (--header "Name: value"); values are masked in every file written
    headers: Annotated[
        dict[str, str],
        Flag(
            "--header",
            "'Name: value' sent with every request (repeat); values are masked in every file tokenbench writes.",
            TARGET,
            repeat=True,
        ),
    ] = Field(default_factory=dict)

    # the response header a router or proxy sets to the replica that served (nginx's $upstream_addr,
    # HAProxy's %s, the mock's --served-by): each record's replica
    replica_header: Annotated[
        str,
        Flag(
            "--replica-header",
            "Fleet: the response header naming the replica that served a request (a router's or proxy's).",
            TELEMETRY,
            default=True,
        ),
    ] = "x-served-by"

    # embeddings
    batch_size: Annotated[
        int | None,
        Flag(
            "--batch-size",
            "Inputs per request of --api embeddings (strings), rerank and score (documents scored against one "
            "query). Default 1.",
            REQUESTS,
        ),
    ] = Field(default=None, gt=0)

    @field_validator("api", mode="before")
    @classmethod
    def _api_spelling(cls, value: object) -> object:
        """Other tools' names for the same APIs (API_SPELLINGS)."""
        return API_SPELLINGS.get(value, value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _batch_size(self) -> TargetConfig:
        if self.batch_size is not None and self.api not in POOLING_APIS:
            raise ValueError(
                f"--batch-size {self.batch_size} sets the inputs of a pooling request: add --api embeddings, "
                f"rerank or score (or drop --batch-size with --api {self.api or 'chat'})"
            )
        return self

    @property
    def pooling(self) -> bool:
        """The API sends inputs and gets one answer (embeddings, rerank, score): no stream."""
        return self.api in POOLING_APIS

    # structured output: (clients/structured.py)
    response_format: Annotated[
        OutputConstraint | None,
        Flag(
            "--response-format",
            "Structured output: json_object, json_schema:FILE, choice:A,B,C, regex:PATTERN or grammar:FILE, sent in "
            "the engine's own fields (--backend); each reply is checked (valid_fraction).",
            REQUESTS,
        ),
    ] = None
    tools: Annotated[
        tuple[dict[str, Any], ...] | None,
        Flag("--tools", "Tool calls (chat): a JSON file of OpenAI tool definitions sent with every request.", REQUESTS),
    ] = None
    tool_choice: Annotated[
        str | None,
        Flag("--tool-choice", "With --tools: auto, required, none, or a tool's NAME (forces that tool).", REQUESTS),
    ] = None
    # how the engine takes --response-format (Profile.structured; the runner sets it): None = openai
    structured_dialect: Dialect | None = None

    @field_validator("tools", mode="before")
    @classmethod
    def _tools(cls, v: object) -> object:
        return None if v is None else load_tools(v)

    @model_validator(mode="after")
    def _tool_choice(self) -> TargetConfig:
        if self.tool_choice is None:
            return self
        if not self.tools:
            raise ValueError("--tool-choice needs --tools FILE (the tool definitions)")
        names = tool_names(self.tools)
        if self.tool_choice not in TOOL_CHOICES and self.tool_choice not in names:
            raise ValueError(
                f"--tool-choice {self.tool_choice}: write auto, required, none or one of the tools: {', '.join(names)}"
            )
        return self

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^https?://[^/]+", v):
            raise ValueError(f"--url must look like http://HOST:PORT, got {v!r}")
        if v is not None and re.search(r"/v1/?$", v):
            # the API paths (/v1/models, /v1/chat/completions) are tokenbench's to add
            raise ValueError(f"drop the /v1 from {v}: --url is the server's base URL, e.g. {v.rstrip('/')[:-3]}")
        return v.rstrip("/") if v else v

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) or None


class EngineKnobs(_Model):
    """The settings every backend profile maps to its own native flags (backends/*.py). None means
    "the engine's default"; a knob an engine has no flag for is an error naming --engine-arg."""

    FLAGS: ClassVar[str] = "engine knobs"  # named in an error about several knobs at once
    _fractions = field_validator("kv_memory", mode="before")(fraction)

    max_num_seqs: Annotated[
        int | None, Flag("--max-num-seqs", "Engine: max concurrent sequences (batch size).", ENGINE)
    ] = Field(default=None, gt=0)
    kv_memory: Annotated[
        float | None,
        Flag("--kv-memory", "Engine: fraction (0..1] of accelerator memory for weights + KV cache.", ENGINE),
    ] = Field(default=None, gt=0, le=1)
    max_model_len: Annotated[
        int | None, Flag("--max-model-len", "Engine: max model length (prompt + output tokens).", ENGINE)
    ] = Field(default=None, gt=0)
    prefix_caching: Annotated[
        bool | None, Flag("--prefix-caching", "Engine: prefix caching on/off (default: the engine's).", ENGINE)
    ] = None
    quantization: Annotated[
        str | None, Flag("--quantization", "Engine: quantization method, in the engine's own words.", ENGINE)
    ] = None
    tensor_parallel: Annotated[int | None, Flag("--tensor-parallel", "Engine: tensor-parallel size.", ENGINE)] = Field(
        default=None, gt=0
    )
    # passed through verbatim after the mapped flags
    engine_args: Annotated[
        tuple[str, ...],
        Flag(
            "--engine-arg",
            "Engine: a native flag passed through verbatim (repeat; use --engine-arg=--flag).",
            ENGINE,
            repeat=True,
        ),
    ] = ()
    engine_env: Annotated[
        dict[str, str],
        Flag("--engine-env", "Engine: KEY=VALUE set in the engine's environment (repeat).", ENGINE, repeat=True),
    ] = Field(default_factory=dict)
    # pooling APIs: serve the model as an embedding model (vLLM --runner pooling --convert
    # embed, llama.cpp --embedding --pooling mean); set by --api embeddings|rerank|score on a launch
    embedding: Annotated[
        bool | None,
        Flag(
            "--embedding",
            "Engine: serve the model as an embedding model (vLLM --runner pooling --convert embed, llama.cpp "
            "--embedding --pooling mean). Default: on with --api embeddings, rerank or score.",
            ENGINE,
        ),
    ] = None
    # routing: LoRA adapters the engine serves (backends/lora.py maps them per engine)
    lora_modules: Annotated[
        tuple[str, ...] | None,
        Flag(
            "--lora-modules",
            "Engine: a LoRA adapter to serve, NAME=PATH (repeat; implies --enable-lora); requests reach it "
            "with --lora-mix NAME=WEIGHT.",
            ENGINE,
            repeat=True,
        ),
    ] = None  # None, not (): a profile that dumps its set knobs (Ray, Triton) sees none
    enable_lora: Annotated[bool | None, Flag("--enable-lora", "Engine: LoRA serving on (vLLM, SGLang).", ENGINE)] = None
    max_loras: Annotated[
        int | None, Flag("--max-loras", "Engine: LoRA adapters in one batch (vLLM, SGLang).", ENGINE)
    ] = Field(default=None, gt=0)
    max_lora_rank: Annotated[
        int | None, Flag("--max-lora-rank", "Engine: the largest LoRA rank served (vLLM, SGLang).", ENGINE)
    ] = Field(default=None, gt=0)

    # speculative decoding and the engine's own per-request figures (backends/speculation.py maps
    # them per engine)
    spec_method: Annotated[
        SpecMethod | None,
        Flag(
            "--spec-method",
            "Engine: speculative decoding: ngram (prompt lookup), draft (a draft model), eagle, eagle3 (a draft "
            "head) or mtp (the model's own multi-token prediction), in each engine's own words.",
            ENGINE,
        ),
    ] = None
    spec_tokens: Annotated[
        int | None,
        Flag("--spec-tokens", "Engine: with --spec-method: tokens proposed per step (the draft length k).", ENGINE),
    ] = Field(default=None, gt=0)
    spec_draft_model: Annotated[
        str | None,
        Flag(
            "--spec-draft-model",
            "Engine: the draft model or head (path or hub id): needed by --spec-method draft, eagle and eagle3.",
            ENGINE,
        ),
    ] = None
    spec_ngram_min: Annotated[
        int | None,
        Flag("--spec-ngram-min", "Engine: --spec-method ngram: the shortest n-gram matched (vLLM).", ENGINE),
    ] = Field(default=None, gt=0)
    spec_ngram_max: Annotated[
        int | None,
        Flag("--spec-ngram-max", "Engine: --spec-method ngram: the longest n-gram matched.", ENGINE),
    ] = Field(default=None, gt=0)
    per_request_metrics: Annotated[
        bool | None,
        Flag(
            "--per-request-metrics",
            "Engine: the engine puts its own timing and speculation figures in each response (vLLM; llama.cpp "
            "always does); kept per request in the records.",
            ENGINE,
        ),
    ] = None

    @model_validator(mode="after")
    def _speculation(self) -> EngineKnobs:
        method = self.spec_method
        given = [
            flag
            for flag, value in (
                ("--spec-tokens", self.spec_tokens),
                ("--spec-draft-model", self.spec_draft_model),
                ("--spec-ngram-min", self.spec_ngram_min),
                ("--spec-ngram-max", self.spec_ngram_max),
            )
            if value is not None
        ]
        if method is None:
            if given:
                verb = "needs" if len(given) == 1 else "need"
                raise ValueError(f"{', '.join(given)} {verb} --spec-method ({', '.join(SPEC_METHODS)})")
            return self
        if method in DRAFT_MODEL_METHODS and self.spec_draft_model is None:
            raise ValueError(f"--spec-method {method} drafts with another model: add --spec-draft-model PATH")
        if method == "ngram" and self.spec_draft_model is not None:
            raise ValueError("--spec-method ngram drafts from the context, not a model: drop --spec-draft-model")
        window = [f for f in ("--spec-ngram-min", "--spec-ngram-max") if f in given]
        if method != "ngram" and window:
            verb, them = ("sets", "it") if len(window) == 1 else ("set", "them")
            raise ValueError(f"{' and '.join(window)} {verb} --spec-method ngram's lookup, not {method}'s: drop {them}")
        low, high = self.spec_ngram_min, self.spec_ngram_max
        if low is not None and high is not None and low > high:
            raise ValueError(f"--spec-ngram-min {low} is above --spec-ngram-max {high}")
        return self

    @field_validator("lora_modules", mode="before")
    @classmethod
    def _lora_modules(cls, v: object) -> object:
        """NAME=PATH each (a comma-separated list in one value too)."""
        if isinstance(v, str):
            v = [v]
        if isinstance(v, list | tuple):
            items = [p.strip() for item in v for p in str(item).split(",") if p.strip()]
            for item in items:
                name, eq, path = item.partition("=")
                if not eq or not name.strip() or not path.strip():
                    raise ValueError(f"--lora-modules {item!r}: write NAME=PATH (an adapter's name and its directory)")
            return tuple(items)
        return v


class BackendConfig(_Model):
    """A server tokenbench launches (``--backend NAME --model M``) or attaches to (``--url`` with
    ``--backend NAME``: only its metric names and quirks are used)."""

    # a profile in backends.PROFILES; None: unknown engine (raw samples only)
    name: Annotated[
        str | None,
        Flag(
            "--backend",
            "Backend profile (tokenbench backends). With --model and no --url: launch it, benchmark, stop it. "
            "With --url: use its metric names.",
            ENGINE,
        ),
    ] = None
    model: Annotated[str | None, SetBy("--model")] = None  # what the engine loads: hub id or local path
    # name sent in requests; defaults per engine
    served_model_name: Annotated[
        str | None, Flag("--served-model-name", "Engine: the model name requests use (default from --model).", ENGINE)
    ] = None
    knobs: EngineKnobs = Field(default_factory=EngineKnobs)
    # overrides the engine's command (e.g. a venv's bin/vllm)
    executable: Annotated[
        str | None,
        Flag(
            "--engine-bin",
            "Engine: the executable to run instead of the profile's command (e.g. a venv's bin/vllm).",
            ENGINE,
        ),
    ] = None
    # None: a free port on 127.0.0.1
    port: Annotated[
        int | None,
        Flag(
            "--engine-port",
            "Engine: port on 127.0.0.1 for the launched server (default: a free one). A port that already answers "
            "is an error naming its holder.",
            ENGINE,
        ),
    ] = Field(default=None, gt=0, lt=65536)
    # includes downloads/conversion/compilation
    ready_timeout_s: Annotated[
        float,
        Flag(
            "--ready-timeout",
            "Engine: seconds to wait for it to be ready (includes conversion/compilation).",
            ENGINE,
            default=True,
        ),
    ] = Field(default=900.0, gt=0)
    # /metrics scrape period
    metrics_interval_s: Annotated[
        float, Flag("--metrics-interval", "Seconds between /metrics scrapes.", TELEMETRY, default=True)
    ] = Field(default=1.0, gt=0)
    # default: the target URL + the profile's metrics path
    metrics_url: Annotated[
        str | None,
        Flag("--metrics-url", "Scrape this URL instead of the server URL + the profile's metrics path.", TELEMETRY),
    ] = None
    # Autoscaling: a scaler's API polled for its replicas beside each scrape (telemetry/scaler.py);
    # a launched ray relay with autoscaling gives its own (backends/ray.py)
    scaler_url: Annotated[
        str | None,
        Flag(
            "--scaler-url",
            "Autoscaling: poll this scaler API for its replicas every --metrics-interval (Ray Serve's "
            "/api/serve/applications/, a Kubernetes PodList URL through kubectl proxy, the mock's /mock/replicas): "
            "each point's replica timeline, scale-up lags and replica-seconds.",
            TELEMETRY,
        ),
    ] = None
    scaler_kind: Annotated[
        ScalerKind,
        Flag(
            "--scaler-kind", "Autoscaling: what --scaler-url answers (ray-serve, kubernetes).", TELEMETRY, default=True
        ),
    ] = "ray-serve"
    # A serving layer (triton, ray) in front of an engine: the engine profile it serves from
    # (llamacpp, vllm), launched first on its own port.
    upstream: Annotated[
        str | None,
        Flag(
            "--upstream",
            "Serving layer (--backend triton/ray): the engine it serves from, launched first on its own port "
            "with --model and the engine options (llamacpp = the embedded llama.cpp server, vllm, ...). "
            "Default for triton: llamacpp; 'none': the layer's own engine (Triton + TensorRT-LLM).",
            ENGINE,
        ),
    ] = None
    # A serving layer's own settings (--layer-arg KEY=VALUE; its profile says which), apart from
    # the engine's knobs (which go to the upstream engine).
    layer_args: Annotated[
        tuple[str, ...],
        Flag(
            "--layer-arg",
            "Serving layer (--backend ray/triton): one of the layer's own settings, KEY=VALUE (repeat), apart "
            "from its engine's, e.g. ray: stream_batching_interval_ms=MS, max_ongoing_requests=N, "
            "autoscaling=min:1,max:2,... (docs/backends.md).",
            ENGINE,
            repeat=True,
        ),
    ] = ()
    # A fleet: a router profile (Profile.router) launched in front of this many copies of its
    # --upstream engine, each on its own port; 1 for anything else. capacity and model use it too.
    replicas: Annotated[
        int,
        Flag(
            "--replicas",
            "Fleet: replicas of --upstream launched behind a router (--backend vllm-router, sglang-router). "
            "With --predict (capacity, model predict): the replicas of the model's round-robin fleet.",
            ENGINE,
            default=True,
        ),
    ] = Field(default=1, ge=1)
    # An attached fleet (--url is its router): each replica's base URL, scraped side by side
    replica_urls: Annotated[
        tuple[str, ...],
        Flag(
            "--replica-url",
            "Fleet behind --url (a router): one replica's base URL (repeat); each one's /metrics is scraped "
            "beside the router's and named by its host:port.",
            TELEMETRY,
            repeat=True,
        ),
    ] = ()

    @field_validator("replica_urls")
    @classmethod
    def _replica_urls(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for url in v:
            if not re.match(r"^https?://[^/]+$", url.rstrip("/")):
                raise ValueError(f"--replica-url must look like http://HOST:PORT, got {url!r}")
        return tuple(url.rstrip("/") for url in v)


class UsersLoad(_Model):
    """Closed loop: ``users`` users spawned evenly over ``ramp_up_s``; each sends its next request
    ``think_time_s`` after the previous one ends."""

    kind: Literal["users"] = "users"
    users: Annotated[int, SetBy("--users")] = Field(gt=0)
    ramp_up_s: Annotated[float, SetBy("--ramp-up")] = Field(default=0.0, ge=0)
    think_time_s: Annotated[float, SetBy("--think-time")] = Field(default=0.0, ge=0)


class RateLoad(_Model):
    """Open loop: arrivals at ``rate_per_s`` regardless of responses."""

    kind: Literal["rate"] = "rate"
    # finite: results.json is JSON (--rate inf is run as users all at once: cli/run_flags.py)
    rate_per_s: Annotated[float, SetBy("--rate")] = Field(gt=0, allow_inf_nan=False)
    arrival: Annotated[Arrival, SetBy("--arrival")] = "poisson"
    burstiness: Annotated[float, SetBy("--burstiness")] = Field(default=1.0, gt=0)  # gamma shape; 1.0 = poisson
    max_concurrency: Annotated[int | None, SetBy("--max-concurrency")] = Field(default=None, gt=0)


class ReplayLoad(_Model):
    """Open loop from a trace (``--dataset trace``): each row is sent at its trace time divided by
    ``speed`` (2 = twice as fast), from the first row in ``[start_s, end_s)`` of trace time,
    whatever the responses; ``jitter_s`` (trace seconds, opt-in) spreads a gridded trace's bursts
    (load.replay_offsets). ``max_concurrency`` caps it as for a rate: the wait is queue delay."""

    kind: Literal["replay"] = "replay"
    speed: Annotated[
        float, Flag("--replay-speed", "Trace: divide trace times by this (2 = twice as fast).", TRACE, default=True)
    ] = Field(default=1.0, gt=0)
    start_s: Annotated[float | None, Flag("--replay-start", "Trace: replay rows from this trace time (s).", TRACE)] = (
        Field(default=None, ge=0)
    )
    end_s: Annotated[float | None, Flag("--replay-end", "Trace: replay rows before this trace time (s).", TRACE)] = (
        Field(default=None, gt=0)
    )
    jitter_s: Annotated[
        float,
        Flag(
            "--replay-jitter",
            "Trace: move each row later by a seeded uniform draw in [0, S) trace seconds (spreads gridded bursts).",
            TRACE,
        ),
    ] = Field(default=0.0, ge=0)
    max_concurrency: Annotated[int | None, SetBy("--max-concurrency")] = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _window(self) -> ReplayLoad:
        if self.start_s is not None and self.end_s is not None and self.end_s <= self.start_s:
            raise ValueError(f"--replay-end {self.end_s:g} must be after --replay-start {self.start_s:g}")
        return self


class StagedLoad(_Model):
    """One point whose level changes while it runs (config/stages.py): open loop when its stages
    set ``rate_per_s`` (arrivals over the piecewise-linear rate curve, ``arrival`` as for a rate),
    closed loop when they set ``users`` (users added along a ramp, retired at a step down once
    their request in flight ends). The point lasts its stages' total (``duration_s``): a longer
    ``--duration`` holds the last stage's level to it (``fitted``), a shorter one is refused.
    ``shape``: the ``--load-shape`` text the stages came from, if any."""

    kind: Literal["staged"] = "staged"
    stages: tuple[Stage, ...] = Field(min_length=1)
    start_level: float = Field(default=0.0, ge=0, allow_inf_nan=False)  # before the first stage
    shape: str | None = None
    arrival: Annotated[Arrival, SetBy("--arrival")] = "poisson"
    burstiness: Annotated[float, SetBy("--burstiness")] = Field(default=1.0, gt=0)
    max_concurrency: Annotated[int | None, SetBy("--max-concurrency")] = Field(default=None, gt=0)
    think_time_s: Annotated[float, SetBy("--think-time")] = Field(default=0.0, ge=0)

    @model_validator(mode="after")
    def _one_kind(self) -> StagedLoad:
        kinds = {stage.kind for stage in self.stages}
        if len(kinds) > 1:
            raise ValueError(
                "a staged point's stages set rate= (open loop) or users= (closed loop), not both: "
                "make every stage rate=R or every stage users=N"
            )
        if self.open_loop and not any(stage.level > 0 for stage in self.stages):
            raise ValueError("an open-loop staged point sends nothing at rate 0 throughout: give a stage rate > 0")
        if not self.open_loop:
            if self.max_concurrency is not None:
                raise ValueError("--max-concurrency caps an open loop: users stages are capped by their users already")
            if self.start_level != int(self.start_level):
                raise ValueError(f"a closed loop starts from a whole number of users, not {self.start_level:g}")
        return self

    @property
    def open_loop(self) -> bool:
        return self.stages[0].kind == "rate"

    @property
    def duration_s(self) -> float:
        return sum(stage.duration_s for stage in self.stages)

    @property
    def starts_s(self) -> list[float]:
        """Each stage's start from the point's start, then the point's end."""
        return stage_starts_s(self.stages)

    @property
    def users(self) -> int | None:
        """A closed loop's most users at once (None: open loop)."""
        return None if self.open_loop else max(int(self.start_level), *(int(s.level) for s in self.stages))

    def level_at(self, t_s: float) -> float:
        """The target level (requests/s or users) ``t_s`` seconds into the point."""
        return level_at(self.stages, self.start_level, t_s)

    def fitted(self, duration_s: float) -> StagedLoad:
        """The point run for ``duration_s``: the last stage held longer to it; shorter is refused."""
        total = self.duration_s
        if duration_s < total - 1e-9:
            raise ValueError(
                f"--duration {duration_s:g}s is shorter than the stages ({total:g}s): drop --duration (a staged "
                "point lasts its stages) or shorten the stages"
            )
        if duration_s <= total + 1e-9:
            return self
        last = self.stages[-1]
        longer = last.model_copy(update={"duration_s": last.duration_s + duration_s - total})
        return self.model_copy(update={"stages": (*self.stages[:-1], longer)})


LoadPoint = UsersLoad | RateLoad | ReplayLoad | StagedLoad
OPEN_LOOP = (RateLoad, ReplayLoad)  # the loads whose requests arrive whatever the responses (and StagedLoad's rates)


def open_loop(load: LoadPoint) -> bool:
    """Whether the point's requests arrive on a schedule whatever the responses (coordinated
    omission's rules: the population is the requests scheduled)."""
    return isinstance(load, OPEN_LOOP) or (isinstance(load, StagedLoad) and load.open_loop)


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

    FLAGS: ClassVar[str] = "--users/--rate"  # named in an error about the whole sweep

    users: Annotated[
        list[int] | None, Flag("--users", "Closed loop: concurrent users, a list runs one point each: 10,50,100.", LOAD)
    ] = None
    rates: Annotated[
        list[float] | None, Flag("--rate", "Open loop: requests/s, a list runs one point each: 1,2,4,8.", LOAD)
    ] = None
    replay: ReplaySweep | None = None
    # one staged point (config/stages.py): its stages, or a shape that makes them
    stages: Annotated[
        list[Stage] | None,
        Flag(
            "--stages",
            "One point whose load changes: 'rate=2:20s, rate=8:20s ramp=5s, rate=2:20s' (or users=N:DURATION); "
            "ramp= goes linearly from the stage before. The point lasts the stages' total (a longer --duration "
            "holds the last level).",
            LOAD,
        ),
    ] = None
    shape: Annotated[
        str | None,
        Flag(
            "--load-shape",
            "One staged point from a shape: steps:levels=2/8/2,each=20s, spike:base=2,peak=10,at=20s,for=10s, "
            "burst-drain:..., diurnal:... or trace:path=FILE (its own rate curve); of=users for users "
            "(docs/workloads.md).",
            LOAD,
        ),
    ] = None
    ramp_up_s: Annotated[
        float, Flag("--ramp-up", "Seconds over which users are spawned evenly.", LOAD, default=True)
    ] = Field(default=UsersLoad.model_fields["ramp_up_s"].default, ge=0)
    think_time_s: Annotated[
        float,
        Flag("--think-time", "Seconds a user waits after a reply before its next request.", LOAD, default=True),
    ] = Field(default=UsersLoad.model_fields["think_time_s"].default, ge=0)
    arrival: Annotated[
        Arrival, Flag("--arrival", "Open-loop arrivals: constant, poisson (default) or gamma.", LOAD)
    ] = RateLoad.model_fields["arrival"].default
    burstiness: Annotated[
        float,
        Flag(
            "--burstiness",
            "Gamma shape (1 = poisson, <1 burstier); other than 1 without --arrival: gamma, as in vllm bench serve.",
            LOAD,
        ),
    ] = Field(default=RateLoad.model_fields["burstiness"].default, gt=0)
    max_concurrency: Annotated[
        int | None,
        Flag(
            "--max-concurrency",
            "Open loop and replay: at most this many in flight; the wait is recorded as queue delay.",
            LOAD,
        ),
    ] = Field(default=None, gt=0)

    _durations = field_validator("ramp_up_s", "think_time_s", mode="before")(seconds)

    @field_validator("stages", mode="before")
    @classmethod
    def _stages_text(cls, v: object) -> object:
        return parse_stages(v) if isinstance(v, str) else v

    @field_validator("shape")
    @classmethod
    def _shape_text(cls, v: str | None) -> str | None:
        if v is not None and trace_shape_keys(v) is None:
            parse_shape(v)  # the error names what to fix now, not when the point is built (a trace's: cli)
        return v

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
        # a shape's stages may be given with it (a trace's rate curve, read by the command line)
        if sum(bool(x) for x in (self.users, self.rates, self.replay, self.stages or self.shape)) != 1:
            raise ValueError(
                "give users (closed loop), rates (open loop), replay (a trace), stages or a load shape: exactly one"
            )
        return self

    def _staged(self) -> StagedLoad:
        stages, start = (self.stages, 0.0) if self.stages else parse_shape(self.shape or "")
        return StagedLoad(
            stages=tuple(stages),
            start_level=start,
            shape=self.shape,
            arrival=self.arrival,
            burstiness=self.burstiness,
            max_concurrency=self.max_concurrency,
            think_time_s=self.think_time_s,
        )

    def points(self) -> list[LoadPoint]:
        if self.stages or self.shape:
            return [self._staged()]
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


DEFAULT_PRECISION = 0.02  # --duration auto: ±2%
DEFAULT_MAX_DURATION_S = 300.0  # --duration auto: the ceiling without --max-duration
DEFAULT_MIN_REQUESTS = 100  # --duration auto: the floor (20 batches of 5)
BACKLOG_SPAN_S = 4.0  # --stop-oversaturated: the backlog is judged once a point lasted this long (metrics.steady)


class StopConfig(_Model):
    duration_s: Annotated[
        float | None,
        Flag(
            "--duration",
            "Seconds of load per point; auto: until its figures are precise (--precision), at most --max-duration "
            "(a trace replay ignores auto: the trace ends it).",
            STOPPING,
            auto=True,
        ),
    ] = Field(default=None, gt=0)
    max_requests: Annotated[int | None, Flag("--max-requests", "Stop a point after this many requests.", STOPPING)] = (
        Field(default=None, gt=0)
    )
    # after ramp-up; excluded from metrics
    warmup_s: Annotated[
        float,
        Flag(
            "--warmup",
            "Seconds after ramp-up excluded from metrics; auto: from where steady state began (no drift in TTFT "
            "and tok/s over 4 windows).",
            STOPPING,
            default=True,
            auto=True,
        ),
    ] = Field(default=0.0, ge=0)
    # wait for in-flight requests at the end
    drain_timeout_s: Annotated[
        float,
        Flag("--drain-timeout", "Seconds in-flight requests may finish after the load stops.", STOPPING, default=True),
    ] = Field(default=60.0, ge=0)
    # The loads' own schedule ends each point (trace replay: its last row), so neither a duration
    # nor a request count is needed; RunConfig allows it only when every load is a replay.
    schedule_ends: bool = False
    # autostop: (autostop.py, metrics/steady.py, metrics/precision.py). Each is None unless set, and
    # then not written to config.json (ADDED_WHEN_SET). --warmup auto: the window starts where
    # steady state began; --duration auto: a point ends once its headline figures are precise,
    # --duration then holding the ceiling (--max-duration)
    warmup_auto: bool | None = None  # --warmup auto (cli/run_flags.py)
    duration_auto: bool | None = None  # --duration auto
    precision: Annotated[
        float | None,
        Flag(
            "--precision",
            "With --duration auto: stop a point once the 95% CI half-width of mean TTFT, mean TPOT, output tok/s "
            "and TTFT p90 is within this fraction of each (batch means; p90 by an order-statistic bound). "
            "Trace replay ignores it (a trace has its own end).",
            STOPPING,
            default=f"{DEFAULT_PRECISION}",
        ),
    ] = Field(default=None, gt=0, lt=1)
    max_duration_s: Annotated[
        float | None,
        Flag(
            "--max-duration",
            "With --duration auto: the ceiling of each point.",
            STOPPING,
            default=f"{DEFAULT_MAX_DURATION_S:g}s",
        ),
    ] = Field(default=None, gt=0)
    min_requests: Annotated[
        int | None,
        Flag(
            "--min-requests",
            "With --duration auto: a point never stops as precise before this many requests in its window.",
            STOPPING,
            default=f"{DEFAULT_MIN_REQUESTS}",
        ),
    ] = Field(default=None, ge=20)
    stop_oversaturated: Annotated[
        bool | None,
        Flag(
            "--stop-oversaturated",
            "Open loop: stop a point whose backlog grows without bound (its slope's 95% CI above 0 and its growth "
            f"at least its mean, judged from {BACKLOG_SPAN_S:g}s on), marked over_saturated (capacity probes: on "
            "unless --no-stop-oversaturated).",
            STOPPING,
        ),
    ] = None
    # the run's --window: the steady-state rule's windows (the runner copies it in for the workers)
    window_s: float | None = Field(default=None, gt=0)

    _durations = field_validator("duration_s", "warmup_s", "drain_timeout_s", "max_duration_s", mode="before")(seconds)
    _fractions = field_validator("precision", mode="before")(fraction)

    @model_validator(mode="before")
    @classmethod
    def _auto_words(cls, data: Any) -> Any:
        """An experiment file's ``duration_s: auto`` and ``warmup_s: auto`` read as the flags'
        ``--duration auto`` and ``--warmup auto`` do (cli/run_flags.py): the duration becomes the
        ceiling (``max_duration_s``, else 300 s), the warm-up is found per point."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if _is_auto(data.get("duration_s")):
            data["duration_s"] = data.get("max_duration_s") or DEFAULT_MAX_DURATION_S
            data["duration_auto"] = True
        if _is_auto(data.get("warmup_s")):
            del data["warmup_s"]
            data["warmup_auto"] = True
        return data

    @property
    def auto_precision(self) -> float:
        return self.precision if self.precision is not None else DEFAULT_PRECISION

    @property
    def auto_min_requests(self) -> int:
        return self.min_requests if self.min_requests is not None else DEFAULT_MIN_REQUESTS

    @model_validator(mode="after")
    def _auto(self) -> StopConfig:
        if not self.duration_auto:
            for value, flag in ((self.precision, "--precision"), (self.max_duration_s, "--max-duration")):
                if value is not None:
                    raise ValueError(f"{flag} goes with --duration auto: add it, or drop {flag}")
            if self.min_requests is not None:
                raise ValueError("--min-requests goes with --duration auto: add it, or drop --min-requests")
        return self

    @model_validator(mode="after")
    def _some_stop(self) -> StopConfig:
        if self.duration_s is None and self.max_requests is None and not self.schedule_ends:
            raise ValueError("set --duration and/or --max-requests so the load stops by itself")
        return self


def _duration_s(value: object) -> float:
    """A stop's duration as given (a number of seconds, or text with its unit) in seconds."""
    if isinstance(value, int | float):
        return float(value)
    return parse_duration_s(str(value))


def _staged_or_as_is(load: object) -> object:
    """A load as given; an experiment file's staged one (a dict) as a StagedLoad."""
    if isinstance(load, dict) and load.get("kind") == "staged":
        return StagedLoad.model_validate(load)
    return load


def _is_auto(value: object) -> bool:
    return isinstance(value, str) and value.strip().lower() == "auto"


class DatasetConfig(_Model):
    name: Annotated[
        DatasetName,
        Flag(
            "--dataset",
            "synthetic, sharegpt, dolly, jsonl, trace (replays --dataset-path on its own schedule), or programs "
            "(agent sessions: graphs of dependent calls).",
            DATASET,
            default=True,
        ),
    ] = "synthetic"
    path: Annotated[
        Path | None, Flag("--dataset-path", "Dataset file (sharegpt JSON, dolly JSONL, your JSONL, a trace).", DATASET)
    ] = None
    # --dataset jsonl with expected answers (datasets/graders.py): how each reply is graded where
    # a row names no grader of its own (None: numeric for GSM8K's "#### N" answers, else exact)
    grader: Annotated[
        str | None,
        Flag(
            "--grader",
            "Graded JSONL (rows with answer/expected): exact, normalised, regex:PATTERN, numeric[:TOL], "
            "json:FIELD or choice (default: a row's own grader, numeric for GSM8K's '#### N', else exact).",
            panel=DATASET,
        ),
    ] = None
    # --dataset sharegpt: which conversations become prompts, in which order, with which length filters
    sharegpt_sampling: Annotated[
        ShareGPTSampling,
        Flag(
            "--sharegpt-sampling",
            "ShareGPT: draw as tokenbench (conversations whose first turn is human), vllm (as vllm bench serve) "
            "or sglang (as SGLang's bench_serving): that tool's turns, shuffle and length filters (the same "
            "lengths with the same --tokenizer and --seed).",
            DATASET,
            default=True,
        ),
    ] = "tokenbench"
    # synthetic prompt length
    input_tokens: Annotated[
        int,
        Flag(
            "--input-tokens",
            "Synthetic prompt length in tokens (with --prefix-groups: the suffix after the prefix).",
            DATASET,
        ),
    ] = Field(default=128, gt=0)
    # None: the reply's length (sharegpt, dolly), SYNTHETIC_OUTPUT_TOKENS, or the jsonl line's
    output_tokens: Annotated[
        int | None,
        Flag("--output-tokens", "max_tokens per request (default: dataset's reply length; synthetic 128).", DATASET),
    ] = Field(default=None, gt=0)
    # prompts loaded, then cycled
    num_prompts: Annotated[
        int,
        Flag(
            "--num-prompts",
            "Distinct prompts to load (default 1000), cycled until --duration/--max-requests; with neither, each is "
            "sent once (as vllm bench serve).",
            DATASET,
        ),
    ] = Field(default=1000, gt=0)
    # filter (dolly, sharegpt)
    min_prompt_tokens: Annotated[
        int | None, Flag("--min-prompt-tokens", "Keep prompts with at least this many tokens.", DATASET)
    ] = None
    max_prompt_tokens: Annotated[
        int | None, Flag("--max-prompt-tokens", "Keep prompts with at most this many tokens.", DATASET)
    ] = None
    system_prompt: Annotated[str | None, Flag("--system-prompt", "System prompt TEXT or @FILE.", DATASET)] = None
    unique_prefix: Annotated[
        bool,
        Flag(
            "--unique-prefix",
            "Prefix every prompt uniquely to defeat prefix caching across requests and runs.",
            DATASET,
        ),
    ] = False
    # HF tokenizer.json path or folder; default: the target's /tokenize
    tokenizer: Annotated[
        str | None,
        Flag(
            "--tokenizer", "HF tokenizer.json (or folder) for exact lengths; default: the server's /tokenize.", DATASET
        ),
    ] = None
    # --dataset trace: the file's format (None: detected), tokens per hash id (None: the format's),
    # BurstGPT's Model and Log Type filters
    trace_format: Annotated[
        TraceFormat | None,
        Flag("--trace-format", "Trace: mooncake, azure, burstgpt or bailian (default: detected from the file).", TRACE),
    ] = None
    block_size: Annotated[
        int | None, Flag("--block-size", "Trace: tokens per hash id (default: Mooncake 512, Bailian 16).", TRACE)
    ] = Field(default=None, gt=0)
    trace_model: Annotated[
        str | None, Flag("--trace-model", "BurstGPT: keep rows of this Model (e.g. GPT-4).", TRACE)
    ] = None
    trace_log_type: Annotated[
        str | None,
        Flag("--trace-log-type", "BurstGPT: keep rows of this Log Type (e.g. 'Conversation log').", TRACE),
    ] = None
    # the context guard (datasets.trace_requests.ContextGuard): the server's context in tokens
    # (None: what its /v1/models says, else --max-model-len of a launched server, else unguarded)
    # and what a row that cannot fit gets
    context_tokens: Annotated[
        int | None,
        Flag(
            "--context-tokens",
            "Trace: the server's context (prompt + reply) in tokens; rows that cannot fit are not sent "
            "(default: what the server's /v1/models says).",
            TRACE,
        ),
    ] = Field(default=None, gt=0)
    over_context: Annotated[
        Literal["skip", "truncate"],
        Flag(
            "--over-context",
            "Trace: a row that cannot fit the context: skip it, or cut its prompt to fit.",
            TRACE,
            default=True,
        ),
    ] = "skip"
    # --dataset programs (datasets/programs/): recorded agent sessions, each a graph of calls
    program_format: Annotated[
        str,
        Flag(
            "--program-format",
            "Programs: the file's format (auto: detected): weka, aiperf-dag, aiperf-graph, tracelab, "
            "tracelab-csv, otel, dynamo.",
            PROGRAMS,
            default=True,
        ),
    ] = "auto"
    program_output: Annotated[
        Literal["live", "recorded"],
        Flag(
            "--program-output",
            "Programs: a child's prompt carries its parent's live reply, or the recorded one.",
            PROGRAMS,
            default=True,
        ),
    ] = "live"
    program_time_scale: Annotated[
        float,
        Flag(
            "--program-time-scale",
            "Programs: multiply every recorded wait (think and tool time, start offsets) by this "
            "(0.01: a session of hours in minutes).",
            PROGRAMS,
            default=True,
        ),
    ] = Field(default=1.0, gt=0)
    # --dataset synthetic in shared-prefix groups (datasets.shared_prefix): G prefixes of P tokens
    # before each request's own input_tokens; the group drawn uniformly or by a Zipf exponent
    prefix_groups: Annotated[
        int | None,
        Flag(
            "--prefix-groups",
            "Synthetic: G shared prefixes; each request takes one, then its own --input-tokens "
            "(as vllm bench's --random-prefix-len: the prefix is extra).",
            PREFIXES,
        ),
    ] = Field(default=None, gt=0)
    prefix_tokens: Annotated[
        int | None, Flag("--prefix-tokens", "Synthetic: tokens in each shared prefix.", PREFIXES)
    ] = Field(default=None, gt=0)
    prefix_skew: Annotated[
        float | None,
        Flag(
            "--prefix-skew",
            "Synthetic: Zipf exponent S of the group choice (group k weighs 1/(k+1)^S; default uniform).",
            PREFIXES,
        ),
    ] = Field(default=None, gt=0)
    # images: synthetic images per chat request (datasets/images.py); a jsonl row's own
    # "images" list is sent as it is
    images: Annotated[
        str | None,
        Flag(
            "--images",
            "Chat: synthetic images per request, N or LO-HI (a seeded uniform draw per request), sent as "
            "base64 data URLs in image_url content parts.",
            IMAGES,
        ),
    ] = None
    image_size: Annotated[
        str,
        Flag(
            "--image-size",
            "Synthetic images' WxH, or a list drawn per image (seeded): 512x512,1024x768.",
            IMAGES,
            default=True,
        ),
    ] = "512x512"
    image_format: Annotated[
        Literal["png", "jpeg"], Flag("--image-format", "Synthetic images' encoding.", IMAGES, default=True)
    ] = "png"

    @model_validator(mode="after")
    def _images(self) -> DatasetConfig:

        if self.images is not None:
            parse_image_count(self.images)
            if self.name not in ("synthetic", "sharegpt", "dolly", "jsonl"):
                raise ValueError(f"--images adds images to prompts: not with --dataset {self.name}")
        parse_image_sizes(self.image_size)
        return self

    @model_validator(mode="after")
    def _sharegpt(self) -> DatasetConfig:
        if self.sharegpt_sampling != "tokenbench" and self.name != "sharegpt":
            raise ValueError(
                f"--sharegpt-sampling {self.sharegpt_sampling} draws ShareGPT prompts: use it with --dataset sharegpt"
            )
        return self

    @model_validator(mode="after")
    def _range(self) -> DatasetConfig:
        lo, hi = self.min_prompt_tokens, self.max_prompt_tokens
        if lo is not None and hi is not None and lo > hi:
            raise ValueError(f"--min-prompt-tokens {lo} is above --max-prompt-tokens {hi}")
        return self

    @model_validator(mode="after")
    def _programs(self) -> DatasetConfig:
        if self.name == "programs" and self.path is None:
            raise ValueError("--dataset programs needs --dataset-path FILE or DIR (recorded agent sessions)")
        set_here = [
            f
            for f, default in (("program_format", "auto"), ("program_output", "live"), ("program_time_scale", 1.0))
            if getattr(self, f) != default
        ]
        if self.name != "programs" and set_here:
            flags = ", ".join("--" + f.replace("_", "-") for f in set_here)
            verb = "describes" if len(set_here) == 1 else "describe"
            raise ValueError(f"{flags} {verb} agent programs: use them with --dataset programs")
        return self

    @model_validator(mode="after")
    def _trace(self) -> DatasetConfig:
        if self.name == "trace" and self.path is None:
            raise ValueError("--dataset trace needs --dataset-path FILE (a Mooncake, Azure, BurstGPT or Bailian trace)")
        trace_only = [
            f
            for f in ("trace_format", "block_size", "trace_model", "trace_log_type", "context_tokens")
            if getattr(self, f)
        ]
        if self.over_context != "skip":
            trace_only.append("over_context")
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

    turns: Annotated[int | None, Flag("--turns", "Synthetic conversations: user turns each.", SESSIONS)] = Field(
        default=None, gt=0
    )
    turn_think_time_s: Annotated[
        float,
        Flag("--turn-think-time", "Seconds between a reply and the conversation's next turn.", SESSIONS, default=True),
    ] = Field(default=0.0, ge=0)
    turn_think_dist: Annotated[
        Literal["fixed", "exponential"],
        Flag("--turn-think-dist", "fixed (default) or exponential (with --turn-think-time as its mean).", SESSIONS),
    ] = "fixed"
    # a turn whose prompt (history + new user text) would exceed this ends its conversation
    max_history_tokens: Annotated[
        int | None,
        Flag(
            "--max-history-tokens",
            "End a conversation whose next prompt (history + user turn) would exceed this; counted in results.",
            SESSIONS,
        ),
    ] = Field(default=None, gt=0)
    # tool calls: a turn whose reply called tools gets this canned result back (a ``tool``
    # message per call) before the conversation's next user turn; None: the calls are not answered
    tool_result: Annotated[
        str | None,
        Flag(
            "--tool-result",
            "With --tools: after a reply that called tools, send this TEXT back as each call's tool message "
            "before the next turn.",
            SESSIONS,
        ),
    ] = None
    # carries the conversation's id on each of its requests
    header: Annotated[
        str,
        Flag(
            "--session-header", "Header carrying the conversation id on each of its requests.", SESSIONS, default=True
        ),
    ] = "X-Session-ID"

    @field_validator("header")
    @classmethod
    def _header(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+", v):
            raise ValueError(f"--session-header {v!r} is not an HTTP header name (e.g. X-Session-ID)")
        return v


class DeadlinesConfig(_Model):  # --deadlines: the fluidity index's (metrics/fluidity.py), Etalon's defaults
    ttft_s: float = Field(default=0.1, gt=0)  # the first token, from the request's send
    tbt_s: float = Field(default=0.05, gt=0)  # each later token, after the one before


class WorkersConfig(_Model):
    """Where the load runs (``--workers``, ``--ray``, ``--ray-address``, ``--ray-cpus-per-worker``):
    one process, ``count`` local worker processes, or ``count`` Ray actors; one global schedule
    dealt to them (the workers package's docstring says how they work)."""

    count: Annotated[
        int,
        Flag(
            "--workers",
            "Send the load from N processes (each its own event loop and connections; with --ray, N Ray "
            "actors). One global schedule is dealt to them: the same load whatever N.",
            SCALE,
            default=True,
        ),
    ] = Field(default=1, ge=1, le=1024)
    ray: Annotated[
        bool,
        Flag(
            "--ray", "Run the --workers as Ray actors on a local Ray instance (pip install 'tokenbench\\[ray]').", SCALE
        ),
    ] = False
    # ADDR or "auto"; implies Ray
    ray_address: Annotated[
        str | None, Flag("--ray-address", "Attach to a Ray cluster (ADDR or 'auto'); implies --ray.", SCALE)
    ] = None
    cpus_per_worker: Annotated[
        float,
        Flag(
            "--ray-cpus-per-worker",
            "Ray CPUs each worker actor reserves (0: place more actors than cores).",
            SCALE,
            default=True,
        ),
    ] = Field(default=1.0, ge=0)

    @property
    def on_ray(self) -> bool:
        return self.ray or self.ray_address is not None

    @property
    def distributed(self) -> bool:  # else the run's own process sends the load
        return self.count > 1 or self.on_ray


# Settings keys (by RunConfig section) written to config.json only when set (RunConfig.redacted).
ADDED_WHEN_SET: dict[str, tuple[str, ...]] = {
    "target": ("response_format", "tools", "tool_choice", "structured_dialect"),  # structured output
    "sessions": ("tool_result",),  # tool calls
    "dataset": ("images",),  # images
    "slo": ("session_s",),  # agent programs
    # steady state: and stopping rules
    "stop": (
        "warmup_auto",
        "duration_auto",
        "precision",
        "max_duration_s",
        "min_requests",
        "stop_oversaturated",
        "window_s",
    ),
}


class RunConfig(_Model):
    target: TargetConfig = TargetConfig()
    loads: list[LoadPoint] = Field(min_length=1)
    stop: StopConfig
    dataset: DatasetConfig = DatasetConfig()
    backend: BackendConfig | None = None
    slo: Annotated[SLOConfig, Flag("--slo", "Goodput objectives, e.g. ttft=500ms,tpot=50ms.", OUTPUT)] = SLOConfig()
    # --deadlines: the fluidity index's
    deadlines: Annotated[
        DeadlinesConfig,
        Flag(
            "--deadlines",
            "Fluidity index deadlines: first token, then each later one.",
            OUTPUT,
            default="ttft=100ms,tbt=50ms",
        ),
    ] = DeadlinesConfig()
    seed: Annotated[int, Flag("--seed", "Seed for prompts and arrivals.", LOAD, default=True)] = 0
    # each load point run this many times in a row (trials): mean ± 95% CI per load, and compare's tests
    trials: Annotated[
        int,
        Flag(
            "--trials",
            "Run each load point N times in a row: the summary gives mean ± 95% CI per load, and "
            "compare tests the differences (as an experiment's trials).",
            LOAD,
            default=True,
        ),
    ] = Field(default=1, ge=1)
    # time-series window
    window_s: Annotated[float, Flag("--window", "Time-series window in seconds.", OUTPUT, default=True)] = Field(
        default=5.0, gt=0
    )
    out_dir: Annotated[Path | None, Flag("--out", "Run directory (default runs/<timestamp>).", OUTPUT)] = None
    # store generated text in records.jsonl
    keep_text: Annotated[bool, Flag("--keep-text", "Store generated text in records.jsonl.", OUTPUT)] = False
    # which model is served: before any load, greedy replies to a few fixed prompts, hashed
    # (clients/served_model.py; results.json target.served_model.fingerprint); chat and completions only
    fingerprint: Annotated[
        bool,
        Flag(
            "--fingerprint",
            "Before the load, send 3 fixed greedy prompts (16 tokens each, in no point) and keep the sha256 of "
            "the replies as the served model's fingerprint (chat, completions). Off by default: the probes "
            "would warm a cold server.",
            TARGET,
        ),
    ] = False
    # server spans: an OTLP/HTTP receiver for the server's own spans, joined to the records
    server_traces: Annotated[
        bool,
        Flag(
            "--server-traces",
            "Receive the server's OpenTelemetry spans on 127.0.0.1 (a launched vLLM, SGLang, TGI or TensorRT-LLM "
            "is pointed at it; an attached one by you, to the endpoints printed) and join them to the records: "
            "each request's server queue, prefill and decode in results.json.",
            TELEMETRY,
        ),
    ] = False
    server_traces_port: Annotated[
        int,
        Flag(
            "--server-traces-port",
            "With --server-traces: the receiver's port on 127.0.0.1 (0: any free one; an attached server's "
            "exporter needs a fixed one, e.g. 4318, OTLP/HTTP's own).",
            TELEMETRY,
        ),
    ] = Field(default=0, ge=0, le=65535)
    server_traces_grpc_port: Annotated[
        int,
        Flag(
            "--server-traces-grpc-port",
            "With --server-traces: the OTLP/gRPC receiver's port on 127.0.0.1 (0: any free one; an attached "
            "server whose exporter speaks gRPC needs a fixed one, e.g. 4317, OTLP/gRPC's own).",
            TELEMETRY,
        ),
    ] = Field(default=0, ge=0, le=65535)
    live: Annotated[bool, Flag("--live", "Show the live view.", OUTPUT, default="live")] = True
    # --multi-turn: conversations instead of single prompts
    sessions: Annotated[
        SessionConfig | None,
        Flag(
            "--multi-turn",
            "Multi-turn sessions: each conversation's turns in order, each carrying the history with the server's "
            "own replies. --users: one conversation at a time per user; --rate: conversations started per second.",
            SESSIONS,
            switch=True,
        ),
    ] = None
    # before every point: reset the server's cache, or keep it
    prefix_cache: Annotated[
        PrefixCacheMode,
        Flag(
            "--prefix-cache",
            "Before every load point: 'reset' empties the server's prefix cache through the engine's own "
            "control (vLLM, SGLang, llama.cpp slots), 'keep' leaves it warm.",
            ENGINE,
            default=True,
        ),
    ] = "keep"
    cost: CostConfig | None = None  # --cost-per-hour, --gpus: each point's cost per million tokens
    workers: WorkersConfig = WorkersConfig()  # --workers, --ray, --ray-address
    # routing: LoRA adapters, classes and tenants (config/mix.py)
    lora_mix: Annotated[
        dict[str, float] | None,
        Flag(
            "--lora-mix",
            "LoRA adapters: send model=NAME by a seeded draw in proportion to the weights, name=weight,... "
            "(e.g. a=1,b=1) or a YAML file of name: weight. The engine must serve each adapter.",
            REQUESTS,
        ),
    ] = None
    mix: Annotated[
        WorkloadMix | None,
        Flag(
            "--mix",
            "Workload mix YAML: classes, each with a share, and optionally its own dataset, slo, priority "
            "(sent as the request's priority field) and tenant (sent in --tenant-header). Results by_class.",
            REQUESTS,
        ),
    ] = None
    tenant_header: Annotated[
        str,
        Flag("--tenant-header", "Header carrying a class's tenant on each of its requests.", REQUESTS, default=True),
    ] = DEFAULT_TENANT_HEADER

    _tenant_header = field_validator("tenant_header")(check_header)

    @field_validator("lora_mix")
    @classmethod
    def _lora_weights(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        return check_weights(v, "--lora-mix") if v is not None else v

    @model_validator(mode="after")
    def _fleet(self) -> RunConfig:
        b = self.backend
        if b is not None and b.replicas > 1 and self.target.url is not None:
            raise ValueError(
                f"--replicas {b.replicas} launches a fleet behind a router; a fleet already running behind "
                f"--url names its replicas with --replica-url (repeat), or pass --predict MODEL to simulate one"
            )
        if b is not None and b.replica_urls and self.target.url is None:
            raise ValueError("--replica-url names the replicas of a fleet behind --url (its router): add --url")
        return self

    @model_validator(mode="after")
    def _groups(self) -> RunConfig:
        if self.mix is not None and self.sessions is not None and any(c.dataset for c in self.mix.classes):
            raise ValueError("--mix: a class's own dataset is not taken with --multi-turn: drop its dataset:")
        if (self.mix is not None or self.lora_mix) and self.dataset.name == "trace":
            # a trace is replayed row by row as it is read: a mix's stratified draw needs the whole list
            raise ValueError("--mix and --lora-mix draw over a list of prompts: not with --dataset trace")
        return self

    @model_validator(mode="after")
    def _programs(self) -> RunConfig:
        """Agent programs: sessions of generated calls, their prompts the recording's."""
        if self.dataset.name != "programs":
            return self
        if self.target.pooling:
            raise ValueError(f"--dataset programs sends agents' calls: not with --api {self.target.api}")
        if self.mix is not None or self.lora_mix:
            raise ValueError("--mix and --lora-mix draw over a list of prompts: not with --dataset programs")
        if self.dataset.unique_prefix:
            raise ValueError(
                "--unique-prefix would break each session's shared prefixes: drop it with --dataset programs"
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _staged_duration(cls, data: Any) -> Any:
        """A staged point lasts its stages: the stop's duration is theirs where none is given (or
        the schedule was to end it), and a longer one holds the last stage's level (StagedLoad.fitted)."""
        if not isinstance(data, dict) or not isinstance(data.get("loads"), list):
            return data
        loads = [_staged_or_as_is(load) for load in data["loads"]]
        staged = [load for load in loads if isinstance(load, StagedLoad)]
        if not staged:
            return data
        if len(loads) > 1:
            raise ValueError("a staged point changes its load while it runs: run it alone (one point), not in a sweep")
        stop = data.get("stop")
        fields = stop.model_dump(exclude_unset=True) if isinstance(stop, StopConfig) else dict(stop or {})
        if fields.get("duration_auto") or _is_auto(fields.get("duration_s")):
            raise ValueError("a staged point lasts its stages: drop --duration auto")
        given_s = None if fields.get("schedule_ends") else fields.get("duration_s")
        load = staged[0]
        duration_s = load.duration_s if given_s is None else _duration_s(given_s)
        fields.update(duration_s=duration_s, schedule_ends=False)
        return {**data, "loads": [load.fitted(duration_s)], "stop": fields}

    @model_validator(mode="after")
    def _staged_alone(self) -> RunConfig:
        """A staged point runs single requests on its own schedule."""
        if not any(isinstance(load, StagedLoad) for load in self.loads):
            return self
        if self.sessions is not None:
            raise ValueError("--multi-turn runs under --users or --rate: not with --stages/--load-shape")
        if self.stop.stop_oversaturated:
            # a stage over capacity, and the drain after it, are what a staged point measures
            raise ValueError("a staged point's overload and its drain are measured: drop --stop-oversaturated")
        if self.dataset.name in ("trace", "programs"):
            raise ValueError(
                f"--dataset {self.dataset.name} has its own schedule: drop --stages/--load-shape "
                "(a trace's rate curve: --load-shape trace:path=FILE)"
            )
        return self

    @model_validator(mode="after")
    def _replay_needs_trace(self) -> RunConfig:
        """A trace is a schedule: it is replayed, and only a trace is; the schedule may end a point."""
        replays = [isinstance(load, ReplayLoad) for load in self.loads]
        if self.dataset.name == "trace" and not all(replays):
            raise ValueError("--dataset trace replays the trace's own schedule: drop --users/--rate")
        if any(replays) and self.dataset.name not in ("trace", "programs"):
            raise ValueError("a replay load needs a trace: --dataset trace --dataset-path FILE")
        if self.stop.schedule_ends and not all(replays):
            raise ValueError("only a trace replay ends by its schedule: set --duration and/or --max-requests")
        return self

    @model_validator(mode="after")
    def _pooling_slo(self) -> RunConfig:
        """A pooling answer has no first token or decode: only E2E bounds it."""
        if self.target.pooling and (self.slo.ttft_s is not None or self.slo.tpot_s is not None):
            raise ValueError(f"--api {self.target.api} answers whole, with no TTFT or TPOT: bound e2e in --slo instead")
        return self

    @model_validator(mode="after")
    def _sessions(self) -> RunConfig:
        if self.sessions is None:
            return self
        if self.target.pooling:  # embeddings
            raise ValueError(f"--multi-turn sends conversations: drop it with --api {self.target.api}")
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
        if self.sessions.tool_result is not None and not self.target.tools:
            raise ValueError("--tool-result answers tool calls: give --tools FILE too")
        if self.sessions.turns is not None and self.dataset.name != "synthetic":
            raise ValueError("--turns sets synthetic conversations' length: the dataset's conversations have theirs")
        if self.dataset.sharegpt_sampling != "tokenbench":
            raise ValueError(multi_turn_sampling_error(self.dataset.sharegpt_sampling))
        return self

    def redacted(self) -> dict[str, Any]:
        """The settings with every credential masked (redact.py): engine environment values and
        arguments named like credentials, header values, extra_body keys like ``api_key``. The
        API key itself is never in the settings (read from the env var ``api_key_env`` names)."""
        data = self.model_dump(mode="json")
        data["target"]["headers"] = {k: MASK for k in self.target.headers}
        # settings added since 0.2 that a plain run leaves unset are not written (its
        # config.json keeps its keys; a missing key reads back as the default)
        for section, keys in ADDED_WHEN_SET.items():
            part = data.get(section)
            if isinstance(part, dict):
                for key in keys:
                    if part.get(key) is None:
                        part.pop(key, None)
        masked: dict[str, Any] = mask(data)
        return masked
