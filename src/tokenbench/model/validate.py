"""A model against a run it was not fitted on: the run's own settings (its config.json: loads,
stop, dataset, seed) predicted, point by point, and each headline figure compared with what the
run measured. The worst relative error becomes the model's ``validation`` (written back to the
model file), which every later prediction carries in results.json."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tokenbench.backends.routers import DEFAULT_POLICY
from tokenbench.config import BackendConfig
from tokenbench.errors import BadInput
from tokenbench.model.engine import Routing
from tokenbench.model.params import ServerModel, Validation
from tokenbench.model.predict import predict
from tokenbench.results import PointResult
from tokenbench.results.layout import CONFIG, RESULTS, SAMPLES
from tokenbench.results.manifest import load_manifest
from tokenbench.rundir.read import read_results
from tokenbench.telemetry.sampler import SamplesFile

# the figures compared: key, title
FIGURES: tuple[tuple[str, str], ...] = (
    ("ttft_mean_s", "TTFT mean"),
    ("ttft_p90_s", "TTFT p90"),
    ("tpot_mean_s", "TPOT mean"),
    ("output_tokens_per_s", "output tok/s"),
)


def figures(point: PointResult) -> dict[str, float | None]:
    return {
        "ttft_mean_s": point.ttft_s.mean,
        "ttft_p90_s": point.ttft_s.p90,
        "tpot_mean_s": point.tpot_s.mean,
        "output_tokens_per_s": point.output_tokens_per_s,
    }


@dataclass(frozen=True)
class PointCheck:
    label: str
    measured: dict[str, float | None]
    predicted: dict[str, float | None]
    error: dict[str, float | None]
    index: int = 0
    requests: int = 0


@dataclass(frozen=True)
class ValidationResult:
    run: str
    points: list[PointCheck]
    validation: Validation
    prediction_dir: Path


def _relative(predicted: float | None, measured: float | None) -> float | None:
    if predicted is None or measured is None or measured == 0:
        return None
    return (predicted - measured) / measured


# a fleet's router policy (--layer-arg policy=) as the model routes it; a policy it has no model of
# is refused. power_of_two picks the less loaded of two replicas it samples: of two, always both.
MODELLED_POLICIES: dict[str, Routing] = {"round_robin": "round-robin"}


@dataclass(frozen=True)
class Fleet:
    """The replicas a run measured behind its router and how the model routes between them."""

    replicas: int
    routing: Routing
    policy: str | None  # the router's, as the run gave it (None: one server)


def fleet_of(backend: BackendConfig | None) -> Fleet:
    """A run's fleet from its settings (--replicas launched, or --replica-url attached) and its
    router's policy mapped to the model's routing; BadInput for a policy the model does not
    have (the prediction would assume another router)."""
    if backend is None:
        return Fleet(1, "round-robin", None)
    replicas = backend.replicas if backend.replicas > 1 else max(1, len(backend.replica_urls))
    if replicas == 1:
        return Fleet(1, "round-robin", None)
    args = dict(a.partition("=")[::2] for a in backend.layer_args)
    # a fleet tokenbench launched routes by its router profile's default unless told; one attached
    # routes as its router was started, which the run does not know unless --layer-arg says
    policy = args.get("policy", DEFAULT_POLICY if backend.replicas > 1 else None)
    if policy is None:
        raise BadInput(
            "the attached fleet's routing is not known: say its router's policy with --layer-arg "
            "policy=NAME (round_robin, power_of_two, ...) in the run, or validate on a fleet tokenbench launched"
        )
    if policy == "power_of_two" and replicas == 2:
        return Fleet(replicas, "least-loaded", policy)
    if policy not in MODELLED_POLICIES:
        modelled = ", ".join([*MODELLED_POLICIES, "power_of_two (2 replicas)"])
        raise BadInput(
            f"the run's router routes by {policy}: the model routes {modelled} only (it has no prefix "
            f"cache or hash to route by); validate on a fleet run with --layer-arg policy=round_robin"
        )
    return Fleet(replicas, MODELLED_POLICIES[policy], policy)


def compare_run(model: ServerModel, model_name: str, run_dir: Path, out_dir: Path) -> list[PointCheck]:
    """Predict ``run_dir``'s own points (its config.json, its points' loads) into ``out_dir`` and
    compare each with what the run measured; a fleet's run (a router and its replicas) as that
    many replicas of the model behind the router's routing (``fleet_of``)."""
    results_path = run_dir / RESULTS
    if not results_path.is_file():
        raise BadInput(f"{run_dir}: no results.json (a prediction is compared with a finished run)")
    measured = {p.index: p for p in read_results(results_path.parent).points}
    manifest = load_manifest(run_dir / CONFIG)
    config = manifest.config.model_copy(update={"out_dir": out_dir})
    # the run's own launch knobs where it says them (a run at another max-num-seqs is predicted at its own)
    launched = manifest.backend.knobs if manifest.backend is not None and manifest.backend.knobs else {}
    if launched.get("max_num_seqs"):
        model = model.with_knobs({"max_num_seqs": float(launched["max_num_seqs"])})
    # the run's own loads as its points ran them (a capacity search's probes are its points)
    events = [e for e in sorted(SamplesFile(run_dir / SAMPLES).point_ends(), key=lambda e: e.index)]
    events = [e for e in events if e.index in measured]
    loads = iter([e.load for e in events])
    fleet = fleet_of(config.backend)
    prediction = predict(
        config, model, model_name, out_dir, fleet.replicas, fleet.routing, plan=lambda _: next(loads, None)
    )
    checks = []
    for event, pred in zip(events, prediction.results.points):
        real = measured[event.index]
        m, p = figures(real), figures(pred)
        error = {k: _relative(p[k], m[k]) for k, _ in FIGURES}
        checks.append(PointCheck(real.label, m, p, error, event.index, real.requests.ok))
    return checks


def validate(model: ServerModel, model_name: str, run_dir: Path, out_dir: Path) -> ValidationResult:
    if str(run_dir) in model.runs or str(run_dir.resolve()) in {str(Path(r).resolve()) for r in model.runs}:
        raise BadInput(f"{run_dir}: the model was fitted on this run; validate on a run it has not seen")
    checks = compare_run(model, model_name, run_dir, out_dir)
    worst: dict[str, float | None] = {}
    for key, _ in FIGURES:
        errors = [abs(e) for c in checks if (e := c.error[key]) is not None]
        worst[key] = max(errors) if errors else None
    known = [e for e in worst.values() if e is not None]
    validation = Validation(
        run=str(run_dir), points=len(checks), error=worst, max_abs_error=max(known) if known else None
    )
    return ValidationResult(str(run_dir), checks, validation, out_dir)
