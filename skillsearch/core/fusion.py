"""Fusion of the lexical and semantic rankings, as pure functions over aligned candidate arrays.

The candidate set is the union of both retrievers' top lists. For every candidate both raw scores are
known: the BM25 score (0 where the document does not match the query) and the exact cosine (the vector
store scores every row). Fusion turns them into one score per candidate.

Methods (design section 4):
- ``zscore``: convex combination of per-query z-score-normalised scores. The default: on the dev splits of
  MetaTool and Seal-Tools it is the only family in which one weight beats both single retrievers.
- ``minmax``: convex combination of per-query min-max-normalised scores.
- ``rrf``: reciprocal rank fusion, ``sum w_i / (k + rank_i)``, k = 60 after Cormack, Clarke and Buettcher,
  "Reciprocal Rank Fusion outperforms Condorcet and individual Rank Learning Methods" (SIGIR 2009).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from skillsearch.core.domain import FusionMethod

__all__ = [
    "RRF_K", "Candidates", "FusionMethod", "adapted_weight", "candidates", "fuse", "lexical_share", "minmax", "zscore",
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
    unlisted_lexical: float = 0.0,
) -> Candidates:
    """The union of both top lists (each best first), with both scores and both ranks of every member.
    ``semantic_all`` holds every row's cosine (None when the semantic side did not run); a candidate the
    lexical list does not hold gets ``unlisted_lexical`` as its BM25 (0: it does not match)."""
    rows, where = np.unique(np.concatenate([lex_rows, sem_rows]), return_inverse=True)
    lexical = np.full(rows.size, unlisted_lexical, np.float32)
    lexical_rank = np.zeros(rows.size, np.int64)
    semantic_rank = np.zeros(rows.size, np.int64)
    lexical[where[: lex_rows.size]] = lex_scores
    lexical_rank[where[: lex_rows.size]] = np.arange(1, lex_rows.size + 1)
    semantic_rank[where[lex_rows.size :]] = np.arange(1, sem_rows.size + 1)
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


def adapted_weight(c: Candidates, method: FusionMethod, weight: float, slope: float) -> float:
    """``weight`` moved by the share of candidates with a lexical match: ``weight + slope * (0.5 - share)``,
    clipped to [0, 1]; ``rrf`` (ranks only) and ``slope`` 0 keep ``weight``.

    Both retrievers hand over ``depth`` candidates, so a full lexical list makes the share at least 0.5, and
    more the more the two lists agree. A request few documents match lexically (share under 0.5) leaves a
    column of zeros with a few matches that z-scoring inflates; it leans on the cosines. A request whose
    lexical and semantic lists mostly coincide leans on BM25 to order that common set. Chosen on the dev
    splits of all three sets (``docs/benchmarks.md``, "Semantic weight by lexical share")."""
    if method == "rrf" or slope == 0.0 or c.rows.size == 0:
        return float(weight)
    return float(np.clip(weight + slope * (0.5 - lexical_share(c)), 0.0, 1.0))


def fuse(c: Candidates, method: FusionMethod, semantic_weight: float, rrf_k: int = RRF_K) -> np.ndarray:
    """One fused score per candidate; higher is better. ``semantic_weight`` is in [0, 1]."""
    w = float(semantic_weight)
    if method == "rrf":
        return (1.0 - w) * _rrf_term(c.lexical_rank, rrf_k) + w * _rrf_term(c.semantic_rank, rrf_k)
    norm = zscore if method == "zscore" else minmax
    return (1.0 - w) * norm(c.lexical.astype(np.float64)) + w * norm(c.semantic.astype(np.float64))
