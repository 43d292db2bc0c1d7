"""Clients send one Request and fill its RequestRecord. A new protocol is one module here."""

from typing import Protocol

from ..records import Request, RequestRecord


class Client(Protocol):
    async def send(self, request: Request, record: RequestRecord) -> None:
        """Fill ``record``; never raise for a failed request (only re-raise cancellation)."""
