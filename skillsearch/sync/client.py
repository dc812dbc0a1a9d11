"""Talking to the subscription platform: the :class:`SubscriptionClient` protocol and its httpx version.

This is httpx's one home for outbound calls. The protocol is deliberately small (one page of changes since
a cursor) so that another platform shape can be adapted here without touching the store or search
(seed 001, "Risks"). What the rest of sync needs to know comes back as values or three exceptions:

- :class:`CursorExpired`: the platform no longer knows our cursor (410): do a full resync.
- :class:`SubscriptionRevoked`: the platform says the subscription is revoked (403 ``SUBSCRIPTION_REVOKED``).
- :class:`~skillsearch.core.errors.UpstreamUnavailableError`: anything else after the retries are spent.

Everything an upstream sends is bounded (seed 001's platform is a process boundary we do not own): one
request has a **total** deadline (``deadline_s``, body included; a body dripped one byte at a time stops
there, not after a per-read timeout per byte), enforced by a watchdog that shuts the socket down, which
also interrupts the request when the poller is stopped; the body is read as a stream and refused past
``max_response_bytes`` after decoding, which ``sync/decoding.py`` does a bounded step at a time (a gzip
bomb stops at the limit; one coding, gzip or deflate, or none; a stream cut short is refused); a page must be JSON
(``application/json``), hold no more items than were asked for, and nest no deeper than the parser can
take. Redirects are never followed.

httpx is imported when a client is made or a webhook sent, never on import: with its command line's rich
and pygments it costs about 0.2 s, which every command that never talks to an upstream (``list``,
``skillsearch mcp``) would otherwise pay at start-up.

Retries cover what is worth retrying: transport errors (refused, reset, dropped mid-body), timeouts,
408, 429 and 5xx. The wait is exponential with full jitter (AWS architecture blog, "Exponential Backoff
and Jitter", 2015) unless the platform says ``Retry-After``, which wins (capped by ``backoff_max_s``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Protocol
from urllib.parse import quote

import pydantic

from skillsearch.core.domain import validation_text
from skillsearch.core.errors import SyncStopped, UpstreamUnavailableError
from skillsearch.core.wellformed import terminal_safe
from skillsearch.sync.config import UpstreamConfig
from skillsearch.sync.contract import (
    ERROR_CODE,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    RawChangePage,
    WebhookEvent,
    error_text,
    parse_error_body,
    sign_webhook,
)
from skillsearch.sync.decoding import BadEncoding, Decoder

if TYPE_CHECKING:
    import httpx

__all__ = [
    "CursorExpired",
    "HttpSubscriptionClient",
    "SubscriptionClient",
    "SubscriptionRevoked",
    "send_webhook",
]

log = logging.getLogger("skillsearch.sync")

_RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
_ERROR_BODY_BYTES = 64 * 1024
_CURSOR_CHARS = 120


class _Interrupted(Exception):
    """The request ran past its total deadline, or sync was stopped while it was in flight."""


class _TooLarge(Exception):
    """The response body passed ``max_response_bytes`` (after decoding)."""


def _plain_digits(value: str) -> bool:
    """ASCII digits only: ``"²".isdigit()`` is true too, and ``int``/``float`` refuse it."""
    return value.isascii() and value.isdigit()


class _Watchdog:
    """Shuts down the sockets of one request when its deadline passes or ``cancel`` is set, which makes a
    read blocked in another thread return at once."""

    def __init__(self, deadline: float, cancel: threading.Event) -> None:
        self.deadline = deadline
        self.fired: str | None = None
        self._cancel = cancel
        self._sockets: list[socket.socket] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True, name="skillsearch-sync-deadline")

    def trace(self, event: str, info: dict[str, object]) -> None:
        """httpcore's trace hook: remember the socket of each new connection (plain and TLS)."""
        if event in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            stream = info.get("return_value")
            sock = getattr(stream, "get_extra_info", lambda _name: None)("socket")
            if isinstance(sock, socket.socket):
                self._sockets.append(sock)

    def __enter__(self) -> _Watchdog:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()

    def check(self) -> None:
        if self.fired is None and (self._cancel.is_set() or time.monotonic() >= self.deadline):
            self.fired = "stopped" if self._cancel.is_set() else "deadline"
        if self.fired is not None:
            raise _Interrupted(self.fired)

    def _watch(self) -> None:
        while not self._done.wait(0.05):
            if self._cancel.is_set() or time.monotonic() >= self.deadline:
                self.fired = "stopped" if self._cancel.is_set() else "deadline"
                for sock in self._sockets:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)
                return


class CursorExpired(Exception):
    """The platform answered 410 for our cursor: only a full resync can continue."""


