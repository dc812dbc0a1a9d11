"""Running the HTTP app: the one home of ``uvicorn``.

``serve`` runs it in the foreground (``skillsearch serve``) and reports the bound address once the socket
listens, so port 0 (any free port) works and a banner never promises a port that failed to bind.
Every app it serves sees request header values as RFC 9110 section 5.5 defines them, without leading or
trailing whitespace (:class:`FieldValues`), whichever HTTP parser uvicorn picked.
``ServerThread`` runs it in a background thread of this process, for tests and benchmarks that need real
HTTP on 127.0.0.1 against an app object they hold.

Every server here listens on a socket :func:`listen_socket` bound first: a port in use (or an address that
cannot be bound) is one :class:`StartupError` (the CLI's exit code 3) instead of uvicorn's log line.
``serve_workers`` runs N worker processes on that one socket (uvicorn's supervisor: each worker imports
the app from a factory, a dead worker is replaced); the processes share the data directory
(``sync/leader.py`` picks the one that syncs).
"""

from __future__ import annotations

import asyncio
import errno
import importlib
import os
import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

import uvicorn
from uvicorn.supervisors import Multiprocess

from skillsearch.core.errors import StartupError

__all__ = ["WORKER_FACTORY_ENV", "FieldValues", "ServerThread", "listen_socket", "serve", "serve_workers",
           "worker_app"]

WORKER_FACTORY_ENV = "SKILLSEARCH_WORKER_FACTORY"


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
    wrapped = app if isinstance(app, str) else FieldValues(app)  # an import string is wrapped by worker_app
    return uvicorn.Config(wrapped, host=host, port=port, access_log=False, log_config=None, **kwargs)


def listen_socket(host: str, port: int) -> socket.socket:
    """A bound TCP socket for ``host:port`` (0: any free port), or :class:`StartupError` saying why not."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise StartupError(f"cannot listen on {host}:{port}: unknown host ({exc.strerror})",
                           {"host": host, "port": port}) from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        why = "the port is already in use (another server?); choose another with --port" \
            if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
        raise StartupError(f"cannot listen on {host}:{port}: {why}", {"host": host, "port": port}) from None
    sock.set_inheritable(True)
    return sock


def serve(app: Any, host: str = "127.0.0.1", port: int = 8000, on_started: Callable[[str], None] | None = None) -> None:
    """Serve ``app`` until interrupted; ``on_started(base_url)`` runs once the socket listens. A port that
    cannot be bound raises :class:`StartupError` before the app starts."""
    sock = listen_socket(host, port)
    with sock:
        _Server(_config(app, host, port), on_started).run(sockets=[sock])


def worker_app() -> Any:
    """What each worker of :func:`serve_workers` imports: the app built by the factory named in
    ``SKILLSEARCH_WORKER_FACTORY`` (``module:function``), seen through :class:`FieldValues`."""
    module, _, name = os.environ[WORKER_FACTORY_ENV].partition(":")
    return FieldValues(getattr(importlib.import_module(module), name)())


class _Supervisor(Multiprocess):
    """uvicorn's supervisor, calling ``on_started`` once every first worker answers its health check."""

    def __init__(self, config: uvicorn.Config, sock: socket.socket, on_started: Callable[[], None] | None,
                 ready_timeout_s: float) -> None:
        super().__init__(config, sockets=[sock])
        self._on_started = on_started
        self._ready_timeout_s = ready_timeout_s
        self.started = False
        self.interrupted = False

    def handle_signals(self) -> None:
        self.interrupted = self.interrupted or bool(self.signal_queue)
        super().handle_signals()

    def init_processes(self) -> None:
        super().init_processes()
        deadline = time.monotonic() + self._ready_timeout_s
        for process in self.processes:
            # A Ctrl-C while the workers load lands in signal_queue; the run loop then stops them all.
            while not process.is_ready(timeout=1):
                if self.signal_queue or not process.process.is_alive() or time.monotonic() > deadline:
                    return
                time.sleep(0.1)
        self.started = True
        if self._on_started is not None:
            self._on_started()


def serve_workers(factory: str, host: str, port: int, workers: int,
                  on_started: Callable[[str], None] | None = None, ready_timeout_s: float = 600.0) -> None:
    """Serve the app that ``factory`` (``"module:function"``, called in each worker) builds with ``workers``
    processes on one socket until interrupted; ``on_started(base_url)`` once all of them serve."""
    sock = listen_socket(host, port)
    bound_host, bound_port = sock.getsockname()[:2]
    url = f"http://{bound_host}:{bound_port}"
    os.environ[WORKER_FACTORY_ENV] = factory  # the spawned workers inherit it
    config = _config(f"{__name__}:worker_app", host, bound_port, factory=True, workers=workers)
    with sock:
        supervisor = _Supervisor(config, sock, (lambda: on_started(url)) if on_started else None, ready_timeout_s)
        supervisor.run()
    if not supervisor.started and not supervisor.interrupted:
        raise StartupError(f"the workers on {url} did not start (see the log above)", {"url": url})


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
