"""A run's side of --server-traces: the engine pointed at the receiver, and a point's spans
awaited before its results are derived."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict

from tokenbench.backends import get_profile
from tokenbench.config import BackendConfig
from tokenbench.spans.phases import GRACE_S, SpanIndex
from tokenbench.spans.receiver import SpanReceiver

QUIET_S = 0.5  # no new span for this long after a point ends: its spans are in


def traced_launch(
    backend: BackendConfig | None,
    endpoint: str,
    attached: bool,
    say: Callable[[str], None],
    grpc_endpoint: str | None = None,
) -> BackendConfig | None:
    """The launch with its engine's trace flags (Profile.traces), pointed at ``endpoint`` (OTLP/HTTP)
    or, for an exporter that speaks only gRPC (Profile.traces_protocol), at ``grpc_endpoint``; an
    attached server is pointed at either by the user (the console names both); an engine without
    spans: one line."""
    if attached or backend is None:
        grpc = f", or its OTLP/gRPC exporter at {grpc_endpoint}" if grpc_endpoint else ""
        say(f"server traces: point the server's OTLP/HTTP trace exporter at {endpoint} (protobuf or JSON){grpc}")
        return backend
    profile = get_profile(backend.name) if backend.name else None
    if profile is not None and profile.layer and backend.upstream:
        if not profile.relays_join_key:  # Triton's relay (triton_model.py) sends no traceparent on
            say(
                f"server traces: {profile.title} does not pass the request's traceparent on to "
                f"{get_profile(backend.upstream).title}, so its spans cannot join: no traces"
            )
            return backend
        # a serving layer relays the join key (ray_serve_app.JOIN_HEADERS): the engine behind it
        # traces, and the layer's own time is in the network phase (sent -> the engine's arrival)
        profile = get_profile(backend.upstream)
    if profile is None or profile.traces is None:
        title = profile.title if profile is not None else backend.name
        say(f"server traces: {title} exports no per-request spans tokenbench can join: no traces")
        return backend
    target = endpoint
    if profile.traces_protocol == "grpc":
        if grpc_endpoint is None:
            say(f"server traces: {profile.title} exports over OTLP/gRPC only, and no gRPC receiver runs: no traces")
            return backend
        target = grpc_endpoint
    args, env = profile.traces(target)
    knobs = backend.knobs.model_copy(
        update={"engine_args": (*backend.knobs.engine_args, *args), "engine_env": {**env, **backend.knobs.engine_env}}
    )
    protocol = "OTLP/gRPC" if profile.traces_protocol == "grpc" else "OTLP/HTTP"
    note = f" ({profile.traces_note})" if profile.traces_note else ""
    say(f"server traces: {profile.title} sends its spans to {target} ({protocol}){note}")
    return backend.model_copy(update={"knobs": knobs})


async def point_spans(
    receiver: SpanReceiver, end_s: float, now: Callable[[], float], origin_unix_s: float
) -> SpanIndex:
    """The spans once the point's have come in: none new for QUIET_S, or GRACE_S after its end."""
    seen, quiet_since = receiver.counts.spans, now()
    while now() < end_s + GRACE_S and now() - max(quiet_since, end_s) < QUIET_S:
        await asyncio.sleep(0.05)
        if receiver.counts.spans != seen:
            seen, quiet_since = receiver.counts.spans, now()
    index = SpanIndex.read(receiver.path, origin_unix_s)
    assert index is not None, "the receiver made its file"
    index.receiver = asdict(receiver.counts)
    return index