class SubscriptionRevoked(Exception):
    """The platform says this subscription is revoked."""


class SubscriptionClient(Protocol):
    """One page of a subscription's changes since ``cursor`` (``None``: everything, from the start)."""

    def fetch_page(self, subscription_id: str, cursor: str | None, limit: int) -> RawChangePage: ...

    def close(self) -> None: ...


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds: either delta-seconds or an HTTP date; ``None`` when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if _plain_digits(value):
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class HttpSubscriptionClient:
    """The platform's HTTP API (``GET /v1/subscriptions/{id}/skills``) with bearer auth and retries."""

    def __init__(
        self,
        config: UpstreamConfig,
        *,
        transport: httpx.BaseTransport | None = None,
        cancel: threading.Event | None = None,
        rng: random.Random | None = None,
        sleep: Callable[[float], None] | None = None,
    ) -> None:
        import httpx

        self.config = config
        self._cancel = cancel or threading.Event()
        self._rng = rng or random.Random()
        self._sleep = sleep
        self._http = httpx.Client(
            base_url=config.url,
            # Each read waits at most this long; the watchdog bounds the whole request by deadline_s.
            timeout=httpx.Timeout(min(config.timeout_s, config.deadline_s)),
            # A fresh connection per request, so the watchdog always knows the socket to shut down.
            limits=httpx.Limits(max_keepalive_connections=0),
            headers={"Authorization": f"Bearer {config.token}", "Accept": "application/json",
                     "Accept-Encoding": "gzip, deflate", "User-Agent": "skillsearch-sync/1"},
            transport=transport,
            follow_redirects=False,
        )
        self.requests = 0

    def close(self) -> None:
        self._http.close()

    def backoff(self, attempt: int, retry_after: float | None) -> float:
        cap = self.config.backoff_max_s
        if retry_after is not None:
            return min(retry_after, cap)
        return self._rng.uniform(0.0, min(cap, self.config.backoff_base_s * (2**attempt)))

    def _wait(self, seconds: float) -> None:
        if self._sleep is not None:
            self._sleep(seconds)
        elif self._cancel.wait(seconds):
            raise SyncStopped("sync was stopped while waiting to retry the upstream")

    def _get(self, path: str, params: dict[str, str | int]) -> tuple[int, httpx.Headers, bytes]:
        """One GET within the total deadline: (status, headers, the decoded body, bounded)."""
        import httpx

        limit = self.config.max_response_bytes
        with _Watchdog(time.monotonic() + self.config.deadline_s, self._cancel) as watchdog:
            try:
                with self._http.stream("GET", path, params=params, extensions={"trace": watchdog.trace}) as response:
                    cap = limit if response.status_code == 200 else _ERROR_BODY_BYTES
                    declared = response.headers.get("Content-Length", "")
                    if response.status_code == 200 and _plain_digits(declared) and int(declared) > limit:
                        raise _TooLarge(f"Content-Length {declared}")
                    raw, encoding = response.iter_raw(), response.headers.get("Content-Encoding", "")
                    if response.is_stream_consumed:  # a transport that hands over a body it read and decoded
                        raw, encoding = iter([response.content]), ""  # (httpx.MockTransport)
                    try:
                        body = _read_body(raw, encoding, cap, watchdog)
                    except _TooLarge:
                        if response.status_code == 200:
                            raise _TooLarge(f"more than {limit} bytes") from None
                        body = b""  # an error page: its status is the answer, its body only a hint
                    except BadEncoding:
                        if response.status_code == 200:
                            raise
                        body = b""
                    watchdog.check()
                    return response.status_code, response.headers, body
            except httpx.HTTPError:
                if watchdog.fired is not None:
                    raise _Interrupted(watchdog.fired) from None
                raise

    def fetch_page(self, subscription_id: str, cursor: str | None, limit: int) -> RawChangePage:
        import httpx

        path = f"/v1/subscriptions/{quote(subscription_id, safe='')}/skills"
        params: dict[str, str | int] = {"limit": limit}
        if cursor is not None:
            params["since"] = cursor
        details = {"subscription_id": subscription_id}
        attempt = 0
        while True:
            retry_after: float | None = None
            self.requests += 1
            try:
                status, headers, body = self._get(path, params)
            except _Interrupted as exc:
                if str(exc) == "stopped":
                    raise SyncStopped("sync was stopped during a request to the upstream", details) \
                        from None
                reason = f"no complete answer within the deadline of {self.config.deadline_s}s"
            except _TooLarge as exc:
                raise UpstreamUnavailableError(
                    f"upstream answer for subscription {subscription_id!r} is too large ({exc}; the limit is "
                    f"max_response_bytes = {self.config.max_response_bytes})", details) from None
            except BadEncoding as exc:
                reason = f"undecodable answer ({exc})"
            except httpx.TimeoutException as exc:
                reason = f"timed out after {self.config.timeout_s}s ({type(exc).__name__})"
            except httpx.TransportError as exc:
                reason = f"connection failed ({type(exc).__name__}: {exc})"
            else:
                if status == 200:
                    page, reason = _parse_page(headers, body)
                    if page is not None:
                        if len(page.items) > limit:
                            raise UpstreamUnavailableError(
                                f"upstream sent {len(page.items)} items for subscription {subscription_id!r}"
                                f" where at most {limit} were asked for", details)
                        return page
                elif status == 410:
                    raise CursorExpired(cursor)
                elif status in _RETRY_STATUSES:
                    reason = f"HTTP {status}{error_text(body)}"
                    retry_after = retry_after_seconds(headers.get("Retry-After"))
                else:
                    code = _error_code(body)
                    if status == 403 and code == "SUBSCRIPTION_REVOKED":
                        raise SubscriptionRevoked(subscription_id)
                    # The platform's own message and problems name what it refused (a field, a parameter):
                    # the operator of the platform reads them in `sync --status`, not only the status code.
                    raise UpstreamUnavailableError(
                        f"upstream refused {path} ({_page_name(cursor)}): HTTP {status}{error_text(body)}",
                        {"status": status, "upstream_code": code, "subscription_id": subscription_id},
                    )
            if attempt >= self.config.retries:
                raise UpstreamUnavailableError(
                    f"upstream unavailable for subscription {subscription_id!r} after {attempt + 1} attempts:"
                    f" {reason}",
                    {"subscription_id": subscription_id, "attempts": attempt + 1, "reason": reason},
                )
            delay = self.backoff(attempt, retry_after)
            log.warning("upstream %s: %s; retry %d/%d in %.2fs", subscription_id, reason, attempt + 1,
                        self.config.retries, delay)
            self._wait(delay)
            attempt += 1


