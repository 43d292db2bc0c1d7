"""`vllm bench serve`'s flags: translated to tokenbench's (one table), or refused with what to use;
a vllm bench command line runs as vLLM would run it."""

import pytest
from typer.testing import CliRunner

from tokenbench.cli import app


@pytest.mark.parametrize(
    "vllm,ours",
    [
        ("--request-rate 4 --base-url http://h:1", "--rate 4 --url http://h:1"),
        (
            "--dataset-name random --random-input-len 512 --random-output-len 64",
            "--dataset synthetic --input-tokens 512 --output-tokens 64",
        ),
        ("--dataset-name=sharegpt --sharegpt-output-len 100", "--dataset sharegpt --output-tokens 100"),
        ("--goodput ttft:500 e2el:3000 tpot:50", "--slo ttft=500ms,e2e=3000ms,tpot=50ms"),
        ("--header A=1 B:2", "--header A:~1 --header B:2"),
        ("--endpoint /v1/chat/completions --backend vllm", "--api chat --backend vllm"),
        ("--backend openai", "--api completions"),
        ("--host 10.0.0.1 --port=9000", "--url http://10.0.0.1:9000"),
        ("--port 9000", "--url http://127.0.0.1:9000"),
        ("--request-rate inf --num-prompts 8", "--rate inf --num-prompts 8"),  # run_flags: all at once
        ("--temperature 0 --top-k 5", '--extra-body {"temperature":~0.0,~"top_k":~5}'),
        ('--extra-body {"seed":3,"top_k":1} --top-k 5', '--extra-body {"seed":~3,~"top_k":~5}'),
        ("--save-result --disable-tqdm --result-dir d", "--no-live --out d"),
        ("--percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,99.0,99.9", ""),
        ("--random-range-ratio 0 --random-prefix-len 0", ""),
        (
            "--random-prefix-len 64 --random-input-len 128",
            "--prefix-groups 1 --prefix-tokens 64 --input-tokens 128",
        ),
        ("--users 4 --num-prompts 10 --engine-arg=--port=1", "--users 4 --num-prompts 10 --engine-arg=--port=1"),
    ],
)
def test_vllm_bench_flags_become_tokenbenchs(vllm, ours):
    from tokenbench.cli.vllm_flags import translate

    assert translate(vllm.split()) == [a.replace("~", " ") for a in ours.split()]  # ~: a space


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--dataset-name", "sonnet"], "--dataset jsonl"),
        (["--endpoint", "/generate"], "--api"),
        (["--num-warmups", "3"], "--warmup SECONDS"),
        (["--ramp-up-strategy", "linear"], "--ramp-up"),
        (["--random-range-ratio", "0.3"], "exactly --input-tokens"),
        (["--random-prefix-len", "-8"], "whole number of tokens"),
        (["--random-prefix-len", "many"], "whole number of tokens"),
        (["--metric-percentiles", "25,99"], "p50, p90, p95, p99 and p99.9"),
        (["--percentile-metrics", "ttft,foo"], "foo"),
        (["--goodput", "ttft=500"], "KEY:MILLISECONDS"),
        (["--temperature", "hot"], "takes a number"),
        (["--extra-body", "[1]"], "JSON object"),
        (["--host", "h", "--base-url", "http://h:1"], "keep one"),
        (["--rate", "1", "--duration", "5", "--burstiness", "0.5", "--arrival", "poisson"], "--arrival gamma"),
    ],
)
def test_vllm_bench_flags_that_mean_something_else_are_refused(args, needle):
    result = CliRunner().invoke(app, ["run", *args])
    assert result.exit_code == 2, result.output
    assert needle in result.output


