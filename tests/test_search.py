"""Search on the bundled sample catalog with the real model and a real Tantivy index."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from skillsearch.core.domain import FUSION_METHODS, Principal
from skillsearch.core.errors import ValidationError
from skillsearch.core.fusion import FUSIONS, adapted_weight, candidates, fusion
from skillsearch.core.settings import NOT_FROM_ENV, Settings
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.search import LEXICAL_SHARE_SLOPE, QUERY_SENTENCES, query_texts
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.service import Catalog

DATA = Path(__file__).parent / "data"

PARAPHRASES: dict[str, str] = json.loads((DATA / "sample_paraphrases.json").read_text(encoding="utf-8"))
CJK_WORDS: list[dict[str, str]] = json.loads((DATA / "sample_cjk_words.json").read_text(encoding="utf-8"))
OPERATOR = Principal.operator()


def slugs(catalog: Catalog, query: str, **kw: object) -> list[str]:
    return [h.skill.slug for h in catalog.search(OPERATOR, SearchRequest(query, **kw)).hits]  # type: ignore[arg-type]


def test_sample_catalog_is_what_the_issue_asks_for(sample: Catalog) -> None:
    skills = sample.list_skills(OPERATOR, limit=200).items
    assert len(skills) >= 40
    assert len(sample.store.grants()) >= 3
    assert {s.kind for s in skills} == {"knowledge", "flow_template"}
    assert set(PARAPHRASES) == {sample.store.skill(s.skill_id).slug for s in skills}  # type: ignore[union-attr]


@pytest.mark.parametrize("slug", sorted(PARAPHRASES))
def test_every_sample_skill_is_found_by_a_paraphrase_in_the_top_3(sample: Catalog, slug: str) -> None:
    assert slug in slugs(sample, PARAPHRASES[slug], limit=3)


@pytest.mark.parametrize("slug", sorted(PARAPHRASES))
def test_every_sample_skill_is_found_by_its_exact_name_lexically(sample: Catalog, slug: str) -> None:
    skill = sample.store.skills_by_slug(slug)[0]
    assert slugs(sample, skill.name, mode="lexical", limit=3)[0] == slug


@pytest.mark.parametrize("item", CJK_WORDS, ids=[w["slug"] for w in CJK_WORDS])
def test_a_cjk_word_inside_a_sentence_finds_its_skill(sample: Catalog, item: dict[str, str]) -> None:
    assert slugs(sample, item["word"], mode="lexical", limit=1) == [item["slug"]]


@pytest.mark.parametrize(
    "text",
    ['"unbalanced', "deploy AND", "name:", "field:value", "*", "(foo", "[a TO b]", "^2", "-", "a || b",
     "x" * 10_000, "🚀🔥 deploy 🚀", "\x00\x01\x1b[31m ctrl", "NOT OR AND", "'; DROP TABLE skills; --",
     "\\", "{}", "\u202e\u200b", "ａｂｃ　全角"],
)
@pytest.mark.parametrize("mode", ["lexical", "semantic", "hybrid"])
def test_hostile_user_text_never_raises(sample: Catalog, text: str, mode: str) -> None:
    result = sample.search(OPERATOR, SearchRequest(text[:2000], mode=mode))
    assert isinstance(result.no_match, bool)
    assert all(h.skill.status == "active" for h in result.hits)


def test_bad_requests_are_validation_errors(sample: Catalog) -> None:
    for request in (SearchRequest("   "), SearchRequest("x" * 2001), SearchRequest("q", limit=0),
                    SearchRequest("q", mode="fuzzy"), SearchRequest("q", kind="recipe"),
                    SearchRequest("q", fusion="borda"), SearchRequest("q", semantic_weight=1.5)):
        with pytest.raises(ValidationError):
            sample.search(OPERATOR, request)


def test_nonsense_is_no_match_rather_than_noise(sample: Catalog) -> None:
    result = sample.search(OPERATOR, SearchRequest("qwzx vbnmk plorth"))
    assert result.no_match and result.hits == []


def test_a_request_of_emoji_or_punctuation_alone_is_no_match(sample: Catalog) -> None:
    """Multilingual audit: ``🚀🚀🚀🚀🚀🚀`` answered two unrelated skills (confidence 0.01): MiniLM reads every emoji as
    ``[UNK]``, whose vector sits near every skill, above the cosine floor. A request with no letter or digit of
    any script holds nothing to match; a word beside the emoji is a request again."""
    for query in ("🚀🚀🚀🚀🚀🚀", "👍", "?!… —", "🔥🔥 !!!"):
        for mode in ("hybrid", "semantic"):
            result = sample.search(OPERATOR, SearchRequest(query, mode=mode))
            assert result.no_match and result.hits == [] and result.no_match_reason == "no_good_match", (query, mode)
    hits = sample.search(OPERATOR, SearchRequest("🚀 renew an expired TLS certificate")).hits
    assert hits and hits[0].skill.slug == "tls-certificate-renewal"


def test_filters_kind_and_tags_apply_in_every_mode(sample: Catalog) -> None:
    for mode in ("lexical", "semantic", "hybrid"):
        hits = sample.search(OPERATOR, SearchRequest("deploy a service", mode=mode, kind="flow_template")).hits
        assert hits and all(h.skill.kind == "flow_template" for h in hits)
        tagged = sample.search(OPERATOR, SearchRequest("query", mode=mode, tags=("sql",))).hits
        assert tagged and all("sql" in h.skill.tags for h in tagged)


def test_a_tag_filter_ignores_case_in_every_mode_and_in_list(fresh_sample: Catalog, tmp_path: Path) -> None:
    """Agents write ``Kubernetes`` for the tag ``kubernetes``: it found nothing (audit); nor did the tag in
    full-width letters (a later audit). A catalog may hold both spellings; a filter by either finds both,
    in the index's three filters (vector mask, Tantivy's tag terms, the store's list) and in the re-check."""
    bundle = tmp_path / "tagged.json"
    bundle.write_text(json.dumps([
        {"slug": "helm-upgrade-k8s", "name": "Helm upgrade", "description": "Upgrade a Helm release on a cluster.",
         "tags": ["Zephyrcloud", "Helm"]},
        {"slug": "drain-a-node", "name": "Drain a node", "description": "Drain a cluster node before maintenance.",
         "tags": ["zephyrcloud"]},
    ]))
    assert fresh_sample.import_path(bundle, "extra", "team:ops").ok
    both = {"helm-upgrade-k8s", "drain-a-node"}
    full_width = "".join(chr(ord(c) + 0xFEE0) for c in "ZEPHYRCLOUD")  # as a Japanese input method types it
    for spelling in ("zephyrcloud", "ZEPHYRCLOUD", "Zephyrcloud", full_width):
        for mode in ("lexical", "semantic", "hybrid"):
            hits = fresh_sample.search(OPERATOR, SearchRequest("cluster", mode=mode, tags=(spelling,))).hits
            assert {h.skill.slug for h in hits} == both, (spelling, mode)
        listed = fresh_sample.list_skills(OPERATOR, tags=[spelling])
        assert {s.name for s in listed.items} == {"Helm upgrade", "Drain a node"}, spelling
    helm = fresh_sample.search(OPERATOR, SearchRequest("cluster", mode="hybrid", tags=("zephyrcloud", "helm"))).hits
    assert [h.skill.slug for h in helm] == ["helm-upgrade-k8s"]


