"""The docs and the CLI agree.

- Every flag README.md and docs/*.md name in code (inline code spans and fenced blocks) is an
  option of some tokenbench command (collected by walking the Typer app's click command tree),
  or one of `vllm bench serve`'s names that `run` takes (vllm_flags.aliases), or another tool's
  flag listed in OTHER_TOOLS with the tool's name.
- Every option of `run` and `capacity` (the same walk) is named somewhere in README.md or
  docs/*.md.
- Every relative link in them points at a file that exists and, with an anchor, at one of its
  headings.

So this fails when a flag is renamed or removed (the docs still name the old one), and when a
flag is added to `run` or `capacity` without a word in the docs: document it, or, for a flag of
another tool quoted in the docs, add it to OTHER_TOOLS.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tokenbench.cli import app

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Flags the docs quote that belong to other programs, and whose.
OTHER_TOOLS = {
    "--any-native-flag": "a placeholder for an engine's own flag (--engine-arg=--any-native-flag)",
    "--api-key": "engines' credential flag (masked in logs)",
    "--slot-save-path": "llama.cpp's llama-server",
    "--cache-ram": "llama.cpp's llama-server",
    "--mmproj": "llama.cpp's llama-server (multimodal projector; images)",
    "--enable-metrics": "SGLang's launch_server",
    "--enable-trace": "SGLang's launch_server (its OTLP spans)",
    "--otlp-traces-endpoint": "vLLM's and SGLang's servers (where their spans go)",
    "--per-chunk-usage": "AIPerf",
    "--no-deps": "pip",
    "--chunk-tokens": "benchmarks/summarize.py",
    "--in-memory": "benchmarks/summarize.py",
    "--full": "benchmarks/soak.py",
    "--quick": "benchmarks/request_overhead.py, benchmarks/client_overhead.py",
    "--rounds": "benchmarks/request_overhead.py",
    "--only": "benchmarks/conformance.py (run one peer tool)",
    "--scheduling-policy": "vLLM's serve",
    "--lora-paths": "SGLang's launch_server",
    "--max-loras-per-batch": "SGLang's launch_server",
    "--lora": "llama.cpp's llama-server",
    "--structured-output-ratio": "vllm bench serve (not supported: docs/workloads.md)",
    "--enable-auto-tool-choice": "vLLM serve (a named tool_choice needs it: docs/workloads.md)",
    "--tool-call-parser": "vLLM serve (a named tool_choice needs it: docs/workloads.md)",
    "--no-oversample": "vllm bench serve (no counterpart: docs/workloads.md, ShareGPT sampling)",
    "--save-detailed": "vllm bench serve (its per-request result, what tokenbench import reads)",
    "--output": "GuideLLM's guidellm run (--output kind=json: the report tokenbench import reads)",
    "--metrics": "GuideLLM's guidellm run (--metrics sample_size=0: no prompts or replies kept)",
    "--disable-shuffle": "vllm bench serve (no counterpart: docs/workloads.md, ShareGPT sampling)",
    "--sharegpt-context-len": "SGLang's bench_serving (no counterpart: docs/workloads.md, ShareGPT sampling)",
    # speculative decoding and per-request metrics: the engines' own flags (docs/backends.md)
    "--speculative-config": "vLLM's serve",
    "--enable-per-request-metrics": "vLLM's serve",
    "--per-request-spec-decode-metrics": "vLLM's serve",
    "--disable-log-stats": "vLLM's serve",
    "--kv-cache-memory-bytes": "vLLM's serve (its KV cache in bytes, on CPU)",
    "--speculative-algorithm": "SGLang's launch_server",
    "--speculative-num-steps": "SGLang's launch_server",
    "--speculative-eagle-topk": "SGLang's launch_server",
    "--speculative-num-draft-tokens": "SGLang's launch_server",
    "--speculative-draft-model-path": "SGLang's launch_server",
    "--speculative-ngram-max-trie-depth": "SGLang's launch_server",
    "--spec-type": "llama.cpp's llama-server",
    "--spec-draft-n-max": "llama.cpp's llama-server",
    "--spec-ngram-simple-size-n": "llama.cpp's llama-server",
    "--spec-ngram-simple-size-m": "llama.cpp's llama-server",
    "--draft-max": "llama.cpp's llama-server (removed in the xllamacpp wheel's build)",
    "--draft-min": "llama.cpp's llama-server (removed in the xllamacpp wheel's build)",
    "--draft": "llama.cpp's llama-server (removed in the xllamacpp wheel's build)",
    "--threads": "llama.cpp's llama-server (a fleet replica's share of the cores)",
    # the routers' own flags (docs/backends.md, routers and fleets)
    "--disable-retries": "vllm-router and sglang-router",
    "--worker-startup-check-interval": "vllm-router and sglang-router",
    "--disable-circuit-breaker": "vllm-router and sglang-router",
    "--artifact-dir": "aiperf profile (its output directory, what tokenbench import reads)",
    "--arrival-pattern": "aiperf profile",
    "--concurrency": "aiperf profile",
    "--export-level": "aiperf profile (records: its per-request file, what tokenbench import reads)",
}
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9](?![\w*-])")  # not vLLM's --ramp-up-*-rps glob
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
SPAN = re.compile(r"`([^`]+)`")  # a span may wrap a line
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+)$", re.M)


def _code(text: str) -> list[str]:
    """The text of every fenced block and inline code span."""
    blocks = FENCE.findall(text)
    return blocks + SPAN.findall(FENCE.sub("", text))


def documented_flags() -> dict[str, set[str]]:
    """flag -> the doc files naming it in code."""
    found: dict[str, set[str]] = {}
    for path in DOCS:
        for code in _code(path.read_text()):
            for flag in FLAG.findall(code):
                found.setdefault(flag, set()).add(path.relative_to(ROOT).as_posix())
    return found


def _options(command: object) -> list[list[str]]:
    """Each option of a click command: its long names (a boolean's --x and --no-x together)."""
    return [
        [name for name in (*param.opts, *param.secondary_opts) if name.startswith("--")]
        for param in command.params  # type: ignore[attr-defined]
        if getattr(param, "param_type_name", "") == "option"
    ]


def commands() -> dict[str, object]:
    """Every command of the app by its path ('run', 'experiment presets', '' for the app)."""
    found: dict[str, object] = {}

    def walk(command: object, path: str) -> None:
        found[path] = command
        for name, sub in (getattr(command, "commands", None) or {}).items():
            walk(sub, f"{path} {name}".strip())

    walk(typer.main.get_command(app), "")
    return found


def cli_flags() -> set[str]:
    from tokenbench.cli.vllm_flags import aliases

    flags = {name for command in commands().values() for option in _options(command) for name in option}
    return flags | set(aliases()) | {"--help"}  # --help: click's own, on every command


def test_the_walk_finds_every_command_and_their_options():
    found = commands()
    for path in ("run", "capacity", "report", "recompute", "export", "compare", "mock", "calibrate"):
        assert path in found
    assert {"backends show", "experiment run", "experiment presets"} <= set(found)
    run = {name for option in _options(found["run"]) for name in option}
    assert {"--url", "--users", "--rate", "--keep-text", "--no-keep-text", "--ready-timeout"} <= run
    assert "--tolerance" in {name for option in _options(found["capacity"]) for name in option}


def test_the_scan_reads_code_spans_and_blocks_only():
    text = "run --prose-flag here\n`--span-flag x` and `--ramp-up-*-rps`, `--wrapped\nspan`\n```sh\ntokenbench run --block-flag 1\n```\n"
    flags = {flag for code in _code(text) for flag in FLAG.findall(code)}
    assert flags == {"--span-flag", "--wrapped", "--block-flag"}


def test_every_flag_the_docs_name_exists():
    known = cli_flags() | set(OTHER_TOOLS)
    unknown = {flag: sorted(files) for flag, files in documented_flags().items() if flag not in known}
    assert not unknown, f"flags the docs name that no tokenbench command has (renamed? removed?): {unknown}"


@pytest.mark.parametrize("path", ["run", "capacity"])
def test_every_flag_of_run_and_capacity_is_documented(path):
    documented = set(documented_flags())
    missing = [names for names in _options(commands()[path]) if names and not documented & set(names)]
    assert not missing, f"`tokenbench {path}` options named nowhere in README.md or docs/*.md: {missing}"


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_anchor(h) for h in HEADING.findall(FENCE.sub("", path.read_text()))}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_relative_link_resolves(doc):
    broken = []
    for target in LINK.findall(FENCE.sub("", doc.read_text())):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        if not path.exists() or (anchor and anchor not in _anchors(path)):
            broken.append(target)
    assert not broken, f"{doc.name}: links to nothing: {broken}"


