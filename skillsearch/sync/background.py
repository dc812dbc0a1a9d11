"""A background service (the poller, the folder watcher, the local sources) for the length of an ASGI app."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio

__all__ = ["running"]


@asynccontextmanager
async def running(start: Callable[[], None], stop: Callable[[], None]) -> AsyncIterator[None]:
    """``start()`` now; ``stop()`` at shutdown, in a worker thread, since stopping joins threads; also when
    the shutdown is a cancellation (an MCP stdio session stopped by SIGTERM), which would skip the join."""
    start()
    try:
        yield
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(stop)
