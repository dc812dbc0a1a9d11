"""The search's request, its hits and its result: the types the stages (``retrieval/search.py``), the
decision (``retrieval/confidence.py``) and every surface share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from skillsearch.core.domain import FusionMethod, SearchMode, Skill, SkillKind

__all__ = ["Hit", "SearchRequest", "SearchResult"]


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
