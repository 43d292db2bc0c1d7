"""Token counting for prompts and replies: an HF tokenizer file, or the target's /tokenize endpoint.

A Tokenizer here only counts. Where no tokenizer is available, lengths are approximate and the
dataset says so (``exact_lengths`` False in results).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Protocol


class Tokenizer(Protocol):
    name: str

    def count(self, text: str) -> int: ...


class TokenIds(Protocol):
    """A tokenizer that also gives token ids (token-id prompts draw their vocabulary from it)."""

    name: str

    def count(self, text: str) -> int: ...

    def ids(self, text: str) -> list[int]: ...


def token_ids_of(tokenizer: Tokenizer | None) -> TokenIds | None:
    """The tokenizer as one that gives ids, when it can."""
    return tokenizer if tokenizer is not None and callable(getattr(tokenizer, "ids", None)) else None  # type: ignore[return-value]


class HFTokenizer:
    """A Hugging Face ``tokenizer.json`` (or a folder holding one). Works offline."""

    def __init__(self, path: str | Path) -> None:
        from tokenizers import Tokenizer as _HF

        p = Path(path)
        if p.is_dir():
            p = p / "tokenizer.json"
        if not p.is_file():
            raise FileNotFoundError(f"--tokenizer: no tokenizer.json at {p}")
        self._tok = _HF.from_file(str(p))
        self.name = f"hf:{p}"

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def ids(self, text: str) -> list[int]:
        return list(self._tok.encode(text, add_special_tokens=False).ids)


class RemoteTokenizer:
    """The server's own tokenizer through ``POST /tokenize`` (llama.cpp: ``{"content"}``, vLLM and
    SGLang: ``{"model", "prompt"}``); both answer with ``tokens`` (vLLM adds ``count``)."""

    def __init__(self, base_url: str, model: str | None, timeout_s: float = 10.0) -> None:
        self._url = base_url.rstrip("/") + "/tokenize"
        self._model = model
        self._timeout_s = timeout_s
        self.name = f"server:{self._url}"

    def _post(self, body: dict[str, object]) -> dict[str, Any]:  # the server's JSON answer: any shape
        req = urllib.request.Request(
            self._url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=self._timeout_s) as resp:
            data = json.loads(resp.read())
        if not isinstance(data, dict):
            raise ValueError(f"{self._url} answered {str(data)[:200]!r}, not a JSON object")
        return data

    def _tokenize(self, text: str) -> dict[str, Any]:  # the server's JSON answer (_post)
        body: dict[str, object] = {"content": text, "prompt": text, "add_special_tokens": False}
        if self._model:
            body["model"] = self._model
        return self._post(body)

    def count(self, text: str) -> int:
        data = self._tokenize(text)
        if "count" in data:
            return int(data["count"])
        return len(data["tokens"])

    def ids(self, text: str) -> list[int]:
        return [int(t) for t in self._tokenize(text)["tokens"]]

    @classmethod
    def available(cls, base_url: str, model: str | None) -> RemoteTokenizer | None:
        tok = cls(base_url, model, timeout_s=5.0)
        try:
            tok.count("hello world")
        except (urllib.error.URLError, OSError, ValueError, KeyError):
            return None
        return tok
