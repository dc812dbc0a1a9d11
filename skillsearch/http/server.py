"""Running the HTTP app: the one home of ``uvicorn``.

``serve`` runs it in the foreground (``skillsearch serve``) and reports the bound address once the socket
listens, so port 0 (any free port) works and a banner never promises a port that failed to bind.
Every app it serves sees request header values as RFC 9110 section 5.5 defines them, without leading or
trailing whitespace (:class:`FieldValues`), whichever HTTP parser uvicorn picked.
``ServerThread`` runs it in a background thread of this process, for tests and benchmarks that need real
HTTP on 127.0.0.1 against an app object they hold.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

import uvicorn

__all__ = ["FieldValues", "ListenError", "ServerThread", "serve"]


class ListenError(OSError):
    """The server cannot listen on its address (in use, not permitted, no such interface): said before
    anything starts, in one line, instead of uvicorn's log record and ``sys.exit(3)``."""


def check_listen(host: str, port: int) -> None:
    """Bind every address uvicorn will bind, with the same socket options, and let go: a busy port or an
    unknown host is a :class:`ListenError` naming it. Port 0 (any free port) always binds."""
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        for family, kind, proto, _, address in infos:
            with socket.socket(family, kind, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:  # as asyncio's create_server binds it
                    probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                probe.bind(address)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        hint = (" (another server is listening there: stop it, or pick another --port; 0 picks a free one)"
                if exc.errno == errno.EADDRINUSE else "")
        raise ListenError(f"cannot listen on {host}:{port}: {reason}{hint}") from None


_OWS = b" \t"


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


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, on_started: Callable[[str], None] | None = None) -> None:
        super().__init__(config)
        self.on_started = on_started
        self.base_url: str | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.should_exit or not self.servers:
            return
        host, port = self.servers[0].sockets[0].getsockname()[:2]
        self.base_url = f"http://{host}:{port}"
        if self.on_started is not None:
            self.on_started(self.base_url)


def _config(app: Any, host: str, port: int, **kwargs: Any) -> uvicorn.Config:
    # Our middleware writes the access log (JSON, with the request id); uvicorn's own would repeat it.
    kwargs.setdefault("lifespan", "on")
    return uvicorn.Config(FieldValues(app), host=host, port=port, access_log=False, log_config=None, **kwargs)


def serve(app: Any, host: str = "127.0.0.1", port: int = 8000, on_started: Callable[[str], None] | None = None) -> None:
    """Serve ``app`` until interrupted; ``on_started(base_url)`` runs once the socket listens. An address
    it cannot listen on is a :class:`ListenError` before the app starts."""
    check_listen(host, port)
    _Server(_config(app, host, port), on_started).run()


class ServerThread:
    """``with ServerThread(app) as url:`` serves ``app`` on 127.0.0.1 (a free port) until the block ends."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, timeout: float = 30.0, **kwargs: Any) -> None:
        self._server = _Server(_config(app, host, port, **kwargs))
        self._timeout = timeout
        self._thread = threading.Thread(target=self._run, name="skillsearch-http", daemon=True)
        self._error: BaseException | None = None

    def _run(self) -> None:
        try:
            asyncio.run(self._server.serve())
        except BaseException as exc:
            self._error = exc

    @property
    def url(self) -> str:
        assert self._server.base_url is not None
        return self._server.base_url

    def __enter__(self) -> str:
        self._thread.start()
        deadline = time.monotonic() + self._timeout
        while self._server.base_url is None:
            if self._error is not None or not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"HTTP server did not start: {self._error!r}")
            time.sleep(0.02)
        return self.url

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(self._timeout)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
