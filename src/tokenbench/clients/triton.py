"""NVIDIA Triton Inference Server generate extension: ``POST /v2/models/{model}/generate_stream``.

Owns the generate-extension body (``text_input`` + ``parameters``) and the reading of its SSE
responses, for the two LLM backends people put behind it: the TensorRT-LLM ``ensemble`` /
``tensorrt_llm_bls`` models and the vLLM backend. Timing, retries and outcomes are the shared
StreamingClient's (clients/stream.py).

Wire facts:
- triton-inference-server/server docs/protocol/extension_generate.md: the request is
  ``{"text_input": ..., "parameters": {...}}``; each response is an SSE ``data`` chunk; an error is
  ``{"error": "<message>"}``; the HTTP status is decided by the *first* response, so an error after
  that arrives inside a 200 stream.
- triton-inference-server/server src/http_server.cc (``GenerateRequestClass``): every response is
  ``data: `` + compact JSON + ``\\n\\n`` with content-type ``text/event-stream; charset=utf-8``;
  errors the same (``AddErrorJson``); a first-response error makes the status 400 with that
  SSE-framed body. Output tensors become JSON fields by name (``text_output``), one-element
  tensors unwrapped to scalars. Keys of ``parameters`` that name a model input become input
  tensors, others request parameters (``ConvertGenerateRequest``/``ExactMappingInput``); older
  servers accept only int/bool/string parameters (``SetTritonParameterFromJsonParameter``).
- Token counts are not sent unless asked for: ``return_num_input_tokens`` /
  ``return_num_output_tokens`` are inputs of the TRT-LLM ensemble (NVIDIA/TensorRT-LLM
  triton_backend/all_models/inflight_batcher_llm/ensemble/config.pbtxt) and of the vLLM backend
  (triton-inference-server/vllm_backend src/utils/request.py). Both send ``num_output_tokens`` as
  the count of *this* response's new tokens when streaming (vllm_backend request.py keeps
  ``prev_lens_num_output_tokens``; TensorRT-LLM tensorrt_llm/1/model.py ``convert_response`` uses
  the response's ``output_ids``), so completion_tokens is their sum. A model without those
  inputs sends neither field and completion_tokens stays None (tokenizer or chunk count is used).

Probe: Triton's health route names no model, and ``Wire.probe_path`` is a fixed string, so the
probe is ``GET /v2/health/ready`` (200 with an empty body when every model is ready): no model ids
come back and ``--model`` (e.g. ``ensemble``) is required.

ignore_eos: there is no such input on the TRT-LLM ensemble; ``min_tokens`` = ``max_tokens`` is the
equivalent both backends understand (ensemble input ``min_tokens``, older ensembles call it
``min_length``; vLLM backend passes it to ``SamplingParams.min_tokens``).
"""

from __future__ import annotations

from urllib.parse import quote

from tokenbench.clients.wire import Body, Framing, Payload, Stream
from tokenbench.config.target import ResolvedTarget
from tokenbench.records import Request


class TritonWire:
    framing: Framing = "sse"
    probe_path = "/v2/health/ready"

    def url(self, target: ResolvedTarget) -> str:
        return f"{target.url}/v2/models/{quote(target.model, safe='')}/generate_stream"

    def payload(self, request: Request, target: ResolvedTarget) -> Body:
        params: Body = {
            # Without stream=true a decoupled TRT-LLM/vLLM model sends the whole reply as one
            # response and TTFT would equal E2E.
            "stream": True,
            "return_num_input_tokens": True,
            "return_num_output_tokens": True,
        }
        if request.max_tokens is not None:
            params["max_tokens"] = request.max_tokens  # required input of the TRT-LLM ensemble
            if target.ignore_eos:
                params["min_tokens"] = request.max_tokens
        if target.temperature is not None:
            # An integral temperature goes as a JSON int: it is an FP32 tensor for the TRT-LLM
            # ensemble (an int reads fine) but a request *parameter* for the vLLM backend, and
            # Triton servers before double-parameter support reject 0.0 there ("should be
            # either 'int', 'bool', or 'string'"). The generate doc's own example sends 0.
            t = target.temperature
            params["temperature"] = int(t) if float(t).is_integer() else t
        # extra_body is merged into the native parameters object. A null value removes one of the
        # defaults above, e.g. {"return_num_input_tokens": null} for a vLLM backend older than
        # those inputs: it would pass them to SamplingParams, which rejects unknown fields.
        for key, value in target.extra_body.items():
            if value is None:
                params.pop(key, None)
            else:
                params[key] = value
        return {"text_input": request.as_prompt_text(), "parameters": params}

    def new_stream(self) -> Stream:
        return TritonStream()

    def model_ids(self, probe_json: object) -> list[str]:
        return []  # /v2/health/ready lists no models (see the module docstring)


def _scalar(value: object) -> object:
    """A tensor output as JSON: one element is unwrapped by the server, more come as a list
    (several sequences: the first is the one we asked for)."""
    if isinstance(value, list):
        return value[0] if value else None
    return value


class TritonStream(Stream):
    __slots__ = ()

    def handle(self, data: Payload) -> bool:
        if self.failed or not data:
            return False
        obj = self.json_object(data)
        if obj is None:
            return False
        if self.response_id is None and isinstance(obj.get("id"), str):
            self.response_id = obj["id"]  # echoed only when the request carried an id
        n_in = _scalar(obj.get("num_input_tokens"))
        if isinstance(n_in, int):
            self.prompt_tokens = n_in
        n_out = _scalar(obj.get("num_output_tokens"))
        if isinstance(n_out, int):
            # Per-response count of new tokens when streaming (module docstring): sum them.
            self.completion_tokens = (self.completion_tokens or 0) + n_out
        finish = _scalar(obj.get("finish_reason"))  # vLLM backend, with return_finish_reason
        self.finish(finish)
        if self.failed:
            return False
        piece = _scalar(obj.get("text_output"))
        if not isinstance(piece, str) or not piece:
            return False
        self.text.append(piece)
        return True