def _read_body(raw: Iterator[bytes], encoding: str, cap: int, watchdog: _Watchdog) -> bytes:
    """The decoded body, read within the watchdog's deadline; ``_TooLarge`` once it passes ``cap`` bytes."""
    decoder = Decoder(encoding)
    chunks: list[bytes] = []
    total = 0
    for data in itertools.chain(raw, [None]):
        watchdog.check()
        for chunk in decoder.decode(data) if data is not None else decoder.finish():
            total += len(chunk)
            if total > cap:
                raise _TooLarge
            chunks.append(chunk)
    return b"".join(chunks)


def _parse_page(headers: httpx.Headers, body: bytes) -> tuple[RawChangePage | None, str]:
    """The page, or ``None`` and why it is not one (wrong content type, not JSON, nested too deeply)."""
    ctype = headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
    if ctype != "application/json" and not ctype.endswith("+json"):
        return None, f"wrong content type {ctype[:100]!r} (expected application/json)"
    try:
        return RawChangePage.model_validate(json.loads(body)), ""
    except RecursionError:
        return None, "malformed page (JSON nested too deeply)"
    except pydantic.ValidationError as exc:  # before ValueError, which it is: name the fields
        return None, f"malformed page ({validation_text(exc, 3)[:300]})"
    except ValueError as exc:
        return None, f"malformed page ({str(exc).splitlines()[0][:200]})"


def _error_code(body: bytes) -> str | None:
    error = parse_error_body(body)
    # Printed and stored as it came: only a code's characters, never a terminal's escape sequences.
    return error.code if error is not None and ERROR_CODE.fullmatch(error.code) else None


def _page_name(cursor: str | None) -> str:
    """Which request it was, in the platform's terms: the cursor it handed out, or the full listing."""
    if cursor is None:
        return "full listing, no since"
    return f"since={terminal_safe(cursor, one_line=True)[:_CURSOR_CHARS]}"


def send_webhook(url: str, secret: str, event: WebhookEvent, *, timeout_s: float = 10.0,
                 timestamp: int | None = None) -> int:
    """POST one signed event (the reference upstream's push); returns the receiver's HTTP status."""
    import httpx

    body = json.dumps(event.model_dump(), separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    ts = int(time.time()) if timestamp is None else timestamp
    headers = {
        "Content-Type": "application/json",
        TIMESTAMP_HEADER: str(ts),
        SIGNATURE_HEADER: sign_webhook(secret, ts, body),
    }
    try:
        with httpx.Client(timeout=timeout_s) as http:
            return http.post(url, content=body, headers=headers).status_code
    except httpx.HTTPError as exc:
        raise UpstreamUnavailableError(f"webhook to {url} failed: {type(exc).__name__}: {exc}") from None
