"""The one exact-name rule (docs/rules.md): a visible skill whose slug is the request written as a slug, or a
lexical leader named exactly like the request, ranks above every other candidate. Kept as a contract
(every sample skill ranks first for its exact name and its slug), not as a relevance rule.

A request is written as a slug by the importer's own ``slugify``, which keeps ASCII letters and digits only
(NFKD first): an accent falls away (``résumé builder`` is ``resume-builder``, as a user types it without
them), but so does every letter with no ASCII decomposition, so ``SvelteKitでフォームを作る`` would be
``sveltekit``. Such a request is not that skill's name: a request names a slug only when slugify drops none
of its letters or digits (:func:`request_slug`)."""

from __future__ import annotations

import unicodedata

import numpy as np

from skillsearch.catalog.read_cache import SkillReads
from skillsearch.core.domain import Principal
from skillsearch.core.visibility import is_visible
from skillsearch.retrieval.indexer import IndexSnapshot

__all__ = ["exact_name_first", "named_rows", "request_slug", "same_name"]

_NONE = np.zeros(0, np.int64)
# Only short requests are looked up as a slug (a slug has 64 characters).
_MAX_SLUG_REQUEST = 80


def _dropped(ch: str) -> bool:
    """Whether slugify drops this letter or digit whole: its NFKD holds no ASCII letter or digit (``漢``,
    ``ж``, ``ß``, ``ø``), unlike an accented or full-width Latin one (``é`` -> ``e``, a full-width ``S`` -> ``S``)."""
    return (not ch.isascii() and ch.isalnum()
            and not any(c.isascii() and c.isalnum() for c in unicodedata.normalize("NFKD", ch)))


def request_slug(query: str) -> str:
    """The slug a request names: the request written as a slug by the importer's ``slugify``, or ``""`` when
    it is too long for one or holds a letter or digit slugify would drop (the rest is not what was asked)."""
    from skillsearch.catalog.importer import slugify  # the importer's own rule; not imported at start-up

    if len(query) > _MAX_SLUG_REQUEST or any(_dropped(ch) for ch in query):
        return ""
    return slugify(query)


def named_rows(
    query: str, store: SkillReads, snapshot: IndexSnapshot, principal: Principal, revoked: frozenset[str],
) -> np.ndarray:
    """The vector rows of the visible skills whose slug is the request written as a slug (``Django Pro``,
    ``django-pro``; :func:`request_slug`)."""
    slug = request_slug(query)
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
