"""A Ray Serve application in front of a running OpenAI-compatible engine (llama.cpp, vLLM): the
serving layer of the ``ray`` profile on CPU (``--backend ray --upstream NAME``).

``make_app`` is a plain FastAPI app (constructible and testable without Ray) that relays
``/v1/chat/completions`` and ``/v1/completions`` to the engine and answers ``/v1/models``:
- a streamed reply is passed on as the engine's bytes arrive (aiohttp ``iter_any``, no line or
  event buffering), with the engine's status and content type; a non-streamed reply whole;
- the request's ``model`` is replaced by the engine's served name (the layer serves the model under
  its own name); replies pass through untouched, so their ``model`` field is the engine's;
- ``/v1/models`` lists the served name once the engine answers its own ``/v1/models`` (readiness
  through the whole chain), else 502;
- an engine that cannot be reached is a 502 with an OpenAI-style error body.
``batch_interval_ms`` > 0 imitates Ray Serve LLM's response batcher
(ray/llm/_internal/serve/utils/batcher.py: what arrived during each interval is sent together),
so its effect on TTFT and inter-chunk gaps can be measured on CPU; 0 (default) relays each read.

Each reply carries ``x-served-by``: the Serve replica's id (``serve.get_replica_context().replica_id
.unique_id``, read when the replica starts: ray/serve/context.py; the id Serve's instance details
list it by), so records name the replica that served them.

``main`` (``python -m tokenbench.backends.ray_serve_app CONFIG_JSON``) hosts the app in Ray Serve:
a local Ray instance (``ray.init(address="local", num_cpus=1, include_dashboard=False,
_metrics_export_port=M)``; on a 2-core box a replica must ask for 0 CPUs or it never schedules),
``serve.start`` on the configured host/port, and one ``@serve.deployment(ray_actor_options=
{"num_cpus": 0})`` ``@serve.ingress`` replica that builds this app on the replica
(``__serve_build_asgi_app__``, ray/serve/api.py ``ingress``).

Autoscaling (``ServeConfig.autoscaling``: Serve's ``autoscaling_config`` fields, ray/serve/config.py
``AutoscalingConfig``): the deployment scales between min_replicas and max_replicas on its ongoing
requests. The dashboard is off (``include_dashboard=False``: on 2 cores its processes cost a
core), so the driver answers its ``GET /api/serve/applications/`` itself on ``replicas_port``: the
controller's ``get_serve_instance_details()`` as JSON, what the dashboard's route answers
(ray/dashboard/modules/serve/serve_head.py), for the run's replica timeline (telemetry/scaler.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import threading
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

import aiohttp

if TYPE_CHECKING:  # fastapi comes with the ray extra: imported where the app is built, so the
    # ray profile can import the configs below without it
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, Response

RELAYED = ("/v1/chat/completions", "/v1/completions")
READY_PATH = "/tokenbench/ready"  # the ray profile's ready_path on both its paths
# hop-by-hop or recomputed headers: never copied from the engine's reply
_DROP_HEADERS = {"content-length", "transfer-encoding", "connection", "content-encoding", "date", "server"}
# server spans: the request's join key goes on to the engine, so its spans join the client's records
# through the layer (W3C trace context and the request id; the relay keeps no trace of its own)
JOIN_HEADERS = ("traceparent", "tracestate", "x-request-id")
SERVED_BY_HEADER = "x-served-by"  # TargetConfig.replica_header's default: the replica's Serve id
DETAILS_PATH = "/api/serve/applications/"  # the dashboard's route for Serve's instance details


@dataclass(frozen=True)
class RelayConfig:
    upstream_url: str  # the engine's base URL, http://127.0.0.1:PORT
    upstream_model: str  # the model name the engine serves
    served_name: str  # the model name this layer serves (what /v1/models lists)
    batch_interval_ms: float = 0.0  # > 0: flush the stream every interval (Ray Serve LLM's batcher)
    timeout_s: float = 3600.0  # total time for one relayed request


@dataclass(frozen=True)
class ServeConfig:
    host: str
    port: int
    metrics_port: int  # Ray's Prometheus metrics export port
    relay: RelayConfig
    # requests one replica takes at once before Serve queues them: Serve's default is 5; Ray Serve
    # LLM's ingress uses 1e9 (ray/llm/_internal/serve/constants.py), so the engine's slots limit
    max_ongoing_requests: int = 1_000_000_000
    # Serve's autoscaling_config (min_replicas, max_replicas, target_ongoing_requests, ...); None: one replica
    autoscaling: dict[str, float] | None = None
    replicas_port: int | None = None  # where the driver answers DETAILS_PATH; None: nowhere

    def to_json(self) -> str:
        """The settings as JSON; those left unset (None) are not written (a launch without
        autoscaling has the command it had before autoscaling existed)."""
        return json.dumps({k: v for k, v in asdict(self).items() if v is not None}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ServeConfig:
        data = json.loads(text)
        return cls(**{**data, "relay": RelayConfig(**data["relay"])})


def _error(status: int, message: str) -> JSONResponse:
    from fastapi.responses import JSONResponse

    return JSONResponse({"error": {"message": message, "type": "upstream_error", "code": status}}, status_code=status)


def make_app(config: RelayConfig, served_by: str | None = None) -> FastAPI:
    """The relay as a FastAPI app; one aiohttp session per app, opened on first use (it needs the
    serving event loop) and closed when the app shuts down (ASGI lifespan, which Serve runs).
    ``served_by``: the replica's id, sent in every reply's ``x-served-by`` (None: no header)."""
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    sessions: list[aiohttp.ClientSession] = []

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        while sessions:
            await sessions.pop().close()

    app = FastAPI(title="tokenbench Ray Serve relay", lifespan=lifespan)

    def session() -> aiohttp.ClientSession:
        if not sessions:
            timeout = aiohttp.ClientTimeout(total=config.timeout_s)
            sessions.append(aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=0)))
        return sessions[0]

    # Starlette routes (add_route): the endpoint gets the request, and FastAPI never resolves
    # these functions' annotations (strings here, as fastapi is imported lazily)
    async def models(request: Request) -> Response:
        try:
            async with session().get(config.upstream_url + "/v1/models") as resp:
                if resp.status != 200:
                    return _error(502, f"upstream /v1/models answered {resp.status}")
        except aiohttp.ClientError as exc:
            return _error(502, f"upstream {config.upstream_url} unreachable: {exc}")
        model = {"id": config.served_name, "object": "model", "owned_by": "ray-serve", "root": config.upstream_model}
        return JSONResponse({"object": "list", "data": [model]})

    async def relay(request: Request) -> Response:
        response = await _relay(session(), config, request)
        if served_by is not None:
            response.headers[SERVED_BY_HEADER] = served_by
        return response

    app.add_route("/v1/models", models, methods=["GET"])
    app.add_route(READY_PATH, models, methods=["GET"])  # the ray profile's ready path: the same check
    for path in RELAYED:
        app.add_route(path, relay, methods=["POST"])
    return app


async def _relay(session: aiohttp.ClientSession, config: RelayConfig, request: Request) -> Response:
    from fastapi.responses import Response, StreamingResponse

    try:
        body: object = json.loads(await request.body())
    except ValueError as exc:
        return _error(400, f"request body is not JSON: {exc}")
    if not isinstance(body, dict):
        return _error(400, "request body must be a JSON object")
    body["model"] = config.upstream_model
    url = config.upstream_url + request.url.path
    join = {name: request.headers[name] for name in JOIN_HEADERS if name in request.headers}
    try:
        resp = await _post(session, url, body, join)
    except aiohttp.ClientError as exc:
        return _error(502, f"upstream {config.upstream_url} unreachable: {exc}")
    headers = {k: v for k, v in resp.headers.items() if k.lower() not in _DROP_HEADERS}
    media_type = resp.headers.get("Content-Type")
    if not (media_type or "").startswith("text/event-stream"):
        async with resp:
            content = await resp.read()
        return Response(content, status_code=resp.status, headers=headers, media_type=media_type)
    return StreamingResponse(
        _stream(resp, config.batch_interval_ms), status_code=resp.status, headers=headers, media_type=media_type
    )


async def _post(
    session: aiohttp.ClientSession, url: str, body: dict[str, object], headers: dict[str, str]
) -> aiohttp.ClientResponse:
    """POST, once more on a fresh connection when a pooled keep-alive connection turns out to be
    closed by the engine (llama.cpp closes idle ones): the request never reached it, so no work is
    repeated. Seen live as "Server disconnected" / "Can not write request body" 502s."""
    try:
        return await session.post(url, json=body, headers=headers)
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
        return await session.post(url, json=body, headers=headers)


async def _stream(resp: aiohttp.ClientResponse, batch_interval_ms: float) -> AsyncIterator[bytes]:
    async with resp:
        reads = resp.content.iter_any()
        if batch_interval_ms <= 0:
            async for data in reads:
                yield data
        else:
            async for batch in batched(reads, batch_interval_ms / 1000):
                yield batch


async def batched(reads: AsyncIterator[bytes], interval_s: float) -> AsyncIterator[bytes]:
    """What ``reads`` yielded during each ``interval_s``, joined, as Ray Serve LLM's Batcher does
    (wait for the interval or the end of the stream, whichever is first, drain, yield if not empty)."""
    parts: list[bytes] = []
    done = asyncio.Event()

    async def pump() -> None:
        try:
            async for data in reads:
                parts.append(data)
        finally:
            done.set()

    task = asyncio.create_task(pump())
    try:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), timeout=interval_s)
            finished = done.is_set()  # before yielding: what arrives meanwhile goes in the next batch
            if parts:
                batch = b"".join(parts)
                parts.clear()
                yield batch
            if finished:
                break
        await task  # re-raise a failed read
    finally:
        task.cancel()


def main(argv: list[str]) -> None:
    """Start local Ray and Serve and run the relay until killed."""
    import ray
    from ray import serve

    config = ServeConfig.from_json(argv[0])
    ray.init(
        address="local",
        num_cpus=1,
        include_dashboard=False,
        _metrics_export_port=config.metrics_port,
    )
    serve.start(http_options={"host": config.host, "port": config.port})
    options: dict[str, object] = {"max_ongoing_requests": config.max_ongoing_requests}
    if config.autoscaling is not None:
        options["autoscaling_config"] = config.autoscaling
    deployment = _deployment().options(**options)
    if config.replicas_port is None:
        serve.run(deployment.bind(config.relay), name="tokenbench-relay", route_prefix="/", blocking=True)
        return
    serve.run(deployment.bind(config.relay), name="tokenbench-relay", route_prefix="/", blocking=False)
    serve_details(config.host, config.replicas_port)


def serve_details(host: str, port: int) -> None:
    """Answer ``GET /api/serve/applications/`` with Serve's instance details, until killed."""
    from ray.serve.context import _get_global_client

    client = _get_global_client()  # raises when no controller runs (serve.run has just returned)
    assert client is not None
    details = client.get_serve_details
    lock = threading.Lock()  # one controller call at a time

    class Details(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != DETAILS_PATH:
                self.send_error(404, f"only {DETAILS_PATH}")
                return
            with lock:
                body = json.dumps(details()).encode()  # its enums are str: their values
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:  # a poll a second: not the engine log's business
            pass

    ThreadingHTTPServer((host, port), Details).serve_forever()


# Any: Ray's serve.Deployment, which mypy cannot see (it does not apply a class decorator's return type)
def _deployment() -> Any:
    from ray import serve

    @serve.deployment(ray_actor_options={"num_cpus": 0})
    @serve.ingress()
    class RayServeRelay:
        def __init__(self, config: RelayConfig) -> None:
            self.config = config
            self.replica_id = serve.get_replica_context().replica_id.unique_id  # set before this runs

        def __serve_build_asgi_app__(self) -> FastAPI:
            return make_app(self.config, self.replica_id)

    return RayServeRelay


if __name__ == "__main__":
    from tokenbench.backends.ray_serve_app import main as _main  # the module's own names, not __main__'s

    _main(sys.argv[1:])
