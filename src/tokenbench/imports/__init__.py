"""Other tools' results as tokenbench run directories (``tokenbench import``).

A reader (one module per tool: vllm_bench.py) turns a tool's per-request output into an
``ImportedRun``: each benchmark in the file a point, each request as the tool recorded it (its
start, its first-token time, the gaps between its chunks, its end, its token counts, its error),
the tool's own headline figures beside, and what the tool did not record. ``write_run_dir`` writes
that as a run directory (config.json, records.jsonl, samples.jsonl with each point's span) and
derives results.json from it by the one path a native run's goes through (rundir.derive), so every
figure is tokenbench's definition over the tool's requests; results.json's ``imported`` keeps the
tool's own figures and, metric by metric, the difference and the definition that explains it
(definitions.py). Everything that reads a run directory (report, compare, history, export) then
reads an imported one. A format of aggregates only (benchmark_report.py: llm-d's Benchmark Report)
gives points without requests: no records, tokenbench's figures absent, the tool's in
``imported`` (``aggregate_only``), which report, compare and the gate read instead.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tokenbench.errors import BadInput
from tokenbench.imports import aiperf, benchmark_report, guidellm, inference_perf, vllm_bench
from tokenbench.imports.tool_run import ImportedRun, ToolPoint, ToolRequest
from tokenbench.imports.write import write_run_dir

__all__ = ["ImportedRun", "ToolPoint", "ToolRequest", "read", "write_run_dir"]

Reader = Callable[[Path], ImportedRun | None]  # None: not this tool's file


def read(path: Path) -> ImportedRun:
    """The first reader that knows ``path``; BadInput naming the formats known when none does."""
    readers: dict[str, Reader] = {"vllm bench serve --save-result --save-detailed (JSON)": vllm_bench.read}
    readers["aiperf profile's --artifact-dir (directory)"] = aiperf.read
    readers["guidellm run --output kind=json (benchmarks.json)"] = guidellm.read
    readers["inference-perf's report directory (report.request_lifecycle.per_request: true)"] = inference_perf.read
    readers["llm-d Benchmark Report v0.2.x (JSON or YAML, or a directory of them)"] = benchmark_report.read
    if not path.exists():
        raise BadInput(f"{path}: no such file or directory; give a result of one of: {'; '.join(readers)}")
    for reader in readers.values():
        run = reader(path)
        if run is not None:
            return run
    raise BadInput(f"{path}: not a result file tokenbench can import; it reads: {'; '.join(readers)}")
