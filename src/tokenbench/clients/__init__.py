"""Clients send one Request and fill its RequestRecord. A protocol is one Wire module here and one
line in ``WIRES`` (the values of ``--api``)."""

from collections.abc import Callable
from typing import Protocol

from tokenbench.clients import compiled

COMPILED = compiled.guard()  # first: a build older than its sources never runs (clients/compiled.py)

from tokenbench.clients.embeddings import PoolingWire  # noqa: E402
from tokenbench.clients.messages import MessagesWire  # noqa: E402
from tokenbench.clients.ollama import OllamaWire  # noqa: E402
from tokenbench.clients.openai import OpenAIWire  # noqa: E402
from tokenbench.clients.responses import ResponsesWire  # noqa: E402
from tokenbench.clients.tgi import TGIWire  # noqa: E402
from tokenbench.clients.triton import TritonWire  # noqa: E402
from tokenbench.clients.wire import Wire  # noqa: E402
from tokenbench.config import Api  # noqa: E402
from tokenbench.records import Request, RequestRecord  # noqa: E402


class Client(Protocol):
    async def send(self, request: Request, record: RequestRecord) -> None:
        """Fill ``record``; never raise for a failed request (only re-raise cancellation)."""


WIRES: dict[Api, Callable[[], Wire]] = {
    "chat": lambda: OpenAIWire(chat=True),
    "completions": lambda: OpenAIWire(chat=False),
    "messages": MessagesWire,  # Anthropic's
    "responses": ResponsesWire,
    "tgi": TGIWire,
    "triton": TritonWire,
    "ollama": OllamaWire,
    # the pooling APIs (config.POOLING_APIS)
    "embeddings": lambda: PoolingWire("embeddings"),
    "rerank": lambda: PoolingWire("rerank"),
    "score": lambda: PoolingWire("score"),
}


def wire_for(api: Api) -> Wire:
    return WIRES[api]()
