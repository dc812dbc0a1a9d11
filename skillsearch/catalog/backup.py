"""A consistent copy of a live catalog: SQLite's online backup API (``Connection.backup``).

The copy is taken in one step, inside one read transaction of the source, so it is the catalog exactly as
of one commit even while another process writes (WAL readers never block writers). It is written as a
single self-contained file (rollback journal, no ``-wal``) so that one digest covers it; the store turns
WAL on again when it opens the file. The sync cursors live in the same file, so they come along and match
the content they describe.
"""

from __future__ import annotations

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


def backup_catalog(source: Path, dest: Path) -> CatalogCopy:
    """Copy the catalog at ``source`` into a new file ``dest`` while others may write it."""
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
        raise IndexNotReadyError(f"the catalog {source} cannot be copied ({exc})", {"path": str(source)}) from exc
    finally:
        src.close()
