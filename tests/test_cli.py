"""Bad input gets a clear error naming what to fix, and a non-zero exit before any load."""

import pytest
from typer.testing import CliRunner

from tokenbench.cli import app


@pytest.mark.parametrize("args,needle", [
    (["--users", "2", "--rate", "1"], "not both"),
    (["--users", "two"], "--users takes a comma-separated list"),
    (["--users", "2"], "--duration and/or --max-requests"),
    (["--users", "2", "--duration", "5", "--ramp-up", "10"], "longer than --ramp-up"),
    (["--users", "2", "--duration", "5", "--slo", "ttft:5"], "--slo part"),
    (["--users", "2", "--duration", "5", "--dataset", "nope"], "dataset"),
    (["--users", "0", "--duration", "5"], "users"),
    (["--rate", "1", "--duration", "5", "--arrival", "sometimes"], "arrival"),
    (["--url", "localhost:8000", "--users", "1", "--duration", "5"], "--url must look like"),
])
def test_bad_flags_exit_2_with_a_message(args, needle):
    result = CliRunner().invoke(app, ["run", *args])
    assert result.exit_code == 2, result.output
    assert needle in result.output


def test_missing_dataset_file_is_named(tmp_path, start_mock):
    url = start_mock()
    result = CliRunner().invoke(app, ["run", "--url", url, "--users", "1", "--max-requests", "1",
                                      "--dataset", "jsonl", "--dataset-path", str(tmp_path / "none.jsonl"),
                                      "--out", str(tmp_path / "out"), "--no-live"])
    assert result.exit_code == 2 and "none.jsonl" in result.output
