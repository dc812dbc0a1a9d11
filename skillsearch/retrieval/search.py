"""The search use case, as its stages: candidates -> fuse -> order -> re-check -> judge.

1. ``candidates_stage``: the grants the principal may see now (its set minus revoked subscriptions) go into
   both retrievers as a filter, so each returns its top ``CANDIDATE_DEPTH`` *visible* candidates; every
   candidate gets both raw scores, BM25 (0 when it does not match) and its exact cosine. A request of
   several sentences is also embedded sentence by sentence; a row's cosine is its best over these vectors.
   With ``minilm+e5`` the request's language picks one model, its columns of the matrix and its
   calibration (the snapshot's routing, ``retrieval/routing.py``); a multilingual encoder's cosines are
   taken against language-centered document vectors (``retrieval/calibration.py``).
2. ``fuse_stage``: the chosen fusion (``core/fusion.py``, a registry; default z-score convex combination,
   semantic weight 0.6 moved by ``LEXICAL_SHARE_SLOPE`` x (0.5 - the share of candidates that match
   lexically)) gives one score per candidate.
3. ``order_stage``: the one exact-name rule (a request that is a visible skill's slug, or the name of one
   of its lexical leaders, ranks that skill first), then the fused order.
4. ``recheck_stage``: the ordered candidates are re-checked against the store (status, grant, revocation,
   kind, tags) in chunks before they are returned: the index may lag the store by one batch, the answer
   may not.
5. ``judge_stage``: ``no_match`` when no candidate shares a word with the request and the top hit's cosine
   is under the encoder's floor, or the request holds no letter or digit, only emoji or punctuation (``no_good_match``),
   or when the fitted decision (``retrieval/confidence.py``) gives the top hit a confidence under its threshold
   (``low_confidence``). Every hybrid hit gets a ``confidence``; ``min_confidence`` leaves out the hits under it, in
   rank order, *before* the list is cut to ``limit`` (confidence is not monotonic in rank: a hit may be surer than the
   one above it). Both read the hit and the request (against the whole index), never the caller's other candidates:
   grants that add no better candidate change neither. A request naming its top hit exactly is never refused, and
   one the encoder cannot read gets a ``notice`` instead of a ``no_match``.

Every rule here is in ``docs/rules.md`` with the measurement that keeps it (``skillsearch bench lodo``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from skillsearch.catalog.read_cache import SkillReads
from skillsearch.catalog.reads import MAX_TAGS
from skillsearch.core.domain import (
    SEARCH_MODES,
    SKILL_KINDS,
    Principal,
    tag_key,
)
from skillsearch.core.errors import ValidationError, problem
from skillsearch.core.fusion import FUSIONS, Candidates, adapted_weight, candidates, fuse, fusion
from skillsearch.core.settings import Settings
from skillsearch.core.visibility import is_visible, visible_grants
from skillsearch.retrieval.calibration import centered_cosines
from skillsearch.retrieval.confidence import decision_of, judge, unreadable_language_notice
from skillsearch.retrieval.cosines import max_cosines
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.exact_name import exact_name_first, named_rows, same_name
from skillsearch.retrieval.indexer import IndexSnapshot
from skillsearch.retrieval.lexical import LexicalIndex
from skillsearch.retrieval.routing import RequestRoute
from skillsearch.retrieval.search_types import Hit, SearchRequest, SearchResult
from skillsearch.retrieval.text_terms import fold, has_words
from skillsearch.retrieval.visible_lexical import visible_lexical_matches

__all__ = [
    "CANDIDATE_DEPTH", "LEXICAL_SHARE_SLOPE", "QUERY_SENTENCES", "Found",
    "candidates_stage", "fuse_stage", "judge_stage", "order_stage", "query_texts",
    "recheck_stage", "run_search", "semantic_scores",
]

# How many candidates each retriever hands to fusion (docs/rules.md).
CANDIDATE_DEPTH = 100
# A request of several sentences is also embedded sentence by sentence, up to this many: past it, its first
# half and its last half, since an agent's long request ends with its ask (docs/rules.md).
QUERY_SENTENCES = 6
# The semantic weight moves by this much times (0.5 - the candidates' lexical share) (docs/rules.md).
LEXICAL_SHARE_SLOPE = 1.0

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def query_texts(query: str, max_sentences: int) -> list[str]:
    """The query, then each of its sentences of 3 words or more when it has several; past
    ``max_sentences`` of them, the first ``max_sentences // 2`` and the last ones.

    One vector for a request that asks for three things lands between them; a vector per sentence finds
    each. A skill's cosine is its best over these texts. An agent's long request gives its context first
    and its ask last, so its ends are kept (measured in docs/rules.md).
    """
    if max_sentences <= 0:
        return [query]
    parts = [p for p in _SENTENCE_END.split(query.strip()) if len(p.split()) >= 3]
    if len(parts) <= 1:
        return [query]
    if len(parts) > max_sentences:
        head = max_sentences // 2
        parts = parts[:head] + parts[len(parts) - (max_sentences - head):]
    return [query, *parts]


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
    if request.fusion is not None and request.fusion not in FUSIONS:
        problems.append(problem("fusion", f"fusion must be one of {', '.join(FUSIONS)}"))
    if request.semantic_weight is not None and not 0.0 <= request.semantic_weight <= 1.0:
        problems.append(problem("semantic_weight", "semantic_weight must be between 0 and 1"))
    if request.min_confidence is not None and not 0.0 <= request.min_confidence <= 1.0:
        problems.append(problem("min_confidence", "min_confidence must be between 0 and 1"))
    if len(request.tags) > MAX_TAGS:  # as every list and the HTTP routes take
        problems.append(problem("tags", f"at most {MAX_TAGS} tags"))
    if problems:
        raise ValidationError("; ".join(p["message"] for p in problems), {"problems": problems})
    return request


class Found(NamedTuple):
    """What the candidates stage hands on: the candidates, the mean and spread of the request's cosine over
    the whole index (before any visibility filter, ``VectorSnapshot.background``; None without a semantic
    side), the rows the request names exactly, the route that scored it, the notice for a request its
    encoder cannot read, and (hybrid) the request's terms and their IDF for the judge's features."""

    cands: Candidates
    background: tuple[float, float] | None
    named: np.ndarray
    route: RequestRoute
    notice: str | None
    revoked: frozenset[str]
    query_idf: dict[str, float]


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
    services over the same models, ``retrieval/batching.py``; a route not in it calls its model directly).

    The stages: candidates -> fuse -> order -> re-check -> judge."""
    started = time.perf_counter()
    request = validate(request, settings)
    method = fusion_of(request, settings)
    timings: dict[str, float] = {}
    found = candidates_stage(request, principal, snapshot, lexical, store, settings, query_encoders, timings)
    weight = semantic_weight(request, settings, found, method)
    fused = fuse_stage(found.cands, request.mode, method, weight)
    order = order_stage(found, fused, request)
    t = time.perf_counter()
    hits, picked = recheck_stage(found, fused, order, request, principal, snapshot, store, method, weight)
    timings["recheck_ms"] = (time.perf_counter() - t) * 1000
    reason = None
    if hits:
        hits, reason = judge_stage(hits, picked, found, request, settings, lexical)
    return SearchResult(
        hits=hits,
        no_match=not hits,
        no_match_reason=(reason or empty_reason(request, principal)) if not hits else None,
        notice=found.notice,
        mode=request.mode,
        fusion=method if request.mode == "hybrid" else None,
        took_ms=(time.perf_counter() - started) * 1000,
        timings=timings,
    )


