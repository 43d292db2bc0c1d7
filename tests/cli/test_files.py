"""tokenbench report, compare (cli/files.py): a path that is not a run exits 2 and says so."""

import pytest
from typer.testing import CliRunner

from tokenbench.cli import app


@pytest.mark.parametrize(
    "args,needle",
    [
        (["report", "/nonexistent/dir"], "not a run directory"),
        (["compare", "/nonexistent/a"], "at least two"),
    ],
)
def test_bad_report_input_exit_2(args, needle):
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    assert needle in result.output
