"""A response body's ``Content-Encoding`` undone a bounded step at a time (``sync/client.py`` reads every
upstream body through it).

httpx's decoders inflate each received chunk whole, so a 13 KB body sent as ``Content-Encoding: gzip, gzip``
asked for gigabytes in one call. :class:`Decoder` accepts one coding, ``gzip`` or ``deflate`` (zlib-wrapped
or raw, as httpx takes it), or none; it yields at most ``_DECODE_STEP`` bytes per step, so the caller's size
check sees a bomb before it has grown, and it refuses a compressed stream cut short.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

__all__ = ["BadEncoding", "Decoder"]


class BadEncoding(Exception):
    """The body's ``Content-Encoding`` is not one we accept, or its bytes do not decode."""


# Output of one decompression step: what a compressed chunk may grow to before the size check sees it.
_DECODE_STEP = 64 * 1024
_CODINGS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class Decoder:
    """Undoes a ``Content-Encoding`` (none, ``gzip`` or ``deflate``) at most ``_DECODE_STEP`` bytes at a time;
    :meth:`finish` at the end of the body refuses a compressed stream that ended before its end."""

    def __init__(self, header: str) -> None:
        codings = [c.strip().lower() for c in header.split(",") if c.strip() and c.strip().lower() != "identity"]
        if len(codings) > 1 or any(c not in _CODINGS for c in codings):
            raise BadEncoding(f"Content-Encoding {header[:100]!r} (accepted: one of gzip, deflate, or none)")
        self._coding = codings[0] if codings else None
        self._zlib = zlib.decompressobj(_CODINGS[self._coding]) if self._coding else None
        # "deflate" is zlib-wrapped, or raw from some servers (httpx takes both): its first two bytes, a zlib
        # header or not, decide; they are held until both have come (a first read may hold one byte).
        self._head: bytes | None = b"" if self._coding == "deflate" else None
        self._fed = False

    def decode(self, data: bytes) -> Iterator[bytes]:
        if self._zlib is None:
            yield data
            return
        if self._head is not None:
            self._head += data
            if len(self._head) < 2:
                return
            data, self._head = self._head, None
            if not _zlib_header(data):
                self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
        self._fed = self._fed or bool(data)
        more = True
        while data or more:
            try:
                out = self._zlib.decompress(data, _DECODE_STEP)
            except zlib.error as exc:
                raise BadEncoding(f"body does not decode as {self._coding} ({exc})") from None
            data = self._zlib.unconsumed_tail
            more = len(out) == _DECODE_STEP  # zlib may hold more output than one step gave
            if out:
                yield out

    def finish(self) -> Iterator[bytes]:
        """What is left at the end of the body (a one-byte deflate body); ``BadEncoding`` when a compressed
        body ended before its stream did (a gzip stream without its CRC and size: not the body sent)."""
        if self._head:
            head, self._head = self._head, None
            self._zlib = zlib.decompressobj(-zlib.MAX_WBITS)
            yield from self.decode(head)
        if self._zlib is not None and self._fed and not self._zlib.eof:
            raise BadEncoding(f"body does not decode as {self._coding} (the compressed stream is cut short)")


def _zlib_header(data: bytes) -> bool:
    """Whether ``data`` starts with a zlib header (RFC 1950: method 8, a check that is a multiple of 31)."""
    return data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