def empty_reason(request: SearchRequest, principal: Principal) -> str:
    """Why nothing came back when no stage refused a hit: ``no_shared_word`` when a lexical search of a
    caller who sees every grant and asked for no kind or tag found no skill holding any of its words (no
    filter to blame), else ``no_candidates`` (the filters or the caller's grants left nothing to rank)."""
    if request.mode == "lexical" and principal.grants is None and not request.kind and not request.tags:
        return "no_shared_word"
    return "no_candidates"


def fusion_of(request: SearchRequest, settings: Settings) -> str:
    """The request's fusion, else the settings'; either must name a registered method."""
    name = request.fusion or settings.fusion
    fusion(name)  # raises ValidationError on an unknown name
    return name


def candidates_stage(
    request: SearchRequest, principal: Principal, snapshot: IndexSnapshot, lexical: LexicalIndex,
    store: SkillReads, settings: Settings, query_encoders: Mapping[str | None, Encoder] | None,
    timings: dict[str, float],
) -> Found:
    """Both retrievers under the caller's visibility: the top ``depth`` visible matches of each, with both
    scores of every candidate, and the request's cosines over the whole index."""
    vectors = snapshot.vectors
    use_lex = request.mode in ("lexical", "hybrid")
    use_sem = request.mode in ("semantic", "hybrid")
    # The route and the model read the request in Unicode's compatibility form, as the lexical side does: a
    # request typed in full-width Latin letters (as a Japanese input method types them) is
    # the English request it spells, routed to MiniLM, whose vocabulary has no full-width letters.
    folded = fold(request.query)
    route = snapshot.routing.route(folded)
    encoded = None
    if use_sem and len(vectors):
        # Started first: with a batching service a worker encodes while SQLite and Tantivy run below.
        t = time.perf_counter()
        texts = query_texts(folded, QUERY_SENTENCES)
        embed = (query_encoders or {}).get(route.route) or route.encoder
        soon = getattr(embed, "encode_soon", None)
        encoded = soon(texts[0], texts[1:]) if soon else (lambda: embed.encode_query_parts(texts[0], texts[1:]))
        timings["encode_ms"] = (time.perf_counter() - t) * 1000

    revoked = store.revoked_subscriptions()
    grants = sorted(visible_grants(principal, vectors.grant_names, revoked))
    # Fusion needs each retriever's deeper list; a single mode only needs the page and a margin for
    # candidates the re-check drops (an index a batch behind the store). Fewer hits also let Tantivy's
    # block-max WAND prune harder.
    depth = max(request.limit, CANDIDATE_DEPTH) if request.mode == "hybrid" else request.limit + 10
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
    # not need the query vectors, i.e. the lexical leaders' rows (kept by catalog/read_cache.py for the
    # re-check), the skills the request names (by slug, or a lexical leader by its name), whether the
    # route's model can read the request at all, and the IDF of the request's terms (the judge's features).
    leaders = store.skills([vectors.rows.skill_id(int(r)) for r in lex_rows[: request.limit + 5]])
    named = _NONE
    if request.mode != "semantic":
        by_name = [int(r) for r in lex_rows[: request.limit + 5]
                   if same_name(getattr(leaders.get(vectors.rows.skill_id(int(r))), "name", ""), request.query)]
        named = np.union1d(named_rows(request.query, store, snapshot, principal, revoked), by_name).astype(np.int64)
    notice = unreadable_language_notice(route.encoder, folded) if use_sem else None
    query_idf = lexical.query_idf(request.query, snapshot.searcher) if request.mode == "hybrid" else {}

    background: tuple[float, float] | None = None
    sem_all: np.ndarray | None = None
    sem_rows = np.zeros(0, np.int64)
    if encoded is not None and grants:
        t = time.perf_counter()
        queries = encoded()
        timings["encode_ms"] += (time.perf_counter() - t) * 1000  # the wait left after the lexical side
        t = time.perf_counter()
        # The vector stage (``VectorSnapshot.nearest_and_background``): the top ``depth`` visible rows by exact cosine, in
        # one pass for all the query's vectors; e5 scores relative to each document language's centroid
        # (skillsearch/retrieval/calibration.py). The lexical candidates' cosines are exact too. The
        # decision's background reads the whole index, whoever the caller is.
        shift = route.shift(queries)
        exact = np.union1d(lex_rows, named) if named.size else lex_rows
        sem_rows, sem_all, background = vectors.nearest_and_background(queries, depth, mask, route.columns,
                                                                       exact, shift)
        timings["vector_ms"] = (time.perf_counter() - t) * 1000
    # The skills the request names are candidates though neither retriever listed them (a slug unlike the
    # skill's name: ``skill-development``, named ``skill-creator``, holds its slug's common words only in
    # ``all``, and the skills named "... development" outrank it), so the exact-name rule ranks them first in
    # both modes that read it; in hybrid mode with their exact cosine (``exact`` above). ``named_rows`` holds
    # visible skills only; their kind and tags are the re-check's (and the mask's: a row it hides has no
    # cosine to fuse, so it stays out).
    also = named if sem_all is None else named[np.isfinite(sem_all[named])]
    cands = candidates(lex_rows, lex_scores, sem_rows, sem_all, also)
    return Found(cands, background, named, route, notice, revoked, query_idf)


