"""Talking to the subscription platform: the :class:`SubscriptionClient` protocol and its httpx version.

This is httpx's one home for outbound calls. The protocol is deliberately small (one page of changes since
a cursor) so that another platform shape can be adapted here without touching the store or search
(seed 001, "Risks"). What the rest of sync needs to know comes back as values or three exceptions:

- :class:`CursorExpired`: the platform no longer knows our cursor (410): do a full resync.
- :class:`SubscriptionRevoked`: the platform says the subscription is revoked (403 ``SUBSCRIPTION_REVOKED``).
- :class:`~skillsearch.core.errors.UpstreamUnavailableError`: anything else after the retries are spent.

Retries cover what is worth retrying: transport errors (refused, reset, dropped mid-body), timeouts,
408, 429 and 5xx. The wait is exponential with full jitter (AWS architecture blog, "Exponential Backoff
and Jitter", 2015) unless the platform says ``Retry-After``, which wins (capped by ``backoff_max_s``).
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Protocol
from urllib.parse import quote

import httpx
import pydantic

from skillsearch.core.errors import UpstreamUnavailableError
from skillsearch.sync.config import UpstreamConfig
from skillsearch.sync.contract import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    ErrorBody,
    RawChangePage,
    WebhookEvent,
    sign_webhook,
)

__all__ = [
    "CursorExpired",
    "HttpSubscriptionClient",
    "SubscriptionClient",
    "SubscriptionRevoked",
    "send_webhook",
]

log = logging.getLogger("skillsearch.sync")

_RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


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
    if value.isdigit():
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
        self.config = config
        self._cancel = cancel or threading.Event()
        self._rng = rng or random.Random()
        self._sleep = sleep
        self._http = httpx.Client(
            base_url=config.url,
            timeout=httpx.Timeout(config.timeout_s),
            headers={"Authorization": f"Bearer {config.token}", "Accept": "application/json",
                     "User-Agent": "skillsearch-sync/1"},
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
            raise UpstreamUnavailableError("sync was stopped while waiting to retry the upstream")

    def fetch_page(self, subscription_id: str, cursor: str | None, limit: int) -> RawChangePage:
        path = f"/v1/subscriptions/{quote(subscription_id, safe='')}/skills"
        params: dict[str, str | int] = {"limit": limit}
        if cursor is not None:
            params["since"] = cursor
        attempt = 0
        while True:
            retry_after: float | None = None
            self.requests += 1
            try:
                response = self._http.get(path, params=params)
            except httpx.TimeoutException as exc:
                reason = f"timed out after {self.config.timeout_s}s ({type(exc).__name__})"
            except httpx.TransportError as exc:
                reason = f"connection failed ({type(exc).__name__}: {exc})"
            else:
                status = response.status_code
                if status == 200:
                    try:
                        return RawChangePage.model_validate(response.json())
                    except (ValueError, pydantic.ValidationError) as exc:
                        reason = f"malformed page ({str(exc).splitlines()[0][:200]})"
                elif status == 410:
                    raise CursorExpired(cursor)
                elif status in _RETRY_STATUSES:
                    reason = f"HTTP {status}"
                    retry_after = retry_after_seconds(response.headers.get("Retry-After"))
                else:
                    code = _error_code(response)
                    if status == 403 and code == "SUBSCRIPTION_REVOKED":
                        raise SubscriptionRevoked(subscription_id)
                    raise UpstreamUnavailableError(
                        f"upstream refused {path}: HTTP {status}" + (f" {code}" if code else ""),
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


def _error_code(response: httpx.Response) -> str | None:
    try:
        return ErrorBody.model_validate(response.json()).error.code
    except (ValueError, pydantic.ValidationError):
        return None


def send_webhook(url: str, secret: str, event: WebhookEvent, *, timeout_s: float = 10.0,
                 timestamp: int | None = None) -> int:
    """POST one signed event (the reference upstream's push); returns the receiver's HTTP status."""
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
