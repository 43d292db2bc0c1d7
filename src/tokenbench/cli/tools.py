"""The scripted mock server and the client-overhead calibration."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from tokenbench.cli.common import err, fail


def mock(
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1.")] = 9000,
    ttft_ms: Annotated[float, typer.Option(help="Time to first content chunk.")] = 50.0,
    itl_ms: Annotated[float, typer.Option(help="Gap between content chunks.")] = 10.0,
    output_tokens: Annotated[int, typer.Option(help="Chunks per reply when a request sets no max_tokens.")] = 128,
    tokens_per_chunk: Annotated[int, typer.Option(help="Tokens each chunk stands for.")] = 1,
    fault: Annotated[
        str,
        typer.Option(
            help="none, http_500, http_429, http_400, disconnect, malformed, error_event, no_content, stall, abort, no_end.",
            metavar="FAULT",
        ),
    ] = "none",
    fault_every: Annotated[int, typer.Option(help="Apply the fault to every N-th request.")] = 1,
    fault_after_chunks: Annotated[int, typer.Option(help="Mid-stream faults happen after this many chunks.")] = 3,
    kv_slots: Annotated[
        int,
        typer.Option(
            help="Count a vllm:num_preemptions_total for each request arriving above this many in flight (0: never)."
        ),
    ] = 0,
    max_streams: Annotated[
        int,
        typer.Option(help="Capacity: at most this many requests generate at once; the rest wait FIFO (0: no limit)."),
    ] = 0,
    reasoning_chunks: Annotated[
        int,
        typer.Option(
            help="Chat: the first K chunks of each reply are reasoning_content (TTFO = TTFT + K * ITL), "
            "and usage gives reasoning_tokens."
        ),
    ] = 0,
    record_requests: Annotated[
        bool, typer.Option(help="Log each request's X-* headers and messages/prompt in /mock/deliveries.")
    ] = False,
    cache_block_tokens: Annotated[
        int,
        typer.Option(
            help="A prefix cache of blocks of N prompt tokens (words, or token ids): usage reports cached_tokens, "
            "/metrics vLLM's prefix_cache counters, POST /reset_prefix_cache empties it (0: none)."
        ),
    ] = 0,
    input_ms: Annotated[
        float,
        typer.Option(help="/v1/embeddings, /v1/rerank, /v1/score: each input's cost (answer at TTFT + N * this)."),
    ] = 5.0,
    image_ms: Annotated[
        float, typer.Option(help="Chat: each image_url part adds this to the reply's TTFT (prefill cost).")
    ] = 0.0,
    image_tokens: Annotated[int, typer.Option(help="Chat: each image_url part adds this to usage.prompt_tokens.")] = 0,
    priority_queue: Annotated[
        bool,
        typer.Option(help="With --max-streams: admit waiting requests by their priority field (lower first)."),
    ] = False,
    adapters: Annotated[
        str,
        typer.Option(help="LoRA adapters served, NAME=MS,...: each one's extra TTFT; other model names get 404."),
    ] = "",
    invalid_every: Annotated[
        int,
        typer.Option(
            help="Structured output and tool calls: every N-th request asking for structure (or offering tools) "
            "gets invalid JSON (0: all valid)."
        ),
    ] = 0,
    warmup_slow_s: Annotated[
        float,
        typer.Option(
            "--warmup-slow-s",
            help="A scripted warm-up transient: requests received within N s of the first one have their TTFT "
            "times --warmup-factor.",
        ),
    ] = 0.0,
    warmup_factor: Annotated[float, typer.Option(help="TTFT multiplier during --warmup-slow-s.")] = 1.0,
    ttft_jitter: Annotated[
        float,
        typer.Option(
            help="Each TTFT times 1 + J * U, U uniform on [-1, 1] (seeded by --jitter-seed): relative SD J/sqrt(3)."
        ),
    ] = 0.0,
    jitter_seed: Annotated[int, typer.Option(help="Seed of --ttft-jitter's draws.")] = 0,
    otlp_endpoint: Annotated[
        str,
        typer.Option(
            help="After each reply, post an llm_request span with vLLM's gen_ai.* attributes and the script's "
            "queue/prefill/decode times to this OTLP/HTTP URL (protobuf), in the request's traceparent's trace.",
            metavar="URL",
        ),
    ] = "",
    otlp_skip_every: Annotated[int, typer.Option(help="With --otlp-endpoint: never send every N-th span.")] = 0,
    otlp_delay_ms: Annotated[float, typer.Option(help="With --otlp-endpoint: send each span this late.")] = 0.0,
    otlp_extra_attribute: Annotated[
        str, typer.Option(help="With --otlp-endpoint: add this attribute (one vLLM never sets) to each span.")
    ] = "",
    otlp_protocol: Annotated[
        str,
        typer.Option(
            help="With --otlp-endpoint: http/protobuf (POST to the URL) or grpc (TraceService/Export to the "
            "endpoint's host:port)."
        ),
    ] = "http/protobuf",
) -> None:
    """Serve a scripted OpenAI-compatible streaming endpoint on 127.0.0.1."""
    from tokenbench.mock import serve
    from tokenbench.mock.settings import FAULTS, MockSettings, is_fault

    if otlp_protocol not in ("http/protobuf", "grpc"):
        fail("--otlp-protocol must be http/protobuf or grpc", 2)
    if not is_fault(fault):  # checked here, not by Typer: the CLI does not load the mock (aiohttp) to start
        fail(f"--fault must be one of {', '.join(FAULTS)}", 2)
    try:
        settings = MockSettings(
            ttft_ms=ttft_ms,
            itl_ms=itl_ms,
            output_tokens=output_tokens,
            tokens_per_chunk=tokens_per_chunk,
            fault=fault,
            fault_every=fault_every,
            fault_after_chunks=fault_after_chunks,
            kv_slots=kv_slots,
            max_streams=max_streams,
            reasoning_chunks=reasoning_chunks,
            record_requests=record_requests,
            cache_block_tokens=cache_block_tokens,
            input_ms=input_ms,
            image_ms=image_ms,
            image_tokens=image_tokens,
            priority_queue=priority_queue,
            adapters=adapters,
            invalid_every=invalid_every,
            warmup_slow_s=warmup_slow_s,
            warmup_factor=warmup_factor,
            ttft_jitter=ttft_jitter,
            jitter_seed=jitter_seed,
            otlp_endpoint=otlp_endpoint,
            otlp_skip_every=otlp_skip_every,
            otlp_delay_ms=otlp_delay_ms,
            otlp_extra_attribute=otlp_extra_attribute,
            otlp_protocol=otlp_protocol,
        )
    except (TypeError, ValueError) as exc:
        fail(str(exc), 2)
    err.print(f"mock server on http://127.0.0.1:{port} (TTFT {ttft_ms} ms, ITL {itl_ms} ms)")
    serve(settings, port=port)


def calibrate(
    users: Annotated[int, typer.Option(help="Concurrent streams.")] = 32,
    requests: Annotated[int | None, typer.Option(help="Requests in all (default 8 per user).")] = None,
    ttft_ms: Annotated[float, typer.Option()] = 50.0,
    itl_ms: Annotated[float, typer.Option()] = 10.0,
    output_tokens: Annotated[int, typer.Option()] = 128,
    pin: Annotated[bool, typer.Option(help="Pin the mock to one core and the client to another.")] = True,
    api: Annotated[
        str, typer.Option(help="chat (streamed replies of --output-tokens) or embeddings (whole answers).")
    ] = "chat",
    target_rate: Annotated[
        float | None,
        typer.Option(help="Requests/s you mean to offer: how many client processes (--workers) it needs."),
    ] = None,
) -> None:
    """Measure the client's own overhead floor at a load, against the mock server: its error, its
    CPU per token and per request, and the highest request rate one client process sustains."""
    from tokenbench.run.calibrate import CalibrationSpec, calibration_table, ceiling_text, request_ceiling
    from tokenbench.run.calibrate import calibrate as run_calibration

    if api not in ("chat", "embeddings"):
        fail(f"--api {api}: calibrate runs chat or embeddings against the mock", 2)
    if target_rate is not None and not target_rate > 0:
        fail(f"--target-rate {target_rate}: give the requests/s you mean to offer (more than 0)", 2)
    spec = CalibrationSpec(
        users=users,
        requests=requests or users * 8,
        ttft_ms=ttft_ms,
        itl_ms=itl_ms,
        output_tokens=output_tokens,
        pin_cores=pin,
        api="chat" if api == "chat" else "embeddings",
    )
    result = run_calibration(spec)
    console = Console()
    console.print(calibration_table([result]))
    ceiling = request_ceiling(result.cost, target_rate) if result.cost is not None else None
    if ceiling is not None:
        console.print(ceiling_text(spec, ceiling))