def semantic_weight(request: SearchRequest, settings: Settings, found: Found, method: str) -> float:
    """The request's weight, else one tuned by ``skillsearch calibrate --queries``, both as given, else the
    settings' weight moved by the candidates' lexical share (``core/fusion.adapted_weight``) unless the
    encoder cannot read the request."""
    given = request.semantic_weight
    if given is None:
        given = (found.route.calibration or {}).get("semantic_weight")
    if isinstance(given, (int, float)):
        return float(given)
    # An encoder that cannot read the request gives no reason to lean on its cosines.
    slope = LEXICAL_SHARE_SLOPE if found.notice is None else 0.0
    return adapted_weight(found.cands, method, settings.semantic_weight, slope)


def fuse_stage(c: Candidates, mode: str, method: str, weight: float) -> np.ndarray:
    """One score per candidate: BM25 alone, the cosine alone, or the fusion of both (``core/fusion.py``)."""
    if mode == "lexical":
        return c.lexical.astype(np.float64)
    if mode == "semantic":
        return c.semantic.astype(np.float64)
    return fuse(c, method, weight)


def order_stage(found: Found, fused: np.ndarray, request: SearchRequest) -> np.ndarray:
    """Candidate indices best first: the skills the request names exactly first (:func:`exact_name_first`),
    then by fused score; lexical mode keeps only lexical matches and the skills the request names."""
    c = found.cands
    order = np.argsort(-exact_name_first(c.rows, fused, found.named), kind="stable")
    if request.mode != "lexical":
        return order
    return order[(c.lexical_rank[order] > 0) | np.isin(c.rows[order], found.named)]


