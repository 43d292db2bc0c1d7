"""Flag text -> settings: durations (``500ms``, ``2s``) and ``--slo``'s per-request objectives."""

from __future__ import annotations

import re

from .config import SLOConfig
from .errors import BadInput

_UNITS = {"ms": 1e-3, "s": 1.0, "m": 60.0, None: 1.0}


def parse_duration_s(text: str) -> float:
    """'500ms' -> 0.5, '2s' -> 2.0, '2m' -> 120.0, '1.5' -> 1.5 (seconds by
    default): every duration flag and a duration in an experiment file."""
    m = re.fullmatch(r"\s*(-?)([0-9]*\.?[0-9]+)\s*(ms|s|m)?\s*", text)
    if not m:
        raise BadInput(f"cannot read a duration from {text!r}; write e.g. 500ms, 5s, 2m (a plain number is seconds)")
    if m.group(1):
        raise BadInput(f"a duration cannot be negative, got {text.strip()!r}; write e.g. 500ms, 5s, 2m")
    return float(m.group(2)) * _UNITS[m.group(3)]


# --slo's names: SLOConfig's fields without their unit ("ttft" -> "ttft_s").
_SLO_FIELDS = {field.removesuffix("_s"): field for field in SLOConfig.model_fields}


def parse_slo(text: str) -> SLOConfig:
    """`run`'s --slo, per request (goodput): 'ttft=500ms,tpot=50ms' -> SLOConfig; ``<=`` may
    stand for ``=`` (ttft<=500ms). capacity's syntax, a statistic over a point (ttft:p90<=500ms,
    errors<=1%), is refused with the run's equivalent and the command that takes it."""
    fields: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, op, value = _slo_part(part)
        if ":" in name or name.strip().lower() == "errors":
            metric = name.partition(":")[0].strip().lower()
            per_request = f"{metric}={value.strip()}" if metric in _SLO_FIELDS else "ttft=500ms"
            raise BadInput(
                f"--slo part {part!r} is a statistic over a point (tokenbench capacity's --slo); run's --slo is "
                f"per request: write {per_request} (goodput counts the requests that meet every limit)"
            )
        key = _SLO_FIELDS.get(name.strip().lower())
        if not op or key is None:
            raise BadInput(f"--slo part {part!r}: write NAME=VALUE with NAME one of ttft, tpot, e2e, e.g. ttft=500ms")
        try:
            fields[key] = parse_duration_s(value)
        except BadInput as exc:
            raise BadInput(f"--slo part {part!r}: {exc}") from None
    return SLOConfig(**fields)


def _slo_part(part: str) -> tuple[str, str, str]:
    """'ttft=500ms' or 'ttft<=500ms' -> (name, operator, value); no operator: ('ttft', '', '')."""
    for op in ("<=", "="):
        name, found, value = part.partition(op)
        if found:
            return name, found, value
    return part, "", ""
