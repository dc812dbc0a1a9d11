"""A serving process's repair of an index left behind the store, in a background thread: :class:`BackgroundRepair`.

When another process wrote the catalog and no writer holds the index's write lock, a request of a server
loads what that process wrote (``SearchIndex.follow``: its whole write, a generation reload) in its own
thread. What is still behind after that (a writer died between its store commit and its index write, or
stopped part-way; files written with another lexical recipe) needs every skill diffed against the store and
the difference embedded (``SearchIndex.catch_up``): seconds to minutes, which no request waits for. It runs
here, one repair at a time, under the holder's lock (so ``readiness`` says ``catching_up``), while requests
serve the last whole snapshot; the store's re-check of every hit keeps an archived or revoked skill out of
their answers meanwhile. A repair that fails is tried again by a later request's step, no sooner than
``RETRY_FIRST_S`` after it, doubling up to ``RETRY_MAX_S``; one stopped by the catalog's ``WriteStops``
keeps what it embedded, and the next repair or open embeds the rest.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from threading import Lock, RLock, Thread

from skillsearch.catalog.store import CatalogStore
from skillsearch.core.errors import StopFlag, WriteStopped
from skillsearch.retrieval.indexer import SearchIndex

__all__ = ["RETRY_FIRST_S", "RETRY_MAX_S", "BackgroundRepair"]

log = logging.getLogger("skillsearch")

# After a failed repair (or a server's failed background open, ``background_open.py``) the next try waits
# RETRY_FIRST_S, doubling after each failure up to RETRY_MAX_S.
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 30.0


class BackgroundRepair:
    """The one background repair of a holder's index; ``lock``: the holder's, held for the repair's length."""

    def __init__(self, data_dir: Path, lock: RLock, stopping: StopFlag) -> None:
        self.data_dir = data_dir
        self._lock = lock
        self._stopping = stopping
        self._thread: Thread | None = None
        self._starting = Lock()
        self._not_before = 0.0  # after a failed repair: when the next may start
        self._delay = RETRY_FIRST_S
        self.repairs = 0  # repairs that finished (for tests and logs)

    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def start(self, idx: SearchIndex, store: CatalogStore) -> bool:
        """Start repairing ``idx`` up to ``store`` unless a repair runs, the last one failed a moment ago, or
        the writes stop. Whether one runs now."""
        with self._starting:
            if self.running():
                return True
            if self._stopping.is_set() or time.monotonic() < self._not_before:
                return False
            log.warning("the index in %s is behind the catalog with no writer at work (a write died or stopped"
                        " part-way): repairing it in the background, serving the last snapshot meanwhile",
                        self.data_dir)
            self._thread = Thread(target=self._run, args=(idx, store), name="skillsearch-index-repair", daemon=True)
            self._thread.start()
            return True

    def _run(self, idx: SearchIndex, store: CatalogStore) -> None:
        try:
            with self._lock:
                if idx.snapshot().generation != store.generation():
                    idx.catch_up(store)
            self._delay, self._not_before = RETRY_FIRST_S, 0.0
            self.repairs += 1
        except WriteStopped as exc:  # the process is stopping: the next repair or open embeds the rest
            log.warning("%s", exc)
        except Exception:
            log.exception("repairing the index in %s failed; a later request tries again", self.data_dir)
            self._not_before = time.monotonic() + self._delay
            self._delay = min(self._delay * 2, RETRY_MAX_S)

    def join(self, wait_s: float) -> None:
        """Wait up to ``wait_s`` for a repair in progress (the caller has set the writes' stop)."""
        thread = self._thread
        if thread is not None and thread.is_alive():
            thread.join(wait_s)
