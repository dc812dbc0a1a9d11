"""A listening socket out of file descriptors, logged once in a while instead of thousands of times a second.

When ``accept()`` fails for lack of a resource (``EMFILE``: the process's open-files limit, ``ENFILE``,
``ENOBUFS``, ``ENOMEM``), asyncio's accept loop (CPython 3.11) reports it through the loop's exception
handler with a traceback, stops reading the socket for a second, and goes on trying the rest of its backlog
(uvicorn's is 2,048) in the same step. Under ``ulimit -n 64`` and 80 concurrent requests that was 430,000
log lines in 20 s, enough to fill a disk. :func:`quiet_accept_errors` installs a handler that turns those
reports into one error line per :data:`EVERY_S` seconds, with how many accepts failed and what to do; every
other report goes to the handler that was there before. asyncio also schedules a retry per failed accept;
those that run after the server closed its socket fail with ``Invalid file descriptor: -1`` and are dropped.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

__all__ = ["EVERY_S", "quiet_accept_errors"]

log = logging.getLogger("skillsearch.http")

EVERY_S = 10.0
_MESSAGE = "socket.accept() out of system resource"  # asyncio's, selector_events._accept_connection


class _AcceptErrors:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.previous = loop.get_exception_handler()
        self.failed = 0
        self.logged_at: float | None = None

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if _retry_after_close(context):
            return
        if context.get("message") != _MESSAGE:
            if self.previous is not None:
                self.previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        self.failed += 1
        now = time.monotonic()
        if self.logged_at is not None and now - self.logged_at < EVERY_S:
            return
        exc = context.get("exception")
        log.error("cannot accept connections: %s (%d failed accepts since the last such line); connections wait"
                  " in the listen queue or are refused: raise the open-files limit (ulimit -n) above"
                  " SKILLSEARCH_HTTP_MAX_CONNECTIONS plus a few hundred, or lower that setting", exc, self.failed)
        self.failed = 0
        self.logged_at = now


def _retry_after_close(context: dict[str, Any]) -> bool:
    """A retry asyncio scheduled after a failed accept (one per failed accept, a second later) that ran after
    the server closed its socket: ``ValueError: Invalid file descriptor: -1``, nothing to report."""
    callback = getattr(context.get("handle"), "_callback", None)
    return (getattr(callback, "__name__", "") == "_start_serving" and isinstance(context.get("exception"), ValueError)
            and "Invalid file descriptor" in str(context.get("exception")))


def quiet_accept_errors(loop: asyncio.AbstractEventLoop | None = None) -> None:
    """Install the handler on ``loop`` (default: the running loop, if any); once per loop."""
    if loop is None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop runs here: nothing listens
            return
    if not isinstance(loop.get_exception_handler(), _AcceptErrors):
        loop.set_exception_handler(_AcceptErrors(loop))
