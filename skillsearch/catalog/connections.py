"""The catalog file's SQLite connections: one a thread, in WAL mode, and the transactions every write runs in.

A connection is opened on a thread's first use, and closed by the next one opened once its thread has ended
(a server's worker threads come and go). Until the catalog's schema is in place (``created``) it may
create the file; after, never: a file deleted under a server would otherwise come back empty in the next
thread. A file SQLite cannot open, or a write the disk or the permissions refuse, is
:class:`IndexNotReadyError` naming the file and the cause (:func:`unwritable_reason`), never a bare
``sqlite3`` error; a refused write keeps nothing of its change.

A read-only command (``list``, ``get``, ``resolve``) on a catalog this user cannot write (a snapshot restored
read-only, another user's catalog) opens it ``read_only``: ``mode=ro`` while a ``-wal`` file is there (its
writer's ``-shm`` beside it: SQLite reads the WAL through it, locks and all), else ``mode=ro&immutable=1``
(no ``-shm`` can be created in a folder this user cannot write, and without a WAL the file holds every
commit). Such a connection writes nothing and sets no journal mode.

So does a read-only command on a catalog whose disk refused its open for writing (``full_disk``: full, or a
file size limit; SQLite could not make or grow its ``-wal`` and ``-shm``): ``mode=ro`` while the ``-wal``
holds commits (read through the ``-shm`` a writer left; when SQLite cannot use one, the open fails, with the
cause, rather than read the file without them), else ``mode=ro&immutable=1`` (an empty ``-wal``, such as the
failed open itself leaves, holds no commit).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from skillsearch.core.errors import IndexNotReadyError

__all__ = ["Connections", "close_every_connection", "disk_refused", "opens_read_only", "unwritable_reason", "writable"]


# What the disk or the permissions did when SQLite could not write the catalog (its primary result codes):
# said to the caller in place of the store's own cause ("restore it" would be wrong advice for a full disk).
_UNWRITABLE = {
    sqlite3.SQLITE_FULL: "its disk is full: free space, then run it again",
    sqlite3.SQLITE_IOERR: "its disk failed to write it (full, or a file size limit): free space, then run it again",
    sqlite3.SQLITE_READONLY: "this user cannot write it: the catalog, its folder and the files beside it must be"
                             " writable",
    sqlite3.SQLITE_CANTOPEN: "this user cannot open it for writing: the catalog, its folder and the files beside it"
                             " must be writable",
}


def writable(path: Path) -> bool:
    """Whether this user may write the catalog's file and its folder (SQLite's ``-wal`` and ``-shm`` are made
    there); a catalog it may not write is opened ``read_only`` by a reader."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)


def opens_read_only(path: Path) -> bool:
    """Whether a reader opens the catalog at ``path`` read-only: one is there that this user may not write.
    Any other open may write it (create it, upgrade its schema, seed it) and its folder."""
    return path.is_file() and not writable(path)


def unwritable_reason(exc: sqlite3.Error) -> str | None:
    """What stopped SQLite writing (disk full, an I/O error, permissions), or ``None`` for any other error."""
    code = getattr(exc, "sqlite_errorcode", None)
    return _UNWRITABLE.get(code & 0xFF) if isinstance(code, int) else None


