"""MCP's streamable HTTP transport for our server: standalone (``skillsearch mcp --http``, served by
``http/server.py`` from the CLI) or mounted at ``/mcp`` inside the HTTP app (``skillsearch serve``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import INVALID_REQUEST
from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

from skillsearch.mcp.context import ServerState

__all__ = ["PostOnly", "mountable", "streamable_http_app"]


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
        body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {
            "code": INVALID_REQUEST,
            "message": f"Method Not Allowed: {scope['method']}; this server is stateless: send each JSON-RPC"
                       " message with POST (there is no session to delete and no stream to open)"}}).encode()
        await send({"type": "http.response.start", "status": 405, "headers": [
            (b"content-type", b"application/json"), (b"allow", b"POST"), (b"content-length", str(len(body)).encode()),
        ]})
        await send({"type": "http.response.body", "body": body})


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
