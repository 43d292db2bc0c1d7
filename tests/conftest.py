"""Shared fixtures: the scripted mock server, in a child process (``start_mock``: for tests that
time to the millisecond or kill it) or in this process (``mock_server``, and ``module_mock_server``
for a module-scoped fixture: a thread with its own event loop, no process start; for every other
test)."""

from __future__ import annotations

import asyncio
import subprocess
import threading
from collections.abc import Callable, Iterator

import pytest
from aiohttp import web
from run_helpers import spawn_mock

from tokenbench.common.procs import stop

# Tests whose assertions a busy neighbour would change run alone: `make check` runs every other test
# side by side (pytest-xdist), then the `serial` ones one at a time (``-m serial``). A module says so
# itself (``pytestmark = pytest.mark.serial``, with why); a test that times a mock process to the
# millisecond says so by asking for ``start_mock`` (see its docstring). The serial tests run a few at a
# time; an ``alone`` test (its claim is that the machine was quiet) runs after them, beside nothing.
SERIAL_FIXTURES = frozenset({"start_mock"})


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if SERIAL_FIXTURES & set(getattr(item, "fixturenames", ())) or item.get_closest_marker("alone"):
            item.add_marker(pytest.mark.serial)


@pytest.fixture
def start_mock() -> Iterator[Callable[..., str]]:
    """start_mock(ttft_ms=50, itl_ms=10, fault="http_500", ...) -> base URL of a mock in a child
    process, for a test that times it to the millisecond (such a test is `serial`)."""
    yield from _mock_processes()


@pytest.fixture(scope="module")
def module_mock_process() -> Iterator[Callable[..., str]]:
    """``start_mock`` for a module-scoped fixture (one timed run shared by a module's tests: the
    module marks itself ``serial``)."""
    yield from _mock_processes()


@pytest.fixture
def mock_process() -> Iterator[Callable[..., str]]:
    """``start_mock`` for a test that needs the mock in a process of its own (to kill it, or to keep
    its allocations out of this process's tracemalloc) but times nothing: it runs beside others."""
    yield from _mock_processes()


def _mock_processes() -> Iterator[Callable[..., str]]:
    procs: list[subprocess.Popen] = []

    def start(**knobs) -> str:
        proc, url = spawn_mock(**knobs)
        procs.append(proc)
        start.procs = procs  # type: ignore[attr-defined]
        return url

    yield start
    for proc in procs:
        stop(proc, grace_s=10)


@pytest.fixture
def mock_server() -> Iterator[Callable[..., str]]:
    """mock_server(ttft_ms=50, fault="http_500", ...) -> base URL of a mock served from a thread of
    this process (the same knobs as ``tokenbench mock``). It shares the GIL with the test: a
    client in this process sees its timing a little later than a child process would."""
    yield from _mock_threads()


@pytest.fixture(scope="module")
def module_mock_server() -> Iterator[Callable[..., str]]:
    """``mock_server`` for a module-scoped fixture (one run shared by a module's tests)."""
    yield from _mock_threads()


def _mock_threads() -> Iterator[Callable[..., str]]:
    from tokenbench.mock import MockServer
    from tokenbench.mock.settings import MockSettings

    servers: list[tuple[asyncio.AbstractEventLoop, web.AppRunner, threading.Thread]] = []

    def start(**knobs) -> str:
        # the mock's loop runs in its thread before the server is set up on it, so an async test
        # may call start() from inside its own running loop
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="mock", daemon=True)
        thread.start()
        runner = web.AppRunner(MockServer(MockSettings(**knobs)).app, access_log=None, shutdown_timeout=1.0)
        servers.append((loop, runner, thread))
        asyncio.run_coroutine_threadsafe(_serve(runner), loop).result(10)
        return f"http://127.0.0.1:{runner.addresses[0][1]}"

    yield start
    for loop, runner, thread in servers:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        pending = asyncio.all_tasks(loop)  # handlers still streaming (a stalled reply): cancelled
        for task in pending:
            task.cancel()
        loop.run_until_complete(_settle(pending))
        loop.close()


async def _serve(runner: web.AppRunner) -> None:  # on the mock's own loop
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()


async def _settle(tasks: set[asyncio.Task]) -> None:
    await asyncio.gather(*tasks, return_exceptions=True)  # in the mock's own loop
