"""Token counting for prompts and replies: an HF tokenizer file, or the target's /tokenize endpoint
(or, on the Messages API, its /v1/messages/count_tokens).

A Tokenizer here only counts, without the special tokens (a BOS) its encoding may add; one may also
say how many it adds (``special_tokens_of``: other tools count them). Where no tokenizer is
available, lengths are approximate and the dataset says so (``exact_lengths`` False in results).
"""

from __future__ import annotations

import http.client
import json
import threading
import urllib.error
import urllib.parse
import weakref
from pathlib import Path
from typing import Any, ClassVar, Protocol, Self


class Tokenizer(Protocol):
    name: str

    def count(self, text: str) -> int: ...


class TokenIds(Protocol):
    """A tokenizer that also gives token ids (token-id prompts draw their vocabulary from it)."""

    name: str

    def count(self, text: str) -> int: ...

    def ids(self, text: str) -> list[int]: ...


def special_tokens_of(tokenizer: Tokenizer | None) -> int:
    """How many tokens the tokenizer adds to a text when asked to (a BOS, say), which ``count``
    leaves out: what ``tokenizer(text).input_ids`` in vllm bench serve and SGLang's bench_serving
    counts beyond it. 0 without a tokenizer or with one that cannot say."""
    special = getattr(tokenizer, "special_tokens", None)
    return int(special()) if callable(special) else 0


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

    def special_tokens(self) -> int:
        """Tokens the file's post-processor adds to one text (its template's BOS, EOS)."""
        return len(self._tok.encode("", add_special_tokens=True).ids)


class ServerRoute:
    """A JSON route of the server, POSTed on kept-alive connections (one per thread); a subclass
    counts with it."""

    def count(self, text: str) -> int:
        raise NotImplementedError

    @classmethod
    def available(cls, base_url: str, model: str | None) -> Self | None:
        """The counter, when the server answers a count; None when it cannot."""
        tok = cls(base_url, model, timeout_s=5.0)
        try:
            tok.count("hello world")
        except (urllib.error.URLError, OSError, ValueError, KeyError, TypeError):
            return None
        return tok

    path: ClassVar[str]  # the route, on the server's base URL

    def __init__(self, base_url: str, model: str | None, timeout_s: float = 10.0) -> None:
        self._url = base_url.rstrip("/") + self.path
        self._model = model
        self._timeout_s = timeout_s
        self.name = f"server:{self._url}"
        self._local = threading.local()  # one kept-alive connection per thread
        self._open: list[http.client.HTTPConnection] = []  # every thread's, closed with the tokenizer
        weakref.finalize(self, _close_all, self._open)

    def _connection(self) -> http.client.HTTPConnection:
        """This thread's connection to the server, kept alive between calls: a synthetic dataset
        counts ~1,100 prompts, and a new connection for each cost 4 ms of the 4.5 s it took (the
        mock), against well under 1 ms for a request on an open one."""
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            url = urllib.parse.urlsplit(self._url)
            kind = http.client.HTTPSConnection if url.scheme == "https" else http.client.HTTPConnection
            conn = kind(url.netloc, timeout=self._timeout_s)
            self._local.conn = conn
            self._open.append(conn)
        return conn

    def _post(self, body: dict[str, object]) -> dict[str, Any]:  # the server's JSON answer: any shape
        payload = json.dumps(body).encode()
        path = urllib.parse.urlsplit(self._url).path
        for attempt in (1, 2):  # a kept-alive connection the server has closed fails once: reconnect
            conn = self._connection()
            try:
                conn.request("POST", path, body=payload, headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                raw = resp.read()
                break
            except (http.client.HTTPException, OSError):
                conn.close()
                self._local.conn = None
                if attempt == 2:
                    raise
        if resp.status >= 400:
            raise urllib.error.HTTPError(self._url, resp.status, resp.reason, resp.headers, None)
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError(f"{self._url} answered {str(data)[:200]!r}, not a JSON object")
        return data


class RemoteTokenizer(ServerRoute):
    """The server's own tokenizer through ``POST /tokenize`` (llama.cpp: ``{"content"}``, vLLM and
    SGLang: ``{"model", "prompt"}``); both answer with ``tokens`` (vLLM adds ``count``)."""

    path = "/tokenize"

    def _tokenize(self, text: str, special: bool = False) -> dict[str, Any]:  # the server's JSON answer (_post)
        # add_special_tokens: vLLM's and SGLang's name; add_special: llama.cpp's (off by default)
        body: dict[str, object] = {"content": text, "prompt": text, "add_special_tokens": special}
        if special:
            body["add_special"] = True
        if self._model:
            body["model"] = self._model
        return self._post(body)

    def count(self, text: str) -> int:
        return _count(self._tokenize(text))

    def special_tokens(self) -> int:
        """The server's count of a word with its special tokens, less its count without them (0
        from a server that takes neither field)."""
        return max(0, _count(self._tokenize("hello", special=True)) - self.count("hello"))

    def ids(self, text: str) -> list[int]:
        return [int(t) for t in self._tokenize(text)["tokens"]]


class MessagesTokenCounter(ServerRoute):
    """The Messages API's own count, ``POST /v1/messages/count_tokens`` (vLLM, llama.cpp; answers
    ``{"input_tokens"}``), for a server without /tokenize: a text's tokens are those of one user
    turn holding it less those of an empty turn (the chat template's own). Counts only: no ids."""

    path = "/v1/messages/count_tokens"
    _template: int | None = None  # an empty turn's count: the chat template's own tokens

    def _turn(self, text: str) -> int:
        body: dict[str, object] = {"model": self._model or "", "messages": [{"role": "user", "content": text}]}
        return int(self._post(body)["input_tokens"])

    def count(self, text: str) -> int:
        if self._template is None:
            self._template = self._turn("")
        return max(0, self._turn(text) - self._template)


def _count(data: dict[str, Any]) -> int:  # a /tokenize answer (vLLM adds ``count``)
    return int(data["count"]) if "count" in data else len(data["tokens"])


def _close_all(connections: list[http.client.HTTPConnection]) -> None:
    for conn in connections:
        conn.close()
