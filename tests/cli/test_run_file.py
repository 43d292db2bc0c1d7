"""`tokenbench run --config FILE` and `--print-config`: a run file's keys are run's flags (without
--, dashes or underscores), its values as the flags take them or YAML/TOML natives; the command
line overrides it flag by flag; a run directory's config.json reads back as one."""

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tokenbench.cli import app

# What differs between two runs of the same settings: where each went and when it ran.
RUN_SPECIFIC = ("out_dir", "clock")


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["run", *args])
    return result.exit_code, result.stdout, result.stderr


def _settings(run_dir: Path) -> dict:
    data = json.loads((run_dir / "config.json").read_text())
    return {k: v for k, v in data.items() if k not in RUN_SPECIFIC}


def _printed(*args: str) -> dict:
    code, out, err = _run(*args, "--print-config")
    assert code == 0, err
    return yaml.safe_load(out)


FLAGS = [
    *("--users", "1,2", "--max-requests", "3", "--ramp-up", "500ms", "--seed", "7"),
    *("--input-tokens", "8", "--output-tokens", "4", "--slo", "ttft=500ms", "--no-live"),
]
FILE = {
    "users": [1, 2],
    "max_requests": 3,
    "ramp-up": "500ms",
    "seed": 7,
    "input-tokens": 8,
    "output_tokens": 4,
    "slo": {"ttft": "500ms"},
    "live": False,
}


def test_a_yaml_run_file_reproduces_a_flags_run(mock_server, tmp_path):
    """The same settings by flags and by a YAML file: the two runs' config.json are equal but for
    where each went and when it ran (out_dir, clock)."""
    url = mock_server(ttft_ms=5, itl_ms=1)
    code, _, err = _run("--url", url, *FLAGS, "--out", str(tmp_path / "flags"))
    assert code == 0, err
    run_file = tmp_path / "run.yaml"
    run_file.write_text(yaml.safe_dump({"url": url, **FILE}))
    code, _, err = _run("--config", str(run_file), "--out", str(tmp_path / "file"))
    assert code == 0, err
    flags, filed = _settings(tmp_path / "flags"), _settings(tmp_path / "file")
    assert [p["users"] for p in filed["loads"]] == [1, 2] and filed["slo"]["ttft_s"] == 0.5
    assert filed == flags


def test_a_flag_overrides_the_file_flag_by_flag(tmp_path):
    """--rate on the command line wins over the file's; --seed 0 too, though it is the default
    (Click says it was given); the file's other keys stay."""
    run_file = tmp_path / "run.yaml"
    run_file.write_text("url: http://127.0.0.1:9\nrate: 4\nduration: 2m\nseed: 5\nwarmup: 10s\n")
    printed = _printed("--config", str(run_file), "--rate", "8", "--seed", "0")
    assert printed["rate"] == 8.0 and "seed" not in printed  # 0: the default, not written
    assert printed["duration"] == 120.0 and printed["warmup"] == 10.0
    assert _printed("--config", str(run_file))["seed"] == 5


def test_a_misspelt_key_names_the_nearest_one(tmp_path):
    run_file = tmp_path / "run.yaml"
    run_file.write_text("url: http://127.0.0.1:9\nrate: 2\nmax-request: 5\n")
    code, _, err = _run("--config", str(run_file))
    assert code == 2
    assert err.strip().count("\n") == 0, err  # one line
    assert "unknown key 'max-request': did you mean max-requests?" in err


def test_a_bad_value_names_its_key(tmp_path):
    run_file = tmp_path / "run.yaml"
    run_file.write_text("url: http://127.0.0.1:9\nrate: 2\nduration: soon\n")
    code, _, err = _run("--config", str(run_file))
    assert code == 2 and "duration: cannot read a duration from 'soon'" in err


def test_a_toml_run_file_reads_as_the_flags(tmp_path):
    run_file = tmp_path / "run.toml"
    run_file.write_text(
        'url = "http://127.0.0.1:9"\nusers = [1, 2]\nmax_requests = 3\nramp-up = "500ms"\nseed = 7\n'
        'input-tokens = 8\noutput_tokens = 4\nslo = "ttft=500ms"\nlive = false\n'
    )
    assert _printed("--config", str(run_file)) == _printed("--url", "http://127.0.0.1:9", *FLAGS)


