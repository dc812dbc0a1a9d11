"""Where each subscription's sync stands: the answer of ``skillsearch sync --status`` and
``GET /v1/sync/status`` (one shape for both)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from skillsearch.catalog.store import CatalogStore
from skillsearch.sync.config import SyncConfig

__all__ = ["SubscriptionStatus", "SyncStatus", "sync_status"]


class SubscriptionStatus(BaseModel):
    subscription_id: str
    source: str = Field(description="The store's name for what this subscription owns.")
    cursor: str | None = Field(description="Where the next pull starts; null means a full sync.")
    last_success: str | None = Field(description="When a pull last reached the end of the changes.")
    last_error: str | None = Field(description="The latest failure or rejected item, with its time.")
    revoked: bool
    revoked_at: str | None = None
    skills_active: int
    skills_archived: int
    counts: dict[str, int] = Field(description="Totals since the first sync: created, updated, archived, ...")
    poller: dict[str, Any] | None = Field(None, description="The background poller's view, when one runs.")


class SyncStatus(BaseModel):
    upstream_url: str
    subscriptions: list[SubscriptionStatus]


def sync_status(store: CatalogStore, config: SyncConfig, poller: dict[str, dict[str, Any]] | None = None) -> SyncStatus:
    out = []
    for sub in config.subscriptions:
        state = store.sync.state(sub.source)
        ids = store.skill_ids_of_source(sub.source)
        skills = store.skills(ids)
        active = sum(1 for s in skills.values() if s.status == "active")
        revoked_at = store.revoked_at(sub.id)
        out.append(SubscriptionStatus(
            subscription_id=sub.id,
            source=sub.source,
            cursor=state.cursor if state else None,
            last_success=state.last_success if state else None,
            last_error=state.last_error if state else None,
            revoked=revoked_at is not None,
            revoked_at=revoked_at,
            skills_active=active,
            skills_archived=len(skills) - active,
            counts=dict(state.counts) if state else {},
            poller=(poller or {}).get(sub.id),
        ))
    return SyncStatus(upstream_url=config.upstream.url, subscriptions=out)
