"""Ollama native streaming: ``POST /api/generate`` (newline-delimited JSON).

Owns Ollama's generate body (``model``, ``prompt``, ``stream``, ``raw``, ``options``) and the reading
of its ``GenerateResponse`` lines. Timing, retries and outcomes are the shared StreamingClient's
(clients/stream.py), so this path is measured exactly like the OpenAI one.

Wire facts:
- ollama/ollama server/routes.go ``streamResponse``: content-type ``application/x-ndjson``, each
  message ``json.Marshal(val)`` + ``\\n``. An error before any content is an HTTP status with a
  JSON body ``{"error": "..."}`` (e.g. 404 ``model "x" not found, try pulling it first`` from
  ``handleScheduleError``); an error after streaming began is an ``{"error": "..."}`` line in the
  200 stream (also https://docs.ollama.com/api/errors).
- ollama/ollama api/types.go ``GenerateResponse``: ``{"model","created_at","response","done"}`` per
  piece (``thinking`` instead of ``response`` for a thinking model's reasoning); the final line has
  ``"done":true``, ``done_reason`` and ``Metrics``: ``total_duration``, ``load_duration``,
  ``prompt_eval_count``, ``prompt_eval_duration``, ``eval_count``, ``eval_duration``
  (``time.Duration``: integer nanoseconds; every field ``omitempty``). docs/api.md documents the
  same fields and units. These are kept verbatim in ``server_timings``; ``eval_count`` is the
  completion token count and ``prompt_eval_count`` the prompt's (tokens actually evaluated: a
  prompt served from Ollama's cache can report fewer).

``raw: true``: the prompt text goes to the model as is, like ``--api completions`` (no chat
template, so the dataset's prompt lengths stay exact). It also spares the server the extra
tokenization of prompt + reply that builds the deprecated ``context`` array on the final line when
raw is off (routes.go ``GenerateHandler``), work that would otherwise sit inside our E2E. Send
``{"raw": false}`` in extra_body for the model's template.

Not supported by Ollama, so never sent: ``ignore_eos`` (no such field in api/types.go ``Options``;
unknown options are dropped with a warning by ``Options.FromMap``).
"""

from __future__ import annotations

from collections.abc import Mapping

from tokenbench.clients.wire import Body, Framing, Payload, Stream
from tokenbench.config.target import ResolvedTarget
from tokenbench.errors import BadInput
from tokenbench.records import Request

# Top-level fields of api/types.go GenerateRequest. extra_body keys among them go to the top level;
# every other key is a model option (num_ctx, top_k, seed, ...), Ollama's native parameters object.
_REQUEST_FIELDS = frozenset(
    {
        "model",
        "prompt",
        "suffix",
        "system",
        "template",
        "context",
        "stream",
        "raw",
        "format",
        "keep_alive",
        "images",
        "options",
        "think",
    }
)


class OllamaWire:
    framing: Framing = "ndjson"
    probe_path = "/api/tags"  # {"models": [{"name": "smollm2:135m", ...}]} (api/types.go ListResponse)

    def url(self, target: ResolvedTarget) -> str:
        return f"{target.url}/api/generate"

    def payload(self, request: Request, target: ResolvedTarget) -> Body:
        body: Body = {
            "model": target.model,
            "prompt": request.as_prompt_text(),
            "stream": True,  # Ollama's default, sent so a proxy's different default cannot apply
            "raw": True,
        }
        options: Body = {}
        if request.max_tokens is not None:
            options["num_predict"] = request.max_tokens
        if target.temperature is not None:
            options["temperature"] = target.temperature  # 0 is greedy in Ollama's sampler
        for key, value in target.extra_body.items():
            if key in _REQUEST_FIELDS:
                body[key] = value
            else:
                options[key] = value
        given = body.get("options", {})  # extra_body's own options win
        if options:
            if not isinstance(given, Mapping):
                raise BadInput(f"extra_body: Ollama's options must be an object, not {given!r}")
            body["options"] = {**options, **given}
        return body

    def new_stream(self) -> Stream:
        return OllamaStream()

    def model_ids(self, probe_json: object) -> list[str]:
        models = probe_json.get("models", []) if isinstance(probe_json, dict) else []
        return [m["name"] for m in models if isinstance(m, dict) and isinstance(m.get("name"), str)]


class OllamaStream(Stream):
    __slots__ = ()

    def handle(self, data: Payload) -> bool:
        if self.failed or not data:
            return False
        obj = self.json_object(data, unit="line")
        if obj is None:
            return False
        if obj.get("done") is True:
            self.done = True
            self.finish(obj.get("done_reason"))  # stop, length, load, unload
            # Every number on the final line, by Ollama's names and units (durations in ns).
            timings = {k: v for k, v in obj.items() if type(v) is int or type(v) is float}
            self.server_timings = timings or None
            count = obj.get("eval_count")
            if isinstance(count, int):
                self.completion_tokens = count
            count = obj.get("prompt_eval_count")
            if isinstance(count, int):
                self.prompt_tokens = count
        piece = obj.get("response")
        if not piece:
            piece = obj.get("thinking")  # a thinking model's reasoning: a chunk, counted apart
            if not piece:
                return False  # the final line's empty response, or an empty piece: not a chunk
            return self.reasoning(piece)
        if self.first_output_chunk is None:
            self.first_output_chunk = self.reasoning_chunks
        self.text.append(piece)
        return True
