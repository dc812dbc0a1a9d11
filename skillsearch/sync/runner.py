"""One sync run of one subscription: page through the changes since the stored cursor until the upstream
says there are no more.

- **Incremental** (a cursor is stored): every page is stored with the cursor that follows it, so a restart
  resumes right after the last stored page.
- **Full** (no cursor yet, or the upstream answered 410 for ours): the upstream lists every skill. Each
  page also records the ids it listed, so a full sync interrupted by a crash resumes from its stored
  cursor and still knows what it saw before. On the last page the skills of this subscription that were
  never listed are deleted, in that page's transaction: nothing the upstream dropped while our cursor was
  expired can survive a resync.
- **Bounded**: a run reads at most ``max_pages`` pages (the next run resumes from the stored cursor), and
  every page that says ``has_more`` must move the cursor to one not seen in this run: an upstream that
  loops (the same cursor again, or a cycle) fails that subscription's run instead of running forever.
- **Revoked** (the upstream answers 403 ``SUBSCRIPTION_REVOKED``): the revocation is confirmed locally
  and the subscription's skills are dropped. A revocation is lifted only by a successful answer to a pull
  that started after it was recorded, so a pull already in flight when a revocation webhook arrived
  cannot undo it.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from skillsearch.catalog.store import CatalogStore, utc_now
from skillsearch.catalog.sync_state import SyncState
from skillsearch.core.errors import SkillSearchError, SyncStopped, UpstreamUnavailableError, WriteStopped
from skillsearch.core.wellformed import terminal_safe
from skillsearch.retrieval.indexer import SearchIndex
from skillsearch.sync.apply import PageOutcome, apply_page, purge_subscription
from skillsearch.sync.client import CursorExpired, SubscriptionClient, SubscriptionRevoked
from skillsearch.sync.config import SubscriptionConfig

__all__ = ["SyncReport", "sync_subscription"]

log = logging.getLogger("skillsearch.sync")

MAX_FULL_RESTARTS = 2
# The index is brought up to the store once this many skills changed (and at the end of the run), not after
# every page: each refresh commits Tantivy, rewrites the vector snapshot and the manifest, so per-page
# refreshes cost a full sync 9 commits for the 883 real skills and, at 100k skills, copied the whole matrix
# once per page. Reads re-check every hit against the store, so a removal or revocation still leaves search
# at its page's commit; only new text waits for the refresh (docs/benchmarks.md, "Sync at the speed of import").
REFRESH_EVERY = 1000


@dataclass
class SyncReport:
    subscription_id: str
    outcome: PageOutcome
    pages: int = 0
    full: bool = False
    revoked: bool = False
    cursor: str | None = None
    embedded: int = 0
    seconds: float = 0.0
    error: dict[str, Any] | None = None

    @classmethod
    def failed(cls, subscription_id: str, exc: SkillSearchError) -> SyncReport:
        return cls(subscription_id, PageOutcome(), error=exc.to_dict())

    def to_dict(self) -> dict[str, Any]:
        o = self.outcome
        return {
            "subscription_id": self.subscription_id,
            "full": self.full,
            "revoked": self.revoked,
            "pages": self.pages,
            "created": len(o.created),
            "updated": len(o.updated),
            "unchanged": len(o.unchanged),
            "archived": len(o.archived),
            "deleted": len(o.deleted),
            "rejected": [{"skill_id": r.skill_id, "reason": r.reason} for r in o.rejected],
            "embedded": self.embedded,
            "cursor": self.cursor,
            "seconds": round(self.seconds, 3),
            "error": self.error,
        }


# How much of an unexpected exception's text the sync state keeps (its type is always named).
MAX_UNEXPECTED_MESSAGE = 300


def _record_error(store: CatalogStore, sub: SubscriptionConfig, message: str) -> None:
    state = store.sync.state(sub.source) or SyncState(sub.source, None, None, None, {})
    store.sync.save(SyncState(state.source, state.cursor, state.last_success, f"{utc_now()} {message}",
                                    state.counts))


def unexpected_text(exc: BaseException) -> str:
    """An exception no layer expected (a ``MemoryError`` in a decoder, a bug) in one line: its type and
    the start of its message, never its traceback (the log has that)."""
    text = terminal_safe(str(exc), one_line=True)
    if len(text) > MAX_UNEXPECTED_MESSAGE:
        text = text[:MAX_UNEXPECTED_MESSAGE] + "..."
    return f"sync failed unexpectedly ({type(exc).__name__}{': ' + text if text else ''})"


def _record_unexpected(store: CatalogStore, sub: SubscriptionConfig, exc: Exception) -> None:
    """``exc`` as the run's last error. Recording must not hide the exception itself (the store may be
    what failed), so a failure to record is only logged."""
    try:
        _record_error(store, sub, unexpected_text(exc))
    except Exception:
        log.exception("sync %s: could not record the failure in the sync state", sub.id)


def sync_subscription(
    store: CatalogStore,
    index: SearchIndex | None,
    client: SubscriptionClient,
    sub: SubscriptionConfig,
    *,
    page_limit: int = 100,
    cancel: threading.Event | None = None,
    max_pages: int = 1000,
) -> SyncReport:
    """Pull and apply every change of ``sub`` waiting upstream. Raises ``UpstreamUnavailableError`` (after
    recording it as the subscription's last error) when the upstream cannot be read; any other exception
    is recorded too (its type and a bounded message) and raised on."""
    started_clock = time.perf_counter()
    started = utc_now()
    report = SyncReport(sub.id, PageOutcome())
    state = store.sync.state(sub.source) or SyncState(sub.source, None, None, None, {})
    cursor = state.cursor
    if cursor is None:
        store.sync.clear_listed(sub.source)
    full = cursor is None or store.sync.full_sync_in_progress(sub.source)
    log.info("sync %s: starting %s sync from cursor %s", sub.id, "a full" if full else "an incremental", cursor)
    restarts = 0
    seen_cursors: set[str | None] = {cursor}
    pending: list[str] = []

    def flush() -> None:
        ids = list(dict.fromkeys(pending))
        pending.clear()  # before the refresh: one that stopped (WriteStopped) is not tried again by the finally
        if index is not None and ids:
            report.embedded += index.refresh(store, ids).embedded

    try:
        while True:
            if cancel is not None and cancel.is_set():
                raise SyncStopped("sync was stopped before it finished", {"subscription_id": sub.id})
            try:
                page = client.fetch_page(sub.id, cursor, page_limit)
            except CursorExpired:
                restarts += 1
                if restarts > MAX_FULL_RESTARTS:
                    raise UpstreamUnavailableError(
                        f"upstream kept expiring the cursor of subscription {sub.id!r} during a full sync",
                        {"subscription_id": sub.id},
                    ) from None
                log.warning("sync %s: cursor expired upstream; starting a full resync", sub.id)
                cursor, full = None, True
                seen_cursors = {None}
                store.sync.clear_listed(sub.source)
                continue
            except SubscriptionRevoked:
                gone = purge_subscription(store, index, sub, state, "subscription revoked upstream")
                log.warning("sync %s: revoked upstream; %d skill(s) removed", sub.id, len(gone))
                report.outcome.deleted.extend(gone)
                report.revoked = True
                cursor = None
                break
            revoked_at = store.revoked_at(sub.id)
            if revoked_at is not None and revoked_at < started:
                store.set_revoked(sub.id, False)
                log.warning("sync %s: upstream serves the subscription again; revocation lifted", sub.id)
            last = not page.has_more
            if not last and page.next_cursor in seen_cursors:
                raise UpstreamUnavailableError(
                    f"upstream did not move the cursor of subscription {sub.id!r} (it answered {page.next_cursor!r}"
                    " again with has_more); the page was not stored",
                    {"subscription_id": sub.id, "cursor": page.next_cursor},
                )
            seen_cursors.add(page.next_cursor)
            outcome, state = apply_page(
                store, None, sub, page.items,
                state=state,
                cursor=page.next_cursor,
                finished=last,
                full=full,
                earlier_rejected=report.outcome.rejected,
            )
            report.outcome.merge(outcome)
            report.pages += 1
            log.info("sync %s: page %d stored (%d changed, %d rejected)%s", sub.id, report.pages,
                     len(outcome.changed), len(outcome.rejected), "" if page.has_more else ", done")
            pending.extend(outcome.changed)
            cursor = page.next_cursor
            if last or len(pending) >= REFRESH_EVERY:
                flush()
            if last:
                break
            if report.pages >= max_pages:
                raise UpstreamUnavailableError(
                    f"sync of subscription {sub.id!r} stopped after {max_pages} pages (max_pages_per_run);"
                    " the next run continues from the stored cursor",
                    {"subscription_id": sub.id, "pages": report.pages},
                )
    except SyncStopped:  # the process is stopping, not a failure of the upstream: nothing to record
        raise
    except SkillSearchError as exc:
        _record_error(store, sub, exc.message)
        raise
    except WriteStopped:  # the process is stopping, not a failure: what was stored waits for the next open
        raise
    except Exception as exc:  # raised on: the caller logs it with its traceback and counts the run failed
        _record_unexpected(store, sub, exc)
        raise
    finally:
        # What was stored reaches search even when a later page failed (the store is ahead otherwise, and
        # the next read would diff the whole index against it).
        flush()
    report.full = full
    report.cursor = cursor
    report.seconds = time.perf_counter() - started_clock
    return report
