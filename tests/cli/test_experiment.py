"""tokenbench experiment's flags: bad input exits 2 with what to change."""

import pytest
from typer.testing import CliRunner

from tokenbench.cli import app


@pytest.mark.parametrize(
    "args,needle",
    [
        (["experiment", "run"], "FILE or --preset"),
        (["experiment", "run", "--preset", "nosuch"], "choose one of"),
        (["experiment", "run", "--preset", "users", "--scale", "medium"], "--scale must be small, full, ci"),
        (["experiment", "run", "/nonexistent/exp.yaml"], "no such experiment file"),
        (["experiment", "presets", "--show", "nosuch"], "choose one of"),
    ],
)
def test_bad_experiment_input_exit_2(args, needle):
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    assert needle in result.output
