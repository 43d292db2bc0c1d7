"""The client's hot path compiled with mypyc, and the guard that keeps a stale build
from shadowing its sources.

In-process (no sockets), a 4-token streamed reply costs the client ~42 µs of CPU from these
modules' sources and ~31 µs compiled: mypyc compiles them, unchanged, to C extensions. Live against
the mock, where the kernel's share is the same for both, that is ~114 -> ~104 µs a request, and
tokenbench's CPU over a bare-socket client's 1.49x -> 1.38x (benchmarks/request_overhead.py,
docs/measurement.md). Nothing needs it: without a build, the sources run as they are.

``make compiled`` (``build()``) builds them in place, beside their sources, and writes which
sources it built from (``compiled.json``: a hash of every source of the package); ``make run``
builds them once, when it can. A build shadows its source on import (Python prefers an extension
module), so an edit after a build would not run: ``guard()`` (called first thing by
``tokenbench.clients``) checks that hash, and on any difference runs the sources and warns once.
``make uncompiled`` (``clean()``) removes a build. ``make test`` builds one in a copy of src/ and
runs the client tests against it (``compiled-tests``)."""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
# The modules a request's path runs through, for every wire (a compiled class cannot be the base
# of an interpreted one: each Stream and Wire is compiled with wire.py's)
MODULES = ("sse", "http1", "wire", "openai", "messages", "responses", "tgi", "ollama", "triton", "embeddings", "stream")
GROUP = "tokenbench_clients"  # the build's shared library: <src>/tokenbench_clients__mypyc*.so
MANIFEST = HERE / "compiled.json"


def fingerprint(here: Path = HERE) -> str:
    """One hash of every source of the package above ``here`` (tokenbench/): a build is of all of
    them, not only of MODULES (mypyc reads its imports' types, and may inline their constants)."""
    root = here.parent
    digest = hashlib.sha1()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _extensions(here: Path = HERE) -> list[Path]:
    return [p for name in MODULES for p in here.glob(f"{name}.*.so")]


def state(here: Path = HERE) -> str:
    """ "compiled" (the build runs), "stale" (a build older than its sources: they run), or
    "source" (no build), of the client package in ``here``."""
    if not _extensions(here):
        return "source"
    try:
        built = json.loads((here / MANIFEST.name).read_text())["sources"]
    except (OSError, ValueError, KeyError, TypeError):
        return "stale"
    return "compiled" if built == fingerprint(here) else "stale"


class _Sources(importlib.abc.MetaPathFinder):
    """Finds the compiled modules' sources first (a stale build)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != __package__ or name not in MODULES:
            return None
        return importlib.util.spec_from_file_location(fullname, HERE / f"{name}.py")


def guard() -> str:
    """Before the client's modules are imported: a stale build is not run (its sources are, with
    a warning), nor any build while ``TOKENBENCH_COMPILED=0`` (make check's and make test's tiers:
    they test the sources, compiled-tests the build; no hash is taken then, ~5 ms a process).
    Returns ``state()``, "off" for the latter."""
    if not _extensions():
        return "source"
    now = "off" if os.environ.get("TOKENBENCH_COMPILED") == "0" else state()
    if now != "compiled" and not any(isinstance(f, _Sources) for f in sys.meta_path):
        sys.meta_path.insert(0, _Sources())
        if now == "stale":
            warnings.warn(
                f"the compiled client in {HERE} is older than its sources: running the sources "
                "(`make compiled` builds it again, `make uncompiled` removes it)",
                stacklevel=2,
            )
    return now


def build() -> None:
    """Compile MODULES in place with mypyc (needs mypy and a C compiler)."""
    import subprocess
    import tempfile

    src = HERE.parents[1]
    clean()
    with tempfile.TemporaryDirectory() as tmp:
        script = (
            "from setuptools import setup; from mypyc.build import mypycify; "
            f"setup(name='tokenbench-clients', ext_modules=mypycify({[f'tokenbench/clients/{m}.py' for m in MODULES]!r}, "
            f"opt_level='3', group_name={GROUP!r}), script_args=['build_ext', '--inplace', '--build-temp', {tmp!r}])"
        )
        env = {**os.environ, "MYPYC_OPT_LEVEL": "3"}
        try:
            subprocess.run([sys.executable, "-c", script], cwd=src, env=env, check=True, stdout=subprocess.DEVNULL)
        except BaseException:
            clean()  # no half build: the sources run, without a warning
            raise
    MANIFEST.write_text(json.dumps({"sources": fingerprint()}) + "\n")
    print(f"compiled {', '.join(MODULES)} in {HERE}")


def clean() -> None:
    """Remove a build: the sources run."""
    for path in [*_extensions(), *HERE.parents[1].glob(f"{GROUP}__mypyc.*.so"), MANIFEST]:
        path.unlink(missing_ok=True)
