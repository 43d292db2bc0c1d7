"""`tokenbench run`: flags -> RunConfig (cli/run_flags.py), then one call (runner.run)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core
from pydantic import ValidationError

from ..config import (
    BackendConfig,
    DatasetConfig,
    ReplayLoad,
    RunConfig,
    SessionConfig,
    StopConfig,
    TargetConfig,
    UsersLoad,
)
from ..cost import CostConfig
from ..vllm_flags import FlagError, translate
from .common import (
    UsageError,
    default,
    err,
    exit_codes,
    fail,
    validation_message,
)
from .engine import (
    EngineArg,
    EngineBin,
    EngineEnv,
    KVMemory,
    MaxModelLen,
    MaxNumSeqs,
    PrefixCaching,
    Quantization,
    ServedModelName,
    TensorParallel,
    Upstream,
)
from .run_flags import run_config


class RunCommand(typer.core.TyperCommand):
    """``tokenbench run``: vllm-bench flags rewritten before the arguments are parsed (vllm_flags)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        try:
            args = translate(args)
        except FlagError as exc:
            fail(str(exc), 2)
        return super().parse_args(ctx, args)


def run(
    ctx: typer.Context,
    url: Annotated[
        str | None,
        typer.Option(help="Server base URL, e.g. http://127.0.0.1:8000. Omit to start the embedded llama.cpp backend."),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="Model name to request (default: the first of /v1/models). Without --url: a .gguf path for the embedded server."
        ),
    ] = None,
    api: Annotated[
        str | None,
        typer.Option(
            help="chat, completions (OpenAI), or native: tgi, triton, ollama. Default: the backend's first API, else chat."
        ),
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option(
            help="Backend profile (tokenbench backends). With --model and no --url: launch it, benchmark, stop it. With --url: use its metric names.",
            rich_help_panel="Engine",
        ),
    ] = None,
    max_num_seqs: MaxNumSeqs = None,
    kv_memory: KVMemory = None,
    max_model_len: MaxModelLen = None,
    prefix_caching: PrefixCaching = None,
    quantization: Quantization = None,
    tensor_parallel: TensorParallel = None,
    engine_arg: EngineArg = None,
    engine_env: EngineEnv = None,
    engine_bin: EngineBin = None,
    served_model_name: ServedModelName = None,
    upstream: Upstream = None,
    engine_port: Annotated[
        int | None,
        typer.Option(
            help="Engine: port on 127.0.0.1 for the launched server (default: a free one). A port that already answers is an error naming its holder.",
            rich_help_panel="Engine",
        ),
    ] = None,
    ready_timeout: Annotated[
        float | None,
        typer.Option(
            help="Engine: seconds to wait for it to be ready (includes conversion/compilation)."
            + default(BackendConfig, "ready_timeout_s"),
            rich_help_panel="Engine",
        ),
    ] = None,
    metrics_interval: Annotated[
        float | None,
        typer.Option(
            help="Seconds between /metrics scrapes." + default(BackendConfig, "metrics_interval_s"),
            rich_help_panel="Engine",
        ),
    ] = None,
    metrics_url: Annotated[
        str | None,
        typer.Option(
            help="Scrape this URL instead of the server URL + the profile's metrics path.", rich_help_panel="Engine"
        ),
    ] = None,
    users: Annotated[
        str | None, typer.Option(help="Closed loop: concurrent users, a list runs one point each: 10,50,100.")
    ] = None,
    rate: Annotated[
        str | None, typer.Option(help="Open loop: requests/s, a list runs one point each: 1,2,4,8.")
    ] = None,
    ramp_up: Annotated[
        float | None,
        typer.Option(help="Seconds over which users are spawned evenly." + default(UsersLoad, "ramp_up_s")),
    ] = None,
    think_time: Annotated[
        float | None,
        typer.Option(
            help="Seconds a user waits after a reply before its next request." + default(UsersLoad, "think_time_s")
        ),
    ] = None,
    arrival: Annotated[
        str | None, typer.Option(help="Open-loop arrivals: constant, poisson (default) or gamma.")
    ] = None,
    burstiness: Annotated[
        float | None,
        typer.Option(
            help="Gamma shape (1 = poisson, <1 burstier); other than 1 without --arrival: gamma, as in vllm bench serve."
        ),
    ] = None,
    max_concurrency: Annotated[
        int | None,
        typer.Option(help="Open loop and replay: at most this many in flight; the wait is recorded as queue delay."),
    ] = None,
    duration: Annotated[float | None, typer.Option(help="Seconds of load per point.")] = None,
    max_requests: Annotated[int | None, typer.Option(help="Stop a point after this many requests.")] = None,
    warmup: Annotated[
        float | None,
        typer.Option(help="Seconds after ramp-up excluded from metrics." + default(StopConfig, "warmup_s")),
    ] = None,
    drain_timeout: Annotated[
        float | None,
        typer.Option(
            help="Seconds in-flight requests may finish after the load stops." + default(StopConfig, "drain_timeout_s")
        ),
    ] = None,
    seed: Annotated[
        int | None, typer.Option(help="Seed for prompts and arrivals." + default(RunConfig, "seed"))
    ] = None,
    dataset: Annotated[
        str | None,
        typer.Option(
            help="synthetic, sharegpt, dolly, jsonl, or trace (replays --dataset-path on its own schedule)."
            + default(DatasetConfig, "name")
        ),
    ] = None,
    dataset_path: Annotated[
        Path | None, typer.Option(help="Dataset file (sharegpt JSON, dolly JSONL, your JSONL, a trace).")
    ] = None,
    trace_format: Annotated[
        str | None,
        typer.Option(
            help="Trace: mooncake, azure, burstgpt or bailian (default: detected from the file).",
            rich_help_panel="Trace replay",
        ),
    ] = None,
    block_size: Annotated[
        int | None,
        typer.Option(
            help="Trace: tokens per hash id (default: Mooncake 512, Bailian 16).", rich_help_panel="Trace replay"
        ),
    ] = None,
    trace_model: Annotated[
        str | None, typer.Option(help="BurstGPT: keep rows of this Model (e.g. GPT-4).", rich_help_panel="Trace replay")
    ] = None,
    trace_log_type: Annotated[
        str | None,
        typer.Option(
            help="BurstGPT: keep rows of this Log Type (e.g. 'Conversation log').", rich_help_panel="Trace replay"
        ),
    ] = None,
    replay_speed: Annotated[
        float | None,
        typer.Option(
            help="Trace: divide trace times by this (2 = twice as fast)." + default(ReplayLoad, "speed"),
            rich_help_panel="Trace replay",
        ),
    ] = None,
    replay_start: Annotated[
        float | None,
        typer.Option(help="Trace: replay rows from this trace time (s).", rich_help_panel="Trace replay"),
    ] = None,
    replay_end: Annotated[
        float | None,
        typer.Option(help="Trace: replay rows before this trace time (s).", rich_help_panel="Trace replay"),
    ] = None,
    replay_jitter: Annotated[
        float | None,
        typer.Option(
            help="Trace: move each row later by a seeded uniform draw in [0, S) trace seconds (spreads gridded bursts).",
            rich_help_panel="Trace replay",
        ),
    ] = None,
    input_tokens: Annotated[
        int | None,
        typer.Option(help="Synthetic prompt length in tokens (with --prefix-groups: the suffix after the prefix)."),
    ] = None,
    prefix_groups: Annotated[
        int | None,
        typer.Option(
            help="Synthetic: G shared prefixes; each request takes one, then its own --input-tokens "
            "(as vllm bench's --random-prefix-len: the prefix is extra).",
            rich_help_panel="Shared prefixes",
        ),
    ] = None,
    prefix_tokens: Annotated[
        int | None,
        typer.Option(help="Synthetic: tokens in each shared prefix.", rich_help_panel="Shared prefixes"),
    ] = None,
    prefix_skew: Annotated[
        float | None,
        typer.Option(
            help="Synthetic: Zipf exponent S of the group choice (group k weighs 1/(k+1)^S; default uniform).",
            rich_help_panel="Shared prefixes",
        ),
    ] = None,
    multi_turn: Annotated[
        bool | None,
        typer.Option(
            help="Multi-turn sessions: each conversation's turns in order, each carrying the history with the server's own replies. --users: one conversation at a time per user; --rate: conversations started per second.",
            rich_help_panel="Sessions",
        ),
    ] = None,
    turns: Annotated[
        int | None,
        typer.Option(help="Synthetic conversations: user turns each.", rich_help_panel="Sessions"),
    ] = None,
    turn_think_time: Annotated[
        float | None,
        typer.Option(
            help="Seconds between a reply and the conversation's next turn."
            + default(SessionConfig, "turn_think_time_s"),
            rich_help_panel="Sessions",
        ),
    ] = None,
    turn_think_dist: Annotated[
        str | None,
        typer.Option(
            help="fixed (default) or exponential (with --turn-think-time as its mean).", rich_help_panel="Sessions"
        ),
    ] = None,
    max_history_tokens: Annotated[
        int | None,
        typer.Option(
            help="End a conversation whose next prompt (history + user turn) would exceed this; counted in results.",
            rich_help_panel="Sessions",
        ),
    ] = None,
    session_header: Annotated[
        str | None,
        typer.Option(
            help="Header carrying the conversation id on each of its requests." + default(SessionConfig, "header"),
            rich_help_panel="Sessions",
        ),
    ] = None,
    output_tokens: Annotated[
        int | None, typer.Option(help="max_tokens per request (default: dataset's reply length; synthetic 128).")
    ] = None,
    num_prompts: Annotated[
        int | None,
        typer.Option(
            help="Distinct prompts to load (default 1000), cycled until --duration/--max-requests; with neither, each is sent once (as vllm bench serve)."
        ),
    ] = None,
    min_prompt_tokens: Annotated[int | None, typer.Option(help="Keep prompts with at least this many tokens.")] = None,
    max_prompt_tokens: Annotated[int | None, typer.Option(help="Keep prompts with at most this many tokens.")] = None,
    system_prompt: Annotated[str | None, typer.Option(help="System prompt TEXT or @FILE.")] = None,
    unique_prefix: Annotated[
        bool | None,
        typer.Option(help="Prefix every prompt uniquely to defeat prefix caching across requests and runs."),
    ] = None,
    tokenizer: Annotated[
        str | None,
        typer.Option(help="HF tokenizer.json (or folder) for exact lengths; default: the server's /tokenize."),
    ] = None,
    ignore_eos: Annotated[
        bool | None, typer.Option(help="Ask the server to ignore EOS (fixed output lengths).")
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(help="Environment variable holding the API key." + default(TargetConfig, "api_key_env")),
    ] = None,
    extra_body: Annotated[
        str | None,
        typer.Option(
            help="JSON object merged into every request body (sampling parameters, e.g. '{\"temperature\": 0}')."
        ),
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option(
            help="'Name: value' sent with every request (repeat); values are masked in every file tokenbench writes."
        ),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(help="Seconds a whole request may take." + default(TargetConfig, "request_timeout_s")),
    ] = None,
    read_timeout: Annotated[
        float | None,
        typer.Option(help="Seconds of silence allowed within a stream." + default(TargetConfig, "read_timeout_s")),
    ] = None,
    slo: Annotated[str | None, typer.Option(help="Goodput objectives, e.g. ttft=500ms,tpot=50ms.")] = None,
    cost_per_hour: Annotated[
        float | None,
        typer.Option(
            help="USD per GPU-hour of the server's hardware (an instance's price: with --gpus 1): each point's "
            "cost per million tokens at its throughput.",
            rich_help_panel="Cost",
        ),
    ] = None,
    gpus: Annotated[
        int | None,
        typer.Option(
            help=f"GPUs --cost-per-hour pays for (default {CostConfig.model_fields['gpus'].default}).",
            rich_help_panel="Cost",
        ),
    ] = None,
    deadlines: Annotated[
        str | None,
        typer.Option(
            help="Fluidity index deadlines: first token, then each later one. \\[default: ttft=100ms,tbt=50ms]"
        ),
    ] = None,
    continuous_usage: Annotated[
        bool | None,
        typer.Option(help="Ask for usage on every chunk (per-token ITL). \\[default: where the --backend gives it]"),
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Run directory (default runs/<timestamp>).")] = None,
    window: Annotated[
        float | None, typer.Option(help="Time-series window in seconds." + default(RunConfig, "window_s"))
    ] = None,
    live: Annotated[bool | None, typer.Option("--live/--no-live", help="Show the live view. \\[default: live]")] = None,
    keep_text: Annotated[bool | None, typer.Option(help="Store generated text in records.jsonl.")] = None,
    prefix_cache: Annotated[
        str | None,
        typer.Option(
            help="Before every load point: 'reset' empties the server's prefix cache through the engine's own "
            "control (vLLM, SGLang, llama.cpp slots), 'keep' leaves it warm. \\[default: keep]"
        ),
    ] = None,
) -> None:
    """Benchmark a server (or, with no --url, the embedded llama.cpp backend).

    Ctrl-C or SIGTERM stops the run, keeps every record and exits with 130 or 143; a second
    signal exits at once (`tokenbench recompute DIR` then derives results.json)."""
    from ..procs import Interrupts

    Interrupts.install()
    _benchmark(_config(ctx.params))


def _config(params: dict[str, Any]) -> RunConfig:
    """The settings, or exit 2 with the flags to fix."""
    try:
        return run_config(params)
    except UsageError as exc:
        fail(str(exc), 2)
    except ValidationError as exc:
        fail(validation_message(exc), 2)


def _benchmark(config: RunConfig) -> None:
    """Run it; a failure exits 3 (the server) or 2 (bad input), an interrupt with its signal's code."""
    from ..procs import Interrupts
    from ..runner import run as run_benchmark

    with exit_codes("interrupted before the load started or finished"):  # children are stopped by then
        result = run_benchmark(config, err)
    err.print(f"results: {result.run_dir}/results.json  records: {result.run_dir}/records.jsonl")
    if result.interrupted:
        err.print("[yellow]interrupted: in-flight requests were recorded as cancelled[/]")
        raise typer.Exit(Interrupts.exit_code())
