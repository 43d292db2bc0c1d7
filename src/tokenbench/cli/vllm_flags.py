"""`vllm bench serve`'s flag names, accepted by `tokenbench run` where they mean the same thing.

A user of vLLM's benchmark types ``--request-rate 4 --num-prompts 200 --dataset-name random
--random-input-len 512``; ``translate`` rewrites those into tokenbench's own flags before the
command line is parsed (``cli.run.RunCommand``), and refuses, naming what to type instead, a flag whose
meaning differs. Names were taken from vLLM 0.32's ``vllm/benchmarks/serve.py`` and
``vllm/benchmarks/datasets/datasets.py``. The table is docs/usage.md's "Coming from vllm bench serve".

Flags both tools spell the same (``--model``, ``--tokenizer``, ``--seed``, ``--ignore-eos``,
``--max-concurrency``, ``--burstiness``, ``--dataset-path``, ``--served-model-name``,
``--num-prompts``) pass through; cli/run.py gives ``--num-prompts`` and ``--burstiness`` vLLM's
meaning when nothing says otherwise (N prompts each sent once; a burstiness other than 1 is gamma
arrivals).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tokenbench.errors import BadInput


class FlagError(BadInput):
    """A vllm-bench flag tokenbench cannot take as it is: the message says what to use."""


def _rate(value: str) -> list[str]:
    """as --rate (inf: every request at once, run as --users N --max-requests N)"""
    return ["--rate", "inf" if value.strip().lower() in ("inf", "infinity") else value]


def _dataset(value: str) -> list[str]:
    """random: as --dataset synthetic; sharegpt: as --dataset sharegpt (add --sharegpt-sampling vllm for vLLM's draw)"""
    names = {"random": "synthetic", "sharegpt": "sharegpt"}
    if value not in names:
        raise FlagError(
            f"--dataset-name {value}: tokenbench reads random (as --dataset synthetic) and "
            f"sharegpt; for your own prompts use --dataset jsonl --dataset-path FILE"
        )
    return ["--dataset", names[value]]


def _endpoint(value: str) -> list[str]:
    """/v1/completions, /v1/chat/completions, /v1/responses, /v1/messages (/v1/embeddings, /v1/rerank,
    /v1/score): as --api completions, chat, responses, messages (embeddings, rerank, score)"""
    apis = {"/v1/completions": "completions", "/v1/chat/completions": "chat"}
    apis |= {"/v1/responses": "responses", "/v1/messages": "messages"}
    apis |= {"/v1/embeddings": "embeddings", "/v1/rerank": "rerank", "/v1/score": "score"}  # embeddings
    if value not in apis:
        raise FlagError(
            f"--endpoint {value}: tokenbench picks the path from --api (chat, completions, responses, messages, "
            "tgi, triton, ollama)"
        )
    return ["--api", apis[value]]


def _backend(value: str) -> list[str]:
    # vLLM's --backend names the request format; tokenbench's names the engine's profile
    apis = {"openai": "completions", "openai-chat": "chat", "openai-completions": "completions"}
    apis |= {"openai-responses": "responses", "anthropic-messages": "messages"}
    apis |= {"openai-embeddings": "embeddings", "vllm-rerank": "rerank"}  # embeddings
    return ["--api", apis[value]] if value in apis else ["--backend", value]


def json_object(value: str) -> dict[str, Any]:
    try:
        body = json.loads(value)
    except json.JSONDecodeError as exc:
        raise FlagError(f"--extra-body takes a JSON object, e.g. '{{\"temperature\": 0}}': {exc}") from None
    if not isinstance(body, dict):
        raise FlagError(f"--extra-body takes a JSON object, got {value!r}")
    return body


def _goodput(values: list[str]) -> list[str]:
    """KEY:MS ... (ttft, tpot, e2el): as --slo"""
    parts = []
    for item in values:
        name, sep, ms = item.partition(":")
        key = {"ttft": "ttft", "tpot": "tpot", "e2el": "e2e"}.get(name.strip().lower())
        if not sep or key is None:
            raise FlagError(f"--goodput {item}: write KEY:MILLISECONDS with KEY one of ttft, tpot, e2el")
        parts.append(f"{key}={ms.strip()}ms")
    return ["--slo", ",".join(parts)]


def _headers(values: list[str]) -> list[str]:
    """NAME=VALUE or 'NAME: VALUE' ...: as --header"""
    out = []
    for item in values:
        if ":" not in item:
            name, _, value = item.partition("=")
            item = f"{name}: {value}"
        out += ["--header", item]
    return out


PERCENTILE_METRICS = {"ttft", "tpot", "itl", "e2el"}
PERCENTILES = {"50", "90", "95", "99", "99.9"}


def _percentile_metrics(value: str) -> list[str]:
    """accepted: ttft, tpot, itl and e2e are always reported"""
    unknown = {m.strip() for m in value.split(",") if m.strip()} - PERCENTILE_METRICS
    if unknown:
        raise FlagError(
            f"--percentile-metrics {','.join(sorted(unknown))}: tokenbench reports ttft, "
            f"tpot, itl and e2e (as e2e_s), all of them, always"
        )
    return []  # every one is in results.json and the console table


def _metric_percentiles(value: str) -> list[str]:
    """accepted for 50, 90, 95, 99, 99.9 (always reported)"""
    asked = {p.strip().rstrip("0").rstrip(".") if "." in p else p.strip() for p in value.split(",") if p.strip()}
    if not asked <= PERCENTILES:
        raise FlagError(
            f"--metric-percentiles {value}: tokenbench reports p50, p90, p95, p99 and p99.9 "
            f"(with mean, std, min and max), always; others are not computed"
        )
    return []


def _zero_only(flag: str, why: str) -> Callable[[str], list[str]]:
    def check(value: str) -> list[str]:
        """accepted as 0 only"""
        try:
            zero = float(value) == 0
        except ValueError:
            zero = False
        if not zero:
            raise FlagError(f"{flag} {value}: {why}")
        return []

    return check


def _shared_prefix(value: str) -> list[str]:
    """as --prefix-groups 1 --prefix-tokens N (0: no prefix)"""
    # vLLM's RandomDataset draws one prefix of N tokens and prepends it to every prompt, the
    # prompt being N + --random-input-len tokens: tokenbench's one prefix group of N tokens, which
    # is also extra to --input-tokens.
    try:
        tokens = int(value)
    except ValueError:
        tokens = -1
    if tokens < 0:
        raise FlagError(f"--random-prefix-len takes a whole number of tokens, got {value!r}")
    return ["--prefix-groups", "1", "--prefix-tokens", str(tokens)] if tokens else []


def _lora_modules(values: list[str]) -> list[str]:
    """names: as --lora-mix NAME=1,... (each adapter an equal share); NAME=PATH: the engine's --lora-modules"""
    # vllm bench serve's --lora-modules names the adapters to send requests to (one drawn per
    # request); vllm serve's takes NAME=PATH to serve: tokenbench's engine knob of that name.
    served = [v for v in values if "=" in v]
    if not served:
        return ["--lora-mix", ",".join(f"{v}=1" for v in values)]
    if len(served) < len(values):
        raise FlagError(
            f"--lora-modules {' '.join(values)}: give adapter names (vllm bench serve: send to them, "
            f"as --lora-mix) or NAME=PATH (vllm serve: serve them), not both"
        )
    return [out for v in values for out in ("--lora-modules", v)]


def _lora_assignment(value: str) -> list[str]:
    """random, round-robin: accepted (each adapter gets its share of the prompts by a seeded draw)"""
    if value not in ("random", "round-robin"):
        raise FlagError(f"--lora-assignment {value}: vllm bench serve takes random or round-robin")
    return []


def _rename(ours: str) -> Callable[[str], list[str]]:
    def rename(value: str) -> list[str]:
        return [ours, value]

    rename.__doc__ = f"as {ours}"
    return rename


# vLLM flag -> how it becomes tokenbench's: a function of its value (or of its values, for the
# flags vLLM takes with nargs="+"), or flags that need no value.
WITH_VALUE: dict[str, Callable[[str], list[str]]] = {
    "--request-rate": _rate,
    "--base-url": _rename("--url"),
    "--dataset-name": _dataset,
    "--random-input-len": _rename("--input-tokens"),
    "--random-output-len": _rename("--output-tokens"),
    "--sharegpt-output-len": _rename("--output-tokens"),
    "--result-dir": _rename("--out"),
    "--endpoint": _endpoint,
    "--backend": _backend,
    "--percentile-metrics": _percentile_metrics,
    "--metric-percentiles": _metric_percentiles,
    "--random-range-ratio": _zero_only(
        "--random-range-ratio",
        "tokenbench's synthetic prompts have "
        "exactly --input-tokens tokens; for a spread use --dataset sharegpt "
        "or --dataset jsonl with your lengths",
    ),
    "--random-prefix-len": _shared_prefix,
    "--random-batch-size": _rename("--batch-size"),  # pooling APIs: inputs per request
    "--lora-assignment": _lora_assignment,
}
WITH_VALUES: dict[str, Callable[[list[str]], list[str]]] = {
    "--goodput": _goodput,
    "--header": _headers,
    "--lora-modules": _lora_modules,
}
# Sampling parameters: vLLM sends each in the request body; so does --extra-body (JSON), here
# merged into one object (the flag's value wins over a key of --extra-body's).
SAMPLING = {
    "--temperature": float,
    "--top-p": float,
    "--top-k": int,
    "--min-p": float,
    "--frequency-penalty": float,
    "--presence-penalty": float,
    "--repetition-penalty": float,
}
NO_VALUE: dict[str, list[str]] = {
    "--disable-tqdm": ["--no-live"],
    "--save-result": [],  # tokenbench always writes results.json
}
# vLLM flags with no equivalent here, and what to type instead
REFUSED: dict[str, str] = {
    "--num-warmups": "tokenbench warms up by time: --warmup SECONDS (excluded from the metrics)",
    "--ramp-up-strategy": "tokenbench ramps users (--users N --ramp-up SECONDS) or sweeps rates (--rate 1,2,4)",
    "--ramp-up-start-rps": "tokenbench ramps users (--users N --ramp-up SECONDS) or sweeps rates (--rate 1,2,4)",
    "--ramp-up-end-rps": "tokenbench ramps users (--users N --ramp-up SECONDS) or sweeps rates (--rate 1,2,4)",
    "--result-filename": "tokenbench writes a directory (--out DIR): results.json, records.jsonl, samples.jsonl",
    "--label": "name the run by its directory (--out DIR)",
    "--profile": "tokenbench does not drive vLLM's torch profiler",
}


def aliases() -> dict[str, str]:
    """Every vllm-bench flag ``translate`` knows, and what it becomes here (for `run --help`)."""
    meaning: dict[str, str] = {
        "--host": "with --port: as --url http://HOST:PORT",
        "--port": "with --host: as --url http://HOST:PORT",
        "--backend": "openai, openai-chat, openai-embeddings, vllm-rerank: as --api completions, chat, embeddings, "
        "rerank; else as --backend",
        "--extra-body": "merged with the sampling flags into one --extra-body",
    }
    meaning |= {flag: (rule.__doc__ or "").strip() for flag, rule in WITH_VALUE.items() if flag != "--backend"}
    meaning |= {flag: (rule.__doc__ or "").strip() for flag, rule in WITH_VALUES.items()}
    meaning |= {flag: "sent in every request body (as a key of --extra-body)" for flag in SAMPLING}
    meaning |= {
        flag: "as " + " ".join(ours) if ours else "accepted (tokenbench does it always)"
        for flag, ours in NO_VALUE.items()
    }
    meaning |= {flag: f"refused: {why}" for flag, why in REFUSED.items()}
    return meaning


def translate(args: list[str]) -> list[str]:
    """``tokenbench run``'s arguments with vllm-bench flags rewritten as tokenbench's; raises
    FlagError for a flag whose meaning differs. ``--host``/``--port`` become ``--url``."""
    cursor = _Cursor(args)
    rewritten = _Rewritten()
    while cursor.more():
        arg = cursor.take()
        flag, eq, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if flag in REFUSED:
            raise FlagError(f"{flag} (vllm bench serve) has no tokenbench equivalent: {REFUSED[flag]}")
        if flag in NO_VALUE:
            rewritten.out += NO_VALUE[flag]
        elif flag in ("--host", "--port", "--extra-body") or flag in WITH_VALUE or flag in SAMPLING:
            rewritten.add(flag, inline if eq else cursor.value(flag))
        elif flag in WITH_VALUES:
            rewritten.out += WITH_VALUES[flag](cursor.values(flag, [inline] if eq else []))
        else:
            rewritten.out.append(arg)
    return rewritten.finished()


class _Cursor:
    """The arguments, read left to right."""

    def __init__(self, args: list[str]) -> None:
        self._args = args
        self._i = 0

    def more(self) -> bool:
        return self._i < len(self._args)

    def take(self) -> str:
        self._i += 1
        return self._args[self._i - 1]

    def value(self, flag: str) -> str:
        if not self.more():
            raise FlagError(f"{flag} needs a value")
        return self.take()

    def values(self, flag: str, values: list[str]) -> list[str]:
        """``values`` and every following argument up to the next flag (vLLM's nargs="+")."""
        while self.more() and not self._args[self._i].startswith("-"):  # `run` takes no positional argument
            values.append(self.take())
        if not values:
            raise FlagError(f"{flag} needs a value")
        return values


class _Rewritten:
    """tokenbench's arguments so far; the server's address and the request body are gathered
    from several flags and added at the end."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self._host: str | None = None
        self._port: str | None = None
        self._body: dict[str, Any] | None = None

    def add(self, flag: str, value: str) -> None:
        if flag == "--host":
            self._host = value
        elif flag == "--port":
            self._port = value
        elif flag == "--extra-body":
            self._body = {**json_object(value), **(self._body or {})}
        elif flag in SAMPLING:
            try:
                self._body = {**(self._body or {}), flag[2:].replace("-", "_"): SAMPLING[flag](value)}
            except ValueError:
                raise FlagError(f"{flag} takes a number, got {value!r}") from None
        else:
            self.out += WITH_VALUE[flag](value)

    def finished(self) -> list[str]:
        out = self.out
        if self._body is not None:
            out += ["--extra-body", json.dumps(self._body)]
        if self._host is not None or self._port is not None:
            if "--url" in out:
                raise FlagError("--host/--port and --base-url (or --url) both name the server: keep one")
            out += ["--url", f"http://{self._host or '127.0.0.1'}:{self._port or 8000}"]
        return out
