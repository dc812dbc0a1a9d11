"""The one exact-name rule in lexical and hybrid mode (``retrieval/exact_name.py``, ``search.order_stage``): a
request that is a visible skill's slug ranks that skill first even when BM25 does not list it
(``skill-development``'s name is ``skill-creator``: only the lexical ``all`` field holds its slug's words, which
are common, and the skills named "... development" outrank it past the page) or, in hybrid mode, neither
retriever does; and never a skill the caller may not see, an archived one, or one of another kind or without
the tags asked for (the re-check stage guards those: the visibility tests here pass with or without the rule's
added candidates, and keep it so).

Real Tantivy and SQLite over the 883 real skills of ``../shared/data/skills-catalog`` and a few skills of our
own in other grants, with the deterministic hashing encoder (lexical mode never reads a vector; hybrid mode's
rule does not depend on the model)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from conftest import SHARED

from skillsearch.core.domain import Principal, SkillKind
from skillsearch.core.settings import Settings
from skillsearch.retrieval.exact_name import request_slug
from skillsearch.retrieval.hashing_encoder import HashingEncoder
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.service import Catalog

SKILLS = SHARED / "data" / "skills-catalog"
GRANT = "team:skills-catalog"
OPERATOR = Principal.operator()
READER = Principal(name="reader", grants=frozenset({GRANT}))

# Slugs whose words are in neither the skill's name nor its description.
OURS = {
    GRANT: [
        {"slug": "amber-signal", "name": "Night watch", "description": "Watch the gate at night."},
        # Its slug's words are among the catalog's commonest and its text shares none of them: neither
        # retriever lists it in a hybrid search's 100 candidates for its slug.
        {"slug": "python-testing-workflow", "name": "Zebra rations", "description": "Feed the zebras at dawn.",
         "instructions": "Weigh the hay, soak the pellets and fill the troughs before the herd wakes. " * 60},
        {"slug": "copper-kettle", "name": "Brew planner", "description": "Plan a brew day.", "tags": ["brewing"],
         "kind": "flow_template", "parameters": [{"name": "batch", "type": "string", "required": True}],
         "steps": [{"tool": "brew.plan", "args": {"batch": "{batch}"}}]},
    ],
    "team:hidden": [{"slug": "quiet-harbor", "name": "Lantern keeper", "description": "Keep the lanterns lit."}],
    "sub:gone": [{"slug": "velvet-anchor", "name": "Rope knots", "description": "Tie a bowline."}],
}


@pytest.fixture(scope="module")
def catalog(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Catalog]:
    data = tmp_path_factory.mktemp("exact-lexical")
    opened = Catalog.open(Settings(data_dir=data / "index", seed_sample=False), encoder=HashingEncoder())
    assert opened.import_path(SKILLS, "skills-catalog", GRANT).created
    for n, (grant, entries) in enumerate(OURS.items()):
        bundle = data / f"ours-{n}.jsonl"
        bundle.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")
        report = opened.import_path(bundle, f"ours-{n}", grant)
        assert len(report.created) == len(entries), report.problems
    yield opened
    opened.close()


def lexical(catalog: Catalog, query: str, principal: Principal = OPERATOR, kind: SkillKind | None = None,
            tags: tuple[str, ...] = ()) -> list[str]:
    result = catalog.search(principal, SearchRequest(query, mode="lexical", limit=10, kind=kind, tags=tags))
    return [h.skill.slug for h in result.hits]


@pytest.mark.parametrize("query", ["skill-development", "Skill Development", "skill_development"])
def test_a_lexical_search_for_a_slug_unlike_the_name_ranks_that_skill_first(catalog: Catalog, query: str) -> None:
    skill = catalog.store.skills_by_slug("skill-development")[0]
    assert skill.name == "skill-creator"  # the name the lexical document holds
    result = catalog.search(OPERATOR, SearchRequest(query, mode="lexical", limit=5))
    top = result.hits[0]
    assert top.skill.slug == "skill-development"
    assert len(result.hits) == 5 and not result.no_match
    # It ranked by the rule, not by BM25: its explanation says it was no lexical match.
    assert top.explanation["lexical_rank"] is None and top.explanation["semantic_score"] is None
    assert lexical(catalog, query, READER)[0] == "skill-development"


def test_hybrid_mode_ranks_it_first_too(catalog: Catalog) -> None:
    result = catalog.search(OPERATOR, SearchRequest("skill-development", mode="hybrid", limit=5))
    assert result.hits[0].skill.slug == "skill-development"


@pytest.mark.parametrize("query", ["python-testing-workflow", "Python Testing Workflow"])
def test_hybrid_mode_ranks_a_named_skill_first_though_neither_retriever_listed_it(catalog: Catalog, query: str) -> None:
    result = catalog.search(OPERATOR, SearchRequest(query, mode="hybrid", limit=5))
    top = result.hits[0]
    assert top.skill.slug == "python-testing-workflow" and not result.no_match
    # Ranked by the rule alone: no lexical or semantic rank, yet its exact cosine and a finite fused score.
    assert top.explanation["lexical_rank"] is None and top.explanation["semantic_rank"] is None
    assert isinstance(top.explanation["semantic_score"], float)
    assert all(h.score == h.score for h in result.hits)  # no NaN fused in
    assert lexical(catalog, query)[0] == "python-testing-workflow"


def test_a_named_skill_the_filters_leave_out_stays_out_of_hybrid_results(catalog: Catalog) -> None:
    for principal, kind, tags in ((READER, "flow_template", ()), (OPERATOR, None, ("brewing",)),
                                  (Principal(name="h", grants=frozenset({"team:hidden"})), None, ())):
        result = catalog.search(principal, SearchRequest("python-testing-workflow", mode="hybrid", limit=10,
                                                         kind=kind, tags=tags))
        assert "python-testing-workflow" not in [h.skill.slug for h in result.hits]
        assert all(h.score == h.score for h in result.hits)


def test_a_skill_found_by_its_slug_alone_is_found_only_by_whoever_may_see_it(catalog: Catalog) -> None:
    assert lexical(catalog, "quiet-harbor")[0] == "quiet-harbor"
    assert "quiet-harbor" not in lexical(catalog, "quiet-harbor", READER)
    assert "quiet-harbor" not in lexical(catalog, "quiet harbor", Principal(name="none", grants=frozenset()))


def test_a_skill_found_by_its_slug_alone_keeps_to_the_kind_and_tags_asked_for(catalog: Catalog) -> None:
    assert lexical(catalog, "copper-kettle")[0] == "copper-kettle"
    assert lexical(catalog, "copper-kettle", kind="flow_template", tags=("brewing",)) == ["copper-kettle"]
    assert "copper-kettle" not in lexical(catalog, "copper-kettle", kind="knowledge")
    assert "copper-kettle" not in lexical(catalog, "copper-kettle", tags=("cooking",))


def test_an_archived_or_revoked_skill_is_never_found_by_its_slug(catalog: Catalog) -> None:
    assert lexical(catalog, "amber-signal")[0] == "amber-signal"
    assert lexical(catalog, "velvet-anchor")[0] == "velvet-anchor"
    # Archived in the store only: the index is a batch behind, the answer may not be.
    assert catalog.store.archive(catalog.store.skills_by_slug("amber-signal")[0].skill_id)
    catalog.store.set_revoked("gone", True)
    assert "amber-signal" not in lexical(catalog, "amber-signal")
    assert "velvet-anchor" not in lexical(catalog, "velvet-anchor")
    assert "velvet-anchor" not in lexical(catalog, "velvet-anchor", Principal(name="s", grants=frozenset({"sub:gone"})))


# -- what "names a slug" means: slugify drops every letter with no ASCII decomposition -----------------------


@pytest.mark.parametrize("query", ["skill-developmentを作る", "skill development на сервере", "用 skill-development 写技能"])
def test_a_request_in_another_script_does_not_name_the_slug_of_its_ascii_remainder(catalog: Catalog, query: str) -> None:
    # slugify drops the Japanese, Cyrillic and Chinese letters: each request would be written
    # "skill-development", yet none is that skill's name, so nothing ranks by the exact-name rule: in lexical
    # mode every hit is one of BM25's (skill-development is not among them, see the first test).
    result = catalog.search(OPERATOR, SearchRequest(query, mode="lexical", limit=10))
    assert all(h.explanation["lexical_rank"] is not None for h in result.hits)
    assert "skill-development" not in [h.skill.slug for h in result.hits]
    hybrid = catalog.search(OPERATOR, SearchRequest(query, mode="hybrid", limit=5))
    assert hybrid.hits[0].skill.slug != "skill-development"


@pytest.mark.parametrize("query", ["skíll dévelopment", "SKÍLL-DÉVELOPMENT", "ｓｋｉｌｌ－ｄｅｖｅｌｏｐｍｅｎｔ"])
def test_an_accented_or_full_width_latin_request_still_names_the_slug(catalog: Catalog, query: str) -> None:
    # Accents decompose to their ASCII letter (a user types the name without them), as full-width letters do.
    result = catalog.search(OPERATOR, SearchRequest(query, mode="lexical", limit=5))
    assert result.hits[0].skill.slug == "skill-development"
    assert result.hits[0].explanation["lexical_rank"] is None  # first by the rule, not by BM25


@pytest.mark.parametrize(("query", "slug"), [
    ("skill-development", "skill-development"), ("Résumé Builder", "resume-builder"), ("ＳｖｅｌｔｅＫｉｔ", "sveltekit"),
    ("SvelteKitでフォームを作る", ""), ("用 scikit-learn 做交叉验证", ""), ("Straße planner", ""), ("φ calculator", ""),
    ("🚀 sveltekit", "sveltekit"), ("x" * 81, ""),
])
def test_request_slug(query: str, slug: str) -> None:
    assert request_slug(query) == slug
