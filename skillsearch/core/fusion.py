"""Fusion of the lexical and semantic rankings, as pure functions over aligned candidate arrays.

The candidate set is the union of both retrievers' top lists. For every candidate both raw scores are
known: the BM25 score (0 where the document does not match the query) and the exact cosine (the vector
store scores every row). Fusion turns them into one score per candidate.

Methods (design section 4), a registry (:data:`FUSIONS`) looked up by name; an unknown name raises
:class:`~skillsearch.core.errors.ValidationError`:
- ``zscore``: convex combination of per-query z-score-normalised scores. The default: on the dev splits of
  MetaTool and Seal-Tools it is the only family in which one weight beats both single retrievers.
- ``minmax``: convex combination of per-query min-max-normalised scores.
- ``rrf``: reciprocal rank fusion, ``sum w_i / (k + rank_i)``, k = 60 after Cormack, Clarke and Buettcher,
  "Reciprocal Rank Fusion outperforms Condorcet and individual Rank Learning Methods" (SIGIR 2009).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from skillsearch.core.domain import FusionMethod
from skillsearch.core.errors import ValidationError

__all__ = [
    "FUSIONS", "RRF_K", "Candidates", "Fusion", "FusionMethod", "adapted_weight", "candidates", "fuse", "fusion",
    "lexical_share", "minmax", "zscore",
]

RRF_K = 60


class Candidates(NamedTuple):
    """Aligned arrays over the candidate set; ranks are 1-based and 0 where a retriever did not list it."""

    rows: np.ndarray
    lexical: np.ndarray
    semantic: np.ndarray
    lexical_rank: np.ndarray
    semantic_rank: np.ndarray


def candidates(
    lex_rows: np.ndarray, lex_scores: np.ndarray, sem_rows: np.ndarray, semantic_all: np.ndarray | None,
    also: np.ndarray | None = None,
) -> Candidates:
    """The union of both top lists (each best first), with both scores and both ranks of every member.
    ``semantic_all`` holds every row's cosine (None when the semantic side did not run); a candidate the
    lexical list does not hold gets BM25 0. ``also``: rows that are candidates though neither list holds
    them (rank 0 in both)."""
    extra = also if also is not None else np.zeros(0, np.int64)
    rows, where = np.unique(np.concatenate([lex_rows, sem_rows, extra]), return_inverse=True)
    lexical = np.zeros(rows.size, np.float32)
    lexical_rank = np.zeros(rows.size, np.int64)
    semantic_rank = np.zeros(rows.size, np.int64)
    lexical[where[: lex_rows.size]] = lex_scores
    lexical_rank[where[: lex_rows.size]] = np.arange(1, lex_rows.size + 1)
    semantic_rank[where[lex_rows.size : lex_rows.size + sem_rows.size]] = np.arange(1, sem_rows.size + 1)
    semantic = semantic_all[rows].astype(np.float32) if semantic_all is not None else np.zeros(rows.size, np.float32)
    return Candidates(rows, lexical, semantic, lexical_rank, semantic_rank)


def zscore(x: np.ndarray) -> np.ndarray:
    if x.size == 0:
        return x.astype(np.float64)
    std = float(x.std())
    if std == 0.0:
        return np.zeros(x.shape, dtype=np.float64)
    out: np.ndarray = (x - x.mean()) / std
    return out


def minmax(x: np.ndarray) -> np.ndarray:
    if x.size == 0:
        return x.astype(np.float64)
    lo, hi = float(x.min()), float(x.max())
    if hi == lo:
        return np.zeros(x.shape, dtype=np.float64)
    return (x - lo) / (hi - lo)


def _rrf_term(ranks: np.ndarray, k: int) -> np.ndarray:
    return np.where(ranks > 0, 1.0 / (k + np.maximum(ranks, 1)), 0.0)


def lexical_share(c: Candidates) -> float:
    """The share of the candidates that match the request lexically (0 for an empty set)."""
    return float((c.lexical_rank > 0).mean()) if c.rows.size else 0.0


def adapted_weight(c: Candidates, method: str, weight: float, slope: float) -> float:
    """``weight`` moved by the share of candidates with a lexical match: ``weight + slope * (0.5 - share)``,
    clipped to [0, 1]; ``rrf`` (ranks only) and ``slope`` 0 keep ``weight``. A request few documents match
    lexically leans on the cosines; one whose two lists mostly coincide leans on BM25 (docs/rules.md)."""
    if method == "rrf" or slope == 0.0 or c.rows.size == 0:
        return float(weight)
    return float(np.clip(weight + slope * (0.5 - lexical_share(c)), 0.0, 1.0))


def _convex(norm: Callable[[np.ndarray], np.ndarray]) -> Fusion:
    def fused(c: Candidates, w: float) -> np.ndarray:
        return (1.0 - w) * norm(c.lexical.astype(np.float64)) + w * norm(c.semantic.astype(np.float64))
    return fused


def _rrf(c: Candidates, w: float) -> np.ndarray:
    return np.asarray((1.0 - w) * _rrf_term(c.lexical_rank, RRF_K) + w * _rrf_term(c.semantic_rank, RRF_K))


# One fused score per candidate from the candidates and the semantic weight in [0, 1]; higher is better.
Fusion = Callable[[Candidates, float], np.ndarray]
FUSIONS: dict[str, Fusion] = {"zscore": _convex(zscore), "minmax": _convex(minmax), "rrf": _rrf}


def fusion(name: str) -> Fusion:
    """The fusion method called ``name``; an unknown name is a :class:`ValidationError` (never a fallback)."""
    found = FUSIONS.get(name)
    if found is None:
        raise ValidationError(f"unknown fusion {name!r}; choose one of {', '.join(FUSIONS)}",
                              {"fusion": name, "choices": list(FUSIONS)})
    return found


def fuse(c: Candidates, method: str, semantic_weight: float) -> np.ndarray:
    """One fused score per candidate by the method called ``method`` (see :func:`fusion`)."""
    return fusion(method)(c, float(semantic_weight))
