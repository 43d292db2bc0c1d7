"""`tokenbench mock`: a scripted OpenAI-compatible streaming server for self-checks and tests.

server.py is the server (MockServer, serve; its doc says what it scripts), settings.py its
settings (MockSettings, whose fields declare `tokenbench mock`'s flags) and what it logs of each
request (Delivery: the known answers); apis.py, divergence.py, otlp.py, pooling.py, speculation.py and
structured.py are its parts.

The package loads only the settings: every ``tokenbench`` command's options are built when the CLI
starts, `tokenbench mock`'s from MockSettings, and the server (aiohttp, prometheus_client) is
loaded the first time one of its names is read (``from tokenbench.mock import serve``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokenbench.mock.settings import Delivery, MockSettings

if TYPE_CHECKING:
    from tokenbench.mock.server import MockServer, PrefixCache, PriorityGate, serve

__all__ = ["Delivery", "MockServer", "MockSettings", "PrefixCache", "PriorityGate", "serve"]

_SERVER = frozenset({"MockServer", "PrefixCache", "PriorityGate", "serve"})

if not TYPE_CHECKING:  # the type checker reads the names above; an unknown name stays an error to it

    def __getattr__(name: str) -> object:
        """A name of the server, loaded on first use (PEP 562)."""
        if name not in _SERVER:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from tokenbench.mock import server

        return getattr(server, name)