def test_readme_keeps_the_quickstart_and_the_exit_codes():
    from tokenbench.errors import BAD_INPUT_EXIT, BUG_EXIT, SERVER_FAILED_EXIT

    readme = (ROOT / "README.md").read_text()
    quickstart = readme[readme.index("## Quickstart") :]
    block = FENCE.search(quickstart)
    assert block is not None
    assert [line.split()[:2] for line in block.group(1).splitlines()] == [["make", "run"], ["make", "test"]]
    codes = readme[readme.index("## Exit codes") :]
    codes = codes[: codes.index("\n## ")]
    for code in (0, 1, BAD_INPUT_EXIT, 3, SERVER_FAILED_EXIT, BUG_EXIT, 130, 143):
        assert re.search(rf"^\| [0-9, ]*\b{code}\b[0-9, ]* \|", codes, re.M), f"exit code {code} not in README"


def test_help_texts_the_docs_point_to_render_whole():
    runner = CliRunner()
    run_help = runner.invoke(app, ["run", "--help", "all"], env={"COLUMNS": "250"})
    assert run_help.exit_code == 0, run_help.output
    assert "pip install 'tokenbench[ray]'" in run_help.output  # Rich markup would eat an unescaped [ray]
    presets = runner.invoke(app, ["experiment", "presets"])
    assert presets.exit_code == 0, presets.output
    from tokenbench.experiments.presets import PRESETS

    for name in PRESETS:
        assert f"``{name}``:" in presets.output  # each preset is described
    assert "two studies" not in presets.output
