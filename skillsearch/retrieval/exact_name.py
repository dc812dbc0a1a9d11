"""The one exact-name rule (docs/rules.md): a visible skill whose slug is the request written as a slug, or a
lexical leader named exactly like the request, ranks above every other candidate. Kept as a contract
(every sample skill ranks first for its exact name and its slug), not as a relevance rule."""

from __future__ import annotations

import numpy as np

from skillsearch.catalog.read_cache import SkillReads
from skillsearch.core.domain import Principal
from skillsearch.core.visibility import is_visible
from skillsearch.retrieval.indexer import IndexSnapshot

__all__ = ["exact_name_first", "named_rows", "same_name"]

_NONE = np.zeros(0, np.int64)


def named_rows(
    query: str, store: SkillReads, snapshot: IndexSnapshot, principal: Principal, revoked: frozenset[str],
) -> np.ndarray:
    """The vector rows of the visible skills whose slug is the request written as a slug (``Django Pro``,
    ``django-pro``). Only short requests are looked up (a slug has 64 characters)."""
    from skillsearch.catalog.importer import slugify  # the importer's own rule; not imported at start-up

    slug = slugify(query) if len(query) <= 80 else ""
    if not slug:
        return _NONE
    found = [snapshot.vectors.row_of(s.skill_id) for s in store.skills_by_slug(slug)
             if is_visible(s.status, s.grant, principal, revoked)]
    return np.asarray([r for r in found if r is not None], np.int64)


def same_name(name: str, query: str) -> bool:
    return bool(name) and " ".join(name.split()).casefold() == " ".join(query.split()).casefold()


def exact_name_first(rows: np.ndarray, fused: np.ndarray, named: np.ndarray) -> np.ndarray:
    """The one exact-name rule: the candidates among ``named`` (:func:`named_rows`) score above every other
    candidate; several such skills (one slug in several grants) keep their fused order among themselves."""
    where = np.flatnonzero(np.isin(rows, named)) if named.size else named
    if where.size == 0:
        return fused
    out = fused.copy()
    out[where] += float(fused.max() - fused.min()) + 1.0
    return out
