"""The time a request body may take to arrive, counted from its whole head.

A request that declares a body and sends it slowly (or never) would otherwise hold its connection for as
long as the client likes: FastAPI reads the body before any authentication runs, and uvicorn bounds
neither. :class:`BodyDeadline` wraps every app :mod:`skillsearch.http.server` serves (as the head's bounds
do): a ``receive`` that is still waiting for the body ``seconds`` after the app was called (the head was
whole) raises :class:`BodyTimeout`; the app's middleware answers it (and counts it) as a JSON 408, and an
app without one gets that 408 from here. The answer carries ``Connection: close``, so the connection is
closed with it. Once the body is whole, ``receive`` is not bounded: a streaming response waits on it for
the client's disconnect.
"""

from __future__ import annotations

import asyncio
from typing import Any

from skillsearch.core.errors import ValidationError, error_bytes, problem

__all__ = ["BodyDeadline", "BodyTimeout", "body_timeout_error"]


class BodyTimeout(Exception):
    """The request body was not whole within the deadline."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"request body not received within {seconds:g} s")
        self.seconds = seconds


def body_timeout_error(seconds: float) -> ValidationError:
    """The 408's error: a ``VALIDATION_ERROR`` in the one shape, its problem on the body as a whole."""
    return ValidationError(f"request body not received within {seconds:g} s",
                           {"problems": [problem("body", f"the whole body must arrive within {seconds:g} s "
                                                         "of the request head")]})


class BodyDeadline:
    """ASGI wrapper: the request body must be whole within ``seconds`` of the app being called."""

    def __init__(self, app: Any, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        deadline = asyncio.get_running_loop().time() + self.seconds
        whole = False
        started = False

        async def bounded_receive() -> Any:
            nonlocal whole
            if whole:
                return await receive()
            try:
                # A body already buffered is returned without waiting, even past the deadline.
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise BodyTimeout(self.seconds) from None
            whole = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        async def tracked_send(message: Any) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, bounded_receive, tracked_send)
        except BodyTimeout as exc:
            if started:
                raise
            body = error_bytes(body_timeout_error(exc.seconds))
            await send({"type": "http.response.start", "status": 408,
                        "headers": [(b"content-type", b"application/json"), (b"connection", b"close"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
