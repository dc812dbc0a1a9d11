"""``HEAD`` answered as ``GET`` without the body (RFC 9110 section 9.3.2), where FastAPI's routes answer 405.

Uptime checkers probe ``/`` and ``/healthz`` with ``HEAD``; FastAPI's routes accept only the methods they
declare. :class:`HeadAsGet` hands a ``HEAD`` request to the app as ``GET`` and sends the answer's status and
header fields (its ``Content-Length`` included) with an empty body, so authentication, validation and
errors are those of ``GET``. The paths in ``exclude`` (mounted apps such as ``/mcp``, whose ``GET`` opens an
event stream) see ``HEAD`` as sent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["HeadAsGet"]

Message = MutableMapping[str, Any]
ASGIApp = Callable[[MutableMapping[str, Any], Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]],
                   Awaitable[None]]


class HeadAsGet:
    def __init__(self, app: ASGIApp, exclude: frozenset[str] = frozenset()) -> None:
        self.app = app
        self.exclude = exclude

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "HEAD" or scope.get("path") in self.exclude:
            await self.app(scope, receive, send)
            return

        async def without_body(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        inner = {**scope, "method": "GET"}
        try:
            await self.app(inner, receive, without_body)
        finally:
            if "route" in inner:  # the route the router found, for the request metrics' label
                scope["route"] = inner["route"]
