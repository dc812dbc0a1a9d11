"""Searches run in a loop while one sync applies 1,000 changes: no search fails, and none returns a skill
that was never visible to its principal (another subscription's, or one that arrived already archived)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from syncsupport import TOKEN, catalog_content, config_for, index_matches_store, upstream_content

from skillsearch.core.domain import Principal
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.service import Catalog
from skillsearch.upstream.platform import ReferenceUpstream

QUERIES = ["handles alpha task", "beta task helper", "archived task", "quick task number 7", "helper"]


def _item(skill_id: str, name: str, status: str = "active") -> dict[str, Any]:
    return {
        "op": "upsert",
        "skill": {"skill_id": skill_id, "slug": skill_id.replace("_", "-"), "status": status},
        "revision": {"name": name, "description": f"{name} handles a quick task.", "kind": "knowledge",
                     "tags": ["task"], "instructions": f"Use {name} for the task."},
        "resources": [],
    }


@pytest.fixture
def upstream() -> ReferenceUpstream:
    up = ReferenceUpstream([TOKEN])
    for sub, n in (("alpha", 100), ("beta", 10)):
        up.feed(sub, create=True)
        for i in range(n):
            up.publish(sub, _item(f"{sub}_{i:04d}", f"{sub} task helper {i}"))
    return up


@pytest.fixture
def catalog(empty_catalog: Catalog) -> Catalog:
    return empty_catalog


def test_searches_during_a_sync_of_1000_changes(catalog: Catalog, upstream: ReferenceUpstream,
                                                upstream_url: str) -> None:
    config = config_for(upstream_url, "alpha", "beta", page_limit=50)
    catalog.subscriptions.sync_once(config)
    visible_ever = {f"alpha_{i:04d}" for i in range(600)}
    changes = 0
    for i in range(100, 600):
        upstream.publish("alpha", _item(f"alpha_{i:04d}", f"alpha task helper {i}"))
        changes += 1
    for i in range(150):
        upstream.publish("alpha", _item(f"alpha_arch_{i:04d}", f"archived task helper {i}", status="archived"))
        changes += 1
    for i in range(60):
        upstream.edit("alpha", f"alpha_{i:04d}", description=f"Edited: handles alpha task number {i}.")
        changes += 1
    for i in range(60, 100):
        upstream.delete("alpha", f"alpha_{i:04d}")
        changes += 1
    for i in range(10, 260):
        upstream.publish("beta", _item(f"beta_{i:04d}", f"beta task helper {i}"))
        changes += 1
    assert changes == 1000

    principal = Principal(name="alpha-user", grants=frozenset({"sub:alpha"}))
    done = threading.Event()
    errors: list[Exception] = []
    seen: set[str] = set()
    searches = [0]

    def search_loop(offset: int) -> None:
        n = offset
        while not done.is_set():
            try:
                response = catalog.search_view(principal, SearchRequest(query=QUERIES[n % len(QUERIES)], limit=20))
                seen.update(h.skill_id for h in response.hits)
                searches[0] += 1
            except Exception as exc:  # every failure of a search is a finding
                errors.append(exc)
                return
            n += 1
            # A client's pause between requests (1 ms; thousands of searches still overlap the sync). A
            # loop that never pauses keeps both cores and the GIL so busy that the sync thread's encoder,
            # which needs the GIL between torch calls, ran about 40 times slower (270 s vs 7 s here).
            time.sleep(0.001)

    threads = [threading.Thread(target=search_loop, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    try:
        reports = catalog.subscriptions.sync_once(config)
    finally:
        done.set()
        for t in threads:
            t.join(60)

    assert [r.error for r in reports] == [None, None]
    assert sum(len(r.outcome.changed) for r in reports) == 1000
    assert errors == []
    assert searches[0] >= 10
    assert seen and seen <= visible_ever, sorted(seen - visible_ever)[:10]
    for sub in ("alpha", "beta"):
        assert catalog_content(catalog, f"upstream:{sub}") == upstream_content(upstream, sub)
    index_matches_store(catalog)
