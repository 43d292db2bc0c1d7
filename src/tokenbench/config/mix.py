"""Who a request belongs to (LoRA adapters, classes and tenants): the settings of a
workload mix and the seeded draw that gives each request its group.

``--lora-mix a=1,b=3`` (or a YAML file of ``name: weight``) sends ``model=<adapter>`` on a share of
the requests in proportion to the weights; ``--mix FILE`` splits them into classes, each with a
share, optionally its own dataset (overrides of the run's dataset settings), SLO, ``priority``
(vLLM's and SGLang's request field, sent verbatim) and tenant (sent in the ``--tenant-header``).

The draw is made once, over the dataset's list of requests, before any load (as `vllm bench
serve` assigns its LoRA adapters when it samples its requests): position i of the list gets its
group from a stratified draw (each group gets its weight's share of the positions, by largest
remainder, and of every prefix to within two, in an order shuffled by the seed: a short point that
sends only the first requests still sends each group its share). The same seed gives the same groups whatever the server's speed,
the load or the number of workers, and a cycled list keeps the shares exactly over each cycle.

The settings' part of it (config/__init__ holds these models in RunConfig); the draw is datasets/mix.py.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import yaml  # type: ignore[import-untyped]  # no stubs installed (types-PyYAML is not a dependency)
from pydantic import Field, field_validator

from tokenbench.common.frozen import FrozenModel
from tokenbench.config.slo import SLOConfig
from tokenbench.errors import BadInput
from tokenbench.records import Group, Request

DEFAULT_TENANT_HEADER = "X-Tenant"
# a multi-turn conversation (datasets.sessions.Conversation: a dataclass with ``group`` and ``headers``)
C = TypeVar("C")


class MixClass(FrozenModel):
    """One class of a workload mix: its share of the requests (of the rate in an open loop, of the
    users' requests in a closed one), and what its requests carry."""

    name: str = Field(min_length=1)
    share: float = Field(gt=0, allow_inf_nan=False)
    priority: int | None = None  # sent as the request's ``priority`` field (vLLM: lower is served first)
    tenant: str | None = None  # sent in the tenant header
    slo: SLOConfig | None = None  # its own objectives (default: the run's --slo)
    # its own dataset: fields of the run's dataset settings to override (input_tokens, output_tokens,
    # name, path, ...); empty: the run's
    dataset: dict[str, Any] = Field(default_factory=dict)
    lora_mix: dict[str, float] | None = None  # its own adapters (default: the run's --lora-mix)
    # `tokenbench capacity`: this class's own objectives in capacity's --slo syntax
    # (ttft:p90<=500ms,errors<=1%), measured on its by_class figures; a load passes when every
    # class meets its own (and the run's --slo holds)
    objectives: str | None = None

    @field_validator("lora_mix")
    @classmethod
    def _weights(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        return check_weights(v, "a class's lora_mix") if v is not None else v


class WorkloadMix(FrozenModel):
    """``--mix FILE``: the classes requests are drawn from by their shares."""

    classes: list[MixClass] = Field(min_length=1)

    @field_validator("classes")
    @classmethod
    def _unique(cls, v: list[MixClass]) -> list[MixClass]:
        names = [c.name for c in v]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"class names must be unique: {', '.join(twice)} given twice")
        return v

    def slo_of(self, name: str) -> SLOConfig | None:
        return next((c.slo for c in self.classes if c.name == name), None)


def check_weights(weights: dict[str, float], what: str) -> dict[str, float]:
    if not weights:
        raise ValueError(f"{what} names no adapter: write name=weight,...")
    for name, weight in weights.items():
        if not name or not math.isfinite(weight) or weight <= 0:
            raise ValueError(f"{what}: {name!r} needs a weight above 0, got {weight}")
    return weights


def parse_lora_mix(text: str) -> dict[str, float]:
    """``--lora-mix``: ``a=1,b=3`` (a name alone weighs 1), or a YAML file of ``name: weight``
    (or a list of names, equal weights)."""
    path = Path(text)
    if text.endswith((".yaml", ".yml", ".json")) or path.is_file():
        try:
            data = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise BadInput(
                f"--lora-mix {text}: cannot read it as YAML ({exc}): give name=weight,... or a file"
            ) from None
        if isinstance(data, dict) and "adapters" in data:
            data = data["adapters"]
        if isinstance(data, list):
            data = {str(name): 1.0 for name in data}
        if not isinstance(data, dict):
            raise BadInput(f"--lora-mix {text}: the file must map adapter names to weights (a: 1)")
        items = [(str(k), v) for k, v in data.items()]
    else:
        items = []
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, eq, weight = part.partition("=")
            items.append((name.strip(), weight.strip() if eq else "1"))
    weights: dict[str, float] = {}
    for name, value in items:
        try:
            weights[name] = float(value)
        except (TypeError, ValueError):
            raise BadInput(f"--lora-mix {name}={value}: the weight must be a number, e.g. {name}=1") from None
    try:
        return check_weights(weights, "--lora-mix")
    except ValueError as exc:
        raise BadInput(str(exc)) from None


def load_mix(path: str) -> WorkloadMix:
    """``--mix FILE``: YAML with ``classes:`` (a list of MixClass)."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise BadInput(f"--mix {path}: cannot read it ({exc}): give a YAML file with classes:") from None
    if isinstance(data, list):
        data = {"classes": data}
    try:
        return WorkloadMix.model_validate(data)
    except ValueError as exc:
        first = str(exc).splitlines()
        raise BadInput(f"--mix {path}: {' '.join(first[:3])}") from None


def check_header(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+", name):
        raise ValueError(f"--tenant-header {name!r} is not an HTTP header name (e.g. X-Tenant)")
    return name


def stratified(n: int, weights: Sequence[float], salt: str) -> list[int]:
    """Which of ``weights`` each of ``n`` positions gets: each its share of the positions (largest
    remainder), and its share of every prefix to within two, so a point that sends only the first
    few requests still sends every group its share. Group k's c_k positions are spread over the list
    by jittered strata (its j-th falls at (j + u) / c_k, u uniform from ``salt``, the seed and what
    is drawn), then the list is read in that order: the same salt, the same list."""
    total = sum(weights)
    exact = [n * w / total for w in weights]
    counts = [math.floor(x) for x in exact]
    by_remainder = sorted(range(len(weights)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in by_remainder[: n - sum(counts)]:
        counts[i] += 1
    rng = random.Random(salt)
    at = [((j + rng.random()) / c, k) for k, c in enumerate(counts) for j in range(c)]
    return [k for _, k in sorted(at)]


def tagged(
    request: Request,
    adapter: str | None,
    group: MixClass | None,
    tenant_header: str,
) -> Request:
    """The request with its group: the adapter it is sent to, its class, tenant and priority."""
    headers = request.headers
    tenant = group.tenant if group is not None else None
    if tenant is not None:
        headers = (*headers, (tenant_header, tenant))
    if adapter is None and group is None:
        return replace(request, group=None, headers=headers)
    return replace(
        request,
        group=Group(
            adapter=adapter,
            request_class=group.name if group is not None else None,
            tenant=tenant,
            priority=group.priority if group is not None else None,
        ),
        headers=headers,
    )


def with_adapters(requests: list[Request], lora_mix: dict[str, float], seed: int, salt: str = "") -> list[Request]:
    names = list(lora_mix)
    picks = stratified(len(requests), [lora_mix[n] for n in names], f"{seed}:lora{salt}")
    return [
        replace(r, group=replace(r.group, adapter=names[k]) if r.group is not None else Group(adapter=names[k]))
        for r, k in zip(requests, picks, strict=True)
    ]


def mixed_requests(
    requests: list[Request],
    mix: WorkloadMix | None,
    lora_mix: dict[str, float] | None,
    tenant_header: str,
    seed: int,
    build: Callable[[dict[str, Any]], list[Request]],
) -> list[Request]:
    """The run's list of requests with every request's group drawn. A class with its own dataset
    takes its requests from ``build(overrides)`` (the run's dataset with its fields changed), in
    order, at the positions the draw gave it; the others from the run's list at those positions."""
    if mix is None:
        return with_adapters(requests, lora_mix, seed) if lora_mix else requests
    classes = mix.classes
    picks = stratified(len(requests), [c.share for c in classes], f"{seed}:class")
    own: dict[int, list[Request]] = {}
    for k, c in enumerate(classes):
        if c.dataset:
            built = build(c.dataset)
            if not built:
                raise BadInput(f"--mix: class {c.name}'s dataset produced no requests")
            own[k] = built
    used = dict.fromkeys(own, 0)
    out: list[Request] = []
    for i, k in enumerate(picks):
        request = requests[i]
        if k in own:
            request = own[k][used[k] % len(own[k])]
            used[k] += 1
        out.append(tagged(request, None, classes[k], tenant_header))
    # adapters: each class's own mix over its positions, else the run's over all of them
    for k, c in enumerate(classes):
        adapters = c.lora_mix or lora_mix
        if not adapters:
            continue
        at = [i for i, p in enumerate(picks) if p == k]
        drawn = with_adapters([out[i] for i in at], adapters, seed, f":{c.name}")
        for i, r in zip(at, drawn, strict=True):
            out[i] = r
    return out


def mixed_conversations(
    conversations: list[C],
    mix: WorkloadMix | None,
    lora_mix: dict[str, float] | None,
    tenant_header: str,
    seed: int,
) -> list[C]:
    """Multi-turn conversations with a group each (every turn of one takes its conversation's),
    drawn as ``mixed_requests`` draws prompts'. A class's own dataset is not taken here."""
    classes = mix.classes if mix is not None else []
    if any(c.dataset for c in classes):
        raise BadInput("--mix: a class's own dataset is not taken with --multi-turn: drop its dataset:")
    n = len(conversations)
    picks = stratified(n, [c.share for c in classes], f"{seed}:class") if classes else [None] * n
    adapters: list[str | None] = [None] * n
    for k in range(len(classes)) if classes else [None]:
        own = classes[k].lora_mix if k is not None else None
        weights = own or lora_mix
        if not weights:
            continue
        at = [i for i, p in enumerate(picks) if p == k]
        names = list(weights)
        salt = f":{classes[k].name}" if k is not None else ""
        for i, j in zip(at, stratified(len(at), [weights[x] for x in names], f"{seed}:lora{salt}"), strict=True):
            adapters[i] = names[j]
    out = []
    for i, conv in enumerate(conversations):
        c = classes[picks[i]] if picks[i] is not None else None  # type: ignore[index]
        tenant = c.tenant if c is not None else None
        group = (
            Group(
                adapter=adapters[i],
                request_class=c.name if c is not None else None,
                tenant=tenant,
                priority=c.priority if c is not None else None,
            )
            if adapters[i] is not None or c is not None
            else None
        )
        headers = ((tenant_header, tenant),) if tenant is not None else ()
        out.append(replace(conv, group=group, headers=headers))  # type: ignore[type-var]
    return out


def adapters_of(lora_mix: dict[str, float] | None, mix: WorkloadMix | None) -> list[str]:
    """Every adapter name the run may send (the engine must serve each)."""
    names = list(lora_mix or {})
    for c in mix.classes if mix is not None else ():
        names += [n for n in c.lora_mix or {} if n not in names]
    return names
