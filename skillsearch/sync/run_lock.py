"""One subscription run at a time per data directory, across processes: ``fcntl.flock`` on
``<data-dir>/sync.lock``.

A run's pages are separate transactions, and a full run keeps the ids it has listed in the store
(``sync_listed``) so that its last page can delete what was never listed. Two runs of one data directory at
once (a server's poller and an operator's ``skillsearch sync``, or two ``sync`` commands) shared that
record: the first to finish cleared it, so the second's last page saw only the ids listed since and deleted
every skill it had listed before, live ones included, then stored the last cursor, so no incremental run
brought them back. A run therefore holds this lock from before it reads its cursor until it has stored its
last page; a second run waits for it (and then reads the cursor the first one left, so it is incremental).

The kernel drops the lock when its holder dies (even by ``kill -9``), so a killed sync never leaves the
directory locked. Waiting is bounded only by ``stop``: a process that is stopping gives up the wait.
``snapshot restore`` refuses a directory whose sync is running (between two pages it holds no other lock),
and holds this lock through its swap (:func:`sync_runs_held_off`).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from skillsearch.core.errors import StopFlag, SyncStopped
from skillsearch.retrieval.inuse import exclusive, lock_pids
from skillsearch.retrieval.writelock import claim_pid_lock, open_lock_file, release_pid_lock

__all__ = ["SYNC_LOCK_FILE", "sync_run_lock", "sync_runs_held_off"]

log = logging.getLogger("skillsearch.sync")

SYNC_LOCK_FILE = "sync.lock"
POLL_S = 0.05


@contextlib.contextmanager
def sync_run_lock(data_dir: Path, subscription_id: str, stops: tuple[StopFlag | None, ...] = ()) -> Iterator[None]:
    """Hold ``<data-dir>/sync.lock`` for one run, waiting while another run (in this process or another) holds
    it; a set flag of ``stops`` ends the wait with ``SyncStopped`` (the run did not start)."""
    path = Path(data_dir) / SYNC_LOCK_FILE
    fd = open_lock_file(path, "the sync lock")
    waited = False
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if any(s is not None and s.is_set() for s in stops):
                    raise SyncStopped("sync was stopped while it waited for another sync run to finish",
                                      {"subscription_id": subscription_id}) from None
                if not waited:
                    waited = True
                    pids = lock_pids(path)
                    log.warning("sync %s: %s is syncing %s; waiting for its run to finish", subscription_id,
                                f"process {pids[0]}" if pids else "another process", data_dir)
                threading.Event().wait(POLL_S)
    except BaseException:
        os.close(fd)
        raise
    claim_pid_lock(fd)
    try:
        yield
    finally:
        release_pid_lock(fd)


def sync_runs_held_off(data_dir: Path) -> contextlib.AbstractContextManager[list[int] | None]:
    """For ``snapshot restore``'s swap: hold ``<data-dir>/sync.lock`` if no run holds it, so none starts
    meanwhile, and yield ``None``; else hold nothing and yield the running syncs' pids. A directory no sync
    ever ran in has no such file: nothing to hold off."""
    return exclusive(data_dir, create=False, name=SYNC_LOCK_FILE)
