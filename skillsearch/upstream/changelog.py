"""The reference upstream's change log for one subscription: what makes ``since=<cursor>`` work.

Every change (publish, archive, delete) gets the next sequence number, and the log keeps only the latest
entry per skill (a compacted log, like a Kafka topic keyed by skill id). Reading since ``s`` returns the
entries with a sequence above ``s`` in sequence order; reading from the start returns the live skills
only. A skill changed while a client pages moves to a higher sequence and so comes again later, which
keeps paging consistent without locks held across requests.

A cursor is ``<epoch>.<seq>``. The epoch is drawn when the upstream starts, so a cursor from an earlier
run of the upstream (whose log is gone) is unknown, and :meth:`Feed.expire_cursors` moves a horizon
below which cursors are refused and tombstones dropped. Both answers are 410: the client's cue for a
full resync.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

__all__ = ["CursorUnknown", "Feed", "FeedPage"]


class CursorUnknown(Exception):
    """The cursor is from another epoch, below the horizon, or not a cursor at all."""


@dataclass(frozen=True)
class FeedPage:
    items: list[dict[str, Any]]
    next_cursor: str
    has_more: bool


class Feed:
    """The compacted change log of one subscription. Items are wire dicts (``op`` upsert or delete)."""

    def __init__(self, subscription_id: str, epoch: str) -> None:
        self.subscription_id = subscription_id
        self.epoch = epoch
        self.revoked = False
        self._seq = 0
        self._horizon = 0
        self._latest: dict[str, tuple[int, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def _cursor(self, seq: int) -> str:
        return f"{self.epoch}.{seq}"

    def _parse(self, cursor: str) -> int:
        epoch, _, seq_text = cursor.rpartition(".")
        if epoch != self.epoch or not (seq_text.isascii() and seq_text.isdigit()):  # "²".isdigit(), int() refuses
            raise CursorUnknown(cursor)
        seq = int(seq_text)
        if seq < self._horizon or seq > self._seq:
            raise CursorUnknown(cursor)
        return seq

    # -- writes -----------------------------------------------------------------------------------

    def put(self, item: dict[str, Any]) -> int:
        """Record an upsert or delete item as the skill's latest change; returns its sequence number."""
        skill_id = item["skill"]["skill_id"] if item["op"] == "upsert" else item["skill_id"]
        with self._lock:
            self._seq += 1
            self._latest[skill_id] = (self._seq, item)
            return self._seq

    def expire_cursors(self) -> None:
        """Forget history: every cursor handed out so far becomes unknown, and tombstones go."""
        with self._lock:
            self._horizon = self._seq + 1
            live = sorted((v for v in self._latest.values() if v[1]["op"] == "upsert"), key=lambda v: v[0])
            self._latest = {}
            for _, item in live:
                self._seq += 1
                self._latest[item["skill"]["skill_id"]] = (self._seq, item)
            self._seq = max(self._seq, self._horizon)

    # -- reads ------------------------------------------------------------------------------------

    def live(self) -> dict[str, dict[str, Any]]:
        """The current upsert item of every skill that is not deleted."""
        with self._lock:
            return {k: item for k, (_, item) in self._latest.items() if item["op"] == "upsert"}

    def get(self, skill_id: str) -> dict[str, Any] | None:
        with self._lock:
            entry = self._latest.get(skill_id)
            return entry[1] if entry and entry[1]["op"] == "upsert" else None

    def page(self, cursor: str | None, limit: int) -> FeedPage:
        with self._lock:
            if cursor is None:
                entries = [(s, i) for s, i in self._latest.values() if i["op"] == "upsert"]
                since = 0
            else:
                since = self._parse(cursor)
                entries = [(s, i) for s, i in self._latest.values() if s > since]
            entries.sort(key=lambda e: e[0])
            chunk = entries[:limit]
            has_more = len(entries) > limit
            last = chunk[-1][0] if chunk else (self._seq if cursor is None else since)
            return FeedPage([i for _, i in chunk], self._cursor(last), has_more)
