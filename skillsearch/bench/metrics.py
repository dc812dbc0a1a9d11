"""Ranking metrics, from ``pytrec_eval`` (trec_eval's own code): the one module that imports it.

A run is ``{query_id: [doc_id, ...]}`` best first. Scores handed to trec_eval are derived from the rank, so
its tie-breaking (by document id) never reorders a list. Queries the run has no answer for count as 0,
so a retriever cannot improve its mean by returning nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytrec_eval

__all__ = ["METRICS", "evaluate", "per_query"]

METRICS: tuple[str, ...] = ("ndcg@10", "recall@10", "recall@50", "mrr@10", "p@1")

_TREC = {"ndcg@10": "ndcg_cut_10", "recall@10": "recall_10", "recall@50": "recall_50", "p@1": "P_1"}


def _scored(run: Mapping[str, Sequence[str]], depth: int | None = None) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for qid, docs in run.items():
        ranked = list(dict.fromkeys(docs))[:depth] if depth else list(dict.fromkeys(docs))
        if ranked:
            out[qid] = {d: float(len(ranked) - i) for i, d in enumerate(ranked)}
    return out


def per_query(qrels: Mapping[str, Mapping[str, int]], run: Mapping[str, Sequence[str]]) -> dict[str, dict[str, float]]:
    """Every metric of :data:`METRICS` for every judged query (0 where the run has nothing)."""
    judged = {q: {d: int(s) for d, s in rel.items()} for q, rel in qrels.items() if rel}
    full = pytrec_eval.RelevanceEvaluator(judged, {"ndcg_cut.10", "recall.10,50", "P.1"}).evaluate(_scored(run))
    top10 = pytrec_eval.RelevanceEvaluator(judged, {"recip_rank"}).evaluate(_scored(run, 10))
    out: dict[str, dict[str, float]] = {}
    for qid in judged:
        values = {name: float(full.get(qid, {}).get(key, 0.0)) for name, key in _TREC.items()}
        values["mrr@10"] = float(top10.get(qid, {}).get("recip_rank", 0.0))
        out[qid] = {m: values[m] for m in METRICS}
    return out


def evaluate(qrels: Mapping[str, Mapping[str, int]], run: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """Mean of each metric over the judged queries of ``qrels``."""
    rows = per_query(qrels, run)
    n = max(len(rows), 1)
    return {m: sum(r[m] for r in rows.values()) / n for m in METRICS}
