"""Confidence, no_match and exact names on the sample catalog, with the real model, Tantivy and SQLite."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from hostile_support import write_skill

from skillsearch.core.domain import Principal
from skillsearch.core.errors import ValidationError
from skillsearch.core.settings import Settings
from skillsearch.retrieval import confidence
from skillsearch.retrieval.confidence import FEATURES, Decision, packaged_decision
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.service import Catalog

OPERATOR = Principal.operator()
MINILM = "sentence-transformers/all-MiniLM-L6-v2"

# Requests from other trades: nothing in the sample catalog (git, Python, ops, data, writing) fits them.
# Two of them share a word with a skill ("table" partitions, "training" models) and may be answered anyway
# (the decision abstains on about half of the dev set's English negatives, docs/benchmarks.md), but never
# with a confident hit.
ABSENT = [
    "recipe for a gluten-free chocolate cake",
    "what should I plant in my vegetable garden in April",
    "how tall is mount everest",
    "find me a cheap flight to Lisbon",
    "write a birthday poem for my grandmother",
    "what is the capital of Australia",
]
ABSENT_SHARING_WORDS = ["book a table for two at an Italian restaurant on Friday", "tips for training a puppy"]
# Requests the sample catalog answers, in the words of a user.
PRESENT = [
    "the TLS certificate on our web server expires next week",
    "my Kubernetes pod keeps restarting in CrashLoopBackOff",
    "undo the last git commit I made",
]


def search(catalog: Catalog, query: str, **kw: object):  # type: ignore[no-untyped-def]
    return catalog.search(OPERATOR, SearchRequest(query, **kw))  # type: ignore[arg-type]


def test_the_default_encoder_ships_a_fitted_decision() -> None:
    decision = packaged_decision(MINILM)
    assert decision is not None
    assert tuple(decision["features"]) == FEATURES
    assert 0.0 < decision["no_match_below"] < 1.0


@pytest.mark.parametrize("query", ABSENT)
def test_a_request_for_something_absent_gets_no_match_or_no_confident_hit(sample: Catalog, query: str) -> None:
    """The shipped threshold is the most conservative one (no refusal on any dev set, docs/rules.md: no
    threshold held left-out false refusals at 1 %), so an off-topic request may get a weak list rather than
    ``no_match``; never a confident hit."""
    result = search(sample, query)
    assert result.notice is None
    if result.no_match:
        assert result.hits == [] and result.no_match_reason in ("low_confidence", "no_good_match")
    else:
        assert all(h.confidence is not None and h.confidence < 0.5 for h in result.hits)


@pytest.mark.parametrize("query", ABSENT_SHARING_WORDS)
def test_an_off_topic_request_sharing_a_word_gets_no_confident_hit(sample: Catalog, query: str) -> None:
    result = search(sample, query)
    assert all(h.confidence is not None and h.confidence < 0.5 for h in result.hits)


@pytest.mark.parametrize("query", PRESENT)
def test_a_request_the_catalog_answers_keeps_its_hits_with_confidences(sample: Catalog, query: str) -> None:
    result = search(sample, query)
    assert not result.no_match and len(result.hits) == 10
    conf = [h.confidence for h in result.hits]
    assert all(c is not None and 0.0 <= c <= 1.0 for c in conf)
    assert conf[0] == max(conf) and conf[0] > conf[-1]  # type: ignore[type-var]


def test_min_confidence_keeps_the_hits_at_or_above_it_in_their_order(sample: Catalog) -> None:
    full = search(sample, PRESENT[0]).hits
    cut_at = (full[0].confidence + full[-1].confidence) / 2  # type: ignore[operator]
    cut = search(sample, PRESENT[0], min_confidence=cut_at).hits
    assert 0 < len(cut) < len(full)
    assert [h.skill.slug for h in cut] == [h.skill.slug for h in full if h.confidence >= cut_at]  # type: ignore[operator]
    nothing = search(sample, PRESENT[0], min_confidence=1.0)
    assert nothing.no_match and nothing.no_match_reason == "below_min_confidence"
    with pytest.raises(ValidationError, match="min_confidence"):
        search(sample, PRESENT[0], min_confidence=1.5)


@pytest.mark.parametrize("query", ["write unit tests", "plot a chart", "kubernetes scale", "train a model"])
def test_min_confidence_filters_before_limit_so_a_surer_hit_below_the_limit_is_not_lost(sample: Catalog, query: str) -> None:
    """Confidence is not monotonic in rank ("write unit tests": the second hit, pytest-fixtures-parametrize, is
    surer than the first). The filter was applied to the first ``limit`` hits only: ``limit=1,
    min_confidence=0.12`` answered ``below_min_confidence`` ("none reached your min_confidence") while the
    second hit reached it. Now the answer is the first ``limit`` hits, in rank order, that reach it, never
    re-sorted by confidence."""
    full = search(sample, query, limit=100).hits
    conf = [h.confidence for h in full]
    assert all(c is not None for c in conf)
    inverted = [(i, j) for i in range(len(conf) - 1) for j in range(i + 1, min(len(conf), 10)) if conf[j] > conf[i]]
    assert inverted, conf[:10]  # the case the old cut got wrong exists for this request
    for i, j in inverted[:3]:
        at = conf[j]
        wanted = [h.skill.slug for h in full if h.confidence >= at]  # type: ignore[operator]
        for limit in (1, i + 1, 3):
            cut = search(sample, query, limit=limit, min_confidence=at)
            assert [h.skill.slug for h in cut.hits] == wanted[:limit], (limit, at)
            assert not cut.no_match and cut.hits[0].confidence >= at  # type: ignore[operator]


def test_every_sample_skill_ranks_first_for_its_exact_name_and_its_slug(sample: Catalog) -> None:
    skills = sample.list_skills(OPERATOR, limit=200).items
    assert len(skills) >= 40
    for item in skills:
        skill = sample.store.skill(item.skill_id)
        assert skill is not None
        for text in (skill.name, skill.slug, skill.name.upper()):
            result = search(sample, text)
            assert result.hits and result.hits[0].skill.slug == skill.slug, (text, [h.skill.slug for h in result.hits])


def test_a_request_the_default_encoder_cannot_read_says_how_to_turn_multilingual_on(sample: Catalog) -> None:
    result = search(sample, "来月の京都旅行で泊まる旅館を予約して")
    assert not result.no_match and result.hits
    assert result.notice is not None and "minilm+e5" in result.notice and "SKILLSEARCH_ENCODER" in result.notice
    assert search(sample, ABSENT[0]).notice is None


def test_the_manifest_records_the_decision_and_an_index_without_it_is_recalibrated(
    sample_dir: Path, tmp_path: Path, encoder: Encoder
) -> None:
    data = tmp_path / "data"
    shutil.copytree(sample_dir, data)
    manifest_path = data / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    assert manifest["calibration"]["decision"] == packaged_decision(MINILM)
    del manifest["calibration"]["decision"]
    manifest["calibration"]["version"] = 2  # what an index built before the decision existed holds
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    catalog = Catalog.open(Settings(data_dir=data), encoder=encoder)
    try:
        answer = search(catalog, PRESENT[0])
        assert answer.hits and answer.hits[0].confidence is not None
        assert catalog.index().calibration["decision"] == packaged_decision(MINILM)
    finally:
        catalog.close()
    rewritten = json.loads(manifest_path.read_text(encoding="utf-8"))
    assert rewritten["calibration"]["decision"] == packaged_decision(MINILM)


STARTER = Principal("starter", frozenset({"sub:starter-pack"}))


@pytest.mark.parametrize("query", ["write tests", *PRESENT, *ABSENT[:2]])
@pytest.mark.parametrize("caller", [STARTER, Principal("data", frozenset({"team:data-science"})),
                                    Principal("two", frozenset({"sub:starter-pack", "sub:ops-pro"}))])
def test_a_skills_confidence_does_not_depend_on_who_else_is_visible(sample: Catalog, query: str,
                                                                    caller: Principal) -> None:
    """Issue 30: the decision read the caller's visible catalog, so adding grants took a right answer away.
    A skill's confidence for a request is the same for every caller who sees it."""
    theirs = {h.skill.skill_id: h.confidence for h in search(sample, query, limit=50).hits}
    mine = sample.search(caller, SearchRequest(query, limit=50))
    for h in mine.hits:
        if h.skill.skill_id in theirs:
            assert h.confidence == theirs[h.skill.skill_id], (query, h.skill.slug)