def test_a_vllm_bench_command_line_runs_as_vllm_would(mock_server, tmp_path):
    """N prompts, each sent once, at the request rate, Poisson unless bursty, sampling parameters
    in the body: what `vllm bench serve` would send, recorded under tokenbench's own names."""
    import json

    url = mock_server(ttft_ms=5, itl_ms=1, output_tokens=8)
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--base-url",
            url,
            "--request-rate",
            "50",
            "--burstiness",
            "0.5",
            "--num-prompts",
            "12",
            "--dataset-name",
            "random",
            "--random-input-len",
            "16",
            "--random-output-len",
            "8",
            "--temperature",
            "0",
            "--goodput",
            "ttft:500",
            "--result-dir",
            str(out),
            "--disable-tqdm",
            "--save-result",
        ],
    )
    assert result.exit_code == 0, result.output
    config = json.loads((out / "config.json").read_text())
    assert config["loads"] == [
        {"kind": "rate", "rate_per_s": 50.0, "arrival": "gamma", "burstiness": 0.5, "max_concurrency": None}
    ]
    assert config["stop"]["max_requests"] == 12 and config["stop"]["duration_s"] is None
    assert config["dataset"]["name"] == "synthetic" and config["dataset"]["num_prompts"] == 12
    assert (config["dataset"]["input_tokens"], config["dataset"]["output_tokens"]) == (16, 8)
    assert config["target"]["extra_body"] == {"temperature": 0.0} and config["slo"]["ttft_s"] == 0.5
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert len(records) == 12 and all(r["outcome"] == "ok" for r in records)


def test_run_help_lists_the_vllm_names_in_their_own_section():
    from tokenbench.cli.vllm_flags import NO_VALUE, REFUSED, SAMPLING, WITH_VALUE, WITH_VALUES, aliases

    known = aliases()
    assert {*WITH_VALUE, *WITH_VALUES, *SAMPLING, *NO_VALUE, *REFUSED, "--host", "--port"} <= set(known)
    assert known["--base-url"] == "as --url" and known["--disable-tqdm"] == "as --no-live"
    assert known["--num-warmups"].startswith("refused: tokenbench warms up by time")
    result = CliRunner().invoke(app, ["run", "--help", "vllm"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    section = result.output[result.output.index("vllm bench serve's flags") :]
    for name in ("--request-rate", "--random-input-len", "--goodput", "--temperature", "--num-warmups", "--host"):
        assert name in section
    assert "--prefix-cache" not in section  # ours are options of their own groups
    every = CliRunner().invoke(app, ["run", "--help", "all"], env={"COLUMNS": "200"}).output
    assert every.index("--prefix-cache") < every.index("vllm bench serve's flags")  # ours above


def test_random_prefix_len_is_one_shared_prefix_extra_to_the_input(mock_server, tmp_path):
    """vLLM's --random-prefix-len N prepends one prefix of N tokens to every prompt, extra to
    --random-input-len: one prefix group of N tokens, every request reusing it after the first."""
    import json

    url = mock_server(ttft_ms=1, itl_ms=1, output_tokens=2)
    out = tmp_path / "run"
    args = "--random-prefix-len 32 --random-input-len 16 --num-prompts 5 --users 1 --no-live"
    result = CliRunner().invoke(app, ["run", "--url", url, *args.split(), "--out", str(out)])
    assert result.exit_code == 0, result.output
    shared = json.loads((out / "results.json").read_text())["dataset"]["shared_prefix"]
    assert (shared["groups"], shared["tokens"]) == (1, 32)
    assert shared["expected_reuse"]["block_fraction"] == 4 / 5  # the first request misses


def test_lora_modules_names_are_a_lora_mix_and_name_path_pairs_the_engines():
    from tokenbench.cli.vllm_flags import FlagError, translate

    assert translate(["--lora-modules", "a", "b", "--lora-assignment", "round-robin"]) == ["--lora-mix", "a=1,b=1"]
    assert translate(["--lora-modules", "a=/x", "b=/y"]) == ["--lora-modules", "a=/x", "--lora-modules", "b=/y"]
    with pytest.raises(FlagError, match="not both"):
        translate(["--lora-modules", "a", "b=/y"])
    with pytest.raises(FlagError, match="--lora-assignment sticky"):
        translate(["--lora-assignment", "sticky"])
