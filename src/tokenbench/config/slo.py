"""A per-request service-level objective (goodput counts the requests that meet every limit):
one model for ``run``'s ``--slo`` and a workload mix's classes, and its one text parser."""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from tokenbench.common.frozen import FrozenModel
from tokenbench.common.units import parse_duration_s, seconds
from tokenbench.errors import BadInput


class SLOConfig(FrozenModel):
    """TTFT and E2E from when the request was scheduled, and TPOT. Durations as numbers of seconds
    or text (``500ms``); the fields by their short names too (``{ttft: 500ms}``), or the whole as
    ``--slo``'s text (``ttft=500ms,tpot=50ms``). ``session_s``: agent programs' sessions (their
    goodput counts the measured sessions within it: metrics/programs.py), no request's limit."""

    ttft_s: float | None = Field(default=None, gt=0)
    tpot_s: float | None = Field(default=None, gt=0)
    e2e_s: float | None = Field(default=None, gt=0)
    session_s: float | None = Field(default=None, gt=0)

    _durations = field_validator("ttft_s", "tpot_s", "e2e_s", "session_s", mode="before")(seconds)

    @model_validator(mode="before")
    @classmethod
    def _short_names(cls, data: object) -> object:
        if isinstance(data, str):
            return parse_slo(data).model_dump()
        if isinstance(data, dict):
            return {(k if str(k).endswith("_s") else f"{k}_s"): v for k, v in data.items()}
        return data

    @property
    def any(self) -> bool:
        """Whether a request has a limit (a session's is not a request's)."""
        return any(v is not None for v in (self.ttft_s, self.tpot_s, self.e2e_s))


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
            raise BadInput(
                f"--slo part {part!r}: write NAME=VALUE with NAME one of ttft, tpot, e2e, session, e.g. ttft=500ms"
            )
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
