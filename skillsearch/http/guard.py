"""A bearer-token guard for mounted ASGI apps (MCP's streamable HTTP at ``/mcp``), which FastAPI's
dependencies do not reach."""

from __future__ import annotations

from skillsearch.core.errors import SkillSearchError, error_bytes
from skillsearch.http.auth import PrincipalRegistry
from skillsearch.http.middleware import ASGIApp, Receive, Scope, Send

__all__ = ["BearerGuard", "require_bearer"]


class BearerGuard:
    """An ASGI app that runs ``app`` only for a valid bearer token, with the caller's :class:`Principal` in
    ``scope["state"]["principal"]``; otherwise it answers 401 with the JSON error body. A class, not a
    function, so that Starlette's ``Route`` treats it as an ASGI app."""

    def __init__(self, app: ASGIApp, registry: PrincipalRegistry) -> None:
        self.app = app
        self.registry = registry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            try:
                principal = self.registry.authenticate_header(headers.get("authorization"))
            except SkillSearchError as exc:
                body = error_bytes(exc)
                await send({"type": "http.response.start", "status": exc.http_status, "headers": [
                    (b"content-type", b"application/json"), (b"www-authenticate", b"Bearer"),
                    (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
            scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, receive, send)


def require_bearer(app: ASGIApp, registry: PrincipalRegistry) -> BearerGuard:
    return BearerGuard(app, registry)
