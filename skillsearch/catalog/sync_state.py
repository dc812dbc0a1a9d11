"""Sync bookkeeping in the catalog's database: each source's cursor and last run (and since when it has been
failing), the ids a full sync has listed so far, and the webhook event ids already received.

It lives beside the catalog tables (same SQLite file, same connection, same transactions: a page's items
and the cursor that follows them commit together) but is not catalog content: nothing here is read by a
search or a read. :class:`SyncLedger` is reached as ``store.sync``; the revocations, which every read
checks, stay with the catalog tables in :mod:`skillsearch.catalog.store`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

__all__ = ["REJECTED_NOTE", "SCHEMA", "Connected", "SyncLedger", "SyncState", "ended_pull", "failing", "stamp"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS sync_state (
    source TEXT PRIMARY KEY,
    cursor TEXT,
    last_success TEXT,
    last_error TEXT,
    counts TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS sync_listed (
    source TEXT NOT NULL,
    skill_id TEXT NOT NULL,
    PRIMARY KEY (source, skill_id)
);
CREATE TABLE IF NOT EXISTS sync_failing (
    source TEXT PRIMARY KEY,
    since TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS webhook_events (
    event_id TEXT PRIMARY KEY,
    received_at REAL NOT NULL
);
"""


class Connected(Protocol):
    """What the ledger needs of the store it lives in (``CatalogStore``): its thread's connection and its
    write transaction, which a ledger write joins."""

    def connection(self) -> sqlite3.Connection: ...

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]: ...


@dataclass(frozen=True)
class SyncState:
    source: str
    cursor: str | None
    last_success: str | None
    last_error: str | None
    counts: dict[str, int]
    # When the failures since the last success began (the first one's time); None while not failing.
    # Kept by ``save`` in its own table (``sync_failing``), so a catalog written before it opens as is.
    failing_since: str | None = None


def stamp(text: str | None) -> datetime | None:
    """The time of an ISO ``last_success``, or the time that starts a ``last_error`` (``"<time> <message>"``)."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.split(" ", 1)[0])
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


# How a page's note of the items it refused starts, after its time: ``"<time> rejected 2 item(s): ..."``. It is
# written with the page, while the pull goes on; every other ``last_error`` ends a pull (a failure, a revocation).
REJECTED_NOTE = "rejected "


def ended_pull(last_error: str | None) -> bool:
    """Whether ``last_error`` records the end of a pull (it failed, or found the subscription revoked), not a
    page's note of refused items written while the pull went on."""
    return bool(last_error) and not (last_error or "").partition(" ")[2].startswith(REJECTED_NOTE)


def failing(last_success: str | None, last_error: str | None) -> bool:
    """The last attempt failed: its error is newer than the last success (a run that succeeded while
    refusing some items records both at the same moment, which is not a failure)."""
    error, success = stamp(last_error), stamp(last_success)
    return error is not None and (success is None or error > success)


class SyncLedger:
    """The sync tables of one :class:`~skillsearch.catalog.store.CatalogStore`; writes join the store's
    transaction when one is open."""

    def __init__(self, store: Connected) -> None:
        self._store = store

    # -- each source's cursor and last run --------------------------------------------------------

    def state(self, source: str) -> SyncState | None:
        row = self._store.connection().execute(
            "SELECT s.*, f.since AS failing_since FROM sync_state s LEFT JOIN sync_failing f USING (source)"
            " WHERE s.source = ?", (source,)).fetchone()
        if row is None:
            return None
        return SyncState(
            row["source"], row["cursor"], row["last_success"], row["last_error"], json.loads(row["counts"]),
            row["failing_since"],
        )

    def states(self) -> list[SyncState]:
        rows = self._store.connection().execute("SELECT source FROM sync_state ORDER BY source").fetchall()
        return [s for r in rows if (s := self.state(r["source"])) is not None]

    def save(self, state: SyncState) -> None:
        with self._store.transaction() as conn:
            conn.execute(
                "INSERT INTO sync_state (source, cursor, last_success, last_error, counts) VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT(source) DO UPDATE SET cursor = excluded.cursor, last_success = excluded.last_success,"
                " last_error = excluded.last_error, counts = excluded.counts",
                (state.source, state.cursor, state.last_success, state.last_error, json.dumps(state.counts)),
            )
            # The first failure since the last success: kept while the failures go on, cleared by a success.
            if not failing(state.last_success, state.last_error):
                conn.execute("DELETE FROM sync_failing WHERE source = ?", (state.source,))
                return
            row = conn.execute("SELECT since FROM sync_failing WHERE source = ?", (state.source,)).fetchone()
            began, success = stamp(row[0]) if row else None, stamp(state.last_success)
            if began is None or (success is not None and began < success):  # none yet, or left from before it
                conn.execute("INSERT INTO sync_failing (source, since) VALUES (?, ?) ON CONFLICT(source)"
                             " DO UPDATE SET since = excluded.since",
                             (state.source, state.last_error.split(" ", 1)[0] if state.last_error else ""))

    # -- the ids a full sync has listed -----------------------------------------------------------

    def mark_listed(self, source: str, skill_ids: Iterable[str]) -> None:
        """Remember skills a full sync of ``source`` has seen so far: a resumed full sync still knows them."""
        with self._store.transaction() as conn:
            conn.executemany("INSERT OR IGNORE INTO sync_listed (source, skill_id) VALUES (?, ?)",
                             [(source, s) for s in skill_ids])

    def listed(self, source: str) -> set[str]:
        rows = self._store.connection().execute("SELECT skill_id FROM sync_listed WHERE source = ?", (source,))
        return {r[0] for r in rows}

    def full_sync_in_progress(self, source: str) -> bool:
        row = self._store.connection().execute(
            "SELECT 1 FROM sync_listed WHERE source = ? LIMIT 1", (source,)
        ).fetchone()
        return row is not None

    def clear_listed(self, source: str) -> None:
        with self._store.transaction() as conn:
            conn.execute("DELETE FROM sync_listed WHERE source = ?", (source,))

    # -- webhook replay guard ---------------------------------------------------------------------

    def remember_event(self, event_id: str, now: float, forget_before: float) -> bool:
        """Record a webhook event id; ``False`` when it was already seen (a replay). Joins the caller's
        transaction so the record and the event's effect land together. Ids older than ``forget_before``
        are dropped: the timestamp window refuses those events anyway."""
        with self._store.transaction() as conn:
            conn.execute("DELETE FROM webhook_events WHERE received_at < ?", (forget_before,))
            cur = conn.execute(
                "INSERT OR IGNORE INTO webhook_events (event_id, received_at) VALUES (?, ?)", (event_id, now)
            )
            return cur.rowcount > 0
