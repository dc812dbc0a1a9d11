"""One writer of the index files per data directory, across processes: ``fcntl.flock`` on
``<data-dir>/write.lock``.

Every process that writes ``lexical/``, ``vectors/`` or ``manifest.json`` (an import, a sync page, a
``reindex``, a server repairing after another process changed the catalog) holds this lock for the write,
and first follows what another process may have written since (``SearchIndex`` reloads from disk). So two
Tantivy writers never work on one folder, and a serving process never commits a ``meta.json`` for a
folder another process replaced. A reader that finds the lock held serves its last whole snapshot
instead of rebuilding; a second writer waits up to ``timeout_s`` and then fails with a clear message. A
reader who may not write the folder takes the lock shared (:meth:`WriteLock.shared`) for the moment it reads
the files, so no writer changes them under it.

The lock is re-entrant within a process (a depth count behind a thread lock, since ``flock`` locks belong
to an open file, not to a thread), and the kernel drops it when its holder dies, so a writer killed with
``kill -9`` never leaves the directory locked.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from skillsearch.core.errors import IndexNotReadyError

__all__ = ["LOCK_FILE", "WriteLock", "claim_pid_lock", "open_lock_file", "release_pid_lock", "writer_elsewhere"]

LOCK_FILE = "write.lock"
DEFAULT_TIMEOUT_S = float(os.environ.get("SKILLSEARCH_WRITE_LOCK_TIMEOUT_S", "300"))


class WriteLock:
    def __init__(self, data_dir: Path, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.path = Path(data_dir) / LOCK_FILE
        self.timeout_s = timeout_s
        self._mutex = threading.RLock()
        self._fd: int | None = None
        self._depth = 0

    @property
    def held(self) -> bool:
        """Whether this process holds it (in this thread or another)."""
        return self._depth > 0

    def _open(self) -> int:
        """The lock file, opened for writing; one that cannot be (another user's file, a read-only folder,
        a full disk) is :class:`IndexNotReadyError` naming it and the cause, never a bare ``OSError``."""
        return open_lock_file(self.path, "the write lock", make_folder=True)

    def holder_pid(self) -> int | None:
        """The process id the holder wrote into the lock file (``None``: none recorded). Advisory, for
        messages: only the ``flock`` itself decides."""
        try:
            text = self.path.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            return None
        return int(text) if text.isdigit() else None

    def holder(self) -> str:
        """Who holds it, for a message: ``process N``, else ``another process``."""
        pid = self.holder_pid()
        return f"process {pid}" if pid is not None else "another process"

    def _take(self, blocking: bool) -> bool:
        fd = self._open()
        if not _flock_within(fd, fcntl.LOCK_EX, self.timeout_s if blocking else 0.0):
            holder = self.holder()
            os.close(fd)
            if not blocking:
                return False
            raise IndexNotReadyError(
                f"{holder} has been writing to the index in {self.path.parent} for over {self.timeout_s:.0f}s;"
                " try again when it has finished (SKILLSEARCH_WRITE_LOCK_TIMEOUT_S sets the wait)",
                {"lock": str(self.path)},
            )
        claim_pid_lock(fd)
        self._fd = fd
        return True

    def _release(self) -> None:
        fd, self._fd = self._fd, None
        release_pid_lock(fd)

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Hold the lock (waiting up to ``timeout_s``); re-entrant."""
        with self._mutex:
            if self._depth == 0:
                self._take(blocking=True)
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self._release()

    @contextlib.contextmanager
    def shared(self, wait_s: float) -> Iterator[bool]:
        """For a reader who may not write the folder (``read_only_open.py``): a shared ``flock`` on the lock
        file opened read-only (``flock`` needs no write permission), so no writer changes the index files
        while they are read; waits up to ``wait_s`` for a writer to finish, then :class:`IndexNotReadyError`.
        Yields False, holding nothing, when the file cannot be opened (no writer ever made it)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            yield False
            return
        try:
            if not _flock_within(fd, fcntl.LOCK_SH, wait_s):
                raise IndexNotReadyError(
                    f"{self.holder()} has been writing to the index in {self.path.parent} for over {wait_s:g}s;"
                    " try again when it has finished", {"lock": str(self.path)})
            yield True
        finally:
            os.close(fd)  # and with it the shared lock

    @contextlib.contextmanager
    def try_hold(self) -> Iterator[bool]:
        """Hold the lock if nobody (no other process, no other thread here) does; yields whether it got it.
        A thread of this process that already holds it gets it again."""
        if not self._mutex.acquire(blocking=False):
            yield False
            return
        try:
            if self._depth == 0 and not self._take(blocking=False):
                yield False
                return
            self._depth += 1
            try:
                yield True
            finally:
                self._depth -= 1
                if self._depth == 0:
                    self._release()
        finally:
            self._mutex.release()


def _flock_within(fd: int, operation: int, wait_s: float) -> bool:
    """Take ``flock(fd, operation)`` (``LOCK_EX`` or ``LOCK_SH``), trying again every 50 ms for up to ``wait_s``
    (0: once); whether it was taken."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)


def writer_elsewhere(data_dir: Path) -> int | None:
    """The id of another process writing to the index in ``data_dir`` now (its ``flock`` held), for a
    message; ``None`` when nobody is, when this process is, or when it cannot be told."""
    lock = WriteLock(data_dir)
    try:
        fd = os.open(lock.path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if _flock_within(fd, fcntl.LOCK_SH, 0.0):
            return None  # free: taken for an instant, let go with the file
        pid = lock.holder_pid()
        return pid if pid is not None and pid != os.getpid() else None
    except OSError:
        return None
    finally:
        os.close(fd)


def open_lock_file(path: Path, what: str, *, make_folder: bool = False) -> int:
    """A data directory's lock file, opened (created, with its folder when ``make_folder``) for writing; one
    that cannot be (another user's file, a read-only folder, a full disk) is :class:`IndexNotReadyError`
    naming ``what`` and the cause in one line, never a bare ``OSError``."""
    try:
        if make_folder:
            path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise IndexNotReadyError(f"{what} {path} cannot be opened ({exc.strerror or exc}): this user must be able"
                                 " to write the data directory and the files in it", {"lock": str(path)}) from None


def claim_pid_lock(fd: int) -> None:
    """Write this process's id into a lock file whose ``flock`` it now holds (who holds it, for messages).
    On a full disk the id is left out (the lock is the ``flock``; messages then say "another process") and the
    file's time is still set, as the write would have (``sync/leader.py``'s ``term_began`` reads it): a
    snapshot of a data directory whose disk is full, the way off that disk, takes the lock."""
    os.ftruncate(fd, 0)
    try:
        os.pwrite(fd, str(os.getpid()).encode("ascii"), 0)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise
        with contextlib.suppress(OSError):
            os.utime(fd)


def release_pid_lock(fd: int | None) -> None:
    """Let go of a held lock file's ``flock`` and close it (nothing when ``fd`` is None)."""
    if fd is not None:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