def test_each_hit_explains_itself(sample: Catalog) -> None:
    hit = sample.search(OPERATOR, SearchRequest("find the commit that broke the build")).hits[0]
    e = hit.explanation
    assert e["lexical_rank"] >= 1 and e["semantic_rank"] >= 1
    assert -1.0 <= e["semantic_score"] <= 1.0 and e["fusion"] == "zscore"
    assert e["fused_score"] == pytest.approx(hit.score, abs=1e-3)


def test_fusion_methods_are_a_registry_and_an_unknown_name_is_a_validation_error(
        sample_dir: Path, tmp_path: Path, encoder: Encoder) -> None:
    """A fusion is looked up by name and an unknown name raises (it once fell back to min-max silently)."""
    assert tuple(FUSIONS) == FUSION_METHODS
    with pytest.raises(ValidationError, match="unknown fusion 'borda'") as raised:
        fusion("borda")
    assert raised.value.code == "VALIDATION_ERROR" and raised.value.details["choices"] == list(FUSION_METHODS)
    # Settings naming an unknown fusion fail every hybrid search with the same error, never another method.
    shutil.copytree(sample_dir, tmp_path / "data")
    catalog = Catalog.open(Settings(data_dir=tmp_path / "data", fusion="borda"), encoder=encoder)
    try:
        with pytest.raises(ValidationError, match="unknown fusion"):
            catalog.search(OPERATOR, SearchRequest("git bisect"))
        assert catalog.search(OPERATOR, SearchRequest("git bisect", fusion="rrf")).hits
    finally:
        catalog.close()


