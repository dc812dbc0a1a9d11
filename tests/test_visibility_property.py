"""Property test: whatever the grants, revocations and query, no hit is outside what the principal may see,
and in lexical mode k hits come back whenever at least k visible skills match (filtering happens inside the
retriever, not after it)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skillsearch.core.domain import Principal
from skillsearch.core.settings import Settings
from skillsearch.core.visibility import is_visible, visible_grants
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.retrieval.visible_lexical import visible_lexical_matches
from skillsearch.service import Catalog

GRANTS = ["sub:starter-pack", "sub:ops-pro", "team:data-science", "user:nobody", "sub:unknown"]
WORDS = ["git", "deploy", "sql", "python", "incident", "data", "test", "docker", "log", "the", "障害", "数据",
         "revue", "certificate", "canary", "pandas", "AND", '"', "*", "rollback", "zzz"]


@pytest.fixture(scope="module")
def catalog(sample_dir: Path, tmp_path_factory: pytest.TempPathFactory, encoder: Encoder) -> Iterator[Catalog]:
    target = tmp_path_factory.mktemp("prop") / "data"
    shutil.copytree(sample_dir, target)
    c = Catalog.open(Settings(data_dir=target), encoder=encoder)
    # One archived skill that must never show up either.
    victim = c.store.skills_by_slug("git-bisect-regressions")[0]
    c.store.archive(victim.skill_id)
    c.index().refresh(c.store, [victim.skill_id])
    yield c
    c.close()


def lexical_matches(catalog: Catalog, query: str, principal: Principal) -> int:
    """Ground truth by another path: every lexical match for the operator, filtered here in Python."""
    idx = catalog.index()
    everything = sorted(idx.snapshot().vectors.grant_names)
    hits = idx.lexical.search(query, everything, limit=10_000)
    rows = [idx.snapshot().vectors.key_to_row[int(k)] for k in hits.keys]
    ids = [idx.snapshot().vectors.rows[r].skill_id for r in rows]
    revoked = catalog.store.revoked_subscriptions()
    skills = catalog.store.skills(ids)
    return sum(1 for s in skills.values() if is_visible(s.status, s.grant, principal, revoked))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    grants=st.frozensets(st.sampled_from(GRANTS)),
    revoked=st.frozensets(st.sampled_from(["starter-pack", "ops-pro", "unknown"]), max_size=2),
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
    mode=st.sampled_from(["lexical", "semantic", "hybrid"]),
    k=st.integers(min_value=1, max_value=12),
)
def test_no_hit_is_ever_outside_the_principals_grants(
    catalog: Catalog, grants: frozenset[str], revoked: frozenset[str], words: list[str], mode: str, k: int
) -> None:
    for sub in ("starter-pack", "ops-pro", "unknown"):
        catalog.store.set_revoked(sub, sub in revoked)
    principal = Principal(name="p", grants=grants)
    query = " ".join(words)
    result = catalog.search(principal, SearchRequest(query, mode=mode, limit=k))
    for hit in result.hits:
        assert hit.skill.grant in grants
        assert hit.skill.grant.removeprefix("sub:") not in revoked
        assert hit.skill.status == "active"
    if mode == "lexical":
        assert len(result.hits) == min(k, lexical_matches(catalog, query, principal))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    grants=st.frozensets(st.sampled_from(GRANTS), min_size=1),
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
    depth=st.integers(min_value=1, max_value=6),
    kind=st.sampled_from([None, "knowledge", "flow_template"]),
)
def test_lexical_candidates_are_the_filtered_ranking_whichever_path_found_them(
    catalog: Catalog, grants: frozenset[str], words: list[str], depth: int, kind: str | None
) -> None:
    """Overfetch-then-filter (4 x depth unfiltered hits, the visible ones kept) and the filtered query it
    falls back to must both return exactly the filtered ranking; small depths over the 45 sample skills
    take both paths. The filtered query, asked directly, is the ground truth."""
    for sub in ("starter-pack", "ops-pro", "unknown"):
        catalog.store.set_revoked(sub, False)
    query = " ".join(words)
    idx = catalog.index()
    snapshot = idx.snapshot()
    vectors = snapshot.vectors
    visible = sorted(visible_grants(Principal("p", grants), vectors.grant_names, frozenset()))
    if not visible:
        return
    truth = idx.lexical.search(query, visible, depth, kind)
    expected = [vectors.key_to_row[int(key)] for key in truth.keys]
    mask = vectors.mask(visible, kind)
    rows, scores = visible_lexical_matches(idx.lexical, query, visible, depth, snapshot, mask, kind)
    assert rows.tolist() == expected
    assert scores.tolist() == truth.scores.tolist()
