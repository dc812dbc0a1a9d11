"""The catalog's tables (``catalog.sqlite3``), created if missing when :class:`CatalogStore` opens the file.

``skills.name_key`` is the name's look-alike skeleton (``core.confusables.skeleton``), indexed with the
grant, so an import finds a look-alike name with one lookup instead of folding every name of the grant.
A catalog written before the column, or by another version of the skeleton, gets it filled in when it is
opened (:func:`ensure_name_keys`).

``skills_by_slug`` serves the search's exact-name lookup (a request written as a slug, in any grant): the
``UNIQUE (grant_key, slug)`` index starts with the grant, so without it that lookup read the whole table, 0.1
to 1 s per short request at 1M skills (docs/benchmarks.md, "Lexical at 1M"). An older catalog gets it when
opened.

A version from before ``name_key`` that writes the catalog again (a rollback after an upgrade) inserts a skill
with no key (the column's default, ``''``) and renames one without changing its key, while the meta row still
says every key is current: that skill would then pass the look-alike check. The triggers of
``NAME_KEY_TRIGGERS`` live in the file, so they run in that version's writes too: such a write deletes the
meta row, and the next open keys every name again. A rename by this version that keeps the skeleton (a
change of case) sets them off as well, which costs the next open that one pass (1.2 s at 100k skills)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from skillsearch.core.confusables import SKELETON_VERSION, skeleton

if TYPE_CHECKING:
    from skillsearch.catalog.sync_state import Connected

__all__ = ["NAME_KEY_INDEX", "NAME_KEY_TRIGGERS", "SCHEMA", "ensure_name_keys"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS skills (
    skill_id TEXT PRIMARY KEY,
    slug TEXT NOT NULL,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    kind TEXT NOT NULL,
    tags TEXT NOT NULL,
    grant_key TEXT NOT NULL,
    status TEXT NOT NULL,
    current_revision_id TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    source TEXT NOT NULL,
    name_key TEXT NOT NULL DEFAULT '',
    UNIQUE (grant_key, slug)
);
CREATE INDEX IF NOT EXISTS skills_by_name ON skills (grant_key, name, skill_id);
CREATE INDEX IF NOT EXISTS skills_by_slug ON skills (slug);
CREATE TABLE IF NOT EXISTS revisions (
    revision_id TEXT PRIMARY KEY,
    skill_id TEXT NOT NULL,
    version TEXT NOT NULL,
    created_at TEXT NOT NULL,
    canonical_hash TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS revisions_by_skill ON revisions (skill_id, created_at);
CREATE TABLE IF NOT EXISTS resources (
    resource_id TEXT PRIMARY KEY,
    revision_id TEXT NOT NULL,
    path TEXT NOT NULL,
    kind TEXT NOT NULL,
    media_type TEXT NOT NULL,
    size INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    content BLOB NOT NULL,
    UNIQUE (revision_id, path)
);
CREATE TABLE IF NOT EXISTS revoked_subscriptions (
    subscription_id TEXT PRIMARY KEY,
    revoked_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

# Created after the column exists (a catalog from before it gets the column first).
NAME_KEY_INDEX = "CREATE INDEX IF NOT EXISTS skills_by_name_key ON skills (grant_key, name_key)"

# Created after the column exists, at every open (a catalog keyed before the triggers existed gets them too).
NAME_KEY_TRIGGERS = """
CREATE TRIGGER IF NOT EXISTS skills_name_key_unset AFTER INSERT ON skills WHEN NEW.name_key = ''
BEGIN DELETE FROM meta WHERE key = 'name_key_version'; END;
CREATE TRIGGER IF NOT EXISTS skills_name_key_kept AFTER UPDATE OF name ON skills
WHEN NEW.name <> OLD.name AND NEW.name_key = OLD.name_key
BEGIN DELETE FROM meta WHERE key = 'name_key_version'; END;
"""


def ensure_name_keys(store: Connected) -> None:
    """Give every skill of ``store`` its ``name_key`` (the look-alike skeleton of its name) when the catalog was
    written before the column existed or by another version of the skeleton; a no-op otherwise."""
    if _name_keys_current(store):
        return
    with store.transaction() as conn:
        if _name_keys_current(store):  # another process did it while this one waited
            return
        if "name_key" not in {r[1] for r in conn.execute("PRAGMA table_info(skills)")}:
            conn.execute("ALTER TABLE skills ADD COLUMN name_key TEXT NOT NULL DEFAULT ''")
        rows = conn.execute("SELECT skill_id, name FROM skills").fetchall()
        conn.executemany("UPDATE skills SET name_key = ? WHERE skill_id = ?", [(skeleton(r[1]), r[0]) for r in rows])
        conn.execute(NAME_KEY_INDEX)
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('name_key_version', ?)"
            " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (SKELETON_VERSION,),
        )


def _name_keys_current(store: Connected) -> bool:
    row = store.connection().execute("SELECT value FROM meta WHERE key = 'name_key_version'").fetchone()
    return row is not None and row[0] == SKELETON_VERSION
