"""A consistent copy of a live catalog: SQLite's online backup API (``Connection.backup``).

The copy is taken in one step, inside one read transaction of the source, so it is the catalog exactly as
of one commit even while another process writes (WAL readers never block writers). It is written as a
single self-contained file (rollback journal, no ``-wal``) so that one digest covers it; the store turns
WAL on again when it opens the file. The sync cursors live in the same file, so they come along and match
the content they describe.

A write of the copy that the system refuses (a full disk, a file size limit) is an ``OSError`` naming the
copy with the error number SQLite's result code stands for, so that the caller says what to do about that
cause; only a failure to read the source blames the source.
"""

from __future__ import annotations

import errno
import os
import resource
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from skillsearch.core.errors import IndexNotReadyError

__all__ = ["CatalogCopy", "backup_catalog", "catalog_generation"]


@dataclass(frozen=True)
class CatalogCopy:
    """What a copy holds: its store generation, its skill count and each sync source's cursor."""

    generation: int
    skills: int
    cursors: dict[str, str | None]


def _connect(path: Path) -> sqlite3.Connection:
    if not path.is_file():
        raise IndexNotReadyError(f"there is no catalog at {path}", {"path": str(path)})
    return sqlite3.connect(path, timeout=30.0, isolation_level=None)


def _generation(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
    return int(row[0]) if row else 0


def catalog_generation(path: Path) -> int:
    """The store generation of the catalog file at ``path`` now."""
    conn = _connect(path)
    try:
        return _generation(conn)
    except sqlite3.DatabaseError as exc:
        raise IndexNotReadyError(f"the catalog {path} cannot be read ({exc})", {"path": str(path)}) from exc
    finally:
        conn.close()


# SQLite's extended result codes for a write of the copy that failed ("disk I/O error"); SQLITE_FULL is a full disk.
_WRITE_FAILED = {sqlite3.SQLITE_IOERR_WRITE, sqlite3.SQLITE_IOERR_FSYNC, sqlite3.SQLITE_IOERR_TRUNCATE}


def _refused_write(src: sqlite3.Connection, dest: Path, exc: sqlite3.DatabaseError) -> OSError | None:
    """The system's refusal of a write of the copy ``dest`` that ``exc`` reports, as the ``OSError`` it was
    (SQLite keeps the error number to itself): ``ENOSPC`` for a full disk, ``EFBIG`` where the catalog is
    larger than this process's file size limit (``ulimit -f``), else ``EIO``. None for any other failure."""
    def refused(number: int) -> OSError:
        return OSError(number, os.strerror(number), str(dest))

    code = getattr(exc, "sqlite_errorcode", None)
    if code == sqlite3.SQLITE_FULL:
        return refused(errno.ENOSPC)
    if code not in _WRITE_FAILED:
        return None
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    try:
        size = int(src.execute("PRAGMA page_count").fetchone()[0]) * int(src.execute("PRAGMA page_size").fetchone()[0])
    except sqlite3.DatabaseError:
        size = 0
    return refused(errno.EFBIG if limit != resource.RLIM_INFINITY and size > limit else errno.EIO)


def backup_catalog(source: Path, dest: Path) -> CatalogCopy:
    """Copy the catalog at ``source`` into a new file ``dest`` while others may write it. A write of ``dest``
    the system refuses is an ``OSError`` naming ``dest`` (:func:`_refused_write`); a source that cannot be
    read, :class:`IndexNotReadyError` naming the source."""
    src = _connect(source)
    try:
        out = sqlite3.connect(dest, isolation_level=None)
        try:
            src.backup(out)  # pages=-1: all in one step, one read transaction: one commit's state
            out.execute("PRAGMA journal_mode=DELETE")
            cursors = {str(r[0]): r[1] for r in out.execute("SELECT source, cursor FROM sync_state ORDER BY source")}
            skills = int(out.execute("SELECT COUNT(*) FROM skills").fetchone()[0])
            return CatalogCopy(_generation(out), skills, cursors)
        finally:
            out.close()
    except sqlite3.DatabaseError as exc:
        refused = _refused_write(src, dest, exc)
        if refused is not None:
            raise refused from exc
        raise IndexNotReadyError(f"the catalog {source} cannot be copied ({exc})", {"path": str(source)}) from exc
    finally:
        src.close()
