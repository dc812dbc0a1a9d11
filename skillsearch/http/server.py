"""Running the HTTP app: the one home of ``uvicorn``.

``serve`` runs it in the foreground (``skillsearch serve``) and reports the bound address once the socket
listens, so port 0 (any free port) works and a banner never promises a port that failed to bind.
Every app it serves sees request header values as RFC 9110 section 5.5 defines them, without leading or
trailing whitespace, and with at most one value of a field that takes one (``http/fields.py``), whichever
HTTP parser uvicorn picked.
``ServerThread`` runs it in a background thread of this process, for tests and benchmarks that need real
HTTP on 127.0.0.1 against an app object they hold.

Every connection is bounded before any authentication runs (:class:`ConnectionLimits`, set by the
``SKILLSEARCH_HTTP_*`` settings): a request head larger than ``max_header_bytes`` gets 431 (h11 and httptools
alike; uvicorn bounds neither by default under httptools) and the connection is closed; a head not
received within ``head_timeout_s`` of the connection opening (or of the previous response) closes the
connection, so neither an idle connection nor one trickling its head a byte at a time is held; a request
body not whole within ``body_timeout_s`` of its head gets a JSON 408 and the connection is closed
(:class:`~skillsearch.http.body_deadline.BodyDeadline`: FastAPI reads a body before authentication); at most
``max_connections`` connections are open (uvicorn's ``limit_concurrency``: at the limit a request gets
503, and a connection beyond it is closed at once); an idle keep-alive connection is closed after
``keep_alive_s``.

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
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import uvicorn
from uvicorn.config import HTTP_PROTOCOLS
from uvicorn.importer import import_from_string
from uvicorn.supervisors import Multiprocess

from skillsearch.core.errors import StartupError, ValidationError, error_bytes, problem
from skillsearch.core.settings import Settings
from skillsearch.http.accept_errors import quiet_accept_errors
from skillsearch.http.body_deadline import BodyDeadline
from skillsearch.http.fields import FieldValues, OneValueFields, refusal_headers, refuse
from skillsearch.http.one_write import OneWrite

__all__ = ["WORKER_FACTORY_ENV", "ConnectionLimits", "HeadSize", "ServerThread", "listen_socket", "serve",
           "serve_workers", "worker_app"]

WORKER_FACTORY_ENV = "SKILLSEARCH_WORKER_FACTORY"



@dataclass(frozen=True)
class ConnectionLimits:
    """What one connection may hold of the server before any request handling runs."""

    max_header_bytes: int = 32 * 1024  # request line and header fields together
    head_timeout_s: float = 10.0  # from the connection opening (or the last response) to a whole head
    keep_alive_s: int = 5  # seconds an idle connection is kept after a response (uvicorn takes whole seconds)
    max_connections: int = 1000
    body_timeout_s: float = 30.0  # from a whole head to the whole body it declared

    @classmethod
    def of(cls, settings: Settings) -> ConnectionLimits:
        return cls(settings.http_max_header_bytes, settings.http_head_timeout_s, settings.http_keep_alive_s,
                   settings.http_max_connections, settings.http_body_timeout_s)

    def wrap(self, app: Any) -> Any:
        """``app`` as every server here serves it: header values without surrounding whitespace, one value
        of a field that takes one, the head's size and the body's time bounded."""
        return HeadSize(OneValueFields(BodyDeadline(FieldValues(app), self.body_timeout_s)), self.max_header_bytes)


def _head_over(limit: int) -> ValidationError:
    return ValidationError(f"request head larger than {limit} bytes", {
        "problems": [problem("header", f"the request line and header fields together are over {limit} bytes")],
        "max_header_bytes": limit})


def _raw_answer(status_line: bytes, body: bytes) -> bytes:
    """A whole response written by the protocol itself (the app never saw the request)."""
    fields = b"".join(name + b": " + value + b"\r\n" for name, value in refusal_headers(body))
    return status_line + b"\r\n" + fields + b"\r\n" + body


def _head_too_large(limit: int) -> bytes:
    return _raw_answer(b"HTTP/1.1 431 Request Header Fields Too Large", error_bytes(_head_over(limit)))


def _malformed(reason: str) -> bytes:
    """The whole 400 for a request the HTTP parser could not read (``reason``: the parser's words)."""
    return _raw_answer(b"HTTP/1.1 400 Bad Request", error_bytes(ValidationError(
        f"malformed HTTP request: {reason}", {"problems": [problem("request", "not a valid HTTP/1.1 request")]})))


class HeadSize:
    """ASGI wrapper: a request whose head (target and header fields) is over ``limit`` bytes gets 431 before
    the app (and its authentication) sees it. The parsers bound only an unfinished head (:func:`_guarded`);
    a whole one that arrived in a single read reaches this point."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            size = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"") + sum(
                len(name) + len(value) + 4 for name, value in scope.get("headers") or ())
            if size > self.limit:
                if scope["type"] == "http":
                    await refuse(send, 431, _head_over(self.limit))
                return
        await self.app(scope, receive, send)


def _guarded(base: type[asyncio.Protocol], limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (``base``: h11's or httptools') with the head bounds of ``limits``.

    A head is complete when the protocol starts a new request cycle (``self.cycle`` changes), in both
    parsers; the bytes received while waiting for it are counted, so an unfinished head is refused at the
    bound whatever the parser buffers. A whole head that arrived in one read is measured by
    :class:`HeadSize`, before the app sees it."""
    parent: Any = base

    class Guarded(parent):  # type: ignore[misc]
        _timer: asyncio.TimerHandle | None = None
        _before: Any = None  # the request cycle before the awaited head
        _received = 0  # bytes received while waiting for the head

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            if len(self.connections) > limits.max_connections:
                transport.close()
                return
            self.transport = OneWrite(transport, self.loop)
            self._await_head()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_timer()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            waiting = self._timer is not None
            if waiting:
                self._received += len(data)
            super().data_received(data)
            if not waiting or self.transport.is_closing():
                return
            if self.cycle is not self._before:
                self._stop_timer()
            elif self._received > limits.max_header_bytes:
                self._refuse()

        def send_400_response(self, msg: str) -> None:
            """The parser refused the request (h11 also an unfinished head over its bound): the JSON error
            body every other refusal has, not uvicorn's plain text."""
            if self._timer is not None and self._received > limits.max_header_bytes:
                self._refuse()
            elif not self.transport.is_closing():
                self._stop_timer()
                self.transport.write(_malformed(msg))
                self.transport.close()

        def on_response_complete(self) -> None:
            if isinstance(self.transport, OneWrite):
                self.transport.flush()  # the whole response now, not one turn of the event loop later
            super().on_response_complete()
            if not self.transport.is_closing():
                self._await_head()

        def _await_head(self) -> None:
            self._stop_timer()
            self._before, self._received = self.cycle, 0
            self._timer = self.loop.call_later(limits.head_timeout_s, self._head_timed_out)

        def _stop_timer(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

        def _head_timed_out(self) -> None:
            self._timer = None
            busy = self.cycle is not None and not self.cycle.response_complete
            if self.cycle is self._before and not busy and not self.transport.is_closing():
                self.transport.close()  # no whole head in time: a slow or idle client holds nothing

        def _refuse(self) -> None:
            self._stop_timer()
            if not self.transport.is_closing():
                self.transport.write(_head_too_large(limits.max_header_bytes))
                self.transport.close()

    Guarded.__name__ = f"Guarded{base.__name__}"
    return Guarded


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, on_started: Callable[[str], None] | None = None,
                 stopping: threading.Event | None = None) -> None:
        super().__init__(config)
        self.on_started = on_started
        self.stopping = stopping
        self.base_url: str | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        quiet_accept_errors()
        await super().startup(sockets)
        if self.should_exit or not self.servers or self._stopped_before():
            return
        host, port = self.servers[0].sockets[0].getsockname()[:2]
        self.base_url = f"http://{host}:{port}"
        if self.on_started is not None:
            self.on_started(self.base_url)

    def _stopped_before(self) -> bool:
        """SIGTERM came before uvicorn took signals over (while the app was built: the catalog opening, a new
        directory seeded): this process's handler took it, so uvicorn never would, and the server served on
        until a second one."""
        return self.stopping is not None and self.stopping.is_set()

    async def main_loop(self) -> None:
        if self._stopped_before():  # shut down at once, through the app's lifespan (its services stopped)
            self.should_exit = True
        await super().main_loop()


def _config(app: Any, host: str, port: int, limits: ConnectionLimits | None = None, **kwargs: Any) -> uvicorn.Config:
    # Our middleware writes the access log (JSON, with the request id); uvicorn's own would repeat it.
    kwargs.setdefault("lifespan", "on")
    limits = limits or ConnectionLimits.of(Settings.from_env())
    wrapped: Any
    http: Any
    if isinstance(app, str):  # the workers of serve_workers: worker_app wraps, the protocol is found by name
        wrapped, http = app, f"{__name__}:WorkerProtocol"
    else:
        wrapped = limits.wrap(app)
        http = _guarded(_protocol(kwargs.pop("http", "auto")), limits)
    return uvicorn.Config(
        wrapped, host=host, port=port, access_log=False, log_config=None, http=http,
        h11_max_incomplete_event_size=limits.max_header_bytes, timeout_keep_alive=limits.keep_alive_s,
        limit_concurrency=limits.max_connections, **kwargs,
    )


def _protocol(http: Any) -> type[asyncio.Protocol]:
    found: type[asyncio.Protocol] = (import_from_string(HTTP_PROTOCOLS.get(http, http)) if isinstance(http, str)
                                     else http)
    return found


def __getattr__(name: str) -> Any:
    """``WorkerProtocol``: uvicorn's automatic protocol with the bounds of the ``SKILLSEARCH_HTTP_*`` settings.
    A worker process (spawned, so the config is pickled) finds it by name, as a class made here cannot be
    pickled."""
    if name == "WorkerProtocol":
        return _guarded(_protocol("auto"), ConnectionLimits.of(Settings.from_env()))
    raise AttributeError(name)


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
        why = (exc.strerror or str(exc)) + (" (another server is listening there: stop it, or pick another --port;"
                                            " 0 picks a free one)" if exc.errno == errno.EADDRINUSE else "")
        raise StartupError(f"cannot listen on {host}:{port}: {why}", {"host": host, "port": port}) from None
    sock.set_inheritable(True)
    return sock


def serve(app: Any, host: str = "127.0.0.1", port: int = 8000, on_started: Callable[[str], None] | None = None,
          limits: ConnectionLimits | None = None, stopping: threading.Event | None = None) -> None:
    """Serve ``app`` until interrupted; ``on_started(base_url)`` runs once the socket listens. A port that
    cannot be bound raises :class:`StartupError` before the app starts. ``limits``: the connection bounds
    (default: from the ``SKILLSEARCH_HTTP_*`` settings). ``stopping``: set by a signal handled before the
    server took signals over (SIGTERM while the app was being built): the server shuts down as it starts."""
    sock = listen_socket(host, port)
    with sock:
        _Server(_config(app, host, port, limits), on_started, stopping).run(sockets=[sock])


def worker_app() -> Any:
    """What each worker of :func:`serve_workers` imports: the app built by the factory named in
    ``SKILLSEARCH_WORKER_FACTORY`` (``module:function``), wrapped as :meth:`ConnectionLimits.wrap` does."""
    module, _, name = os.environ[WORKER_FACTORY_ENV].partition(":")
    quiet_accept_errors()  # uvicorn loads the app in the worker's running loop, before it listens
    return ConnectionLimits.of(Settings.from_env()).wrap(getattr(importlib.import_module(module), name)())


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

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, timeout: float = 30.0,
                 limits: ConnectionLimits | None = None, **kwargs: Any) -> None:
        self._server = _Server(_config(app, host, port, limits, **kwargs))
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
