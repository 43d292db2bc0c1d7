"""A run's side of --server-traces: the engine pointed at the receiver, and a point's spans
awaited before its results are derived."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict

from ..backends import get_profile
from ..config import BackendConfig
from .phases import GRACE_S, SpanIndex
from .receiver import SpanReceiver

QUIET_S = 0.5  # no new span for this long after a point ends: its spans are in


def traced_launch(
    backend: BackendConfig | None, endpoint: str, attached: bool, say: Callable[[str], None]
) -> BackendConfig | None:
    """The launch with its engine's trace flags (Profile.traces); an attached server is pointed at
    the endpoint by the user (the console says where); an engine without spans: one line."""
    if attached or backend is None:
        say(f"server traces: point the server's OTLP/HTTP trace exporter at {endpoint} (protobuf or JSON)")
        return backend
    profile = get_profile(backend.name) if backend.name else None
    if profile is not None and profile.layer and backend.upstream:
        # a serving layer relays the join key (ray_serve_app.JOIN_HEADERS): the engine behind it
        # traces, and the layer's own time is in the network phase (sent -> the engine's arrival)
        profile = get_profile(backend.upstream)
    if profile is None or profile.traces is None:
        title = profile.title if profile is not None else backend.name
        say(f"server traces: {title} exports no per-request spans tokenbench can join: no traces")
        return backend
    args, env = profile.traces(endpoint)
    knobs = backend.knobs.model_copy(
        update={"engine_args": (*backend.knobs.engine_args, *args), "engine_env": {**env, **backend.knobs.engine_env}}
    )
    say(f"server traces: {profile.title} sends its spans to {endpoint}")
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
