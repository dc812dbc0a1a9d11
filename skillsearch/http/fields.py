"""Request header fields as every server here hands them to its app (``http/server.ConnectionLimits.wrap``).

- :class:`FieldValues`: values without the optional whitespace around them (RFC 9110 section 5.5).
- :class:`OneValueFields`: a request that sends a field which takes one value (``Authorization``,
  ``Content-Type``, ``Content-Length``, ``Host``) more than once gets a JSON 400 before the app sees it.
  RFC 9110 section 5.3 lets only list-valued fields repeat; with two ``Authorization`` lines a proxy in
  front and this server could each read a different one (Starlette's ``headers.get`` takes the first, a
  dict of the fields the last), so which token counted would depend on who reads.

A refusal before the app (here and ``server.HeadSize``'s 431) is sent by :func:`refuse`, with the header
fields the protocol's own answers carry too (:func:`refusal_headers`).
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

from skillsearch.core.errors import ValidationError, error_bytes, problem

__all__ = ["ONE_VALUE", "FieldValues", "OneValueFields", "refusal_headers", "refuse"]

_OWS = b" \t"

# Fields that take one value (RFC 9110 sections 5.3, 7.2, 8.3, 8.6, 11.6.2), lower case as ASGI gives names.
ONE_VALUE = (b"authorization", b"content-length", b"content-type", b"host")


class FieldValues:
    """ASGI wrapper: request header values without the optional whitespace around them (SP, HTAB).

    RFC 9110 section 5.5: a field value does not include leading or trailing whitespace, and a parser MUST
    exclude it before evaluating the value. uvicorn's h11 parser does; its httptools parser (used whenever
    httptools is installed) keeps trailing whitespace, so ``Mcp-Name: search_skills  `` would not equal the
    body's ``search_skills`` and MCP's header check would refuse the request (-32020)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        headers = scope.get("headers") if scope["type"] in ("http", "websocket") else None
        if headers and any(v[:1] in (b" ", b"\t") or v[-1:] in (b" ", b"\t") for _, v in headers):
            scope = dict(scope, headers=[(k, v.strip(_OWS)) for k, v in headers])
        await self.app(scope, receive, send)


def refusal_headers(body: bytes) -> list[tuple[bytes, bytes]]:
    """The header fields of a JSON refusal sent before the app sees the request (here, ``server.HeadSize``,
    the protocol's own 431 and 400): a request id like every other response (the app's middleware, which
    adds it elsewhere, never sees this request), and ``Connection: close``."""
    return [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"x-request-id", uuid.uuid4().hex.encode()), (b"connection", b"close")]


async def refuse(send: Any, status: int, error: ValidationError) -> None:
    """Answer ``status`` with ``error``'s JSON body and :func:`refusal_headers`, in place of the app."""
    body = error_bytes(error)
    await send({"type": "http.response.start", "status": status, "headers": refusal_headers(body)})
    await send({"type": "http.response.body", "body": body})


def repeated(headers: Any) -> list[str]:
    """The fields of :data:`ONE_VALUE` that ``headers`` (ASGI's name/value pairs) hold more than once."""
    counts = Counter(name.lower() for name, _ in headers or () if name.lower() in ONE_VALUE)
    return sorted(name.decode("latin-1") for name, n in counts.items() if n > 1)


class OneValueFields:
    """ASGI wrapper: a request holding a field of :data:`ONE_VALUE` twice or more gets 400 with the JSON
    error body (``VALIDATION_ERROR``, a problem per field) and ``Connection: close``; a websocket is closed."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            twice = repeated(scope.get("headers"))
            if twice:
                if scope["type"] == "http":
                    await refuse(send, 400, ValidationError(
                        f"the request holds more than one {', '.join(twice)} header field",
                        {"problems": [problem("header", f"{name} takes one value and was sent more than once")
                                      for name in twice]}))
                else:
                    await send({"type": "websocket.close", "code": 1008})
                return
        await self.app(scope, receive, send)
