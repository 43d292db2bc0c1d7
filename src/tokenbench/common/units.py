"""Durations and fractions as people write them (``500ms``, ``2s``, ``2m``; ``0.02``, ``2%``):
every duration and fraction flag, and every duration in an experiment or mix file."""

from __future__ import annotations

import re

from tokenbench.errors import BadInput

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


def seconds(value: object) -> object:
    """A settings field's duration before validation: text (``5s``, ``2m``, ``500ms``) as
    seconds, as the flags take it; a number stays as it is (pydantic checks it after)."""
    return parse_duration_s(value) if isinstance(value, str) else value


def parse_fraction(text: str) -> float:
    """'0.02' -> 0.02, '2%' -> 0.02: every fraction flag (--precision, --kv-memory, --tolerance)
    and capacity's ``errors<=1%``; its range is the setting's to check."""
    m = re.fullmatch(r"\s*(-?)([0-9]*\.?[0-9]+)\s*(%?)\s*", text)
    if not m:
        raise BadInput(f"cannot read a fraction from {text!r}; write it as 0.02 or as 2%")
    if m.group(1):
        raise BadInput(f"a fraction cannot be negative, got {text.strip()!r}; write it as 0.02 or as 2%")
    return float(m.group(2)) / (100.0 if m.group(3) else 1.0)


def fraction(value: object) -> object:
    """A settings field's fraction before validation: text (``2%``, ``0.02``) as a number, as the
    flags take it; a number stays as it is (pydantic checks its range after)."""
    return parse_fraction(value) if isinstance(value, str) else value