def disk_refused(exc: BaseException | None) -> bool:
    """Whether ``exc`` is SQLite's error for a write the disk refused (full, an I/O error: a file size limit,
    a ``-shm`` it could not grow), as opposed to the permissions or the file's contents."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR)


_LIVE: weakref.WeakSet[Connections] = weakref.WeakSet()


def close_every_connection() -> None:
    """Close every SQLite connection this process opened, any thread's: the last one closed checkpoints the
    WAL into the catalog file and removes it. At exit the interpreter's last garbage collection did this;
    a server that freezes its heap before it exits (``cli/main.py``) calls this first."""
    for connections in list(_LIVE):
        connections.close_all()


class Connections:
    """The connections to the catalog at ``path``; ``functions``: SQL functions of one argument every
    connection gets (deterministic)."""

    def __init__(self, path: Path, functions: Mapping[str, Callable[[Any], Any]], read_only: bool = False,
                 full_disk: bool = False) -> None:
        """``read_only``: writes nothing (a catalog this user cannot write, or, ``full_disk``, whose disk
        refused its open for writing)."""
        self.path = path
        self.functions = dict(functions)
        self.read_only = read_only or full_disk
        self.full_disk = full_disk
        # Until the schema is in place, the first connection may create the file (never a read-only one).
        self.created = read_only
        self._local = threading.local()
        self._write_lock = threading.RLock()
        # Every thread's, for close_all, by the thread that opened it: a thread that ended leaves its connection
        # here (its thread-local is gone), so the next connection opened closes those of ended threads. A
        # server's worker threads come and go (anyio's idle ones end after 10 s): keeping them all held two file
        # descriptors each, for ever, and their read snapshots could hold back the WAL's checkpoints.
        self._opened: dict[threading.Thread, sqlite3.Connection] = {}
        self._opened_lock = threading.Lock()
        _LIVE.add(self)

    def connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            conn.row_factory = sqlite3.Row
            for name, function in self.functions.items():
                conn.create_function(name, 1, function, deterministic=True)
            try:  # SQLite opens the file here, at the first statement (too many files open: this fails)
                if not self.read_only:
                    conn.execute("PRAGMA journal_mode=WAL")
                    conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute("PRAGMA foreign_keys=ON")
            except sqlite3.OperationalError as exc:
                conn.close()
                raise self._unopenable(exc) from exc
            self._local.conn = conn
            with self._opened_lock:
                ended = [t for t in self._opened if not t.is_alive()]
                orphans = [self._opened.pop(t) for t in ended]
                self._opened[threading.current_thread()] = conn
            for orphan in orphans:
                orphan.close()
        return conn

    def _connect(self) -> sqlite3.Connection:
        """A new connection (one a thread). Once the catalog exists, never one that creates it: a file
        deleted under a server would otherwise come back empty in the next thread ("no such table", a 500),
        and an empty catalog is seeded with the sample at the next start."""
        if not self.created:
            return sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        mode = "rw"
        if self.read_only:
            wal = self.path.with_name(self.path.name + "-wal")
            mode = "ro" if wal.exists() and (not self.full_disk or wal.stat().st_size > 0) else "ro&immutable=1"
        try:
            return sqlite3.connect(f"{self.path.absolute().as_uri()}?mode={mode}", uri=True, timeout=30.0,
                                   isolation_level=None, check_same_thread=False)
        except sqlite3.OperationalError as exc:
            if not self.path.exists():
                raise IndexNotReadyError(
                    f"the catalog {self.path} is gone (deleted while in use?): put it back (`skillsearch snapshot"
                    " restore`), then restart", {"path": str(self.path), "reason": "missing"},
                ) from exc
            raise self._unopenable(exc) from exc

    def _unopenable(self, exc: sqlite3.OperationalError) -> IndexNotReadyError:
        return IndexNotReadyError(
            f"the catalog {self.path} cannot be opened ({exc}); "
            f"{unwritable_reason(exc) or 'too many files open? try again'}",
            {"path": str(self.path)},
        )

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; nested use joins the outer one. Rolls back on any exception, a failed
        ``COMMIT`` included (SQLite may or may not have rolled back already: a full disk does, so a second
        ``ROLLBACK`` would hide the cause). A write the disk or the permissions refused is
        :class:`IndexNotReadyError` naming the catalog's file and the cause; nothing of it was kept."""
        conn = self.connection()
        if conn.in_transaction:
            yield conn
            return
        with self._write_lock:
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        try:
                            conn.execute("ROLLBACK")
                        except sqlite3.Error:  # must not hide the cause; the connection goes, the next is new
                            self.close()
                    raise
            except sqlite3.OperationalError as exc:
                reason = unwritable_reason(exc)
                if reason is None:
                    raise
                raise IndexNotReadyError(
                    f"the catalog {self.path} could not be written ({exc}); nothing of this change was kept: {reason}",
                    {"path": str(self.path), "reason": "unwritable"},
                ) from exc

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """Inside a transaction: a block that is undone alone when it raises. A constraint the block broke
        (a slug taken in the same grant, ...) comes out as ``ValueError`` with the store's reason."""
        conn = self.connection()
        conn.execute("SAVEPOINT block")
        try:
            yield
        except sqlite3.IntegrityError as exc:
            conn.execute("ROLLBACK TO block")
            conn.execute("RELEASE block")
            raise ValueError(f"the catalog refused it: {exc}") from None
        except BaseException:
            conn.execute("ROLLBACK TO block")
            conn.execute("RELEASE block")
            raise
        conn.execute("RELEASE block")

    def close(self) -> None:
        """This thread's connection."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
            with self._opened_lock:
                self._opened = {t: c for t, c in self._opened.items() if c is not conn}

    def close_all(self) -> None:
        """Every thread's connection (a thread that uses its own again after this gets an error)."""
        with self._opened_lock:
            opened, self._opened = list(self._opened.values()), {}
        for conn in opened:
            conn.close()
