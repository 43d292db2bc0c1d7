"""OpenAI-compatible streaming: /v1/chat/completions and /v1/completions (SSE).

Served by vLLM, SGLang, LMDeploy, TensorRT-LLM (trtllm-serve), MLC-LLM, llama.cpp, Ollama and Ray
Serve LLM. Usage arrives in a final chunk with empty ``choices`` when ``stream_options.
include_usage`` is set; with ``continuous_usage_stats`` too (TargetConfig.continuous_usage), vLLM
and SGLang put the cumulative usage on every chunk (vLLM's chat_completion/serving.py: the
role chunk says 0, each later one ``previous_num_tokens``, tokens included), which
``Stream.chunk_usage`` keeps per content chunk. vLLM's per-request ``metrics`` object (its own timing
and speculation figures) rides on the final usage chunk, SGLang's ``sglext`` (speculation, with
``return_spec_tokens_details``) on a choice-less chunk of its own, TensorRT-LLM's
``avg_decoded_tokens_per_iter`` on every choice (the finishing one's kept): all kept as sent
(clients/server_report.py). vLLM sends a role-only first delta: not content, so not a chunk.
A chat delta's reasoning (``reasoning`` / ``reasoning_content``) is a chunk too, counted apart
(``Stream.reasoning_chunks``); the first delta with ``content`` is the first output (TTFO).
A delta's ``tool_calls`` (a call's name, then its arguments in pieces, as vLLM streams them:
chat_completion/serving.py DeltaToolCall) is output too: a chunk, kept apart (``Stream.tool_calls``).
--response-format and --tools go in the engine's own fields (structured.py).
"""

from __future__ import annotations

from orjson import loads as _loads  # payloads are parsed on the hot path

from tokenbench.clients.structured import request_fields
from tokenbench.clients.wire import Body, Framing, JsonObject, Payload, Stream
from tokenbench.config.target import ResolvedTarget
from tokenbench.datasets.chat_images import chat_messages
from tokenbench.records import Request


class OpenAIWire:
    framing: Framing = "sse"
    probe_path = "/v1/models"

    def __init__(self, chat: bool) -> None:
        self.chat = chat

    def url(self, target: ResolvedTarget) -> str:
        return f"{target.url}{'/v1/chat/completions' if self.chat else '/v1/completions'}"

    def payload(self, request: Request, target: ResolvedTarget) -> Body:
        group = request.group
        adapter = group.adapter if group is not None else None
        # a LoRA adapter is its own model name (vLLM, SGLang, LMDeploy, llama.cpp's router)
        body: Body = {"model": adapter or target.model, "stream": True}
        if self.chat:
            messages = request.as_messages()
            body["messages"] = chat_messages(messages, request.images) if request.images else messages
        elif request.prompt_token_ids is not None:
            body["prompt"] = list(request.prompt_token_ids)  # only made for servers that take ids
        else:
            body["prompt"] = request.as_prompt_text()
        if request.max_tokens is not None:
            # max_tokens is what every OpenAI-compatible server reads; newer servers also read
            # max_completion_tokens but some reject unknown fields, so send only the common one.
            body["max_tokens"] = request.max_tokens
        if target.include_usage:
            # continuous_usage_stats: usage (cumulative) on every chunk, vLLM's and SGLang's
            # StreamOptions field (vLLM sends it only with include_usage: should_include_usage)
            body["stream_options"] = (
                {"include_usage": True, "continuous_usage_stats": True}
                if target.continuous_usage
                else {"include_usage": True}
            )
        if target.ignore_eos:
            body["ignore_eos"] = True
        if target.temperature is not None:
            body["temperature"] = target.temperature
        if group is not None and group.priority is not None:  # vLLM's and SGLang's request field
            body["priority"] = group.priority
        if target.response_format is not None or target.tools:  # in the engine's own fields
            body.update(request_fields(target))
        if target.report_fields:  # the engine's report of the reply (SGLang's return_spec_tokens_details)
            body.update(target.report_fields)
        body.update(target.extra_body)
        return body

    def new_stream(self) -> Stream:
        return OpenAIStream(self.chat)

    def model_ids(self, probe_json: object) -> list[str]:
        data = probe_json.get("data", []) if isinstance(probe_json, dict) else []
        return [str(m["id"]) for m in data if isinstance(m, dict) and m.get("id")]


