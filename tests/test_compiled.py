"""the compiled client: the client's hot path compiled with mypyc (clients/compiled.py). A build older than its
sources never runs; in make test's compiled tier (TOKENBENCH_EXPECT_COMPILED=1) the build is what runs."""

import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tokenbench
from tokenbench.clients import compiled
from tokenbench.clients.compiled import MODULES, state

SRC = Path(tokenbench.__file__).resolve().parents[1]
SO = importlib.machinery.EXTENSION_SUFFIXES[0]  # ".cpython-311-x86_64-linux-gnu.so"


def _copy(tmp_path: Path) -> Path:
    """src/tokenbench copied (sources only) under tmp_path; its clients package."""
    shutil.copytree(SRC / "tokenbench", tmp_path / "tokenbench", ignore=shutil.ignore_patterns("*.so", "compiled.json"))
    return tmp_path / "tokenbench" / "clients"


def test_a_build_runs_only_while_it_matches_its_sources(tmp_path):
    here = _copy(tmp_path)
    assert state(here) == "source"
    (here / f"http1{SO}").write_bytes(b"not a library")
    assert state(here) == "stale"  # no record of what it was built from
    (here / "compiled.json").write_text(json.dumps({"sources": compiled.fingerprint(here)}))
    assert state(here) == "compiled"
    with (here / "sse.py").open("a") as f:
        f.write("\n# an edit after the build\n")
    assert state(here) == "stale"
    (here / "compiled.json").write_text(json.dumps({"sources": compiled.fingerprint(here)}))
    with (here.parent / "records.py").open("a") as f:  # a module the build imports, not one it compiles
        f.write("\n# an edit after the build\n")
    assert state(here) == "stale"


def test_a_stale_build_is_not_imported_its_sources_are_and_it_says_so(tmp_path):
    """A broken library beside http1.py, older than its source: importing the client runs the
    source (without the guard the import fails on the library), with a warning naming the fix."""
    here = _copy(tmp_path)
    (here / f"http1{SO}").write_bytes(b"not a library")
    code = "import tokenbench.clients as c, tokenbench.clients.http1 as h; print(c.COMPILED, h.__file__)"
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    env.pop("TOKENBENCH_COMPILED", None)  # (make check's tiers set it: the sources, quietly)
    done = subprocess.run([sys.executable, "-W", "always", "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["stale", str(here / "http1.py")]
    assert "older than its sources" in done.stderr and "make compiled" in done.stderr


@pytest.mark.skipif(os.environ.get("TOKENBENCH_EXPECT_COMPILED") != "1", reason="make test's compiled tier only")
def test_the_compiled_tier_runs_the_build():
    import importlib

    import tokenbench.clients

    assert tokenbench.clients.COMPILED == "compiled"
    for name in MODULES:
        module = importlib.import_module(f"tokenbench.clients.{name}")
        assert module.__file__ is not None and module.__file__.endswith(".so"), module.__file__


def test_tokenbench_compiled_0_runs_the_sources_of_any_build_quietly(tmp_path):
    """make check's and make test's tiers (TOKENBENCH_COMPILED=0) test the sources where a build
    is in place; the build (here a broken library, recorded as current) is not touched."""
    here = _copy(tmp_path)
    (here / f"http1{SO}").write_bytes(b"not a library")
    (here / "compiled.json").write_text(json.dumps({"sources": compiled.fingerprint(here)}))
    code = "import tokenbench.clients as c, tokenbench.clients.http1 as h; print(c.COMPILED, h.__file__)"
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "TOKENBENCH_COMPILED": "0"}
    done = subprocess.run([sys.executable, "-W", "always", "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["off", str(here / "http1.py")]
    assert "older than its sources" not in done.stderr
    (here / "compiled.json").write_text("{}")  # a stale build too: the sources, quietly
    done = subprocess.run([sys.executable, "-W", "always", "-c", code], env=env, capture_output=True, text=True)
    assert done.stdout.split() == ["off", str(here / "http1.py")] and "older" not in done.stderr, done.stderr
    (here / "compiled.json").write_text(json.dumps({"sources": compiled.fingerprint(here)}))
    env["TOKENBENCH_COMPILED"] = "1"  # the build runs: this one is not a library
    assert subprocess.run([sys.executable, "-c", code], env=env, capture_output=True).returncode != 0
