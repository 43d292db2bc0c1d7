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
