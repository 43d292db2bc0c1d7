"""Hugging Face text-generation-inference native streaming: ``POST /generate_stream`` (SSE).

Owns TGI's request body (``inputs`` + ``parameters``) and the reading of its ``StreamResponse``
events. One event per generated token; the last one also carries ``generated_text`` and, because
we always ask for ``details``, the server's own token counts. Timing, retries and outcomes are the
shared StreamingClient's (clients/stream.py), so this path is measured exactly like the OpenAI one.

Wire facts (huggingface/text-generation-inference, router/src/server.rs ``generate_stream_internal``
and router/src/lib.rs ``StreamResponse``/``Token``/``StreamDetails``/``ErrorResponse``):
  data:{"index":1,"token":{"id":504,"text":"The","logprob":-0.52705,"special":false},
        "generated_text":null,"details":null}
  ... final event: "generated_text":"...","details":{"finish_reason":"eos_token",
        "generated_tokens":8,"seed":null,"input_length":16}
  error: data:{"error":"Input validation error: ...","error_type":"validation"}
Events are axum ``Event::default().json_data(..)`` (tokio-rs/axum axum/src/response/sse.rs):
``data:`` with no space, no ``event:`` line, so an error is told apart only by its ``error`` key.
Validation runs inside the stream, after the 200 and the headers: a rejected request is a 200
whose only event is an error (hence a stream_error, not an http_error, in our records).

Not supported by TGI, so never sent: ``ignore_eos`` (router/src/validation.rs builds
``StoppingCriteriaParameters`` with ``ignore_eos_token: false``; the field is not in
``GenerateParameters``). ``--ignore-eos`` therefore has no effect on this API.
"""

from __future__ import annotations

from tokenbench.clients.structured import fields_of
from tokenbench.clients.wire import Body, Framing, Payload, Stream
from tokenbench.config.target import ResolvedTarget
from tokenbench.records import Request


class TGIWire:
    framing: Framing = "sse"
    # GET /info answers {"model_id": "...", ...} (router/src/lib.rs Info); any 200 proves the router.
    probe_path = "/info"

    def url(self, target: ResolvedTarget) -> str:
        # TGI serves one model; the name in --model is a label only (the route has no model field).
        return f"{target.url}/generate_stream"

    def payload(self, request: Request, target: ResolvedTarget) -> Body:
        # details=true is what makes the final event carry generated_tokens and input_length
        # (server.rs builds StreamDetails only `if details`). decoder_input_details must stay
        # false: TGI rejects it on the streaming route (ValidationError::PrefillDetailsStream).
        params: Body = {"details": True}
        if request.max_tokens is not None:
            params["max_new_tokens"] = request.max_tokens
        temperature = target.temperature
        if temperature is not None:
            if temperature > 0:
                params["do_sample"] = True
                params["temperature"] = temperature
            else:
                # Greedy. TGI rejects temperature <= 0 ("`temperature` must be strictly positive",
                # validation.rs) and any temperature != 1.0 switches sampling on in the server's
                # NextTokenChooser (server/text_generation_server/utils/tokens.py), so temperature 0
                # is do_sample=false with no temperature at all.
                params["do_sample"] = False
        if target.response_format is not None:  # parameters.grammar (structured.py)
            params.update(fields_of(target.response_format, "tgi"))
        params.update(target.extra_body)  # TGI's native parameters object (GenerateParameters)
        return {"inputs": request.as_prompt_text(), "parameters": params}

    def new_stream(self) -> Stream:
        return TGIStream()

    def model_ids(self, probe_json: object) -> list[str]:
        model_id = probe_json.get("model_id") if isinstance(probe_json, dict) else None
        return [model_id] if isinstance(model_id, str) and model_id else []


class TGIStream(Stream):
    __slots__ = ()

    def handle(self, data: Payload) -> bool:
        if self.failed or not data:
            return False
        obj = self.json_object(data)  # TGI's error events carry error_type (router/src/lib.rs)
        if obj is None:
            return False
        details = obj.get("details")
        if isinstance(details, dict):
            self.done = True
            self.finish(details.get("finish_reason"))  # length, eos_token, stop_sequence
            # generated_tokens counts every generated token, the EOS included (lib.rs StreamDetails).
            self.completion_tokens = details.get("generated_tokens", self.completion_tokens)
            # input_length: the prompt as TGI's validation tokenized it; absent before TGI 2.x.
            self.prompt_tokens = details.get("input_length", self.prompt_tokens)
        elif obj.get("generated_text") is not None:
            self.done = True  # the final event when details were turned off through extra_body
        token = obj.get("token")
        if not isinstance(token, dict) or token.get("special"):
            # A special token (the EOS: {"text":"<|im_end|>","special":true}) is not in
            # generated_text, as vLLM's final empty delta is not content: not a chunk.
            return False
        piece = token.get("text")
        if not piece:
            return False  # e.g. a byte-fallback token that completes no character yet
        self.text.append(piece)
        return True
