"""The engine options (cli/engine.py): a knob the backend cannot take, or one without a launch, is
refused before anything starts."""

import pytest
from typer.testing import CliRunner

from tokenbench.cli import app


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--backend", "nosuch", "--model", "m"], "not a known backend"),
        (["--backend", "vllm"], "pass --model"),
        (["--backend", "ollama", "--model", "m", "--prefix-caching"], "--engine-arg"),
        (["--backend", "vllm", "--model", "m", "--kv-memory", "1.5"], "--kv-memory"),
        (["--url", "http://127.0.0.1:1", "--max-num-seqs", "4"], "launched"),
        (["--backend", "vllm", "--model", "m", "--engine-env", "NOEQUALS"], "KEY=VALUE"),
        (["--upstream", "llamacpp"], "add --backend triton"),
        (["--backend", "vllm", "--model", "m", "--upstream", "llamacpp"], "is an engine, not a serving layer"),
    ],
)
def test_bad_backend_flags_exit_2_before_launch(args, needle):
    result = CliRunner().invoke(app, ["run", *args, "--users", "1", "--duration", "5"])
    assert result.exit_code == 2, result.output
    assert needle in result.output