class OpenAIStream(Stream):
    __slots__ = ("chat",)

    def __init__(self, chat: bool) -> None:
        super().__init__()
        self.chat = chat

    def handle(self, data: Payload) -> bool:
        if self.failed:
            return False
        if data == b"[DONE]":
            self.done = True
            return False
        if not data:
            return False
        try:  # json_object's usual answer without its call (eight events a short reply)
            obj = _loads(data)
        except ValueError:
            obj = None
        if type(obj) is not dict or "error" in obj:
            obj = self.json_object(data)  # fails the stream with the reason
            if obj is None:
                return False
        if self.response_id is None:
            self.response_id = obj.get("id")
        # ``in`` before a look-up of the keys most events lack (a method call fewer each)
        usage = obj["usage"] if "usage" in obj else None
        if usage:
            self.prompt_tokens = usage.get("prompt_tokens", self.prompt_tokens)
            self.completion_tokens = usage.get("completion_tokens", self.completion_tokens)
            details = usage.get("completion_tokens_details")
            if isinstance(details, dict) and isinstance(details.get("reasoning_tokens"), int):
                self.reasoning_tokens = details["reasoning_tokens"]
            details = usage.get("prompt_tokens_details")
            if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
                self.cached_prompt_tokens = details["cached_tokens"]
        timings = obj["timings"] if "timings" in obj else None  # llama.cpp's per-request timings (ms), verbatim
        if isinstance(timings, dict):
            self.server_timings = timings
            if self.cached_prompt_tokens is None and isinstance(timings.get("cache_n"), int):
                self.cached_prompt_tokens = timings["cache_n"]  # prompt tokens reused from its KV
        choices = obj.get("choices")
        if not choices:
            if "metrics" in obj and isinstance(obj["metrics"], dict):  # vLLM's, on the final usage chunk
                self.server_metrics = obj["metrics"]
            if "sglext" in obj and isinstance(obj["sglext"], dict):  # SGLang's, on its own chunk before the usage
                self.sglext = obj["sglext"]
            return False  # usage-only chunk
        chunk = self._choice(choices[0])
        if chunk and self.chunk_usage is not None:  # usage on every chunk asked for: its count here
            count = usage.get("completion_tokens") if usage else None
            self.chunk_usage.append(count if type(count) is int else None)
        return chunk

    def _choice(self, choice: JsonObject) -> bool:
        """A choice's finish reason and content: True when it carried content (a chunk)."""
        reason = choice.get("finish_reason")
        if reason is not None:
            self.finish(reason)  # an abort fails the stream here
            if self.failed:
                return False
            if "avg_decoded_tokens_per_iter" in choice:  # TensorRT-LLM's on every choice: the last is the reply's
                self.decoded_per_iter = choice["avg_decoded_tokens_per_iter"]
        if self.chat:
            delta = choice.get("delta") or {}
            piece = delta.get("content")
            calls = delta["tool_calls"] if "tool_calls" in delta else None
            if calls and self.tool_delta(calls, bool(piece)) and not piece:
                if self.first_output_chunk is None:  # a tool call is output: every chunk before was reasoning
                    self.first_output_chunk = self.reasoning_chunks
                return True
            if not piece:
                # Reasoning streams apart from the answer: vLLM's ``reasoning`` (its older name
                # ``reasoning_content`` is still sent beside it), SGLang's and DeepSeek's
                # ``reasoning_content``. A chunk all the same (TTFT counts it), counted apart.
                piece = delta.get("reasoning") or delta.get("reasoning_content")
                if not piece:
                    return False  # role-only or empty delta: not a chunk
                return self.reasoning(piece)
        else:
            piece = choice.get("text")
            if not piece:
                return False
        if self.first_output_chunk is None:
            self.first_output_chunk = self.reasoning_chunks  # every chunk before it was reasoning
        self.text.append(piece)
        return True
