"""backends/_xllamacpp_child.py: llama-server's flags (as the llama.cpp profile renders them) ->
xllamacpp's CommonParams. xllamacpp is stood in for, so nothing is loaded or served; the child's
wait for SIGTERM returns at once."""

from __future__ import annotations

import signal
import sys
import types
from unittest import mock

import pytest

from tokenbench.backends import _xllamacpp_child as child


class _Params:
    def __init__(self) -> None:
        self.model = types.SimpleNamespace(path=None)
        self.cpuparams = types.SimpleNamespace(n_threads=None)
        self.cpuparams_batch = types.SimpleNamespace(n_threads=None)
        draft = types.SimpleNamespace(
            mparams=types.SimpleNamespace(path=""),
            n_max=3,
            cpuparams=types.SimpleNamespace(n_threads=-1),
            cpuparams_batch=types.SimpleNamespace(n_threads=-1),
        )
        ngram = types.SimpleNamespace(size_n=12, size_m=48)
        self.speculative = types.SimpleNamespace(types=["NONE"], draft=draft, ngram_simple=ngram)


# xllamacpp's common_speculative_type members the child names (checked against the wheel below)
_SPEC_TYPE = types.SimpleNamespace(
    **{f"COMMON_SPECULATIVE_TYPE_{n}": n for n in ("DRAFT_SIMPLE", "DRAFT_EAGLE3", "DRAFT_MTP", "NGRAM_SIMPLE")}
)


@pytest.fixture
def served(monkeypatch, capsys):
    """Run the child's main with ``argv``; returns the CommonParams it served with."""
    got: list[_Params] = []

    class Server:
        listening_address = "127.0.0.1:1234"

        def __init__(self, params: _Params) -> None:
            got.append(params)

    fake = types.ModuleType("xllamacpp")
    fake.CommonParams = _Params
    fake.Server = Server
    fake.common_speculative_type = _SPEC_TYPE
    monkeypatch.setitem(sys.modules, "xllamacpp", fake)
    # the child's own view of threading only: its wait for a signal returns at once
    never_waits = types.SimpleNamespace(Event=lambda: types.SimpleNamespace(wait=lambda: True))
    monkeypatch.setattr(child, "threading", never_waits)

    def run(*argv: str) -> _Params:
        with mock.patch.object(sys, "argv", ["xllamacpp-server", *argv]), mock.patch.object(child.signal, "signal"):
            child.main()
        assert capsys.readouterr().out == "LISTENING 127.0.0.1:1234\n"
        return got[-1]

    return run


def test_every_rendered_flag_reaches_its_param(served):
    params = served(
        *("-m", "m.gguf", "--host", "0.0.0.0", "--port", "8081", "-np", "3", "-c", "3072", "-t", "2"),
        *("-a", "smollm2", "--metrics", "--no-cache-prompt", "--slot-save-path", "/tmp/slots", "--cache-ram", "0"),
        *("--api-key", "k1", "--api-key", "k2"),
    )
    assert params.model.path == "m.gguf"
    assert params.model_alias == "smollm2"
    assert params.hostnames == ["0.0.0.0"]
    assert (params.port, params.n_parallel, params.n_ctx) == (8081, 3, 3072)
    assert params.cpuparams.n_threads == params.cpuparams_batch.n_threads == 2
    assert params.cache_prompt is False and params.endpoint_metrics is True
    assert params.slot_save_path == "/tmp/slots" and params.cache_ram_mib == 0
    assert params.api_keys == ["k1", "k2"]


def test_defaults_leave_optional_params_unset(served):
    params = served("-m", "m.gguf", "--port", "9000")
    assert params.hostnames == ["127.0.0.1"]
    assert (params.n_parallel, params.n_ctx, params.cpuparams.n_threads) == (4, 8192, 1)
    assert params.cache_prompt is True and params.endpoint_metrics is False
    for unset in ("model_alias", "slot_save_path", "cache_ram_mib", "api_keys"):
        assert not hasattr(params, unset)


def test_a_signal_exits_cleanly():
    with pytest.raises(SystemExit) as exc:
        child._exit_now(signal.SIGTERM, None)
    assert exc.value.code == 0


def test_speculation_flags_reach_the_speculative_params(served):
    params = served(
        *("-m", "m.gguf", "--port", "1", "-t", "3", "--spec-type", "draft-simple", "--spec-draft-model", "d.gguf"),
        *("--spec-draft-n-max", "5"),
    )
    spec = params.speculative
    assert spec.types == ["DRAFT_SIMPLE"] and spec.draft.mparams.path == "d.gguf" and spec.draft.n_max == 5
    assert spec.draft.cpuparams.n_threads == spec.draft.cpuparams_batch.n_threads == 3  # the server's threads
    params = served(
        *("-m", "m.gguf", "--port", "1", "--spec-type", "ngram-simple"),
        *("--spec-ngram-simple-size-n", "3", "--spec-ngram-simple-size-m", "6"),
    )
    spec = params.speculative
    assert spec.types == ["NGRAM_SIMPLE"] and (spec.ngram_simple.size_n, spec.ngram_simple.size_m) == (3, 6)
    assert spec.draft.mparams.path == "" and spec.draft.cpuparams.n_threads == -1  # no draft model: untouched
    assert served("-m", "m.gguf", "--port", "1", "--model-draft", "d.gguf").speculative.draft.mparams.path == "d.gguf"
    assert served("-m", "m.gguf", "--port", "1").speculative.types == ["NONE"]  # none asked: as it came


def test_an_unknown_spec_type_is_a_usage_error(served):
    with pytest.raises(SystemExit) as exc:
        served("-m", "m.gguf", "--port", "1", "--spec-type", "medusa")
    assert exc.value.code == 2


def test_the_spec_types_are_the_wheels():
    xlc = pytest.importorskip("xllamacpp")
    for name in child.SPEC_TYPES:
        assert hasattr(xlc.common_speculative_type, "COMMON_SPECULATIVE_TYPE_" + name.upper().replace("-", "_"))
