"""When the catalog changed, and for whom: the reads behind "the skills you can see changed".

The store bumps its generation and records ``changed_at`` in the same statement group on every write (see
``CatalogStore._bump``); these reads give a surface what it needs to tell a caller to re-list.
"""

from __future__ import annotations

from typing import Any

from skillsearch.catalog.store import CatalogStore
from skillsearch.core.domain import Principal
from skillsearch.core.visibility import visible_grants

__all__ = ["change_marks", "changed_at", "visible_mark"]


def changed_at(store: CatalogStore) -> str | None:
    """When the catalog last changed (any write that moved the generation)."""
    row = store.connection().execute("SELECT value FROM meta WHERE key = 'changed_at'").fetchone()
    return str(row["value"]) if row else None


def change_marks(store: CatalogStore) -> dict[str, tuple[int, int, str]]:
    """Per grant: (skills, active skills, latest ``updated_at``). A grant's mark moves whenever one of its
    skills is added, changed, archived or removed, so comparing marks tells who may see a change."""
    rows = store.connection().execute(
        "SELECT grant_key, COUNT(*), SUM(status = 'active'), MAX(updated_at) FROM skills GROUP BY grant_key"
    ).fetchall()
    return {r[0]: (int(r[1]), int(r[2] or 0), str(r[3])) for r in rows}


def visible_mark(store: CatalogStore, principal: Principal) -> tuple[Any, ...]:
    """The marks of the grants ``principal`` can see now: it moves whenever a skill they can (or could)
    see is added, changed, withdrawn, or hidden by a revocation, and never for another grant's change."""
    marks = change_marks(store)
    grants = visible_grants(principal, marks, store.revoked_subscriptions())
    return tuple(sorted((g, marks[g]) for g in grants if g in marks))
