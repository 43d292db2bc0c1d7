"""--layer-arg on the command line: refused without a serving layer to give it to."""

import pytest
from typer.testing import CliRunner

from tokenbench.cli import app


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--layer-arg", "stream_batching_interval_ms=0"], "add --backend ray"),
        (["--backend", "vllm", "--model", "m", "--layer-arg", "max_ongoing_requests=8"], "is for a serving layer"),
    ],
)
def test_layer_args_without_a_layer_exit_2_before_launch(args, needle):
    result = CliRunner().invoke(app, ["run", *args, "--users", "1", "--duration", "5"])
    assert result.exit_code == 2, result.output
    assert needle in result.output


def test_a_layer_arg_the_layer_does_not_take_exits_2_before_anything_starts():
    args = ["--backend", "ray", "--upstream", "llamacpp", "--layer-arg", "nope=1"]
    result = CliRunner().invoke(app, ["run", *args, "--users", "1", "--duration", "5"])
    assert result.exit_code == 2, result.output
    assert "stream_batching_interval_ms, max_ongoing_requests" in result.output
    assert "starting" not in result.output
