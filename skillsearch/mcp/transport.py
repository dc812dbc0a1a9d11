"""MCP's transports for our server: streamable HTTP, standalone (``skillsearch mcp --http``, served by
``http/server.py`` from the CLI) or mounted at ``/mcp`` inside the HTTP app (``skillsearch serve``); and over
stdio, :class:`AnswerUnreadable`, which answers a line the SDK cannot read instead of dropping it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager
from typing import Any, Self

import anyio
import pydantic
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError, JSONRPCRequest, RequestId
from starlette.applications import Starlette
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from skillsearch.mcp.context import ServerState

__all__ = ["AnswerUnreadable", "JsonErrorBodies", "PostOnly", "SayNotInitialized", "mountable", "streamable_http_app"]


def _jsonrpc_error(message: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": message}}).encode()


class PostOnly:
    """ASGI middleware: at the MCP path, anything but ``POST`` is 405 with ``Allow: POST`` and a JSON-RPC error
    body. The server is stateless with JSON responses, so there is no session to ``DELETE`` and nothing could
    ever arrive on the standalone SSE stream a ``GET`` would open (the SDK would hold it open, silent)."""

    def __init__(self, app: ASGIApp, path: str) -> None:
        self.app = app
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] == "POST" or scope["path"].rstrip("/") != self.path:
            await self.app(scope, receive, send)
            return
        body = _jsonrpc_error(f"Method Not Allowed: {scope['method']}; this server is stateless: send each JSON-RPC"
                              " message with POST (there is no session to delete and no stream to open)")
        await send({"type": "http.response.start", "status": 405, "headers": [
            (b"content-type", b"application/json"), (b"allow", b"POST"), (b"content-length", str(len(body)).encode()),
        ]})
        await send({"type": "http.response.body", "body": body})


class JsonErrorBodies:
    """ASGI middleware: the SDK's transport security answers a refused request in plain text ("Invalid Host
    header" 421, "Invalid Origin header" 403, "Invalid Content-Type header" 400, "Request body too large" 413);
    here such an answer keeps its status and its words, as a JSON-RPC error body (``application/json``), like
    every other refusal of this endpoint. Answers that are already JSON, or not errors, pass untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        text = bytearray()

        async def rewrite(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                content_type = dict(message.get("headers", [])).get(b"content-type", b"")
                if message["status"] >= 400 and not content_type.startswith(b"application/json"):
                    start = message  # held until the body is whole
                    return
            elif start is not None and message["type"] == "http.response.body":
                text.extend(message.get("body", b""))
                if message.get("more_body", False):
                    return
                body = _jsonrpc_error(text.decode("utf-8", "replace").strip() or f"HTTP {start['status']}")
                headers = [(k, v) for k, v in start.get("headers", [])
                           if k.lower() not in (b"content-type", b"content-length")]
                await send({**start, "headers": [*headers, (b"content-type", b"application/json"),
                                                 (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                start = None
                return
            await send(message)

        await self.app(scope, receive, rewrite)


def streamable_http_app(
    server: MCPServer[ServerState],
    *,
    path: str = "/mcp",
    host: str = "127.0.0.1",
    allowed_hosts: Iterable[str] = (),
) -> Starlette:
    """The streamable HTTP ASGI app; its lifespan runs ``server.session_manager.run()``, which enters the
    server's lifespan once. To serve it inside another app, see :func:`mountable`.

    Stateless JSON responses: no session to lose, any replica can answer; only ``POST`` is served
    (:class:`PostOnly`). DNS-rebinding protection stays
    on: only ``host`` (loopback names when it is a loopback address) and ``allowed_hosts`` are accepted."""
    security: TransportSecuritySettings | None = None
    extra = list(allowed_hosts)
    if extra or host not in ("127.0.0.1", "localhost", "::1"):
        hosts = [f"{host}:*", host, *extra]
        security = TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                             allowed_origins=[f"http://{h}" for h in hosts])
    app = server.streamable_http_app(
        streamable_http_path=path, json_response=True, stateless_http=True, host=host, transport_security=security,
    )
    app.add_middleware(PostOnly, path=path.rstrip("/"))
    app.add_middleware(JsonErrorBodies)
    return app


def mountable(
    server: MCPServer[ServerState], *, host: str = "127.0.0.1", allowed_hosts: Iterable[str] = ()
) -> tuple[Starlette, Callable[[], AbstractAsyncContextManager[None]]]:
    """``(asgi_app, lifespan)`` to serve ``/mcp`` inside another ASGI app such as the FastAPI HTTP app.

    Add the app as ``Route("/mcp", endpoint=asgi_app)``: it answers exactly ``/mcp``, where a
    ``Mount("/mcp", ...)`` would first redirect every POST to ``/mcp/``. Enter ``lifespan()`` inside the
    outer app's lifespan: a routed sub-app's own lifespan never runs, and the session manager (which also
    enters this server's lifespan, opening the catalog once) must."""
    return streamable_http_app(server, path="/mcp", host=host, allowed_hosts=allowed_hosts), server.session_manager.run


class _Wrapped:
    """One stream of the SDK's stdio transport, wrapped: its other attributes (``last_context``, which the
    dispatcher reads, and the rest), its closing and its context manager go to the stream itself."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> Self:
        await self._stream.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        result: bool | None = await self._stream.__aexit__(*exc)
        return result


class AnswerUnreadable(_Wrapped):
    """The stdio read stream, less the lines the SDK could not read, each answered on ``write_stream``.

    The SDK's stdio reader hands a line that is not a JSON-RPC message on as an exception, which its
    dispatcher only logs: a request holding a lone surrogate escape (``"\\ud83d"``: a client that cut an emoji
    in half), nested too deeply, or not JSON at all was never answered, and its client waited forever. Over
    HTTP the same body is a 400 with a JSON-RPC error. Here the error goes back at once, under the request's
    own id where Python's parser (which takes lone surrogates) can still find it, else ``null``: ``-32700``
    for a line that is not JSON the SDK reads, ``-32600`` for JSON that is not a request. A notification
    (no id) is not answered. The message names the problem, never the text sent."""

    def __init__(self, read_stream: Any, write_stream: Any, handshake: SayNotInitialized | None = None) -> None:
        super().__init__(read_stream)
        self._read, self._write, self._handshake = read_stream, write_stream, handshake

    async def receive(self) -> Any:
        while True:
            item = await self._read.receive()
            if not isinstance(item, pydantic.ValidationError):
                if self._handshake is not None and isinstance(item, SessionMessage):
                    self._handshake.saw(item.message)
                return item
            reply = unreadable_reply(item)
            if reply is not None:
                await self._write.send(SessionMessage(reply))

    def __aiter__(self) -> AnswerUnreadable:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None


# The SDK's answer to a request its handshake gate refused: the words of a malformed request's, no data.
_GATE_ERROR = ErrorData(code=INVALID_PARAMS, message="Invalid request parameters", data="")
NOT_INITIALIZED = ("Invalid request parameters: the session is not initialized; send initialize first"
                   " (and then notifications/initialized)")


class SayNotInitialized(_Wrapped):
    """The stdio write stream, where the SDK's refusal of a request sent before ``initialize`` says so.

    The SDK answers such a request (``tools/list`` first, say) exactly as one with malformed params:
    ``-32602 "Invalid request parameters"``, no data, though its params may be fine, and a host's developer
    is left guessing. Here the requests of the handshake era read before any ``initialize``
    (:meth:`saw`, called by :class:`AnswerUnreadable`) are remembered, and that one answer to one of them
    keeps its code and gains the reason. Requests of the 2026-07-28 era (their ``_meta`` carries the
    protocol version) need no handshake and are left alone."""

    def __init__(self, write_stream: Any) -> None:
        super().__init__(write_stream)
        self._write = write_stream
        self._greeted = False
        self._early: set[RequestId] = set()

    def saw(self, message: Any) -> None:
        if not isinstance(message, JSONRPCRequest) or self._greeted:
            return
        meta = (message.params or {}).get("_meta")
        if message.method == "initialize":
            self._greeted = True
        elif not (isinstance(meta, dict) and "io.modelcontextprotocol/protocolVersion" in meta):
            self._early.add(message.id)

    async def send(self, item: Any) -> None:
        message = getattr(item, "message", None)
        answered = getattr(message, "id", None)
        if self._early and isinstance(answered, int | str) and answered in self._early:
            self._early.discard(answered)
            if isinstance(message, JSONRPCError) and message.error == _GATE_ERROR:
                item = SessionMessage(JSONRPCError(jsonrpc="2.0", id=message.id, error=ErrorData(
                    code=INVALID_PARAMS, message=NOT_INITIALIZED)))
        await self._write.send(item)


# The id where JSON-RPC clients write it, before the params: {"jsonrpc": "2.0", "id": 7, ...
_LEADING_ID = re.compile(r'\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(-?\d{1,18}|"[A-Za-z0-9._:-]{1,200}")\s*,')


def unreadable_reply(error: pydantic.ValidationError) -> JSONRPCError | None:
    """The JSON-RPC error that answers a line the SDK refused with ``error``; ``None`` for a notification."""
    problems = error.errors(include_url=False)
    first: dict[str, Any] = dict(problems[0]) if problems else {}
    raw = first.get("input")
    message: Any = raw
    if first.get("type") == "json_invalid" and isinstance(raw, str):
        if not raw.strip():
            return None  # a blank line: nothing was asked
        try:
            message = json.loads(raw)
        except (ValueError, RecursionError):  # nested past Python's stack too: the id leads a client's request
            lead = _LEADING_ID.match(raw)
            message = {"id": json.loads(lead.group(1))} if lead else None
        code, text = PARSE_ERROR, f"Parse error: {first.get('msg', 'not JSON')}"
    else:  # JSON, not a message: some problem's input is the whole object (the others, one of its values)
        message = next((p["input"] for p in problems if isinstance(p.get("input"), dict)), raw)
        code, text = INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 request, notification or response"
    if isinstance(message, dict) and "id" not in message:
        return None  # a notification (or something without an id): JSON-RPC answers none
    request_id = message.get("id") if isinstance(message, dict) else None
    if isinstance(request_id, bool) or not isinstance(request_id, int | str | None):
        request_id = None
    if isinstance(request_id, str) and any("\ud800" <= c <= "\udfff" for c in request_id):
        request_id = None  # an id holding a lone surrogate cannot be written back as UTF-8
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=text))
