"""The fitted server model as a file: each parameter's value, its standard error, whether the runs
constrained it (and which), and the fit's per-point residuals. A parameter the runs did not
constrain says so (``constrained`` False, a ``note`` naming why) and takes a neutral value: 0 for a
step cost, no limit for a batch limit; ``--knob`` at prediction sets one by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from tokenbench.errors import BadInput
from tokenbench.rundir import write_json

MODEL_KIND = "tokenbench-server-model"
MODEL_VERSION = 1

# The step-time terms: an engine step lasts base + per_seq * decode sequences + per_prefill_token *
# prefill tokens in the step + per_kv_token * KV tokens in use + per_prefill_attention * the prefill's
# attention pairs (each prefill token times the prompt tokens before it and itself: n * (before + n / 2)
# for a chunk of n tokens after ``before``; the part of a prefill that grows with the prompt's square).
STEP_TERMS = (
    "step_base_s",
    "step_per_seq_s",
    "step_per_prefill_token_s",
    "step_per_kv_token_s",
    "step_per_prefill_attention_s",
)
# Latency a request spends in its slot before its prefill is scheduled (API, tokenization, the
# stream's own path): it holds the slot but not the engine.
OVERHEAD = "first_token_overhead_s"
# The share of the step in flight that a request ready during it waits before its first token's step
# begins, as its stream reads it: 1 in a step-synchronous engine (vLLM, llama.cpp: the prefill joins
# the next step); 0 where each stream runs on its own clock (the mock: a flat TTFT beside any load).
# A model file without it is step-synchronous.
WAIT_SHARE = "first_token_wait_share"
LIMITS = ("max_num_seqs", "kv_capacity_tokens", "max_batched_tokens")
KNOBS = frozenset(LIMITS)


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Param(_Part):
    """One fitted parameter. ``value`` None: a limit the runs never reached (no limit is modelled)."""

    value: float | None
    se: float | None = None  # standard error (the fit's covariance); None: not estimated
    constrained: bool
    by: list[str] = []  # the runs whose data constrained it (dropping one raises its SE > 10%)
    note: str | None = None  # how it was found, or why it is not constrained


class PointFit(_Part):
    """One fitted point: measured and simulated means (the point's own arrivals and tokens replayed
    through the fitted model), and the relative error of each."""

    run: str
    point: int
    label: str
    requests: int
    measured: dict[str, float | None]
    simulated: dict[str, float | None]
    error: dict[str, float | None]  # (simulated - measured) / measured


class Validation(_Part):
    """The model's last validation against a run it was not fitted on (validate.py)."""

    run: str
    points: int
    error: dict[str, float | None]  # the largest |relative error| per metric over the points
    max_abs_error: float | None


class ServerModel(_Part):
    kind: str = MODEL_KIND
    version: int = MODEL_VERSION
    server: dict[str, Any] = {}  # Any: the runs' ServerFacts as JSON (engine, model, knobs)
    params: dict[str, Param]
    prompt_tokens_mean: float | None = None
    # the server counts this many prompt tokens more than the dataset says (chat template, BOS):
    # added to a predicted request's prompt
    prompt_tokens_extra: float = 0.0
    # the server reused this many of a request's prompt tokens from its cache (the median of what the
    # fitted runs' servers said: llama.cpp's chat template from a slot's last prompt): a predicted
    # request prefills its prompt less these
    prompt_tokens_cached: float = 0.0
    output_tokens_mean: float | None = None  # a request without max_tokens generates this many
    runs: list[str] = []
    points: list[PointFit] = []
    residual_sd: dict[str, float] = {}  # the per-request regression's residual SD, per row kind
    validation: Validation | None = None

    def value(self, name: str) -> float | None:
        p = self.params.get(name)
        return p.value if p is not None else None

    def with_knobs(self, knobs: dict[str, float | None]) -> ServerModel:
        """This model with batch limits set by hand (--knob max_num_seqs=64): set, not fitted."""
        params = dict(self.params)
        for name, value in knobs.items():
            if name not in KNOBS:
                raise BadInput(f"--knob {name}: the model's knobs are {', '.join(LIMITS)}")
            params[name] = Param(value=value, constrained=True, note="set by --knob")
        return self.model_copy(update={"params": params})

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, self.to_json())

    @classmethod
    def load(cls, path: Path) -> ServerModel:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise BadInput(f"{path}: not a model file ({exc}); make one with `tokenbench model fit RUN_DIR`") from None
        if not isinstance(data, dict) or data.get("kind") != MODEL_KIND:
            raise BadInput(f"{path} is not a tokenbench model: make one with `tokenbench model fit RUN_DIR`")
        return cls.model_validate(data)


def parse_knobs(items: list[str] | None) -> dict[str, float | None]:
    """--knob NAME=VALUE (repeatable; VALUE ``none``: no limit) -> {name: value}."""
    knobs: dict[str, float | None] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in KNOBS:
            raise BadInput(f"--knob takes NAME=VALUE with NAME one of {', '.join(LIMITS)}, got {item!r}")
        try:
            knobs[name] = None if value.strip().lower() == "none" else float(value)
        except ValueError:
            raise BadInput(f"--knob {name}: a number (or none), got {value!r}") from None
    return knobs
