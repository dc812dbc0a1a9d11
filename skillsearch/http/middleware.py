"""What wraps every HTTP request: a request id, the body-size limit (and the body deadline's answer), metrics
and one JSON log line.

It is a plain ASGI middleware (not Starlette's ``BaseHTTPMiddleware``) so that it also wraps mounted
streaming apps, such as MCP's streamable HTTP transport, without buffering them. It is also the last
line of defence: an exception nothing else handled becomes a JSON 500 that carries the request id, with
the traceback in the log and never in the response.

Log lines are JSON objects on one line. They name the principal, never the token: the ``Authorization``
header and the query string are not logged.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.requests import ClientDisconnect

from skillsearch.core.errors import SkillSearchError, error_bytes
from skillsearch.http.body_deadline import BodyTimeout, body_timeout_error
from skillsearch.http.errors import too_large as body_too_large
from skillsearch.http.metrics import HttpMetrics

__all__ = ["CLIENT_CLOSED", "JsonLogFormatter", "RequestContextMiddleware", "configure_json_logging"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

access_log = logging.getLogger("skillsearch.http")
_PROBES = frozenset({"/healthz", "/readyz", "/metrics"})
REQUEST_ID_HEADER = "x-request-id"
# The status a request is counted and logged with when its client closed the connection before its body was
# whole, so no answer could be sent (nginx's "client closed request").
CLIENT_CLOSED = 499
_CLIENT_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_STANDARD_RECORD_KEYS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "color_message"}



class JsonLogFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message and any ``extra=`` fields."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD_RECORD_KEYS and not key.startswith("_"):
                payload[key] = value
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(payload, ensure_ascii=False, default=str)


def configure_json_logging(level: int = logging.INFO, stream: Any = None) -> None:
    """Route the package's and uvicorn's loggers to one JSON handler on stderr (the server's log)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonLogFormatter())
    for name in ("skillsearch", "uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level)
        logger.propagate = False
    logging.getLogger("uvicorn.access").disabled = True


class _Refused(Exception):
    """The body went over the size limit or past its deadline: the caller gets the refusal, whatever the
    app answers."""


class RequestContextMiddleware:
    """Request id in and out, body-size limit, request metrics and the access log line."""

    def __init__(self, app: ASGIApp, metrics: HttpMetrics, max_body_bytes: int) -> None:
        self.app = app
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        incoming = headers.get(REQUEST_ID_HEADER, "")
        request_id = incoming if _CLIENT_REQUEST_ID.match(incoming) else uuid.uuid4().hex
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        status = 500
        response_started = False
        # The body went over the limit (413) or past its deadline (408, http/body_deadline.py): whatever
        # the app answers (FastAPI turns a failed body read into a 400), the caller gets this, and the
        # connection is closed with it, as the rest of the body is never read.
        refusal: tuple[int, bytes] | None = None

        async def send_with_id(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                if refusal is not None:
                    await reply(*refusal)
                    return
                status = int(message["status"])
                response_started = True
                message["headers"] = [*message.get("headers", []),
                                      (REQUEST_ID_HEADER.encode(), request_id.encode())]
            elif refusal is not None and status == refusal[0]:
                return
            await send(message)

        received = 0

        async def refused_receive() -> Message:
            raise _Refused

        # The client closed the connection before its body was whole (a host killed mid-request): nobody is
        # left to answer, and nothing failed here. The MCP transport's body read raised ``ClientDisconnect``
        # (logged as an unhandled error with its traceback) or answered 500 itself, and either was counted as
        # a 500, which an operator's 5xx alert pages on; such a request is counted and logged as 499.
        client_gone = body_whole = False

        async def limited_receive() -> Message:
            nonlocal received, refusal, client_gone, body_whole
            try:
                message = await receive()
            except BodyTimeout as exc:
                refusal = (408, error_bytes(body_timeout_error(exc.seconds)))
                raise _Refused from None
            if message["type"] == "http.disconnect" and not body_whole:
                client_gone = True
            if message["type"] == "http.request":
                body_whole = not message.get("more_body", False)
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    refusal = (413, too_large)
                    raise _Refused
            return message

        async def reply(code: int, body: bytes) -> None:
            nonlocal status, response_started
            status, response_started = code, True
            closing = [(b"connection", b"close")] if code in (408, 413) else []
            await send({"type": "http.response.start", "status": code,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode()),
                                    (REQUEST_ID_HEADER.encode(), request_id.encode()), *closing]})
            await send({"type": "http.response.body", "body": body})

        too_large = error_bytes(body_too_large(self.max_body_bytes))
        try:
            declared = headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self.max_body_bytes:
                # Refused unread; the app still routes it (its first read fails, or whatever it answers is
                # replaced), so its metrics and log line name its route, not "other".
                refusal = (413, too_large)
                await self.app(scope, refused_receive, send_with_id)
            else:
                await self.app(scope, limited_receive, send_with_id)
        except _Refused:
            if not response_started and refusal is not None:
                await reply(*refusal)
        except ClientDisconnect:
            client_gone = True
        except Exception:
            access_log.exception("unhandled error", extra={"request_id": request_id})
            if not response_started:
                await reply(500, error_bytes(SkillSearchError(
                    "internal error; quote the request id when reporting it", {"request_id": request_id})))
        finally:
            if client_gone and (status >= 500 or not response_started):
                status = CLIENT_CLOSED
            seconds = time.perf_counter() - started
            route = scope.get("route")
            template = getattr(route, "path", None) or ("unmatched" if status in (404, 405) else "other")
            method = scope.get("method", "")
            method = method if method in _METHODS else "OTHER"
            self.metrics.observe_request(template, method, status, seconds)
            principal = state.get("principal")
            # A balancer's and Prometheus' probes that answer 200 are logged at debug (-v): every second per
            # checker otherwise, burying the requests. A probe that fails (a 503 /readyz) stays at info.
            level = logging.DEBUG if template in _PROBES and status == 200 else logging.INFO
            access_log.log(level, "request", extra={
                "request_id": request_id,
                "method": method,
                "path": scope.get("path", ""),
                "route": template,
                "status": status,
                "duration_ms": round(seconds * 1000, 3),
                "principal": getattr(principal, "name", None),
                "client": (scope.get("client") or ("", 0))[0],
            })
