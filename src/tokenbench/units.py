"""Flag text -> settings: durations (``500ms``, ``2s``) and ``--slo``'s per-request objectives."""

from __future__ import annotations

import re

from .config import SLOConfig
from .errors import BadInput


def parse_duration_s(text: str) -> float:
    """'500ms' -> 0.5, '2s' -> 2.0, '1.5' -> 1.5 (seconds by default)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ms|s|m)?\s*", text)
    if not m:
        raise BadInput(f"cannot read a duration from {text!r}; write e.g. 500ms or 2s")
    value = float(m.group(1))
    return value * {"ms": 1e-3, "s": 1.0, "m": 60.0, None: 1.0}[m.group(2)]


# --slo's names: SLOConfig's fields without their unit ("ttft" -> "ttft_s").
_SLO_FIELDS = {field.removesuffix("_s"): field for field in SLOConfig.model_fields}


def parse_slo(text: str) -> SLOConfig:
    """'ttft=500ms,tpot=50ms' -> SLOConfig."""
    fields: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, eq, value = part.partition("=")
        key = _SLO_FIELDS.get(name.strip().lower())
        if not eq or key is None:
            raise BadInput(f"--slo part {part!r}: write NAME=VALUE with NAME one of ttft, tpot, e2e")
        fields[key] = parse_duration_s(value)
    return SLOConfig(**fields)
