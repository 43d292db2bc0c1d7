"""A decoupled Triton model with the TensorRT-LLM ensemble's interface, served by NVIDIA PyTriton
(a real tritonserver, Triton 2.51, on CPU), whose Python code streams from an upstream engine's
OpenAI completions API: one Triton response per upstream chunk.

Run by the PyTriton venv's interpreter as a FILE (scripts/setup_triton.sh builds it from Debian's
python3.11; the profile in triton.py renders the command). It imports nothing from tokenbench:

    .cache/triton-venv/bin/python src/tokenbench/backends/triton_model.py \\
        --host 127.0.0.1 --http-port 8000 --grpc-port 8001 --metrics-port 8002 \\
        --upstream-url http://127.0.0.1:8080 --upstream-model smollm2 --model-name ensemble

Interface (NVIDIA/TensorRT-LLM triton_backend/all_models/inflight_batcher_llm/ensemble/
config.pbtxt, as tokenbench's clients/triton.py sends it through /v2/models/<m>/generate_stream,
where every key of "parameters" that names a model input becomes that input):
- inputs: text_input (string), max_tokens (int32), stream (bool), and optional bad_words,
  stop_words (string), temperature, top_p (fp32), top_k, min_tokens, random_seed (int32),
  return_num_input_tokens, return_num_output_tokens (bool);
- outputs: text_output (string), num_input_tokens, num_output_tokens (int32; sent when asked).
Relayed to the upstream as /v1/completions {prompt, max_tokens, stream, temperature, top_p,
top_k, seed, stop (stop_words), min_tokens, ignore_eos (min_tokens >= max_tokens)}; bad_words has
no OpenAI completions field and is ignored. num_output_tokens is exact, never guessed: with
continuous usage (vLLM) each response carries the new tokens of its chunk; otherwise the last
response carries the rest of the upstream's final usage.completion_tokens, so their sum is the
engine's count. With stream=false the text comes as one response.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import AsyncIterator, Mapping

import aiohttp
import numpy as np
from pytriton.model_config import ModelConfig, Tensor  # type: ignore[import-not-found]  # only in Triton's venv
from pytriton.triton import Triton, TritonConfig  # type: ignore[import-not-found]

STRING_INPUTS = ("text_input", "bad_words", "stop_words")
INT_INPUTS = ("max_tokens", "top_k", "min_tokens", "random_seed")
FLOAT_INPUTS = ("temperature", "top_p")
BOOL_INPUTS = ("stream", "return_num_input_tokens", "return_num_output_tokens")
REQUIRED = ("text_input", "max_tokens")
RESENDS = 2  # a request whose pooled connection the engine had closed is sent again (before any byte came back)

TritonRequest = Mapping[str, object]  # PyTriton's request: an input's name -> its numpy array
Number = int | float | bool
Response = dict[str, np.ndarray]  # an output's name -> its numpy array


def _array(request: TritonRequest, name: str) -> np.ndarray | None:
    """One input, flat; None when the request did not send it (or sent it empty)."""
    if name not in request:
        return None
    array = np.asarray(request[name]).reshape(-1)
    return array if array.size else None


def _strings(request: TritonRequest, name: str) -> list[str] | None:
    """A string input (bytes decoded); None when the request did not send it."""
    array = _array(request, name)
    return None if array is None else [x.decode() if isinstance(x, bytes) else str(x) for x in array]


def _number(request: TritonRequest, name: str) -> Number | None:
    """A numeric or boolean input's first element as a Python scalar; None when not sent."""
    array = _array(request, name)
    if array is None:
        return None
    value: Number = array[0].item()
    return value