def test_write_tests_gets_the_same_answer_for_one_grant_and_for_the_operator(sample: Catalog) -> None:
    """Issue 30's example: "write tests" gave ``pytest-fixtures-parametrize`` at confidence 0.88 to a caller
    who sees ``sub:starter-pack`` and ``no_match`` (low_confidence) to the operator, who sees more. The
    added grants hold no better candidate, so the answer must be the same."""
    mine = sample.search(STARTER, SearchRequest("write tests"))
    everyone = search(sample, "write tests", limit=50)
    assert mine.hits and mine.hits[0].skill.slug == "pytest-fixtures-parametrize"
    assert mine.no_match is everyone.no_match is False
    theirs = {h.skill.slug: h.confidence for h in everyone.hits}
    assert theirs["pytest-fixtures-parametrize"] == mine.hits[0].confidence


def test_the_background_features_read_the_whole_catalog_whatever_the_caller_sees(
    sample: Catalog, encoder: Encoder
) -> None:
    """``cos_bg`` / ``cos_z`` read the request's cosine with *every* skill of the index, before any
    visibility or kind filter: the same for every caller."""
    query = PRESENT[1]
    scores = sample.index().snapshot().vectors.matrix @ encoder.encode_query(query)
    hits = search(sample, query).hits
    feats = hits[0].features
    assert feats["cos_bg"] == pytest.approx(float(scores.mean()), abs=2e-4)
    assert feats["cos_z"] == pytest.approx((feats["cos"] - scores.mean()) / scores.std(), abs=2e-3)
    filtered = search(sample, query, kind=hits[0].skill.kind).hits[0].features
    assert filtered["cos_bg"] == feats["cos_bg"]
    narrow = sample.search(STARTER, SearchRequest("write tests")).hits[0].features
    assert narrow["cos_bg"] == search(sample, "write tests").hits[0].features["cos_bg"]


