"""Graders: whether a reply gives a graded dataset row's expected answer (pure).

A grader is named by a spec (``--grader``, or a row's own ``grader`` field):

    exact            the reply, stripped, equals the expected answer, stripped
    normalised       the same after lower-casing, dropping punctuation and collapsing whitespace
    regex:PATTERN    group 1 of PATTERN's first match in the reply (the whole match when PATTERN
                     has no group), stripped, equals the expected answer, stripped
    numeric[:TOL]    the last number in the reply (GSM8K's rule: commas removed) is within TOL
                     (absolute, default 1e-6) of the expected number
    json:FIELD       the reply parsed as JSON (else its outermost {...}), FIELD read from it
                     (dotted: a.b.0), equals the expected answer (text as text, else its JSON)
    choice           the first "answer is X" (X a letter A-E), else the first standalone capital
                     A-E, equals the expected letter

``grade(spec, reply, expected)`` gives (correct, what the grader read from the reply; None when it
read nothing). An unknown spec or a pattern that does not compile is BadInput naming it.
"""

from __future__ import annotations

import json
import math
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from tokenbench.errors import BadInput

GRADERS = ("exact", "normalised", "regex:PATTERN", "numeric[:TOL]", "json:FIELD", "choice")
NUMERIC_TOLERANCE = 1e-6
GSM8K_MARK = "####"  # GSM8K's answers end in "#### 42": the graded answer is what follows it

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ANSWER_IS = re.compile(r"answer\s*(?:is|:)\s*:?\s*\(?([A-E])\)?(?![A-Za-z])", re.IGNORECASE)
_LETTER = re.compile(r"(?<![A-Za-z])([A-E])(?![A-Za-z'])")


@dataclass(frozen=True)
class Grader:
    """A parsed spec: its kind and its argument (a pattern, a tolerance, a field)."""

    spec: str
    read: Callable[[str], str | None]  # what the grader reads from a reply
    same: Callable[[str, str], bool]  # (read, expected) -> correct


def normalised(text: str) -> str:
    return " ".join(text.lower().translate(_PUNCTUATION).split())


def last_number(text: str) -> str | None:
    """The last number in ``text``, commas removed (GSM8K's extraction)."""
    found = _NUMBER.findall(text)
    return found[-1].replace(",", "") if found else None


def _number(text: str) -> float | None:
    try:
        value = float(text.replace(",", "").replace("$", "").strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _within(tolerance: float) -> Callable[[str, str], bool]:
    def same(read: str, expected: str) -> bool:
        a, b = _number(read), _number(expected)
        return a is not None and b is not None and abs(a - b) <= tolerance

    return same


def _regex(pattern: re.Pattern[str]) -> Callable[[str], str | None]:
    def read(reply: str) -> str | None:
        match = pattern.search(reply)
        if match is None:
            return None
        return (match.group(1) if pattern.groups else match.group(0)).strip()

    return read


def _json_field(name: str) -> Callable[[str], str | None]:
    steps = name.split(".")

    def read(reply: str) -> str | None:
        text = reply.strip()
        try:
            value: object = json.loads(text)
        except ValueError:
            start, end = text.find("{"), text.rfind("}")
            try:
                value = json.loads(text[start : end + 1]) if 0 <= start < end else None
            except ValueError:
                return None
        for step in steps:
            if isinstance(value, dict) and step in value:
                value = value[step]
            elif isinstance(value, list) and step.isdigit() and int(step) < len(value):
                value = value[int(step)]
            else:
                return None
        return value if isinstance(value, str) else json.dumps(value)

    return read


def _json_same(read: str, expected: str) -> bool:
    if read.strip() == expected.strip():
        return True
    a, b = _number(read), _number(expected)
    return a is not None and a == b


def _choice(reply: str) -> str | None:
    match = _ANSWER_IS.search(reply) or _LETTER.search(reply)
    return match.group(1).upper() if match else None


def _stripped(read: str, expected: str) -> bool:
    return read.strip() == expected.strip()


@cache
def grader(spec: str, where: str = "--grader") -> Grader:
    """The grader a spec names; BadInput naming ``where`` (the flag, or a file's line) otherwise."""
    kind, _, arg = spec.partition(":")
    kind = kind.strip().lower()
    if kind == "exact" and not arg:
        return Grader(spec, lambda reply: reply.strip(), _stripped)
    if kind in ("normalised", "normalized") and not arg:
        return Grader(spec, normalised, lambda read, expected: read == normalised(expected))
    if kind == "regex" and arg:
        try:
            pattern = re.compile(arg)
        except re.error as exc:
            raise BadInput(f"{where} {spec!r}: the pattern does not compile ({exc})") from exc
        return Grader(spec, _regex(pattern), _stripped)
    if kind == "numeric":
        tolerance = NUMERIC_TOLERANCE if not arg else _number(arg)
        if tolerance is None or tolerance < 0:
            raise BadInput(f"{where} {spec!r}: the tolerance must be a number >= 0, e.g. numeric:0.01")
        return Grader(spec, last_number, _within(tolerance))
    if kind == "json" and arg.strip():
        return Grader(spec, _json_field(arg.strip()), _json_same)
    if kind == "choice" and not arg:
        return Grader(spec, _choice, lambda read, expected: read == expected.strip().upper())
    raise BadInput(f"{where} {spec!r}: a grader is one of {', '.join(GRADERS)}")


def grade(spec: str, reply: str, expected: str) -> tuple[bool, str | None]:
    """(correct, what the grader read from the reply)."""
    g = grader(spec)
    read = g.read(reply)
    return (read is not None and g.same(read, expected)), read


def gsm8k_answer(answer: str) -> str | None:
    """What follows the last ``####`` of a GSM8K answer, commas removed; None without one."""
    if GSM8K_MARK not in answer:
        return None
    return answer.rsplit(GSM8K_MARK, 1)[1].strip().replace(",", "")
