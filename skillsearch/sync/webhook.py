"""The push side of sync: proving a webhook and applying its event (the HTTP route is ``http/sync_routes.py``).

A webhook is only an accelerator (seed 001, D3): ``skills.changed`` moves the subscription's next pull to
now, ``subscription.revoked`` marks the subscription revoked in the store before answering, so every read
hides its skills at once (visibility is re-checked on each read), and schedules the pull that confirms it.

Every request must prove itself before anything changes, in this order:
1. ``X-Skillsearch-Timestamp`` is unix seconds within ``webhook_tolerance_s`` of our clock;
2. ``X-Skillsearch-Signature`` is ``v1=HMAC-SHA256(secret, "<timestamp>." + raw body)``;
3. the event id was not seen before. The id is recorded in the same transaction as the event's effect.
Failing any of them is ``401 UNAUTHENTICATED`` with nothing changed; so is a request when no secret is
configured. Only then is the body parsed: a signed body sent without a JSON ``Content-Type`` is ``415`` and
a malformed one ``400 VALIDATION_ERROR``, each with ``details.problems`` (the route, ``http/sync_routes.py``,
also refuses an undeclared length, 400, and a body over :data:`MAX_WEBHOOK_BYTES`, 413, before reading it).
"""

from __future__ import annotations

from typing import Any

from skillsearch.catalog.store import CatalogStore
from skillsearch.core.errors import UnauthenticatedError
from skillsearch.sync.config import SyncConfig
from skillsearch.sync.contract import SIGNATURE_HEADER, TIMESTAMP_HEADER, WebhookAction, WebhookEvent, signature_matches

__all__ = ["MAX_WEBHOOK_BYTES", "apply_event", "verify_webhook"]

MAX_WEBHOOK_BYTES = 64 * 1024
_SCHEME = ('expected v1= and the lowercase hex of HMAC-SHA256(secret, "<timestamp>." + the body\'s bytes as sent),'
           ' comma-separated when several')


def verify_webhook(secret: str | None, headers: Any, body: bytes, now: float, tolerance_s: int) -> None:
    """Raises :class:`UnauthenticatedError` unless the timestamp and signature headers prove ``body``."""
    if not secret:
        raise UnauthenticatedError("webhooks are not enabled here (no webhook secret is configured)")
    timestamp = headers.get(TIMESTAMP_HEADER)
    signature = headers.get(SIGNATURE_HEADER)
    if not timestamp or not signature:
        raise UnauthenticatedError(f"unsigned webhook: {TIMESTAMP_HEADER} and {SIGNATURE_HEADER} are required")
    # ASCII digits only: a header is read as Latin-1, and ``"²".isdigit()`` is true while ``int("²")`` fails.
    if not (timestamp.isascii() and timestamp.isdigit()) or len(timestamp) > 12:
        raise UnauthenticatedError(f"{TIMESTAMP_HEADER} must be unix seconds")
    if abs(now - int(timestamp)) > tolerance_s:
        raise UnauthenticatedError(
            f"webhook timestamp is outside the accepted window of {tolerance_s}s",
            {"tolerance_s": tolerance_s},
        )
    # What a platform got wrong, said in the contract's terms (never what was expected: that is the secret's).
    if not any(part.strip().startswith("v1=") for part in signature.split(",")):
        raise UnauthenticatedError(f"{SIGNATURE_HEADER} holds no v1= signature ({_SCHEME})")
    if not signature_matches(secret, timestamp, body, signature):
        raise UnauthenticatedError(f"webhook signature does not match ({_SCHEME})")


def apply_event(store: CatalogStore, config: SyncConfig, event: WebhookEvent, now: float) -> WebhookAction:
    """Records ``event`` (refusing a replayed id) and applies it in one transaction; returns the action:
    ``revoked``, ``pull_scheduled`` (the caller triggers the poller) or ``ignored``."""
    tolerance_s = config.upstream.webhook_tolerance_s
    with store.transaction():
        if not store.sync.remember_event(event.id, now, now - 2 * tolerance_s):
            raise UnauthenticatedError("webhook replayed: this event id was already received",
                                       {"event_id": event.id})
        if event.type == "subscription.revoked":
            if config.subscription(event.subscription_id) is None:
                # Not ours: revoking it would hide that sub: grant for good, locally imported skills too.
                return "ignored"
            store.set_revoked(event.subscription_id, True)
            return "revoked"
    if event.type == "skills.changed":
        return "pull_scheduled" if config.subscription(event.subscription_id) else "ignored"
    return "ignored"
