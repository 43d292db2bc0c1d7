"""How long `tokenbench model predict` takes for loads far longer than any run (a program, not a
test; the server model: "a prediction of a load 10x longer than any run takes seconds").

A model with known parameters (the mock's: 10 ms steps, 40 ms overhead, 4 or 64 slots; or a
vLLM-like one whose step grows with the batch and the prompt) predicts open-loop and closed-loop
points of 30 s to 600 s of virtual time; the table gives the requests and tokens simulated and the
wall time of each prediction (dataset, simulation, derive's results and the files written).

    python benchmarks/model_predict.py           # 30, 120 and 600 s points
    python benchmarks/model_predict.py --quick   # 30 s points only
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from tokenbench.config import DatasetConfig, LoadPoint, RateLoad, RunConfig, StopConfig, TargetConfig, UsersLoad
from tokenbench.model.params import Param, ServerModel
from tokenbench.model.predict import predict


def _model(name: str) -> ServerModel:
    if name == "mock-like":
        values = {"step_base_s": 0.010, "first_token_overhead_s": 0.040, "max_num_seqs": 4.0}
    else:  # vllm-like: the step grows with the batch and the prefill
        values = {
            "step_base_s": 0.015,
            "step_per_seq_s": 0.002,
            "step_per_prefill_token_s": 0.00005,
            "first_token_overhead_s": 0.005,
            "max_num_seqs": 64.0,
        }
    return ServerModel(params={k: Param(value=v, constrained=True) for k, v in values.items()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="30 s points only")
    args = parser.parse_args()
    durations = [30.0] if args.quick else [30.0, 120.0, 600.0]
    cases: list[tuple[str, LoadPoint]] = [
        ("mock-like", RateLoad(rate_per_s=8)),
        ("mock-like", UsersLoad(users=16)),
        ("vllm-like", RateLoad(rate_per_s=20)),
        ("vllm-like", UsersLoad(users=64)),
    ]
    table = Table(title="tokenbench model predict: wall time by virtual duration")
    for column in ("model", "load", "virtual s", "requests", "output tokens (about)", "wall s", "virtual s per wall s"):
        table.add_column(column, justify="right")
    with tempfile.TemporaryDirectory() as tmp:
        k = 0
        for name, load in cases:
            for duration in durations:
                config = RunConfig(
                    target=TargetConfig(url="http://model"),
                    loads=[load],
                    stop=StopConfig(duration_s=duration),
                    dataset=DatasetConfig(input_tokens=256, output_tokens=64, num_prompts=50),
                    live=False,
                )
                out = Path(tmp) / f"p{k}"
                k += 1
                prediction = predict(config, _model(name), name, out)
                point = prediction.results.points[0]
                table.add_row(
                    name,
                    point.label,
                    f"{duration:g}",
                    str(point.requests_in_window.total),
                    f"{point.output_tokens_per_s * duration:.0f}",
                    f"{prediction.wall_s:.2f}",
                    f"{duration / prediction.wall_s:.0f}",
                )
    Console().print(table)


if __name__ == "__main__":
    main()
