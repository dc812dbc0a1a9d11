"""The push side of sync on our HTTP app: ``POST /v1/sync/webhook`` and ``GET /v1/sync/status``.

A webhook is only an accelerator (seed 001, D3): ``skills.changed`` moves the subscription's next pull to
now, ``subscription.revoked`` marks the subscription revoked in the store before answering, so every read
hides its skills at once (visibility is re-checked on each read), and schedules the pull that confirms it.

Every request must prove itself before anything changes, in this order:
1. ``X-Skillsearch-Timestamp`` is unix seconds within ``webhook_tolerance_s`` of our clock;
2. ``X-Skillsearch-Signature`` is ``v1=HMAC-SHA256(secret, "<timestamp>." + raw body)``;
3. the event id was not seen before. The id is recorded in the same transaction as the event's effect.
Failing any of them is ``401 UNAUTHENTICATED`` with nothing changed; so is a request when no secret is
configured. Only then is the body parsed (a malformed signed body is ``400 VALIDATION_ERROR``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import pydantic
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from skillsearch.errors import SkillSearchError, UnauthenticatedError, ValidationError
from skillsearch.sync.config import SyncConfig
from skillsearch.sync.contract import SIGNATURE_HEADER, TIMESTAMP_HEADER, WebhookEvent, signature_matches
from skillsearch.sync.status import SyncStatus, sync_status

if TYPE_CHECKING:
    from skillsearch.service import Catalog
    from skillsearch.sync.poller import Poller

__all__ = ["MAX_WEBHOOK_BYTES", "make_sync_router", "verify_webhook"]

log = logging.getLogger("skillsearch.sync")

MAX_WEBHOOK_BYTES = 64 * 1024


def _error(exc: SkillSearchError) -> JSONResponse:
    return JSONResponse({"error": exc.to_dict()}, status_code=exc.http_status)


def verify_webhook(secret: str | None, headers: Any, body: bytes, now: float, tolerance_s: int) -> None:
    """Raises :class:`UnauthenticatedError` unless the timestamp and signature headers prove ``body``."""
    if not secret:
        raise UnauthenticatedError("webhooks are not enabled here (no webhook secret is configured)")
    timestamp = headers.get(TIMESTAMP_HEADER)
    signature = headers.get(SIGNATURE_HEADER)
    if not timestamp or not signature:
        raise UnauthenticatedError(f"unsigned webhook: {TIMESTAMP_HEADER} and {SIGNATURE_HEADER} are required")
    if not timestamp.isdigit() or len(timestamp) > 12:
        raise UnauthenticatedError(f"{TIMESTAMP_HEADER} must be unix seconds")
    if abs(now - int(timestamp)) > tolerance_s:
        raise UnauthenticatedError(
            f"webhook timestamp is outside the accepted window of {tolerance_s}s",
            {"tolerance_s": tolerance_s},
        )
    if not signature_matches(secret, timestamp, body, signature):
        raise UnauthenticatedError("webhook signature does not match")


def make_sync_router(
    catalog: Catalog,
    config: SyncConfig,
    poller: Poller | None = None,
    *,
    authenticate: Callable[[str | None], object] | None = None,
    clock: Callable[[], float] = time.time,
) -> APIRouter:
    """The sync routes, self-contained (they answer their own errors). ``authenticate`` guards the status
    route, which names subscriptions and errors: it gets the ``Authorization`` header and raises a
    :class:`SkillSearchError` (e.g. ``UNAUTHENTICATED``) to refuse. The webhook has its own HMAC proof and
    must not sit behind the app's bearer tokens."""
    router = APIRouter(tags=["sync"])
    upstream = config.upstream

    def _apply(event: WebhookEvent, now: float) -> str:
        store = catalog.store
        with store.transaction():
            if not store.remember_event(event.id, now, now - 2 * upstream.webhook_tolerance_s):
                raise UnauthenticatedError("webhook replayed: this event id was already received",
                                           {"event_id": event.id})
            if event.type == "subscription.revoked":
                store.set_revoked(event.subscription_id, True)
                return "revoked"
        if event.type == "skills.changed":
            return "pull_scheduled" if config.subscription(event.subscription_id) else "ignored"
        return "ignored"

    @router.post(
        "/v1/sync/webhook",
        status_code=202,
        summary="Receive a signed change notification from the subscription platform",
        responses={401: {"description": "unsigned, badly signed, stale or replayed"},
                   400: {"description": "signed but malformed"}},
    )
    async def webhook(request: Request) -> JSONResponse:
        declared = request.headers.get("content-length", "")
        if not declared.isdigit() or int(declared) > MAX_WEBHOOK_BYTES:
            return _error(ValidationError(f"webhook body must be declared and at most {MAX_WEBHOOK_BYTES} bytes"))
        body = await request.body()
        now = clock()
        try:
            if len(body) > MAX_WEBHOOK_BYTES:
                raise ValidationError(f"webhook body is over {MAX_WEBHOOK_BYTES} bytes")
            verify_webhook(upstream.webhook_secret, request.headers, body, now, upstream.webhook_tolerance_s)
            try:
                event = WebhookEvent.model_validate_json(body)
            except pydantic.ValidationError as exc:
                raise ValidationError(f"malformed webhook event: {exc.errors()[0]['msg']}") from None
            action = await anyio.to_thread.run_sync(_apply, event, now)
        except SkillSearchError as exc:
            log.warning("webhook refused: %s", exc.message)
            return _error(exc)
        if action in ("revoked", "pull_scheduled") and poller is not None:
            poller.trigger(event.subscription_id)
        log.info("webhook %s %s for %s: %s", event.id, event.type, event.subscription_id, action)
        return JSONResponse({"accepted": True, "event_id": event.id, "type": event.type, "action": action},
                            status_code=202)

    @router.get(
        "/v1/sync/status",
        response_model=SyncStatus,
        summary="Per subscription: cursor, last success, last error, counts",
        responses={401: {"description": "missing or unknown bearer token"}},
    )
    def status(request: Request) -> Any:
        if authenticate is not None:
            try:
                authenticate(request.headers.get("authorization"))
            except SkillSearchError as exc:
                return _error(exc)
        return sync_status(catalog.store, config, poller.status() if poller is not None else None)

    return router
