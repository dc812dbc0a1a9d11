"""The catalog's SQLite connections (``catalog/connections.py``) over a server's life: one a thread, and a thread
that ended leaves no open connection behind. A server's worker threads come and go (anyio ends an idle one
after 10 s and starts another under the next burst): in a soak of ``skillsearch serve``, every round of
requests left two more file descriptors on the catalog (the file and its ``-wal``), 27 -> 62 -> 109 after two
rounds. Real SQLite, real threads, the process's own descriptor table."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from skillsearch.catalog.store import CatalogStore

THREADS = 40


def _descriptors_on(path: Path) -> int:
    """This process's open file descriptors on ``path`` (the catalog file itself, not its -wal or -shm)."""
    target, count = str(path.resolve()), 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == target:
                count += 1
        except OSError:
            continue
    return count


def _read_in_a_thread(store: CatalogStore) -> None:
    seen: list[int] = []
    thread = threading.Thread(target=lambda: seen.append(store.generation()))
    thread.start()
    thread.join()
    assert seen == [store.generation()]


def test_threads_that_ended_leave_no_connection_open(tmp_path: Path) -> None:
    store = CatalogStore(tmp_path / CatalogStore.FILENAME)
    try:
        store.generation()
        before = _descriptors_on(store.path)
        for _ in range(THREADS):
            _read_in_a_thread(store)
        # This thread's connection and the last thread's (closed by the next connection opened), and one
        # descriptor SQLite may keep of a closed connection while another holds a lock on the file.
        assert _descriptors_on(store.path) <= before + 2
    finally:
        store.close()


def test_a_live_threads_connection_stays_open_while_others_come_and_go(tmp_path: Path) -> None:
    store = CatalogStore(tmp_path / CatalogStore.FILENAME)
    go_on, reads, failures = threading.Event(), [], []

    def long_lived() -> None:
        reads.append(store.generation())
        go_on.wait(60)
        try:
            reads.append(store.generation())
        except Exception as exc:  # the assertion below names it
            failures.append(exc)

    keeper = threading.Thread(target=long_lived)
    keeper.start()
    try:
        for _ in range(THREADS):
            _read_in_a_thread(store)
    finally:
        go_on.set()
        keeper.join()
    try:
        assert failures == [] and len(reads) == 2
        assert _descriptors_on(store.path) <= 4
    finally:
        store.close()
