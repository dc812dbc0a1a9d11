"""MCP's streamable HTTP transport for our server: standalone (``skillsearch mcp --http``, served by
``http/server.py`` from the CLI) or mounted at ``/mcp`` inside the HTTP app (``skillsearch serve``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette

from skillsearch.mcp.context import ServerState

__all__ = ["mountable", "streamable_http_app"]


def streamable_http_app(
    server: MCPServer[ServerState],
    *,
    path: str = "/mcp",
    host: str = "127.0.0.1",
    allowed_hosts: Iterable[str] = (),
) -> Starlette:
    """The streamable HTTP ASGI app; its lifespan runs ``server.session_manager.run()``, which enters the
    server's lifespan once. To serve it inside another app, see :func:`mountable`.

    Stateless JSON responses: no session to lose, any replica can answer. DNS-rebinding protection stays
    on: only ``host`` (loopback names when it is a loopback address) and ``allowed_hosts`` are accepted."""
    security: TransportSecuritySettings | None = None
    extra = list(allowed_hosts)
    if extra or host not in ("127.0.0.1", "localhost", "::1"):
        hosts = [f"{host}:*", host, *extra]
        security = TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                             allowed_origins=[f"http://{h}" for h in hosts])
    return server.streamable_http_app(
        streamable_http_path=path, json_response=True, stateless_http=True, host=host, transport_security=security,
    )


def mountable(
    server: MCPServer[ServerState], *, host: str = "127.0.0.1", allowed_hosts: Iterable[str] = ()
) -> tuple[Starlette, Callable[[], AbstractAsyncContextManager[None]]]:
    """``(asgi_app, lifespan)`` to serve ``/mcp`` inside another ASGI app such as the FastAPI HTTP app.

    Add the app as ``Route("/mcp", endpoint=asgi_app)``: it answers exactly ``/mcp``, where a
    ``Mount("/mcp", ...)`` would first redirect every POST to ``/mcp/``. Enter ``lifespan()`` inside the
    outer app's lifespan: a routed sub-app's own lifespan never runs, and the session manager (which also
    enters this server's lifespan, opening the catalog once) must."""
    return streamable_http_app(server, path="/mcp", host=host, allowed_hosts=allowed_hosts), server.session_manager.run
