"""A connection's transport that sends a response's head and body in one write (``http/server.py`` puts
it under uvicorn's HTTP protocol)."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["OneWrite"]


class OneWrite:
    """A connection's transport whose writes within one step of the event loop leave as one write, at the end
    of that step, or as soon as the response is complete: a response's head and body (uvicorn writes them
    apart, and another thread may take the GIL between the two) reach the socket together. A server killed
    mid-response has then sent the proxy nothing, which HAProxy retries on another replica (``retry-on
    all-retryable-errors``, ``deploy/haproxy.cfg``), or the whole response, never a head without its body.
    Everything else is the transport's own."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport, self._loop = transport, loop
        self._pending: list[bytes] = []
        self._flush_handle: asyncio.Handle | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._pending:
            self._flush_handle = self._loop.call_soon(self.flush)
        self._pending.append(bytes(data))

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(map(len, self._pending))

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._drop()
        self._transport.abort()

    def flush(self) -> None:
        """Write what this step has written so far (the protocol calls it once a response is complete)."""
        data = b"".join(self._pending)
        self._drop()
        if data and not self._transport.is_closing():
            self._transport.write(data)

    def _drop(self) -> None:
        self._pending.clear()
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
