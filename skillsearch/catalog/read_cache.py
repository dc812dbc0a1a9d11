"""The search path's store reads, shared by every request while the store's generation holds.

A search re-checks its hits against the store (status, grant, revocation) because the index may lag the
store by a batch. Every write to the store (an upsert, an archive, a removal, a revocation) moves its
generation in the same transaction (``CatalogStore._bump``), so what a read returns cannot change while the
generation stays: the rows, the revoked subscriptions and the slug lookups of one generation can be kept
and handed to the next request that read the same generation, as the result cache already hands out whole
answers (``service.Catalog.search``). Under load this removed two SQL queries and their row steps from every
search: each step gives up the GIL and waits to take it back (docs/benchmarks.md, "Serving under load").

Correctness rests on two rules, both under one lock: a generation newer than the kept one empties the
cache, and a read made under an older generation than the kept one goes to the store and keeps nothing;
values are read from the store after the caller read its generation, so nothing older than a kept
generation is ever kept under it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol

from skillsearch.catalog.store import CatalogStore
from skillsearch.core.domain import Skill

__all__ = ["GenerationReads", "ReadsAt", "SkillReads"]


class SkillReads(Protocol):
    """The store reads a search makes (a :class:`CatalogStore` is one, a :class:`ReadsAt` another)."""

    def skills(self, skill_ids: Sequence[str]) -> dict[str, Skill]: ...

    def skills_by_slug(self, slug: str) -> list[Skill]: ...

    def revoked_subscriptions(self) -> frozenset[str]: ...


class GenerationReads:
    """Kept reads of ``store`` for the newest generation asked about; at most ``size`` skills and slugs."""

    def __init__(self, store: CatalogStore, size: int = 8192) -> None:
        self.store, self.size = store, size
        self._lock = threading.Lock()
        self._generation = -1
        self._skills: dict[str, Skill | None] = {}
        self._slugs: dict[str, list[Skill]] = {}
        self._revoked: frozenset[str] | None = None

    def at(self, generation: int) -> ReadsAt:
        """The reads as of ``generation`` (read from the store by the caller, before any of these)."""
        return ReadsAt(self, generation)

    def _usable(self, generation: int) -> bool:
        """Under the lock: whether ``generation`` may use and fill the cache (emptied for a newer one)."""
        if generation > self._generation:
            self._generation = generation
            self._skills, self._slugs, self._revoked = {}, {}, None
        return generation == self._generation

    def skills(self, skill_ids: Sequence[str], generation: int) -> dict[str, Skill]:
        ids = list(dict.fromkeys(skill_ids))
        with self._lock:
            usable = self._usable(generation)
            known = {i: self._skills[i] for i in ids if i in self._skills} if usable else {}
        missing = [i for i in ids if i not in known]
        fetched = self.store.skills(missing) if missing else {}
        if usable and missing:
            with self._lock:
                if self._generation == generation:
                    if len(self._skills) + len(missing) > self.size:
                        self._skills = {}
                    for i in missing:  # an id the store no longer holds is kept as absent
                        self._skills[i] = fetched.get(i)
        out = {i: s for i, s in known.items() if s is not None}
        out.update(fetched)
        return out

    def skills_by_slug(self, slug: str, generation: int) -> list[Skill]:
        with self._lock:
            known = self._slugs.get(slug) if self._usable(generation) else None
        if known is not None:
            return list(known)
        found = self.store.skills_by_slug(slug)
        with self._lock:
            if self._generation == generation:
                if len(self._slugs) >= self.size:
                    self._slugs = {}
                self._slugs[slug] = found
        return list(found)

    def revoked_subscriptions(self, generation: int) -> frozenset[str]:
        with self._lock:
            known = self._revoked if self._usable(generation) else None
        if known is not None:
            return known
        revoked = self.store.revoked_subscriptions()
        with self._lock:
            if self._generation == generation:
                self._revoked = revoked
        return revoked


class ReadsAt:
    """:class:`SkillReads` of one generation, through the shared :class:`GenerationReads`."""

    def __init__(self, cache: GenerationReads, generation: int) -> None:
        self.cache, self.generation = cache, generation

    def skills(self, skill_ids: Sequence[str]) -> dict[str, Skill]:
        return self.cache.skills(skill_ids, self.generation)

    def skills_by_slug(self, slug: str) -> list[Skill]:
        return self.cache.skills_by_slug(slug, self.generation)

    def revoked_subscriptions(self) -> frozenset[str]:
        return self.cache.revoked_subscriptions(self.generation)