def test_the_search_constants_are_not_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tuning constants no operator needs are not read from ``SKILLSEARCH_*`` (issue 30)."""
    for name in NOT_FROM_ENV:
        monkeypatch.setenv(f"SKILLSEARCH_{name.upper()}", "0.9")
    assert {name: getattr(Settings.from_env(), name) for name in NOT_FROM_ENV} == \
        {name: getattr(Settings(), name) for name in NOT_FROM_ENV}


@pytest.mark.parametrize("fusion", ["zscore", "minmax", "rrf"])
def test_every_fusion_method_ranks_the_obvious_answer_first(sample: Catalog, fusion: str) -> None:
    assert slugs(sample, "git bisect to find a regression", fusion=fusion)[0] == "git-bisect-regressions"


def test_grants_limit_every_mode(sample: Catalog) -> None:
    ops_only = Principal(name="p", grants=frozenset({"sub:ops-pro"}))
    for mode in ("lexical", "semantic", "hybrid"):
        hits = sample.search(ops_only, SearchRequest("git commit", mode=mode, limit=20)).hits
        assert all(h.skill.grant == "sub:ops-pro" for h in hits)
    nobody = Principal(name="n", grants=frozenset())
    assert sample.search(nobody, SearchRequest("git")).no_match


def test_a_candidate_only_the_semantic_list_holds_has_bm25_zero_and_no_lexical_rank() -> None:
    semantic = np.linspace(0.1, 0.9, 6)
    c = candidates(np.asarray([5, 2]), np.asarray([9.0, 4.0], np.float32), np.asarray([0, 1, 2]), semantic)
    assert c.rows.tolist() == [0, 1, 2, 5]
    assert c.lexical.tolist() == [0.0, 0.0, 4.0, 9.0]
    assert c.lexical_rank.tolist() == [0, 0, 2, 1]
    assert c.semantic_rank.tolist() == [1, 2, 3, 0]


def test_a_hybrid_search_weighs_by_its_lexical_share_unless_the_request_names_a_weight(sample: Catalog) -> None:
    query = "find the commit that broke the build"
    # The sample catalog is smaller than the candidate depth: every skill is a semantic candidate, so the
    # share is the lexical matches over the catalog.
    skills = len(sample.list_skills(OPERATOR, limit=200).items)
    matches = len(sample.search(OPERATOR, SearchRequest(query, mode="lexical", limit=100)).hits)
    assert 0 < matches < skills
    expected = min(1.0, max(0.0, 0.6 + LEXICAL_SHARE_SLOPE * (0.5 - matches / skills)))
    assert expected != 0.6
    hits = sample.search(OPERATOR, SearchRequest(query)).hits
    assert hits and all(h.explanation["semantic_weight"] == pytest.approx(expected, abs=1e-4) for h in hits)
    given = sample.search(OPERATOR, SearchRequest(query, semantic_weight=0.3)).hits
    assert {h.explanation["semantic_weight"] for h in given} == {0.3}


def test_the_semantic_weight_follows_the_share_of_candidates_that_match_lexically() -> None:
    semantic = np.linspace(0.1, 0.9, 8)
    half = candidates(np.arange(4), np.ones(4, np.float32), np.arange(4, 8), semantic)
    few = candidates(np.arange(1), np.ones(1, np.float32), np.arange(8), semantic)
    every = candidates(np.arange(8), np.ones(8, np.float32), np.arange(8), semantic)
    assert adapted_weight(half, "zscore", 0.6, 1.0) == pytest.approx(0.6)
    assert adapted_weight(few, "zscore", 0.6, 1.0) == pytest.approx(0.975), "few lexical matches lean on cosines"
    assert adapted_weight(every, "minmax", 0.6, 1.0) == pytest.approx(0.1), "agreeing lists lean on BM25"
    assert adapted_weight(few, "rrf", 0.6, 1.0) == 0.6


# Eight sentences of an agent's context that point at no skill (as benchmarks/tuning/long_requests.py's).
LONG_CONTEXT = (
    "I have been working on this for a couple of weeks now. My manager asked me to look into it before the end of"
    " the month. There are four of us on the team, and two joined recently. We are spread over different time"
    " zones, so replies can be slow. I am writing this from home because the office is closed today. Last week we"
    " spent most of our time on something unrelated. Nobody on the team has done this kind of thing before. I would"
    " like to finish it before my holiday starts on Friday."
)
ENGLISH_PARAPHRASES = {slug: text for slug, text in PARAPHRASES.items() if text.isascii()}


def test_a_long_request_keeps_its_first_and_last_sentences() -> None:
    sentences = [f"Sentence number {i} of the request." for i in range(1, 11)]
    texts = query_texts(" ".join(sentences), QUERY_SENTENCES)
    assert texts[1:] == sentences[:3] + sentences[-3:]
    assert query_texts(" ".join(sentences[:6]), QUERY_SENTENCES)[1:] == sentences[:6]


def test_requests_with_their_ask_after_eight_sentences_of_context_find_their_skills(sample: Catalog) -> None:
    """An agent's long request: context first, the ask last. Embedding only its first 6 sentences left the ask
    in no query vector: 11 of the 33 English paraphrases fell out of their top 3 (on the skills dev set, hit@1
    0.91 -> 0.02); with the first and last sentences, 3 do, as 1 in 10 of the dev set's requests."""
    missed = [slug for slug, ask in sorted(ENGLISH_PARAPHRASES.items())
              if slug not in slugs(sample, f"{LONG_CONTEXT} {ask}", limit=3)]
    assert len(ENGLISH_PARAPHRASES) == 33
    assert len(missed) <= 4, missed
