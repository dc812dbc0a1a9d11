"""The result cache: a repeated request is answered from memory, never with a stale or foreign answer."""

from __future__ import annotations

from skillsearch.core.domain import Principal
from skillsearch.core.lru import LRU
from skillsearch.core.settings import Settings
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.service import Catalog

OPERATOR = Principal.operator()
QUERY = SearchRequest("renew the TLS certificate of our web server before it expires")


def slugs(catalog: Catalog, principal: Principal, request: SearchRequest = QUERY) -> list[str]:
    return [h.skill.slug for h in catalog.search(principal, request).hits]


def test_a_repeated_request_is_served_from_the_cache_with_the_same_hits(fresh_sample: Catalog) -> None:
    first = fresh_sample.search(OPERATOR, QUERY)
    again = fresh_sample.search(OPERATOR, QUERY)
    assert "result_cache_hit" not in first.timings
    assert again.timings == {"result_cache_hit": 1.0}
    assert [(h.skill.skill_id, h.score) for h in again.hits] == [(h.skill.skill_id, h.score) for h in first.hits]
    assert again.hits is not first.hits
    assert again.hits[0].skill.slug == "tls-certificate-renewal"


def test_options_and_grants_are_part_of_the_key(fresh_sample: Catalog) -> None:
    ops = Principal("ops", frozenset({"sub:ops-pro"}))
    data = Principal("data", frozenset({"team:data-science"}))
    assert "tls-certificate-renewal" in slugs(fresh_sample, ops)
    seen_by_data = slugs(fresh_sample, data)
    assert "tls-certificate-renewal" not in seen_by_data
    assert all(fresh_sample.store.skills_by_slug(s)[0].grant == "team:data-science" for s in seen_by_data)
    assert len(slugs(fresh_sample, OPERATOR, SearchRequest(QUERY.query, limit=2))) == 2
    lexical = fresh_sample.search(OPERATOR, SearchRequest(QUERY.query, mode="lexical"))
    assert lexical.mode == "lexical" and "result_cache_hit" not in lexical.timings


def test_a_revocation_applies_to_the_next_repeat_at_once(fresh_sample: Catalog) -> None:
    ops = Principal("ops", frozenset({"sub:ops-pro"}))
    assert "tls-certificate-renewal" in slugs(fresh_sample, ops)
    fresh_sample.store.set_revoked("ops-pro", True)
    after = fresh_sample.search(ops, QUERY)
    assert "result_cache_hit" not in after.timings
    assert after.hits == [] and after.no_match


def test_an_archived_skill_leaves_the_cached_answer(fresh_sample: Catalog) -> None:
    skill = fresh_sample.store.skills_by_slug("tls-certificate-renewal")[0]
    assert "tls-certificate-renewal" in slugs(fresh_sample, OPERATOR)
    fresh_sample.store.archive(skill.skill_id)
    assert "tls-certificate-renewal" not in slugs(fresh_sample, OPERATOR)


def test_a_change_made_by_another_process_misses_the_cache(fresh_sample: Catalog) -> None:
    """Another process on the same data directory (a second Catalog) revokes; this one must see it."""
    assert "tls-certificate-renewal" in slugs(fresh_sample, OPERATOR)
    other = Catalog(Settings(data_dir=fresh_sample.data_dir), encoder=fresh_sample.encoder)
    try:
        other.store.set_revoked("ops-pro", True)
    finally:
        other.close()
    assert "tls-certificate-renewal" not in slugs(fresh_sample, OPERATOR)


def test_a_size_of_zero_keeps_nothing() -> None:
    cache: LRU[str, int] = LRU(0)
    cache.put("a", 1)
    assert cache.get("a") is None and len(cache) == 0
    small: LRU[str, int] = LRU(2)
    for i, key in enumerate("abc"):
        small.put(key, i)
    assert small.get("a") is None and small.get("c") == 2 and len(small) == 2
