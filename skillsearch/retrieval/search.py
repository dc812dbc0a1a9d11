"""The search use case: both retrievers under the caller's visibility, fused, re-checked, explained.

1. The grants the principal may see now (its set minus revoked subscriptions) go into both retrievers as
   a filter, so each returns its top ``depth`` *visible* candidates.
2. Every candidate gets both raw scores: BM25 (0 when it does not match) and its exact cosine. A full
   lexical list (``depth`` matches) leaves out matches below its last score: a candidate it left out gets
   ``unlisted_lexical_share`` of that score instead of 0, since its own lies somewhere under it.
3. The chosen fusion (default: z-score convex combination, semantic weight 0.6 moved by the share of
   candidates that match lexically, ``core/fusion.adapted_weight``) orders them.
4. The fused list is re-checked against the store in one query (status, grant, revocation) before it is
   returned: the index may lag the store by one batch, the answer may not.
   A multilingual encoder's cosines are taken against language-centered document vectors (the index's
   calibration holds the centroids, see ``skillsearch/retrieval/calibration.py``).
   With ``minilm+e5`` the request's language picks one model, its columns of the matrix and its
   calibration (the snapshot's routing, ``skillsearch/retrieval/routing.py``); everything below uses that
   route's numbers.
5. ``no_match``: when no candidate matches lexically and the best cosine is under the encoder's
   dev-measured threshold (``Encoder.no_match_cosine``) or else its calibrated one, nothing is a good
   match and the list is left empty rather than padded with noise; so it is when the fitted decision
   (``skillsearch/retrieval/confidence.py``) says nothing fits (``no_match_reason`` says which). The
   decision is per query, not per hit, so a good match never loses its weaker neighbours. Every hybrid
   hit gets a ``confidence`` (monotone with rank); ``min_confidence`` cuts the list. A request that is
   exactly a skill's slug or name ranks it first and is never refused; a request the encoder cannot read
   gets a ``notice`` instead of a ``no_match``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from skillsearch.catalog.importer import slugify
from skillsearch.catalog.read_cache import SkillReads
from skillsearch.core.domain import (
    FUSION_METHODS,
    SEARCH_MODES,
    SKILL_KINDS,
    FusionMethod,
    Principal,
    SearchMode,
    Skill,
    SkillKind,
)
from skillsearch.core.errors import ValidationError, problem
from skillsearch.core.fusion import Candidates, adapted_weight, candidates, fuse
from skillsearch.core.settings import Settings
from skillsearch.core.skill_uri import skill_uri
from skillsearch.core.views import Explanation, SearchHitView, SearchResponse
from skillsearch.core.visibility import is_visible, visible_grants
from skillsearch.retrieval.confidence import Background, decision_of, judge, unreadable_language_notice
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.indexer import IndexSnapshot
from skillsearch.retrieval.lexical import LexicalIndex
from skillsearch.retrieval.visible_lexical import visible_lexical_matches

__all__ = ["Hit", "SearchRequest", "SearchResult", "run_search", "search_response"]

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
    # cut), "no_good_match" (no lexical match, cosine under the floor), "no_candidates".
    no_match_reason: str | None = None
    # Set when the request is in a language the configured encoder cannot read (see ``MULTILINGUAL_OFF``).
    notice: str | None = None


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def query_texts(query: str, max_sentences: int) -> list[str]:
    """The query, then each of its sentences of 3 words or more when it has several.

    One vector for a request that asks for three things lands between them; a vector per sentence finds
    each. A skill's cosine is its best over these texts.
    """
    if max_sentences <= 0:
        return [query]
    parts = [p for p in _SENTENCE_END.split(query.strip()) if len(p.split()) >= 3]
    return [query, *parts[:max_sentences]] if len(parts) > 1 else [query]


def validate(request: SearchRequest, settings: Settings) -> SearchRequest:
    problems: list[dict[str, str]] = []
    query = request.query.strip() if isinstance(request.query, str) else ""
    if not query:
        problems.append(problem("query", "query must not be empty"))
    if len(request.query) > settings.max_query_chars:
        problems.append(problem("query", f"query is longer than {settings.max_query_chars} characters"))
    if not 1 <= request.limit <= settings.max_limit:
        problems.append(problem("limit", f"limit must be between 1 and {settings.max_limit}"))
    if request.mode not in SEARCH_MODES:
        problems.append(problem("mode", f"mode must be one of {', '.join(SEARCH_MODES)}"))
    if request.kind is not None and request.kind not in SKILL_KINDS:
        problems.append(problem("kind", f"kind must be one of {', '.join(SKILL_KINDS)}"))
    if request.fusion is not None and request.fusion not in FUSION_METHODS:
        problems.append(problem("fusion", f"fusion must be one of {', '.join(FUSION_METHODS)}"))
    if request.semantic_weight is not None and not 0.0 <= request.semantic_weight <= 1.0:
        problems.append(problem("semantic_weight", "semantic_weight must be between 0 and 1"))
    if request.min_confidence is not None and not 0.0 <= request.min_confidence <= 1.0:
        problems.append(problem("min_confidence", "min_confidence must be between 0 and 1"))
    if problems:
        raise ValidationError("; ".join(p["message"] for p in problems), {"problems": problems})
    return request


def run_search(
    request: SearchRequest,
    principal: Principal,
    *,
    snapshot: IndexSnapshot,
    lexical: LexicalIndex,
    store: SkillReads,
    settings: Settings,
    query_encoders: Mapping[str | None, Encoder] | None = None,
) -> SearchResult:
    """``request`` as ``principal`` over one index snapshot (its vectors, searcher and routing, whose
    encoder and calibration apply) and the store the answer is re-checked against. ``query_encoders``: what
    embeds a route's requests instead of the route's own encoder, by route key (the catalog's batching
    services over the same models, ``retrieval/batching.py``; a route not in it calls its model directly)."""
    started = time.perf_counter()
    request = validate(request, settings)
    timings: dict[str, float] = {}
    vectors = snapshot.vectors
    use_lex = request.mode in ("lexical", "hybrid")
    use_sem = request.mode in ("semantic", "hybrid")
    route = snapshot.routing.route(request.query)
    encoded = None
    if use_sem and len(vectors):
        # Started first: with a batching service a worker encodes while SQLite and Tantivy run below.
        t = time.perf_counter()
        texts = query_texts(request.query, settings.query_sentences)
        embed = (query_encoders or {}).get(route.route) or route.encoder
        soon = getattr(embed, "encode_soon", None)
        encoded = soon(texts[0], texts[1:]) if soon else (lambda: embed.encode_query_parts(texts[0], texts[1:]))
        timings["encode_ms"] = (time.perf_counter() - t) * 1000

    revoked = store.revoked_subscriptions()
    grants = sorted(visible_grants(principal, vectors.grant_names, revoked))
    # Fusion needs each retriever's deeper list; a single mode only needs the page and a margin for
    # candidates the re-check drops (an index a batch behind the store). Fewer hits also let Tantivy's
    # block-max WAND prune harder.
    depth = max(request.limit, settings.candidate_depth) if request.mode == "hybrid" else request.limit + 10
    method: FusionMethod = request.fusion or settings.fusion  # type: ignore[assignment]
    # Rows the caller may see and asked for; None when that is every row (no filter anywhere).
    everything = set(vectors.grant_names) <= set(grants) and not request.kind and not request.tags
    mask = None if everything or not grants else vectors.mask(grants, request.kind, request.tags)

    lex_rows = np.zeros(0, np.int64)
    lex_scores = np.zeros(0, np.float32)
    if use_lex and grants:
        t = time.perf_counter()
        lex_rows, lex_scores = visible_lexical_matches(lexical, request.query, grants, depth, snapshot, mask,
                                                       request.kind, request.tags)
        timings["lexical_ms"] = (time.perf_counter() - t) * 1000

    # While the model works (a batching worker holds no GIL in its forward pass): the store reads that do
    # not need the query vectors, i.e. the skills a request that is a slug or name names, and the lexical
    # leaders' rows, which the kept reads (catalog/read_cache.py) then hand to the re-check below.
    slug_rows = _named_rows(request.query, store, snapshot, principal, revoked) if request.mode != "semantic" else None
    if encoded:
        store.skills([vectors.rows[int(r)].skill_id for r in lex_rows[: request.limit + 5]])

    sem_all: np.ndarray | None = None
    sem_rows = np.zeros(0, np.int64)
    if encoded is not None and grants:
        t = time.perf_counter()
        queries = encoded()
        timings["encode_ms"] += (time.perf_counter() - t) * 1000  # the wait left after the lexical side
        t = time.perf_counter()
        # The vector stage (``VectorSnapshot.nearest``): the top ``depth`` visible rows by exact cosine, in
        # one pass for all the query's vectors; e5 scores relative to each document language's centroid
        # (skillsearch/retrieval/calibration.py). The lexical candidates' cosines are exact too.
        sem_rows, sem_all = vectors.nearest(queries, depth, mask, route.columns, lex_rows, route.shift(queries))
        timings["vector_ms"] = (time.perf_counter() - t) * 1000

    cands = candidates(lex_rows, lex_scores, sem_rows, sem_all, _unlisted_lexical(request, settings, lex_scores, depth))
    notice = unreadable_language_notice(route.encoder, request.query) if use_sem else None
    weight = _semantic_weight(request, settings, snapshot.routing.calibration, cands, method, notice is None)
    rows, lexical_score, semantic, lexical_rank = cands.rows, cands.lexical, cands.semantic, cands.lexical_rank

    if request.mode == "lexical":
        fused = lexical_score.astype(np.float64)
    elif request.mode == "semantic":
        fused = semantic.astype(np.float64)
    else:
        fused = fuse(cands, method, weight, settings.rrf_k)

    fused, exact = _exact_name_first(rows, fused, slug_rows) if slug_rows is not None else (fused, False)
    decision = decision_of(route.calibration) if request.mode == "hybrid" else None
    threshold = no_match_threshold(settings, route.encoder, route.calibration)
    keep = np.ones(rows.size, dtype=bool)
    reason = None
    if request.mode == "lexical":
        keep = lexical_rank > 0
    elif (settings.abstain and notice is None and not (lexical_rank > 0).any()
          and (semantic.size == 0 or float(semantic.max()) < threshold)):
        keep, reason = np.zeros(rows.size, dtype=bool), "no_good_match"
    order = np.argsort(-fused, kind="stable")
    order = order[keep[order]]

    # Re-check visibility on the fused list against the store, in one round trip.
    t = time.perf_counter()
    hits_out: list[Hit] = []
    picked: list[int] = []
    chunk = request.limit + 5
    for start in range(0, order.size, chunk):
        part = order[start : start + chunk]
        ids = [vectors.rows[int(rows[i])].skill_id for i in part]
        skills = store.skills(ids)
        for i, skill_id in zip(part, ids, strict=True):
            skill = skills.get(skill_id)
            if skill is None or not (is_visible(skill.status, skill.grant, principal, revoked)
                                     and (not request.kind or skill.kind == request.kind)
                                     and set(request.tags) <= set(skill.tags)):
                continue
            hits_out.append(Hit(skill, float(fused[i]), _explain(cands, int(i), fused, method, weight, request.mode)))
            picked.append(int(i))
            if len(hits_out) == request.limit:
                break
        if len(hits_out) == request.limit:
            break
    timings["recheck_ms"] = (time.perf_counter() - t) * 1000
    named = next((j for j, h in enumerate(hits_out) if _same_name(h.skill.name, request.query)), None)
    if named and request.mode != "semantic":
        hits_out.insert(0, hits_out.pop(named))
        picked.insert(0, picked.pop(named))
    exact = exact or named is not None
    # The decision was fitted on unfiltered searches: a kind or tag filter changes the candidate set its
    # features describe, so such a request keeps only the floor rule above (its hits still get confidences).
    abstain_by_decision = (settings.abstain and notice is None and not exact and not request.kind
                           and not request.tags)
    if request.mode == "hybrid" and hits_out:
        background = Background.of(sem_all, filtered=mask is not None)
        hits_out, reason = judge(hits_out, picked, cands, request, decision, abstain_by_decision,
                                 lexical=lexical, searcher=snapshot.searcher, background=background)
    return SearchResult(
        hits=hits_out,
        no_match=not hits_out,
        no_match_reason=(reason or "no_candidates") if not hits_out else None,
        notice=notice,
        mode=request.mode,
        fusion=method if request.mode == "hybrid" else None,
        took_ms=(time.perf_counter() - started) * 1000,
        timings=timings,
    )


def _unlisted_lexical(request: SearchRequest, settings: Settings, lex_scores: np.ndarray, depth: int) -> float:
    """The BM25 a hybrid candidate outside the lexical list is given: 0 when the list holds every match (it
    has fewer than ``depth``), else ``unlisted_lexical_share`` of the list's last score (its true score lies
    between 0 and that; docs/benchmarks.md, "Candidates below a full lexical list")."""
    if request.mode != "hybrid" or lex_scores.size < depth:
        return 0.0
    return settings.unlisted_lexical_share * float(lex_scores.min())


def _named_rows(
    query: str, store: SkillReads, snapshot: IndexSnapshot, principal: Principal, revoked: frozenset[str],
) -> np.ndarray:
    """The vector rows of the visible skills whose slug the request is, or whose name written as one it is
    (``Django Pro``, ``django-pro``). Only short requests are looked up (a slug has 64 characters)."""
    slug = slugify(query) if len(query) <= 80 else ""
    if not slug:
        return np.zeros(0, np.int64)
    found = [snapshot.vectors.row_of(s.skill_id) for s in store.skills_by_slug(slug)
             if is_visible(s.status, s.grant, principal, revoked)]
    return np.asarray([r for r in found if r is not None], np.int64)


def _exact_name_first(rows: np.ndarray, fused: np.ndarray, named: np.ndarray) -> tuple[np.ndarray, bool]:
    """The candidates among ``named`` (:func:`_named_rows`) rank first, above every fused score; several such
    skills (one slug in several grants) keep their fused order among themselves."""
    where = np.flatnonzero(np.isin(rows, named)) if named.size else named
    if where.size == 0:
        return fused, False
    out = fused.copy()
    out[where] += float(fused.max() - fused.min()) + 1.0
    return out, True


def _same_name(name: str, query: str) -> bool:
    return " ".join(name.split()).casefold() == " ".join(query.split()).casefold()


def _semantic_weight(
    request: SearchRequest, settings: Settings, calibration: dict[str, Any] | None, c: Candidates, method: FusionMethod,
    readable: bool,
) -> float:
    """The request's weight, else one tuned by ``skillsearch calibrate --queries``, both as given, else the
    settings' weight moved by the lexical share (``adapted_weight``) unless the encoder cannot read the request."""
    given = request.semantic_weight if request.semantic_weight is not None else (calibration or {}).get("semantic_weight")
    if isinstance(given, (int, float)):
        return float(given)
    return adapted_weight(c, method, settings.semantic_weight, settings.lexical_share_slope if readable else 0.0)


def no_match_threshold(settings: Settings, encoder: Encoder, calibration: dict[str, Any] | None) -> float:
    """The settings' value, else the encoder's dev-measured value, else the index's calibration."""
    if settings.no_match_cosine is not None:
        return float(settings.no_match_cosine)
    if encoder.no_match_cosine is not None:
        return encoder.no_match_cosine
    return float((calibration or {}).get("no_match_cosine", 0.25))


def _explain(
    c: Candidates, i: int, fused: np.ndarray, method: str, weight: float, mode: str
) -> dict[str, Any]:
    return {
        "lexical_rank": int(c.lexical_rank[i]) or None,
        "lexical_score": round(float(c.lexical[i]), 4) if c.lexical_rank[i] else None,
        "semantic_rank": int(c.semantic_rank[i]) or None,
        "semantic_score": round(float(c.semantic[i]), 4) if mode != "lexical" else None,
        "fused_score": round(float(fused[i]), 4),
        "fusion": method if mode == "hybrid" else None,
        "semantic_weight": round(weight, 4) if mode == "hybrid" else None,
    }


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
