"""The load run's HTTP client: one keep-alive HTTP/1.1 connection on asyncio streams, and process CPU time.

Why not httpx: the clients run on the same two cores as the server they measure, so every millisecond of
client CPU is taken from the server. 32 httpx clients cost about 3.6 ms of CPU per request here (measured
with ``cpu_ms_per_request`` of ``load_http.py``), a third of what the server itself spends on an uncached
search; this client parses only the status line, the framing headers and the body bytes. It speaks just what
``skillsearch serve`` answers a GET with: ``Content-Length`` or chunked bodies, keep-alive unless the server
says ``Connection: close``.
"""

from __future__ import annotations

import asyncio
import os

__all__ = ["LeanConnection", "process_cpu_seconds"]

MAX_HEAD = 64 * 1024


class LeanConnection:
    """``await connection.get(path, head)`` -> (status, body); reconnects after a close or an error."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def get(self, path: str, head: str) -> tuple[int, bytes]:
        """``head``: the header lines after the request line, ending with the blank line."""
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port, limit=MAX_HEAD)
        assert self._reader is not None
        self._writer.write(f"GET {path} HTTP/1.1\r\n{head}".encode())
        raw = await self._reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip().lower()
        if headers.get("transfer-encoding") == "chunked":
            parts = []
            while True:
                size = int((await self._reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
                if size == 0:
                    await self._reader.readuntil(b"\r\n")
                    break
                parts.append((await self._reader.readexactly(size + 2))[:-2])
            body = b"".join(parts)
        else:
            body = await self._reader.readexactly(int(headers.get("content-length", "0")))
        if headers.get("connection") == "close":
            self.close()
        return status, body

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far, all its threads (``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