@pytest.mark.parametrize(
    "flags",
    [
        ["--rate", "1,2.5", "--duration", "30s", "--arrival", "gamma", "--burstiness", "0.5", "--max-concurrency", "4"],
        ["--rate", "2", "--duration", "auto", "--max-duration", "1m", "--precision", "0.05", "--warmup", "auto"],
        ["--stages", "rate=2:20s, rate=8:20s ramp=5s, rate=2:20s", "--duration", "70s"],
        ["--load-shape", "spike:base=2,peak=10,at=20s,for=10s"],
        ["--users", "2", "--max-requests", "4", "--multi-turn", "--turns", "3", "--turn-think-time", "1s"],
        ["--users", "2", "--duration", "10", "--extra-body", '{"top_k": 5}', "--deadlines", "ttft=200ms,tbt=20ms"],
        ["--users", "2", "--duration", "10", "--dataset", "sharegpt", "--sharegpt-sampling", "vllm"],
        ["--num-prompts", "20", "--rate", "inf", "--max-concurrency", "5"],
        ["--users", "3", "--duration", "10", "--workers", "2", "--trials", "2", "--window", "2s"],
        [
            *("--dataset", "trace", "--dataset-path", "tests/fixtures/traces/mooncake_conversation.first400.jsonl"),
            *("--replay-speed", "2", "--replay-end", "30", "--max-concurrency", "8"),
        ],
    ],
)
def test_printed_settings_read_back_as_the_same_settings(tmp_path, flags):
    """--print-config's YAML, given back as --config, prints the same settings again."""
    printed = _printed("--url", "http://127.0.0.1:9", *flags)
    run_file = tmp_path / "printed.yaml"
    run_file.write_text(yaml.safe_dump(printed))
    assert _printed("--config", str(run_file)) == printed


def test_a_run_directory_runs_its_settings_again(mock_server, tmp_path):
    """config.json (or its directory) is a run file: the settings printed from it are the flags',
    and a run from it writes the same settings (out_dir and clock aside)."""
    url = mock_server(ttft_ms=5, itl_ms=1)
    first, again = tmp_path / "first", tmp_path / "again"
    code, _, err = _run("--url", url, *FLAGS, "--out", str(first))
    assert code == 0, err
    expected = _printed("--url", url, *FLAGS)
    assert _printed("--config", str(first / "config.json")) == expected
    assert _printed("--config", str(first)) == expected  # the directory reads as its config.json
    code, _, err = _run("--config", str(first), "--out", str(again))
    assert code == 0, err
    assert _settings(again) == _settings(first)


def test_masked_headers_must_be_given_again(mock_server, tmp_path):
    """config.json masks header values: a run from it asks for them, and takes them from --header."""
    url = mock_server(ttft_ms=5, itl_ms=1)
    first = tmp_path / "first"
    code, _, err = _run("--url", url, *FLAGS, "--header", "X-Key: secret", "--out", str(first))
    assert code == 0, err
    code, _, err = _run("--config", str(first), "--print-config")
    assert code == 2 and "--header's values are masked there" in err
    printed = _printed("--config", str(first), "--header", "X-Key: secret")
    assert printed["header"] == ["X-Key: ***"]  # --print-config masks them too


def test_aliases_and_natives_read_as_the_flags(tmp_path):
    """A flag's alias is a key too (timeout: --request-timeout's); mappings read as the flag's text
    (deadlines as k=v, extra-body as JSON, header as Name: value) and tools as the list itself."""
    run_file = tmp_path / "run.yaml"
    run_file.write_text(
        "url: http://127.0.0.1:9\nrate: '1,2'\nduration: 90\ntimeout: 30s\nendpoint-type: completions\n"
        "deadlines: {ttft: 200ms, tbt: 20ms}\nextra-body: {top_k: 5}\n"
        "tools: [{type: function, function: {name: f, parameters: {type: object}}}]\ntool-choice: f\n"
    )
    flags = [
        *("--url", "http://127.0.0.1:9", "--rate", "1,2", "--duration", "90", "--request-timeout", "30"),
        *("--api", "completions", "--deadlines", "ttft=200ms,tbt=20ms", "--extra-body", '{"top_k": 5}'),
    ]
    tools = tmp_path / "tools.json"
    tools.write_text('[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]')
    expected = _printed(*flags, "--tools", str(tools), "--tool-choice", "f")
    assert _printed("--config", str(run_file)) == expected
    assert expected["request-timeout"] == 30.0 and expected["deadlines"] == "ttft=0.2s,tbt=0.02s"