# Requests about something the sample catalog (git, Python, ops, data, writing) does not cover at all.
UNCOVERED = ["recipe for a gluten-free chocolate cake", "what should I plant in my vegetable garden in April"]
# The English requests the README and the search page show on the sample catalog.
EXAMPLES = ["which commit broke the build?", "renew an expired TLS certificate", "find the commit that broke it",
            "profile slow python code", "clean a messy dataset with pandas",
            "detect drift in model features", "cut a tagged release", "write tests"]


@pytest.mark.parametrize("query", UNCOVERED)
def test_a_request_the_catalog_does_not_cover_is_no_match(sample: Catalog, query: str) -> None:
    """Issue 30: the decision's ``no_match`` reads the top hit's fit (its cosine, the request's mean cosine
    with the whole catalog, half its coverage), so a request far from every skill is refused, for the
    operator and for a caller who sees one grant alike."""
    for caller in (OPERATOR, STARTER):
        result = sample.search(caller, SearchRequest(query))
        assert result.no_match and result.hits == [], (query, caller)
        assert result.no_match_reason in ("low_confidence", "no_good_match")


@pytest.mark.parametrize("query", EXAMPLES)
def test_the_readme_examples_are_not_refused(sample: Catalog, query: str) -> None:
    result = search(sample, query)
    assert not result.no_match and result.hits, query


def test_no_match_reads_the_top_hits_fit_not_its_confidence() -> None:
    """The fit is the fixed sum the shipped decision names, over the hit's features."""
    stored = packaged_decision(MINILM)
    assert stored is not None
    decision = Decision.from_dict(stored)
    row = np.asarray([0.3, 0.2, 0.4, 3.0, 0.05])  # cos, lex, coverage, cos_z, cos_bg
    expected = sum(stored["refusal"].get(f, 0.0) * v for f, v in zip(FEATURES, row, strict=True))
    assert decision.fit(row) == pytest.approx(expected)
    with pytest.raises(ValueError, match="refusal"):
        Decision.from_dict({**stored, "refusal": {"cos": 1.0, "nope": 1.0}})


def test_a_server_following_another_processes_writes_keeps_a_bounded_number_of_parsed_decisions(
    fresh_sample: Catalog, tmp_path: Path,
) -> None:
    """Each write of another process is followed by reading its manifest again: a new calibration dict per
    snapshot. The decisions parsed from them are kept by identity, at most ``PARSED_KEPT`` of them (a soak of
    ``skillsearch serve`` beside ``skillsearch import`` kept one more for every import)."""
    writer = Catalog.open(Settings(data_dir=fresh_sample.data_dir), encoder=fresh_sample.encoder)
    request = SearchRequest("the TLS certificate on our web server expires next week")
    try:
        generations = set()
        for i in range(confidence.PARSED_KEPT + 4):
            folder = tmp_path / f"round-{i}" / "soak-churn"
            write_skill(folder, "soak-churn", f"Rotate the soak churn note, round {i}.")
            writer.import_path(folder.parent, "soak", "team:soak")
            result = fresh_sample.search(OPERATOR, request)
            assert result.hits and result.hits[0].confidence is not None
            generations.add(fresh_sample.index_generation())
        assert len(generations) == confidence.PARSED_KEPT + 4  # each round served a newly followed snapshot
        assert len(confidence._PARSED) <= confidence.PARSED_KEPT
    finally:
        writer.close()
