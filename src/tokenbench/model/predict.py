"""A prediction as a run directory: the run's own settings (a RunConfig from `tokenbench run`'s
flags), each point simulated in virtual time (drive.py) and written as a run writes it
(config.json, records.jsonl, samples.jsonl's point events), each point's results derived by the
one path (derive.point_result), and results.json marked ``predicted``. So `tokenbench report`,
`compare` and `recompute` read it as any run (recompute drops the ``predicted`` mark: it derives
from the files alone).

A plan (a callable from the results so far to the next load, as runner.run takes; capacity's
CapacityPlan) chooses the points; without one, the config's loads in order.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tokenbench import __version__
from tokenbench.config import LoadPoint, RunConfig
from tokenbench.datasets import build_requests, trace_info, trace_plan
from tokenbench.datasets.trace_requests import ContextGuard
from tokenbench.errors import BadInput
from tokenbench.loadgen.schedule import replay_window
from tokenbench.loadgen.source import RequestSource, TraceSource
from tokenbench.model.drive import PointDriver
from tokenbench.model.engine import Routing
from tokenbench.model.observe import PREDICTED_URL
from tokenbench.model.params import LIMITS, ServerModel
from tokenbench.results import Clock, Predicted, RunResults, Tool
from tokenbench.results.layout import CONFIG, RECORDS, RESULTS, SAMPLES
from tokenbench.results.manifest import PointStart, RunManifest, ServerFacts, TargetFacts
from tokenbench.rundir import write_json
from tokenbench.rundir.derive import point_result, results_header
from tokenbench.telemetry.sampler import SamplesFile

Plan = Callable[[RunResults], LoadPoint | None]
GAP_S = 1.0  # virtual seconds between two points (the server idle, as between a run's points)


@dataclass(frozen=True)
class Prediction:
    results: RunResults
    run_dir: Path
    wall_s: float  # how long the simulation took on this machine


def interval_of(model: ServerModel) -> float | None:
    """The relative half-width the model claims for its mean figures: the worst of its fit's
    per-point errors and its last validation's."""
    errors = [abs(e) for p in model.points for e in p.error.values() if e is not None]
    if model.validation is not None and model.validation.max_abs_error is not None:
        errors.append(model.validation.max_abs_error)
    return max(errors) if errors else None


def predict(
    config: RunConfig,
    model: ServerModel,
    model_name: str,
    run_dir: Path,
    replicas: int = 1,
    routing: Routing = "round-robin",
    plan: Plan | None = None,
) -> Prediction:
    """Simulate ``config``'s points (or ``plan``'s) against ``model``; write ``run_dir``."""
    if config.sessions is not None:
        raise BadInput("--multi-turn: the model predicts single requests; sessions are not modelled yet")
    if config.target.pooling:
        raise BadInput(f"--api {config.target.api}: the model predicts streamed generation only")
    began = time.perf_counter()
    run_dir.mkdir(parents=True, exist_ok=True)
    for name in (RECORDS, SAMPLES):
        if (run_dir / name).exists():
            raise BadInput(f"--out {run_dir} already holds a run ({name}): choose a new directory")
    source: RequestSource | TraceSource
    if config.dataset.name == "trace":  # its rows as the replay reaches them, unguarded
        api = config.target.api or "chat"
        recipe = trace_plan(config.dataset, config.seed, replay_window(config.loads), False, ContextGuard(), api)
        source = TraceSource(recipe, None)
        info = trace_info(config.dataset, source.trace, source.trace.facts(None), None)
    else:
        requests, info = build_requests(config.dataset, None, config.seed)
        source = RequestSource(requests)
    server = model.server
    manifest = RunManifest(
        config=config,
        resolved_target=TargetFacts(
            url=f"{PREDICTED_URL}{model_name}", model=server.get("model"), api=config.target.api
        ),
        backend=ServerFacts(
            backend=server.get("backend"),
            engine=f"predicted: {server.get('engine') or 'server'} (tokenbench model)",
            knobs={name: model.value(name) for name in LIMITS},
        ),
        dataset_info=info,
        tool=Tool(name="tokenbench", version=__version__),
        clock=Clock(origin_monotonic_s=0.0, origin_unix_s=time.time(), unit="s (virtual)"),
    )
    write_json(run_dir / CONFIG, manifest.to_json())
    samples_path = run_dir / SAMPLES
    samples_path.touch()
    samples = SamplesFile(samples_path)
    results = results_header(manifest, "run")
    loads = iter(config.loads)
    choose: Plan = plan if plan is not None else (lambda _: next(loads, None))
    start_s, preemptions, index = 0.0, 0, 0
    with (run_dir / RECORDS).open("w") as records_file, samples_path.open("a") as samples_file:
        while (load := choose(results)) is not None:
            source.start_point(load, config.seed)
            seed = config.seed + index  # a point's arrivals: the seed plus its index, as runner.run draws them
            driver = PointDriver(model, index, load, config.stop, source, seed, start_s, replicas, routing)
            simulated = driver.run()
            event = simulated.event
            start = PointStart(
                index=index,
                load=load,
                start_s=event.start_s,
                ramp_end_s=event.ramp_end_s,
                window_start_s=event.window_start_s,
            )
            for record in simulated.records:
                records_file.write(json.dumps(record.to_json()) + "\n")
            samples_file.write(json.dumps(start.to_json()) + "\n")
            samples_file.write(json.dumps(event.to_json()) + "\n")
            records_file.flush()
            samples_file.flush()
            results = results.with_point(point_result(manifest, event, simulated.records, samples))
            preemptions += simulated.preemptions
            start_s = event.end_s + GAP_S
            index += 1
    predicted = Predicted(
        model=model_name,
        replicas=replicas,
        routing=routing,
        knobs={name: model.value(name) for name in LIMITS},
        interval=interval_of(model),
        validation_run=model.validation.run if model.validation is not None else None,
        validation_error=model.validation.max_abs_error if model.validation is not None else None,
        simulated_s=start_s,
        preemptions=preemptions,
    )
    results = results.finished(False).model_copy(update={"predicted": predicted})
    write_json(run_dir / RESULTS, results.to_json())
    return Prediction(results, run_dir, time.perf_counter() - began)
