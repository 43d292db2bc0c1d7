"""A server under test that tokenbench launched: start it from its profile's local command, wait
until it is ready, record its version and cold start, stop it by PID.

The engine runs in its own process group (so Ctrl-C in the terminal reaches tokenbench, which
then stops the engine in order), watched by a guardian (procs.Guardian) that stops the group if
tokenbench dies first and writes the engine's stdout and stderr to ``server.log`` in the run
directory, credentials masked. A port that already answers (a server left by a crashed run) is
an error naming its holder, never a server to reuse.
A router (Profile.router) is launched after its fleet: --replicas copies of its upstream engine,
each with its own port and log (``server-replica-K.log``), and stops before them.
Cold start = seconds from launch to the first 2xx of the profile's ready path, which includes
weight download, conversion or engine compilation where the engine does those at start.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from tokenbench.backends import EMBEDDED, PROFILES, get_profile
from tokenbench.backends.base import Launch, LaunchSpec, Profile
from tokenbench.common import procs, redact
from tokenbench.config import BackendConfig, EngineKnobs
from tokenbench.errors import BackendError
from tokenbench.results.manifest import ServerFacts
from tokenbench.telemetry.prom import replica_name
from tokenbench.telemetry.scaler import ScalerTarget

HOST = "127.0.0.1"


def launch_spec(
    profile: Profile,
    config: BackendConfig,
    port: int | None = None,
    upstream: ManagedServer | None = None,
    fleet: tuple[str, ...] = (),
) -> LaunchSpec:
    """What the profile renders its command from. A serving layer (``upstream``: the engine
    launched before it) serves the engine's model; the engine's knobs are the engine's. A router's
    ``fleet``: every replica's base URL (the first is ``upstream``'s)."""
    model = config.model or (upstream.spec.model if upstream else None)
    model = model or (profile.default_model() if profile.default_model else None)
    if not model:
        raise BackendError(f"--backend {profile.name} without --url launches it: pass --model (what it should load)")
    served = config.served_model_name or profile.default_served_name
    if config.layer_args and not profile.layer:
        raise BackendError(
            f"--layer-arg is for a serving layer; --backend {profile.name} is an engine: use --engine-arg"
        )
    layer_args = {"engine_args": (*config.knobs.engine_args, *config.layer_args)}
    return LaunchSpec(
        model=model,
        served_name=served or (upstream.spec.served_name if upstream else _default_served_name(model)),
        host=HOST,
        port=port or config.port or profile.default_port,
        knobs=EngineKnobs(engine_args=config.layer_args) if upstream else config.knobs.model_copy(update=layer_args),
        executable=None if upstream else config.executable,
        upstream_url=upstream.url if upstream else None,
        upstream_model=upstream.spec.served_name if upstream else None,
        upstream_urls=fleet,
    )


NO_UPSTREAM = "none"  # --upstream none: a layer profile launched on its own (its own engine)


def upstream_config(profile: Profile, config: BackendConfig) -> BackendConfig | None:
    """The engine a serving layer serves from (``config.upstream``, else the profile's default),
    with the launch's model, knobs, --engine-bin and timeouts; None: no engine to launch first.
    "llamacpp" is the embedded llama.cpp server unless --engine-bin names a llama-server."""
    name = config.upstream or profile.default_upstream
    fleet_size(profile, config)  # --replicas N: only behind a router
    if profile.router and name == NO_UPSTREAM:
        raise BackendError(
            f"--backend {profile.name} is a router: it needs an engine to route to; drop --upstream none"
        )
    if name is None or name == NO_UPSTREAM:
        return None
    if not profile.layer:
        layers = ", ".join(p.name for p in PROFILES.values() if p.layer)
        raise BackendError(
            f"--upstream {name}: --backend {profile.name} is an engine, not a serving layer ({layers}); drop --upstream"
        )
    if name == "llamacpp" and config.executable is None:
        name = EMBEDDED
    engine = get_profile(name)
    if engine.layer:
        raise BackendError(
            f"--upstream {name} is a serving layer: name the engine it serves from (e.g. llamacpp, vllm)"
        )
    return BackendConfig(
        name=name,
        model=config.model,
        knobs=config.knobs,
        executable=config.executable,
        ready_timeout_s=config.ready_timeout_s,
        metrics_interval_s=config.metrics_interval_s,
    )


def fleet_size(profile: Profile, config: BackendConfig) -> int:
    """How many copies of the upstream engine a launch starts: --replicas behind a router, else 1
    (--replicas N with anything but a router is refused)."""
    if config.replicas > 1 and not profile.router:
        routers = ", ".join(p.name for p in PROFILES.values() if p.router)
        engine = "llamacpp" if config.name in (None, EMBEDDED) else config.name
        raise BackendError(
            f"--replicas {config.replicas} launches a fleet behind a router: add --backend vllm-router "
            f"--upstream {engine} (the routers: {routers}); --backend {profile.name} is not a router"
        )
    return config.replicas if profile.router else 1


def replica_config(engine: Profile, upstream: BackendConfig, replicas: int) -> BackendConfig:
    """One replica's launch: the engine's share of the machine (Profile.replica_launch)."""
    return engine.replica_launch(upstream, replicas) if engine.replica_launch else upstream


def engine_profile(profile: Profile, config: BackendConfig) -> Profile:
    """The profile whose launch defaults (prepare, reset_launch) apply to ``config``'s knobs: the
    upstream engine's for a serving layer, else the profile itself."""
    upstream = upstream_config(profile, config)
    return get_profile(upstream.name) if upstream is not None and upstream.name else profile


def check_launch(profile: Profile, config: BackendConfig) -> list[Launch]:
    """Render the command(s) a launch would run (the engine's first; a router's replicas each, on
    illustrative ports): BackendError for an unmappable knob or upstream."""
    upstream = upstream_config(profile, config)
    if upstream is None:
        return [profile.local(launch_spec(profile, config))]
    engine = get_profile(upstream.name or "")
    n = fleet_size(profile, config)
    replica = replica_config(engine, upstream, n) if profile.router else upstream
    specs = [launch_spec(engine, replica, (upstream.port or engine.default_port) + k) for k in range(n)]
    engines = [engine.local(spec) for spec in specs]
    # the layer as it will be rendered once the engine runs (its URL is known only then), with
    # the knobs launch_spec gives a layer with an upstream: its --layer-arg only
    spec = specs[0]
    layer = replace(
        launch_spec(profile, config.model_copy(update={"model": spec.model})),
        knobs=EngineKnobs(engine_args=config.layer_args),
    )
    urls = tuple(f"http://{HOST}:{s.port}" for s in specs) if profile.router else ()
    return [
        *engines,
        profile.local(
            replace(
                layer, upstream_url=f"http://{HOST}:{spec.port}", upstream_model=spec.served_name, upstream_urls=urls
            )
        ),
    ]


def metrics_url_for(profile: Profile | None, url: str | None, spec: LaunchSpec | None = None) -> str | None:
    """Where a server's Prometheus metrics are: the profile's own rule for a launched server (a
    separate metrics port), else the server URL + the profile's path; None without metrics."""
    if profile is None:
        return None
    if spec is not None and profile.metrics_url is not None:
        return profile.metrics_url(spec)
    if profile.metrics is None or url is None:
        return None
    return f"{url}{profile.metrics.path}"


def _default_served_name(model: str) -> str:
    path = Path(model)
    return path.stem if path.suffix == ".gguf" else path.name if path.exists() else model


class ManagedServer:
    """``with ManagedServer(profile, config, log_path) as server: server.url``."""

    def __init__(
        self,
        profile: Profile,
        config: BackendConfig,
        log_path: Path,
        upstream: ManagedServer | None = None,
        fleet: tuple[ManagedServer, ...] = (),
    ) -> None:
        self.profile = profile
        self.config = config
        self.log_path = log_path
        self.fleet = fleet  # a router's replicas (started before it, each ready)
        # the engine a serving layer serves from (started before this): a router's first replica
        self.upstream = fleet[0] if fleet else upstream
        port = config.port or procs.free_port(HOST)
        urls: tuple[str, ...] = tuple(r.url for r in fleet)
        self.spec = launch_spec(profile, config, port, self.upstream, urls)
        self.launch = profile.local(self.spec)  # raises BackendError for unmapped knobs
        self.url: str = f"http://{HOST}:{self.spec.port}"
        self.cold_start_s: float | None = None
        self.version: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._guardian: procs.Guardian | None = None
        # credentials in the engine's environment and arguments: masked in every file and line
        self.secrets = redact.secrets_of(dict(self.launch.env), self.launch.argv)
        redact.register(*self.secrets)

    def __enter__(self) -> ManagedServer:
        if procs.port_in_use(HOST, self.spec.port):
            raise BackendError(
                f"port {self.spec.port} on {HOST} already answers: {procs.port_holder(self.spec.port)}. "
                f"A server left by a crashed run? Stop it, or pick another --engine-port; tokenbench "
                f"never benchmarks a server it did not start as if it had"
            )
        env = {**os.environ, **self.launch.env}
        read_fd, write_fd = os.pipe()
        t0 = time.perf_counter()
        try:
            self._proc = subprocess.Popen(
                list(self.launch.argv),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=write_fd,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=procs.child_preexec(),
            )
        except FileNotFoundError as exc:
            os.close(read_fd)
            raise BackendError(
                f"cannot start {self.profile.title}: {self.launch.argv[0]!r} not found. Install it, "
                f"or point --engine-bin at its executable"
            ) from exc
        finally:
            os.close(write_fd)
        try:
            self._guardian = procs.Guardian(self._proc.pid, read_fd, self.log_path, self.secrets)
        finally:
            os.close(read_fd)
        try:
            body = self.profile.ready_body
            accept = (lambda data: body(self.spec, data)) if body is not None else None
            ready_url = self.url + self.profile.ready_url_path(self.spec)
            procs.wait_http(ready_url, self.config.ready_timeout_s, self._proc, accept)
        except procs.NotReady as exc:
            self.stop()
            raise BackendError(f"{self.profile.title} did not become ready: {exc}; see {self.log_path}") from exc
        except BaseException:  # Ctrl-C / SIGTERM while it starts: __exit__ will not run
            self.stop()
            raise
        self.cold_start_s = time.perf_counter() - t0
        self.version = self._version()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        """The started process's PID (None: not running)."""
        return self._proc.pid if self._proc is not None else None

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        procs.stop(proc, group=True)
        guardian, self._guardian = self._guardian, None
        if guardian is not None:
            guardian.release()

    def _version(self) -> str | None:
        p = self.profile
        if p.version_path and p.version_field:
            try:
                with urllib.request.urlopen(self.url + p.version_path, timeout=5) as resp:
                    value = json.loads(resp.read())
                for key in p.version_field.split("."):
                    value = value[key]
                if value and value != "b0-unknown":
                    return str(value)
            except (OSError, ValueError, KeyError, TypeError):
                pass
        if p.version_package:
            from importlib.metadata import PackageNotFoundError, version

            try:
                return version(p.version_package)
            except PackageNotFoundError:
                return None
        return p.version_reader() if p.version_reader else None

    def describe(self) -> ServerFacts:
        if self.fleet:  # a router: each replica's facts, where the router reached it
            replicas = [r._describe().model_copy(update={"url": r.url}) for r in self.fleet]
            return self._describe().model_copy(update={"knobs": None, "replicas": replicas})
        if self.upstream is None:
            return self._describe()
        # the knobs are the engine's (the upstream's); the layer takes none
        upstream = self.upstream._describe().model_copy(update={"url": self.upstream.url})
        return self._describe().model_copy(update={"knobs": None, "upstream": upstream})

    def _describe(self) -> ServerFacts:
        return ServerFacts(
            backend=self.profile.name,
            engine=self.profile.title,
            engine_version=self.version,
            cold_start_s=self.cold_start_s,
            cold_start_includes=self.profile.cold_start_includes,
            command=redact.mask_argv(self.launch.argv),
            command_env=redact.mask(dict(self.launch.env)),
            knobs=self.config.knobs.model_dump(mode="json"),
            engine_model=self.config.model,
            log=str(self.log_path),
        )


@dataclass(frozen=True)
class ReplicaEndpoint:
    """One replica of a fleet behind a router: ``name`` its host:port (how router metrics, proxy
    headers and records name it), its base ``url``, where its Prometheus metrics are
    (``metrics_url``; None: nothing to scrape) and its engine profile's name (``backend``; None:
    unknown, raw samples only)."""

    name: str
    url: str
    metrics_url: str | None
    backend: str | None = None

    @classmethod
    def at(cls, url: str, profile: Profile | None, spec: LaunchSpec | None = None) -> ReplicaEndpoint:
        return cls(replica_name(url), url, metrics_url_for(profile, url, spec), profile.name if profile else None)


@dataclass(frozen=True)
class ServerUnderTest:
    """The server a run measures: launched by tokenbench for the block's duration, or attached to."""

    url: str
    model: str | None  # the name requests use; None: the run's --model, else the first of /v1/models
    profile: Profile | None  # its APIs and metric names; None: a server tokenbench knows nothing of
    metrics_url: str | None  # where the sampler scrapes; None: nothing to scrape
    facts: ServerFacts  # what config.json and results.json say of it (backend, engine, version, cold start, command)
    # started for this block and not yet sent a request: its caches are empty (a run's first
    # point needs no prefix-cache reset; experiments clear it once a cell has used the server)
    fresh: bool = False
    # a fleet: the replicas behind the router at ``url`` (launched, or --replica-url); () otherwise
    replicas: tuple[ReplicaEndpoint, ...] = ()
    scaler: ScalerTarget | None = None  # autoscaling: the scaler API the sampler polls; None: none
    # the processes tokenbench started as this server (engine, layer, replicas and router): the
    # sampler reads their CPU; () when attached
    pids: tuple[int, ...] = ()


@contextlib.contextmanager
def server_under_test(
    backend: BackendConfig | None, url: str | None, log_path: Path, say: Callable[[str], None] = lambda _: None
) -> Iterator[ServerUnderTest]:
    """Attach to ``url`` (``backend`` then only names a profile: its APIs and metric names, and
    where its metrics are), or launch ``backend`` and stop it when the block ends, whatever ends
    it. ``say`` gets the progress lines (starting, ready). A serving layer (Profile.layer) starts
    its upstream engine first (its log ``<log>-upstream``), then itself in front of it; the layer
    stops first, then the engine, also when the layer fails to start. A router (Profile.router)
    starts --replicas copies of its upstream engine first (``_fleet``)."""
    profile = get_profile(backend.name) if backend is not None and backend.name else None
    override = backend.metrics_url if backend is not None else None
    if url is not None:
        facts = ServerFacts.attached(profile.name if profile else None, profile.title if profile else None)
        replicas = (
            tuple(ReplicaEndpoint.at(u, _replica_profile(profile, backend)) for u in backend.replica_urls)
            if backend
            else ()
        )
        scaler = ScalerTarget(backend.scaler_url, backend.scaler_kind) if backend and backend.scaler_url else None
        metrics = override or metrics_url_for(profile, url)
        yield ServerUnderTest(url, None, profile, metrics, facts, replicas=replicas, scaler=scaler)
        return
    if backend is None or profile is None:
        raise BackendError("nothing to benchmark: pass --url, or --backend NAME to launch one")
    if profile.router:
        with _fleet(profile, backend, log_path, say) as fleet:
            yield fleet
        return
    with contextlib.ExitStack() as stack:  # unwinds last-started first: the layer, then its engine
        upstream = upstream_config(profile, backend)
        engine = None
        if upstream is not None:
            engine = stack.enter_context(
                _started(get_profile(upstream.name or ""), upstream, _upstream_log(log_path), say)
            )
        server = stack.enter_context(_started(profile, backend, log_path, say, engine))
        metrics_url = override or metrics_url_for(profile, server.url, server.spec)
        scaler = (
            ScalerTarget(backend.scaler_url, backend.scaler_kind)
            if backend.scaler_url
            else profile.scaler(server.spec)
            if profile.scaler
            else None
        )
        pids = _pids(engine, server)
        yield ServerUnderTest(
            server.url, server.spec.served_name, profile, metrics_url, server.describe(), True, scaler=scaler, pids=pids
        )


@contextlib.contextmanager
def _fleet(
    profile: Profile, backend: BackendConfig, log_path: Path, say: Callable[[str], None]
) -> Iterator[ServerUnderTest]:
    """A router (Profile.router) in front of --replicas copies of its upstream engine: each replica
    on its own free port with its own log (server-replica-K.log), started and ready one after
    another, then the router given every replica's URL. The ExitStack stops the router first, then
    the replicas, last-started first, also when one of them fails to start."""
    upstream = upstream_config(profile, backend)
    assert upstream is not None and upstream.name  # a router always has one (upstream_config)
    engine = get_profile(upstream.name)
    n = fleet_size(profile, backend)
    replica = replica_config(engine, upstream, n)
    with contextlib.ExitStack() as stack:
        fleet = tuple(stack.enter_context(_started(engine, replica, _replica_log(log_path, k), say)) for k in range(n))
        router = stack.enter_context(_started(profile, backend, log_path, say, fleet=fleet))
        metrics_url = backend.metrics_url or metrics_url_for(profile, router.url, router.spec)
        replicas = tuple(ReplicaEndpoint.at(r.url, engine, r.spec) for r in fleet)
        facts = router.describe()
        yield ServerUnderTest(
            router.url, router.spec.served_name, profile, metrics_url, facts, True, replicas, pids=_pids(*fleet, router)
        )


def _pids(*servers: ManagedServer | None) -> tuple[int, ...]:
    return tuple(p for s in servers if s is not None and (p := s.pid) is not None)


def _replica_log(log_path: Path, k: int) -> Path:
    """Replica ``k``'s log beside the router's: server.log -> server-replica-K.log."""
    return log_path.with_name(f"{log_path.stem}-replica-{k}{log_path.suffix}")


def _replica_profile(profile: Profile | None, backend: BackendConfig) -> Profile | None:
    """The engine profile an attached fleet's replicas speak: --upstream's, else --backend's when it
    is an engine (a router's own metric names are not its replicas'), else unknown."""
    if backend.upstream and backend.upstream != NO_UPSTREAM:
        return get_profile(backend.upstream)
    return profile if profile is not None and not profile.layer else None


def _upstream_log(log_path: Path) -> Path:
    """The engine's log beside the layer's: server.log -> server-upstream.log."""
    return log_path.with_name(f"{log_path.stem}-upstream{log_path.suffix}")


@contextlib.contextmanager
def _started(
    profile: Profile,
    config: BackendConfig,
    log_path: Path,
    say: Callable[[str], None],
    upstream: ManagedServer | None = None,
    fleet: tuple[ManagedServer, ...] = (),
) -> Iterator[ManagedServer]:
    server = ManagedServer(profile, config, log_path, upstream, fleet)
    say(f"starting {profile.title}: {' '.join(redact.mask_argv(server.launch.argv))}")
    with server:
        say(
            f"{profile.title} ready at {server.url} after {server.cold_start_s:.1f}s "
            f"(version {server.version or 'unknown'})"
        )
        yield server
