"""The search's request, its hits and its result: the types the stages (``retrieval/search.py``), the
decision (``retrieval/confidence.py``) and every surface share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from skillsearch.core.domain import FusionMethod, SearchMode, Skill, SkillKind
from skillsearch.core.skill_uri import skill_uri
from skillsearch.core.views import Explanation, SearchHitView, SearchResponse

__all__ = ["Hit", "SearchRequest", "SearchResult", "search_response"]


@dataclass(frozen=True)
class SearchRequest:
    query: str
    limit: int = 10
    mode: SearchMode = "hybrid"
    kind: SkillKind | None = None
    tags: tuple[str, ...] = ()
    fusion: FusionMethod | None = None
    semantic_weight: float | None = None
    # Hits whose confidence is under this are left out (hybrid searches of an index with a fitted decision).
    min_confidence: float | None = None


@dataclass(frozen=True)
class Hit:
    skill: Skill
    score: float
    explanation: dict[str, Any]
    # Probability that this skill is one the request wants (hybrid mode; None without a fitted decision).
    confidence: float | None = None
    features: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class SearchResult:
    hits: list[Hit]
    no_match: bool
    mode: str
    fusion: str | None
    took_ms: float
    timings: dict[str, float] = field(default_factory=dict)
    # Why the list is empty: "low_confidence" (the fitted decision), "below_min_confidence" (the caller's
    # cut), "no_good_match" (no lexical match, cosine under the floor), "no_shared_word" (lexical mode, no
    # filter: no skill holds a word of the request), "no_candidates" (the filters or grants left nothing).
    no_match_reason: str | None = None
    # Set when the request is in a language the configured encoder cannot read (see ``MULTILINGUAL_OFF``).
    notice: str | None = None


def search_response(request: SearchRequest, result: SearchResult) -> SearchResponse:
    """The answer every surface shows for ``result``: rounded scores and each hit's explanation."""
    return SearchResponse(
        query=request.query,
        mode=result.mode,
        fusion=result.fusion,
        no_match=result.no_match,
        no_match_reason=result.no_match_reason,
        notice=result.notice,
        took_ms=round(result.took_ms, 3),
        hits=[
            SearchHitView(
                skill_id=h.skill.skill_id, slug=h.skill.slug, name=h.skill.name, description=h.skill.description,
                kind=h.skill.kind, tags=list(h.skill.tags), score=round(h.score, 6), confidence=h.confidence,
                explanation=Explanation(**h.explanation), skill_uri=skill_uri(h.skill.grant, h.skill.slug),
            )
            for h in result.hits
        ],
    )
