"""The search path's kept store reads (``catalog/read_cache.py``): a write by this process or another moves
the generation and so is seen by the next read; a read under an older generation never gets, nor keeps,
anything stale. Real SQLite stores and real catalogs throughout."""

from __future__ import annotations

from pathlib import Path

from skillsearch.catalog.read_cache import GenerationReads
from skillsearch.catalog.store import CatalogStore
from skillsearch.core.domain import Principal
from skillsearch.core.settings import Settings
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.service import Catalog

OPERATOR = Principal.operator()
QUERY = SearchRequest("renew the TLS certificate of our web server before it expires")
SLUG = "tls-certificate-renewal"


def test_reads_follow_every_write_through_the_generation(fresh_sample: Catalog) -> None:
    store = fresh_sample.store
    reads = GenerationReads(store)
    skill = store.skills_by_slug(SLUG)[0]
    before = store.generation()
    at = reads.at(before)
    assert at.skills([skill.skill_id, "no-such-skill"]) == {skill.skill_id: skill}
    assert at.skills_by_slug(SLUG) == [skill] and at.revoked_subscriptions() == frozenset()
    assert reads.at(before).skills([skill.skill_id])[skill.skill_id].status == "active"  # kept, same answer

    store.archive(skill.skill_id)
    store.set_revoked("ops-pro", True)
    after = reads.at(store.generation())
    assert after.generation > before
    assert after.skills([skill.skill_id])[skill.skill_id].status == "archived"
    assert after.skills_by_slug(SLUG)[0].status == "archived"
    assert after.revoked_subscriptions() == frozenset({"ops-pro"})
    # A request that read the older generation goes to the store: it sees the write, and keeps nothing.
    old = reads.at(before)
    assert old.skills([skill.skill_id])[skill.skill_id].status == "archived"
    assert old.revoked_subscriptions() == frozenset({"ops-pro"})
    store.set_revoked("ops-pro", False)
    assert reads.at(store.generation()).revoked_subscriptions() == frozenset()


def test_a_full_cache_starts_over_instead_of_growing(fresh_sample: Catalog) -> None:
    store = fresh_sample.store
    reads = GenerationReads(store, size=2)
    ids = [s.skill_id for s in store.skills_by_slug(SLUG)] + ["missing-1", "missing-2", "missing-3"]
    at = reads.at(store.generation())
    first = at.skills(ids)
    assert at.skills(ids) == first and len(first) == 1


def test_uncached_searches_see_another_processes_archive_at_once(fresh_sample: Catalog) -> None:
    """Both caches off in this catalog: only the kept reads stand between the store and the answer."""
    catalog = Catalog.open(Settings(data_dir=fresh_sample.data_dir, result_cache_size=0, query_cache_size=0),
                           encoder=fresh_sample.encoder)
    try:
        assert SLUG in [h.skill.slug for h in catalog.search(OPERATOR, QUERY).hits]
        other = Catalog(Settings(data_dir=fresh_sample.data_dir), encoder=fresh_sample.encoder)
        try:
            other.store.set_revoked("ops-pro", True)
        finally:
            other.close()
        assert SLUG not in [h.skill.slug for h in catalog.search(OPERATOR, QUERY).hits]
        assert SLUG not in [h.skill.slug for h in catalog.search(OPERATOR, SearchRequest(SLUG)).hits]
    finally:
        catalog.close()


def test_the_searchs_slug_lookup_reads_an_index_even_in_a_catalog_written_before_it(tmp_path: Path) -> None:
    """A request written as a slug is looked up in every grant; ``UNIQUE (grant_key, slug)`` cannot serve
    that, so without its own index each short request read the whole table (seconds at 1M skills)."""
    path = tmp_path / "catalog.sqlite3"
    old = CatalogStore(path)
    old.connection().execute("DROP INDEX IF EXISTS skills_by_slug")  # as a catalog written before the index
    old.close()
    store = CatalogStore(path)
    conn = store.connection()
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        store.skills_by_slug(SLUG)
    finally:
        conn.set_trace_callback(None)
    plans = [row["detail"] for sql in statements if sql.lstrip().upper().startswith("SELECT")
             for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}")]
    assert plans and not [p for p in plans if p.startswith("SCAN skills")], plans
    assert any("skills_by_slug" in p for p in plans), plans
    store.close()
