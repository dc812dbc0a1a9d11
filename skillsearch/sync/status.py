"""Where each subscription's sync stands: the answer of ``skillsearch sync --status`` and
``GET /v1/sync/status`` (one shape for both)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from skillsearch.catalog.changes import changed_at
from skillsearch.catalog.store import CatalogStore
from skillsearch.catalog.sync_state import SyncState, failing, stamp
from skillsearch.sync.config import SyncConfig
from skillsearch.sync.health import poller_failing
from skillsearch.sync.sources import SourceConfig

__all__ = ["SourceStatus", "SubscriptionStatus", "SyncStatus", "error_line", "sources_status", "sync_status", "visible_to"]


class SubscriptionStatus(BaseModel):
    subscription_id: str
    grant: str = Field(description="The grant its skills are visible under (sub:<subscription_id>).")
    source: str = Field(description="The store's name for what this subscription owns.")
    cursor: str | None = Field(description="Where the next pull starts; null means a full sync.")
    last_success: str | None = Field(description="When a pull last reached the end of the changes.")
    last_error: str | None = Field(description="The latest failure or rejected item, with its time.")
    failing: bool = Field(False, description="The last attempt failed: last_error is newer than last_success, or"
                                             " this server's poller failed where the store could not record it"
                                             " (a full disk: poller.last_error says why).")
    revoked: bool
    revoked_at: str | None = None
    skills_active: int
    skills_archived: int
    counts: dict[str, int] = Field(description="Totals since the first sync: created, updated, archived, ...")
    poller: dict[str, Any] | None = Field(None, description="The background poller's view, when one runs.")


class SourceStatus(BaseModel):
    name: str
    kind: str = Field(description="folder or git")
    grant: str
    location: str = Field(description="The folder, or the repository URL with #ref and :subdir.")
    commit: str | None = Field(None, description="A git source: the commit it last applied.")
    last_success: str | None = Field(description="When a run last applied the source whole.")
    last_error: str | None = Field(description="The latest failure or refused skill, with its time.")
    failing: bool = Field(False, description="The last attempt failed: last_error is newer than last_success.")
    skills_active: int
    skills_archived: int
    counts: dict[str, int] = Field(description="Totals since the first run: runs, added, changed, removed, ...")
    runner: dict[str, Any] | None = Field(None, description="The background runner's view, when one runs.")


class SyncStatus(BaseModel):
    upstream_url: str | None
    subscriptions: list[SubscriptionStatus]
    sources: list[SourceStatus] = Field(default_factory=list)
    catalog_changed_at: str | None = Field(None, description="When the catalog last changed, from any source.")


def error_line(last_success: str | None, last_error: str | None, *, revoked: bool = False) -> str:
    """The status text's line for ``last_error`` ("" without one), saying whether it is still the news: the
    last attempt failed, the last successful run refused some items (the same moment), or a run has
    succeeded since. A ``revoked`` subscription is not failing (as ``SubscriptionStatus.failing`` says): the
    platform's 403 is the answer it was asked for, not an outage."""
    if not last_error:
        return ""
    if revoked:
        return f"\n  last error (revoked, so not failing): {last_error}"
    if failing(last_success, last_error):
        return f"\n  last error (failing now): {last_error}"
    if stamp(last_error) == stamp(last_success):
        return f"\n  refused in the last run: {last_error}"
    return f"\n  earlier error (a run succeeded since): {last_error}"


def _held(store: CatalogStore | None, source: str) -> tuple[SyncState | None, int, int]:
    """The stored state of the store's ``source``, and how many of its skills are active and archived."""
    if store is None:
        return None, 0, 0
    skills = store.skills(store.skill_ids_of_source(source))
    active = sum(1 for s in skills.values() if s.status == "active")
    return store.sync.state(source), active, len(skills) - active


def sources_status(store: CatalogStore | None, sources: Sequence[SourceConfig],
                   runner: dict[str, dict[str, Any]] | None = None) -> list[SourceStatus]:
    out = []
    for source in sources:
        state, active, archived = _held(store, source.name)
        try:
            cursor = json.loads(state.cursor) if state and state.cursor else {}
        except json.JSONDecodeError:
            cursor = {}
        commit = cursor.get("commit") if isinstance(cursor, dict) else None
        out.append(SourceStatus(
            name=source.name, kind=source.kind, grant=source.grant, location=source.location,
            commit=commit if isinstance(commit, str) else None,
            last_success=state.last_success if state else None, last_error=state.last_error if state else None,
            failing=failing(state.last_success, state.last_error) if state else False,
            skills_active=active, skills_archived=archived,
            counts=dict(state.counts) if state else {}, runner=(runner or {}).get(source.name),
        ))
    return out


def _poller_failing(run_times: tuple[float | None, float | None], state: SyncState | None) -> bool:
    """The poller's own record (``Poller.run_times``) says its runs fail, the last one after the stored
    success (``sync/health.py``)."""
    finished, failing_since = run_times
    success = stamp(state.last_success) if state else None
    return poller_failing(failing_since, finished, None if success is None else success.timestamp())


def sync_status(store: CatalogStore | None, config: SyncConfig | None,
                poller: dict[str, dict[str, Any]] | None = None, sources: Sequence[SourceConfig] = (),
                runner: dict[str, dict[str, Any]] | None = None,
                ran: Mapping[str, tuple[float | None, float | None]] | None = None) -> SyncStatus:
    """``poller``: its status per subscription id, shown as is; ``ran``: its run times (``Poller.run_times``),
    which count towards ``failing``. ``store`` ``None``: the data directory has no catalog yet, so nothing has
    run (a status read creates none)."""
    out = []
    for sub in config.subscriptions if config is not None else ():
        state, active, archived = _held(store, sub.source)
        revoked_at = store.revoked_at(sub.id) if store is not None else None
        out.append(SubscriptionStatus(
            subscription_id=sub.id,
            grant=sub.grant,
            source=sub.source,
            cursor=state.cursor if state else None,
            last_success=state.last_success if state else None,
            last_error=state.last_error if state else None,
            # Also when this process's poller failed where the store could not record it (a full disk).
            failing=revoked_at is None and ((failing(state.last_success, state.last_error) if state else False)
                                            or _poller_failing((ran or {}).get(sub.id, (None, None)), state)),
            revoked=revoked_at is not None,
            revoked_at=revoked_at,
            skills_active=active,
            skills_archived=archived,
            counts=dict(state.counts) if state else {},
            poller=(poller or {}).get(sub.id),
        ))
    return SyncStatus(upstream_url=config.upstream.url if config is not None else None, subscriptions=out,
                      sources=sources_status(store, sources, runner),
                      catalog_changed_at=changed_at(store) if store is not None else None)


def visible_to(status: SyncStatus, grants: frozenset[str] | None) -> SyncStatus:
    """``status`` as a caller holding ``grants`` may read it (``None``: every grant, the operator): only the
    subscriptions and local sources whose skills it may see. Their names, locations, errors and skill counts
    would otherwise tell any caller what other grants hold."""
    if grants is None:
        return status
    return status.model_copy(update={
        "subscriptions": [s for s in status.subscriptions if s.grant in grants],
        "sources": [s for s in status.sources if s.grant in grants],
    })
