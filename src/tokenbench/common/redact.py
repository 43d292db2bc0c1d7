"""Credentials never reach a file tokenbench writes or its console.

Three rules, applied by ``mask`` to any JSON-like value and by ``mask_text`` to a string:
- a dict key that names a credential (``HF_TOKEN``, ``api_key``, ``Authorization``,
  ``X-Api-Key``, ``password``...: a word of the key is one of ``SECRET_WORDS``) has its string
  value replaced; keys that name an environment variable (``api_key_env``) are names, not secrets;
- in an argument list, the value after a credential flag (``--api-key V``, ``--hf-token=V``);
- in any string: values registered as secret in this process (``register``: engine environment
  values and engine arguments named like credentials, every header the user passes, the API key),
  and shapes that are credentials whatever their place (``Bearer ...``, ``hf_...``, ``sk-...``,
  ``NAME=value`` / ``NAME: value`` with a credential name, a password in a URL).

The run's files are masked where they are written (rundir.write_json, the records' error
texts, the engine log through its guardian, samples' URLs), so no caller has to remember.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

MASK = "***"
SECRET_WORDS = frozenset(
    {
        "token",
        "key",
        "apikey",
        "secret",
        "password",
        "passwd",
        "pwd",
        "authorization",
        "auth",
        "credential",
        "credentials",
        "cookie",
        "bearer",
    }
)
_WORD = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
_NAME = r"[A-Za-z0-9_.-]*(?:token|api[-_]?key|secret|password|passwd|credentials?|authorization)"
_SHAPES = [
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}"), rf"\1 {MASK}"),
    (re.compile(r"\bhf_[A-Za-z0-9]{8,}"), MASK),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"), MASK),
    (re.compile(r"(://[^/@\s:]+:)[^/@\s]+@"), rf"\1{MASK}@"),
    # NAME=value, NAME: value, "NAME": "value", --name value; not max_tokens=5 or "token count"
    (
        re.compile(
            rf"(?i)((?<![A-Za-z0-9]){_NAME}(?![a-z])[\"']?\s*[:=]\s*[\"']?|--{_NAME}\s+)"
            rf"(?!{re.escape(MASK)})(?!(?:bearer|basic)\s)([^\s\"',}}]+)"
        ),
        rf"\1{MASK}",
    ),
]
_known: set[str] = set()


def register(*values: str | None) -> None:
    """Values this process must never write or print (at least 4 characters, or masking them
    would mangle ordinary text)."""
    for value in values:
        if value and len(value) >= 4:
            _known.add(value)


def secret_name(key: str) -> bool:
    """A dict key, env var name, header or flag that names a credential."""
    words = [w.lower() for w in _WORD.split(key) if w]
    if words and words[-1] == "env":  # api_key_env: the *name* of the variable holding the key
        return False
    return any(w in SECRET_WORDS for w in words) or "apikey" in key.lower().replace("-", "").replace("_", "")


def mask_text(text: str) -> str:
    for value in sorted(_known, key=len, reverse=True):
        if value in text:
            text = text.replace(value, MASK)
    for pattern, repl in _SHAPES:
        text = pattern.sub(repl, text)
    return text


def _argv_secrets(argv: list[str] | tuple[str, ...]) -> list[str | None]:
    """For each argument, the credential it carries (the value of ``--api-key V`` or
    ``--hf-token=V``), else None."""
    found: list[str | None] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            found.append(arg)
            hide_next = False
            continue
        flag, eq, value = arg.partition("=")
        named = arg.startswith("-") and secret_name(flag.lstrip("-"))
        found.append(value if named and eq else None)
        hide_next = named and not eq
    return found


def mask_argv(argv: list[str] | tuple[str, ...]) -> list[str]:
    return [
        mask_text(arg) if secret is None else arg[: len(arg) - len(secret)] + MASK
        for arg, secret in zip(argv, _argv_secrets(argv))
    ]


def mask(value: Any) -> Any:  # any JSON-like value in, the same shape out (a dict stays a dict)
    """A copy of a JSON-like value with every credential masked (see the module's rules)."""
    if isinstance(value, dict):
        return {
            k: (MASK if isinstance(v, str) and isinstance(k, str) and secret_name(k) and v else mask(v))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, str) for v in value) and any(v.startswith("-") for v in value):
            return mask_argv(value)
        return [mask(v) for v in value]
    if isinstance(value, str):
        return mask_text(value)
    return value


def secrets_of(
    env: Mapping[str, str] | None = None,
    argv: list[str] | tuple[str, ...] = (),
    headers: Mapping[str, str] | None = None,
) -> list[str]:
    """The secret values in an engine environment, an argument list and request headers (every
    header value counts: a header is how a gateway key travels)."""
    found = [v for k, v in (env or {}).items() if secret_name(k)]
    found += [secret for secret in _argv_secrets(argv) if secret is not None]
    found += list((headers or {}).values())
    return found
