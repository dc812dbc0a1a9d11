"""The SQLite catalog (design section 2): skills, immutable revisions, resources, revocations.

One file, WAL mode, a connection per thread. Every write goes through :meth:`CatalogStore.transaction`,
so a batch lands whole or not at all. The sync bookkeeping (cursors, listed ids, webhook events) shares
the file, the connection and the transactions, but lives in :mod:`skillsearch.catalog.sync_state`
(``store.sync``); the rows become domain objects in :mod:`skillsearch.catalog.rows`. There is no
authoring API: content arrives as :class:`SkillContent` from import or sync, and new content always makes a
new revision.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from skillsearch.catalog.connections import Connections, disk_refused, opens_read_only, unwritable_reason
from skillsearch.catalog.rows import (
    SKILL_COLUMNS,
    IndexRow,
    index_row_from_row,
    resource_from_row,
    revision_from_row,
    skill_from_row,
)
from skillsearch.catalog.schema import NAME_KEY_TRIGGERS, ensure_name_keys
from skillsearch.catalog.schema import SCHEMA as CATALOG_SCHEMA
from skillsearch.catalog.sync_state import SCHEMA as SYNC_SCHEMA
from skillsearch.catalog.sync_state import SyncLedger
from skillsearch.core.confusables import skeleton
from skillsearch.core.domain import Resource, Revision, Skill, SkillContent, tag_key
from skillsearch.core.errors import IndexNotReadyError
from skillsearch.core.hashing import canonical_hash, revision_body, sha256_hex, stable_id

__all__ = ["CatalogStore", "UpsertOutcome", "utc_now"]

UpsertOutcome = Literal["created", "updated", "unchanged"]


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


class CatalogStore:
    """The local catalog in ``<data_dir>/catalog.sqlite3``."""

    FILENAME = "catalog.sqlite3"

    def __init__(self, path: Path, reads_only: bool = False) -> None:
        """``reads_only``: the caller only reads (``list``, ``get``, ``resolve``, ``search``); a catalog this user
        cannot write (the file, or its folder, where SQLite keeps its ``-wal`` and ``-shm``) is then opened
        read-only (``read_only``), as it is: no schema upgrade, no name keys given. So is one whose open for
        writing the disk refused (full, a file size limit: ``full_disk``), which a read needs no write for."""
        self.path = Path(path)
        self.read_only = reads_only and opens_read_only(self.path)
        self.full_disk = False
        if not self.read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.sync = SyncLedger(self)
        try:
            self._open()
        except IndexNotReadyError as exc:
            if not (reads_only and not self.read_only and self.path.is_file() and disk_refused(exc.__cause__)):
                raise
            self.read_only = self.full_disk = True
            self._open()

    def _open(self) -> None:
        self._db = Connections(self.path, {"tag_key": _tag_key}, read_only=self.read_only, full_disk=self.full_disk)
        try:
            if self.read_only:
                self.connection().execute("SELECT 1 FROM skills LIMIT 1").fetchall()
            else:
                self.connection().executescript(CATALOG_SCHEMA + SYNC_SCHEMA)
                self.ensure_name_keys()
                self.connection().executescript(NAME_KEY_TRIGGERS)
                self._db.created = True
        except sqlite3.DatabaseError as exc:
            self.close()
            advice = unwritable_reason(exc) or "restore it or point --data-dir elsewhere"
            raise IndexNotReadyError(
                f"the catalog {self.path} cannot be opened ({exc}); {advice}", {"path": str(self.path)},
            ) from exc
        except IndexNotReadyError:  # SQLite could not open it, or a write (name keys) was refused
            self.close()
            raise

    def ensure_name_keys(self) -> None:
        """Give every skill its ``name_key`` (``schema.ensure_name_keys``); a no-op when every key is current."""
        ensure_name_keys(self)

    @classmethod
    def in_dir(cls, data_dir: Path, reads_only: bool = False) -> CatalogStore:
        return cls(Path(data_dir) / cls.FILENAME, reads_only)

    # -- connections and transactions (catalog/connections.py) -------------------------------------

    def connection(self) -> sqlite3.Connection:
        return self._db.connection()

    def transaction(self) -> AbstractContextManager[sqlite3.Connection]:
        """One write transaction (``Connections.transaction``): nested use joins the outer one; a write the
        disk or the permissions refused is :class:`IndexNotReadyError` and keeps nothing."""
        return self._db.transaction()

    def savepoint(self) -> AbstractContextManager[None]:
        return self._db.savepoint()

    def close(self) -> None:
        self._db.close()

    # -- writes -----------------------------------------------------------------------------------

    def upsert(self, content: SkillContent, now: str | None = None) -> UpsertOutcome:
        """Store ``content`` as the skill's current revision. Unchanged content makes no new revision."""
        now = now or utc_now()
        resources = [
            r.model_copy(update={"sha256": sha256_hex(r.content), "size": len(r.content)}) for r in content.resources
        ]
        chash = canonical_hash(content.revision, resources)
        revision_id = self.revision_id_of(content, chash)
        rev = content.revision
        with self.transaction() as conn:
            existing = conn.execute(
                f"SELECT {SKILL_COLUMNS} FROM skills WHERE skill_id = ?", (content.skill_id,)
            ).fetchone()
            if existing is not None and existing["current_revision_id"] == revision_id and (
                existing["status"] == "active"
                and existing["grant_key"] == content.grant
                and existing["slug"] == content.slug
                and existing["source"] == content.source
            ):
                return "unchanged"
            known = conn.execute("SELECT 1 FROM revisions WHERE revision_id = ?", (revision_id,)).fetchone()
            if known is None:
                conn.execute(
                    "INSERT INTO revisions (revision_id, skill_id, version, created_at, canonical_hash, body)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (revision_id, content.skill_id, rev.version, rev.created_at or now, chash,
                     json.dumps(revision_body(rev))),
                )
                conn.executemany(
                    "INSERT INTO resources (resource_id, revision_id, path, kind, media_type, size, sha256, content)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (stable_id("res", revision_id, r.path), revision_id, r.path, r.kind, r.media_type,
                         r.size, r.sha256, r.content)
                        for r in resources
                    ],
                )
            values = (
                content.slug, rev.name, rev.description, rev.kind, json.dumps(list(rev.tags)), content.grant,
                revision_id, now, content.source, skeleton(rev.name), content.skill_id,
            )
            if existing is None:
                conn.execute(
                    "INSERT INTO skills (slug, name, description, kind, tags, grant_key, status,"
                    " current_revision_id, updated_at, source, name_key, skill_id)"
                    " VALUES (?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, ?, ?)",
                    values,
                )
                self._bump(conn)
                return "created"
            conn.execute(
                "UPDATE skills SET slug = ?, name = ?, description = ?, kind = ?, tags = ?, grant_key = ?,"
                " status = 'active', current_revision_id = ?, updated_at = ?, source = ?, name_key = ?"
                " WHERE skill_id = ?",
                values,
            )
            self._bump(conn)
            return "updated"

    @staticmethod
    def revision_id_of(content: SkillContent, chash: str | None = None) -> str:
        """The id ``content`` gets as a revision: the same content of the same skill gives the same id."""
        return stable_id("rev", content.skill_id, chash or canonical_hash(content.revision, content.resources))

    def archive(self, skill_id: str, now: str | None = None) -> bool:
        with self.transaction() as conn:
            cur = conn.execute(
                "UPDATE skills SET status = 'archived', updated_at = ? WHERE skill_id = ? AND status != 'archived'",
                (now or utc_now(), skill_id),
            )
            if cur.rowcount:
                self._bump(conn)
            return cur.rowcount > 0

    def delete(self, skill_id: str) -> bool:
        """Remove a skill and everything it had (an upstream delete, not an archive)."""
        with self.transaction() as conn:
            cur = conn.execute("DELETE FROM skills WHERE skill_id = ?", (skill_id,))
            conn.execute(
                "DELETE FROM resources WHERE revision_id IN (SELECT revision_id FROM revisions WHERE skill_id = ?)",
                (skill_id,),
            )
            conn.execute("DELETE FROM revisions WHERE skill_id = ?", (skill_id,))
            if cur.rowcount:
                self._bump(conn)
            return cur.rowcount > 0

    def set_revoked(self, subscription_id: str, revoked: bool, now: str | None = None) -> None:
        with self.transaction() as conn:
            if revoked:
                conn.execute(
                    "INSERT OR IGNORE INTO revoked_subscriptions (subscription_id, revoked_at) VALUES (?, ?)",
                    (subscription_id, now or utc_now()),
                )
            else:
                conn.execute("DELETE FROM revoked_subscriptions WHERE subscription_id = ?", (subscription_id,))
            self._bump(conn)

    def _bump(self, conn: sqlite3.Connection) -> None:
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('generation', '1')"
            " ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1"
        )
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('changed_at', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (utc_now(),),
        )

    def revoked_at(self, subscription_id: str) -> str | None:
        row = self.connection().execute(
            "SELECT revoked_at FROM revoked_subscriptions WHERE subscription_id = ?", (subscription_id,)
        ).fetchone()
        return str(row["revoked_at"]) if row else None

    # -- reads ------------------------------------------------------------------------------------

    def generation(self) -> int:
        row = self.connection().execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return int(row["value"]) if row else 0

    def revoked_subscriptions(self) -> frozenset[str]:
        rows = self.connection().execute("SELECT subscription_id FROM revoked_subscriptions").fetchall()
        return frozenset(r["subscription_id"] for r in rows)

    def grants(self) -> list[str]:
        return [r[0] for r in self.connection().execute("SELECT DISTINCT grant_key FROM skills ORDER BY grant_key")]

    def count(self, status: str | None = None) -> int:
        if status is None:
            return int(self.connection().execute("SELECT COUNT(*) FROM skills").fetchone()[0])
        return int(self.connection().execute("SELECT COUNT(*) FROM skills WHERE status = ?", (status,)).fetchone()[0])

    def skill(self, skill_id: str) -> Skill | None:
        row = self.connection().execute(f"SELECT {SKILL_COLUMNS} FROM skills WHERE skill_id = ?", (skill_id,)).fetchone()
        return skill_from_row(row) if row else None

    def skill_by_slug(self, grant: str, slug: str) -> Skill | None:
        row = self.connection().execute(f"SELECT {SKILL_COLUMNS} FROM skills WHERE grant_key = ? AND slug = ?",
                                        (grant, slug)).fetchone()
        return skill_from_row(row) if row else None

    def skill_named(self, grant: str, name: str) -> Skill | None:
        """The skill of ``grant`` whose name reads as ``name`` (one skeleton; a grant's names never look alike)."""
        row = self.connection().execute(f"SELECT {SKILL_COLUMNS} FROM skills WHERE grant_key = ? AND name_key = ?"
                                        " ORDER BY skill_id LIMIT 1", (grant, skeleton(name))).fetchone()
        return skill_from_row(row) if row else None

    def slugs_spelt_like(self, grant: str, pattern: str) -> list[str]:
        """The slugs of ``grant`` that the SQL ``LIKE`` pattern matches, in order."""
        rows = self.connection().execute("SELECT slug FROM skills WHERE grant_key = ? AND slug LIKE ? ORDER BY slug",
                                         (grant, pattern)).fetchall()
        return [str(r[0]) for r in rows]

    def current_revisions_without(self, body_key: str, done_key: str) -> int:
        """How many current revisions have no ``body_key`` in their body. Once none has, ``done_key`` is
        recorded in ``meta`` and later calls answer 0 without counting (a read-only or busy catalog records
        it at a later open)."""
        conn = self.connection()
        if conn.execute("SELECT 1 FROM meta WHERE key = ?", (done_key,)).fetchone():
            return 0
        count = int(conn.execute(
            "SELECT COUNT(*) FROM skills s JOIN revisions r ON r.revision_id = s.current_revision_id"
            " WHERE json_type(r.body, ?) IS NULL", (f"$.{body_key}",)
        ).fetchone()[0])
        if not count:
            with suppress(sqlite3.Error):  # a read-only or busy catalog: counted again at the next open
                conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES (?, '1')", (done_key,))
        return count

    def look_alike(self, grant: str, skill_id: str, name: str) -> tuple[str, str] | None:
        """(skill id, name) of another skill of ``grant`` whose different name looks like ``name`` (the
        same skeleton, ``core.confusables``); one indexed lookup, whatever the grant's size."""
        row = self.connection().execute(
            "SELECT skill_id, name FROM skills WHERE grant_key = ? AND name_key = ? AND skill_id != ? AND name != ?"
            " ORDER BY skill_id LIMIT 1",
            (grant, skeleton(name), skill_id, name),
        ).fetchone()
        return (row[0], row[1]) if row else None

    def skills_by_slug(self, slug: str) -> list[Skill]:
        rows = self.connection().execute(
            f"SELECT {SKILL_COLUMNS} FROM skills WHERE slug = ? ORDER BY grant_key", (slug,)
        ).fetchall()
        return [skill_from_row(r) for r in rows]

    def skills(self, skill_ids: Sequence[str]) -> dict[str, Skill]:
        """Many skills in one round trip (the search path asks once per query, never per hit)."""
        out: dict[str, Skill] = {}
        ids = list(dict.fromkeys(skill_ids))
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self.connection().execute(
                f"SELECT {SKILL_COLUMNS} FROM skills WHERE skill_id IN ({marks})", chunk
            ):
                out[row["skill_id"]] = skill_from_row(row)
        return out

    def skill_ids_of_source(self, source: str) -> list[str]:
        return [r[0] for r in self.connection().execute("SELECT skill_id FROM skills WHERE source = ?", (source,))]

    def list_page(
        self,
        grants: Iterable[str],
        *,
        kind: str | None = None,
        tags: Sequence[str] = (),
        after: tuple[str, str] | None = None,
        limit: int = 50,
    ) -> list[Skill]:
        """Active skills of the given grants ordered by (name, skill_id), keyset-paged after ``after``."""
        grant_list = list(grants)
        if not grant_list:
            return []
        clauses = [f"status = 'active' AND grant_key IN ({','.join('?' * len(grant_list))})"]
        params: list[Any] = list(grant_list)
        if kind:
            clauses.append("kind = ?")
            params.append(kind)
        for tag in tags:
            clauses.append("EXISTS (SELECT 1 FROM json_each(skills.tags) WHERE tag_key(json_each.value) = ?)")
            params.append(tag_key(tag))
        if after is not None:
            clauses.append("(name, skill_id) > (?, ?)")
            params.extend(after)
        params.append(limit)
        rows = self.connection().execute(
            f"SELECT {SKILL_COLUMNS} FROM skills WHERE {' AND '.join(clauses)} ORDER BY name, skill_id LIMIT ?",
            params,
        ).fetchall()
        return [skill_from_row(r) for r in rows]

    def revision(self, revision_id: str) -> Revision | None:
        row = self.connection().execute("SELECT * FROM revisions WHERE revision_id = ?", (revision_id,)).fetchone()
        return revision_from_row(row) if row else None

    def revisions_of(self, skill_id: str) -> list[Revision]:
        rows = self.connection().execute(
            "SELECT * FROM revisions WHERE skill_id = ? ORDER BY created_at, revision_id", (skill_id,)
        ).fetchall()
        return [revision_from_row(r) for r in rows]

    def resources(self, revision_id: str, with_content: bool = False) -> list[Resource]:
        rows = self.connection().execute(
            "SELECT * FROM resources WHERE revision_id = ? ORDER BY path", (revision_id,)
        ).fetchall()
        return [resource_from_row(r, with_content) for r in rows]

    def resource(self, revision_id: str, path_or_id: str) -> Resource | None:
        row = self.connection().execute(
            "SELECT * FROM resources WHERE revision_id = ? AND (path = ? OR resource_id = ?)",
            (revision_id, path_or_id, path_or_id),
        ).fetchone()
        return resource_from_row(row, True) if row else None

    def index_rows(self, skill_ids: Sequence[str] | None = None) -> Iterator[IndexRow]:
        """Active skills with their current revision's text, for (re)building the search index."""
        sql = (
            "SELECT s.skill_id, s.slug, s.grant_key, s.kind, s.tags, s.name, s.description, r.body,"
            " r.canonical_hash FROM skills s JOIN revisions r ON r.revision_id = s.current_revision_id"
            " WHERE s.status = 'active'"
        )
        params: list[Any] = []
        if skill_ids is not None:
            if not skill_ids:
                return
            sql += f" AND s.skill_id IN ({','.join('?' * len(skill_ids))})"
            params = list(skill_ids)
        for row in self.connection().execute(sql + " ORDER BY s.skill_id", params):
            yield index_row_from_row(row)


def _tag_key(value: str | int | float | bytes | None) -> str | int | float | bytes | None:
    """SQLite's ``tag_key()``: ``core.domain.tag_key`` for text (SQLite's own ``lower`` folds ASCII only)."""
    return tag_key(value) if isinstance(value, str) else value