def upstream_body(request: TritonRequest, model: str) -> dict[str, object]:
    """The OpenAI completions request for one Triton request."""
    max_tokens = _number(request, "max_tokens")
    stream = _number(request, "stream")
    text = _strings(request, "text_input")
    body: dict[str, object] = {
        "model": model,
        "prompt": text[0] if text else None,
        "max_tokens": max_tokens,
        "stream": True,  # always streamed upstream; stream=false only joins the text here
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    for name, field in (("temperature", "temperature"), ("top_p", "top_p"), ("top_k", "top_k")):
        if (value := _number(request, name)) is not None:
            body[field] = value
    if (seed := _number(request, "random_seed")) is not None:
        body["seed"] = seed
    if stop := _strings(request, "stop_words"):
        body["stop"] = stop
    if (min_tokens := _number(request, "min_tokens")) is not None:
        body["min_tokens"] = min_tokens
        if max_tokens is not None and min_tokens >= max_tokens:
            body["ignore_eos"] = True  # llama.cpp has no min_tokens; both honour ignore_eos
    body["_stream"] = stream is None or bool(stream)
    return body


class Relay:
    """The model's inference callable: an async generator of responses per request."""

    def __init__(self, upstream_url: str, upstream_model: str) -> None:
        self.url = upstream_url.rstrip("/") + "/v1/completions"
        self.model = upstream_model
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:  # created on PyTriton's inference loop, where it is used
            timeout = aiohttp.ClientTimeout(total=None, sock_read=600)
            self._session = aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=0))
        return self._session

    async def __call__(self, requests: list[TritonRequest]) -> AsyncIterator[list[Response]]:
        if len(requests) != 1:  # no batching in the model config: Triton sends one at a time
            raise ValueError(f"expected one request per call, got {len(requests)}")
        (request,) = requests
        for name in REQUIRED:
            if _array(request, name) is None:
                raise ValueError(f"input {name} is required")
        body = upstream_body(request, self.model)
        streaming = body.pop("_stream")
        want_in = bool(_number(request, "return_num_input_tokens"))
        want_out = bool(_number(request, "return_num_output_tokens"))
        held: list[str] = []
        async for text, n_in, n_out in self._chunks(body):
            response: Response = {}
            if text and streaming:
                response["text_output"] = np.array([text.encode()], dtype=np.bytes_)
            elif text:
                held.append(text)
            if want_out and n_out:
                response["num_output_tokens"] = np.array([n_out], dtype=np.int32)
            if want_in and n_in is not None:
                response["num_input_tokens"] = np.array([n_in], dtype=np.int32)
            if response and streaming:
                yield [response]
        if not streaming:
            yield [{"text_output": np.array(["".join(held).encode()], dtype=np.bytes_)}]

    async def _chunks(self, body: dict[str, object]) -> AsyncIterator[tuple[str, int | None, int]]:
        """(text, prompt tokens once known, new completion tokens) per upstream SSE event. A pooled
        connection the engine closed while idle (llama.cpp closes them after 5 s) fails before any
        response: sent again on a fresh one, up to RESENDS times."""
        for attempt in range(RESENDS + 1):
            try:
                resp = await self.session().post(self.url, json=body)
            except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError):
                if attempt == RESENDS:
                    raise
                continue
            async with resp:
                async for item in self._events(resp):
                    yield item
            return

    async def _events(self, resp: aiohttp.ClientResponse) -> AsyncIterator[tuple[str, int | None, int]]:
        counted = 0
        if resp.status != 200:
            raise RuntimeError(f"upstream {self.url} answered {resp.status}: {(await resp.text())[:500]}")
        async for raw in resp.content:
            line = raw.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                break
            event = json.loads(data)
            if "error" in event:
                raise RuntimeError(f"upstream error: {event['error']}")
            choices = event.get("choices") or []
            text = (choices[0].get("text") or "") if choices else ""
            usage = event.get("usage") or {}
            total = usage.get("completion_tokens")
            new = total - counted if isinstance(total, int) and total > counted else 0
            counted += new
            yield text, usage.get("prompt_tokens"), new


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--grpc-port", type=int, required=True)
    parser.add_argument("--metrics-port", type=int, required=True)
    parser.add_argument("--upstream-url", required=True)
    parser.add_argument("--upstream-model", required=True)
    parser.add_argument("--model-name", default="ensemble")
    parser.add_argument("--metrics-config", action="append", default=[])
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config = TritonConfig(
        http_address=args.host,
        http_port=args.http_port,
        grpc_address=args.host,
        grpc_port=args.grpc_port,
        metrics_address=args.host,
        metrics_port=args.metrics_port,
        metrics_config=args.metrics_config or None,
    )
    inputs = [Tensor(name="text_input", dtype=bytes, shape=(-1,))]
    inputs += [Tensor(name=n, dtype=bytes, shape=(-1,), optional=True) for n in STRING_INPUTS[1:]]
    inputs += [Tensor(name=n, dtype=np.int32, shape=(-1,), optional=n != "max_tokens") for n in INT_INPUTS]
    inputs += [Tensor(name=n, dtype=np.float32, shape=(-1,), optional=True) for n in FLOAT_INPUTS]
    inputs += [Tensor(name=n, dtype=np.bool_, shape=(-1,), optional=True) for n in BOOL_INPUTS]
    outputs = [
        Tensor(name="text_output", dtype=bytes, shape=(-1,)),
        Tensor(name="num_input_tokens", dtype=np.int32, shape=(-1,)),
        Tensor(name="num_output_tokens", dtype=np.int32, shape=(-1,)),
    ]
    with Triton(config=config) as triton:
        triton.bind(
            model_name=args.model_name,
            infer_func=Relay(args.upstream_url, args.upstream_model),
            inputs=inputs,
            outputs=outputs,
            config=ModelConfig(batching=False, decoupled=True),
            strict=False,
        )
        triton.serve()


if __name__ == "__main__":
    main()