def recheck_stage(
    found: Found, fused: np.ndarray, order: np.ndarray, request: SearchRequest, principal: Principal,
    snapshot: IndexSnapshot, store: SkillReads, method: str, weight: float,
) -> tuple[list[Hit], list[int]]:
    """The first ``limit`` candidates the store still shows the caller (status, grant, revocation, kind and
    tags; all of them for a hybrid ``min_confidence``, which the judge cuts first), read in chunks: the index may
    lag the store by one batch, the answer may not. Returns the hits and each one's index in the candidates."""
    rows, hits, picked = found.cands.rows, list[Hit](), list[int]()
    wanted = order.size if request.min_confidence is not None and request.mode == "hybrid" else request.limit
    chunk = wanted + 5
    wanted_tags = {tag_key(t) for t in request.tags}
    for start in range(0, order.size, chunk):
        part = order[start : start + chunk]
        ids = [snapshot.vectors.rows.skill_id(int(rows[i])) for i in part]
        skills = store.skills(ids)
        for i, skill_id in zip(part, ids, strict=True):
            skill = skills.get(skill_id)
            if skill is None or not (is_visible(skill.status, skill.grant, principal, found.revoked)
                                     and (not request.kind or skill.kind == request.kind)
                                     and wanted_tags <= {tag_key(t) for t in skill.tags}):
                continue
            hits.append(Hit(skill, float(fused[i]), _explain(found.cands, int(i), fused, method, weight, request.mode)))
            picked.append(int(i))
            if len(hits) == wanted:
                return hits, picked
    return hits, picked


def judge_stage(
    hits: list[Hit], picked: list[int], found: Found, request: SearchRequest, settings: Settings,
    lexical: LexicalIndex,
) -> tuple[list[Hit], str | None]:
    """Whether the top hit is good enough, and each hit's confidence (hybrid; ``retrieval/confidence.py``).

    ``no_good_match``: no candidate shares a word with the request and the top hit's cosine is under the
    encoder's floor (:func:`no_match_threshold`) or the request holds no letter or digit (``has_words``);
    ``low_confidence``: the fitted decision says the top hit does not fit. Both read the top hit and the
    request only. Never refused: a request naming its top hit exactly, one the encoder cannot read, one with
    a kind or tag filter (the decision was fitted on unfiltered searches)."""
    c, top = found.cands, picked[0]
    named_first = bool(found.named.size) and int(c.rows[top]) in set(found.named.tolist())
    abstain = settings.abstain and found.notice is None and not named_first
    floor = no_match_threshold(settings, found.route.encoder, found.route.calibration) if has_words(request.query) else np.inf
    if abstain and request.mode != "lexical" and not (c.lexical_rank > 0).any() and float(c.semantic[top]) < floor:
        return [], "no_good_match"
    if request.mode != "hybrid":
        return hits, None
    return judge(hits, c, picked, request, decision_of(found.route.calibration),
                 abstain and not request.kind and not request.tags,
                 background=found.background, lexical=lexical, query_idf=found.query_idf)


_NONE = np.zeros(0, np.int64)


def semantic_scores(route: RequestRoute, queries: np.ndarray) -> np.ndarray:
    """Every row's cosine with the request: the best over its vectors (``(n, dim)``, the whole request and
    its sentences). e5 scores relative to each document language's centroid (``retrieval/calibration.py``);
    otherwise one pass over the matrix for all the vectors (``max_cosines``, measured there)."""
    if route.centering is not None:
        scores = centered_cosines(route.matrix, queries, route.centering, route.language_codes)
        return np.asarray(scores.max(axis=0) if scores.ndim == 2 else scores, dtype=np.float32)
    return max_cosines(route.matrix, queries)


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
