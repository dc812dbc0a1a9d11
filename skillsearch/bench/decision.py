"""Fitting the decision with the leave-one-dataset-out protocol (``skillsearch bench lodo``).

Data: the top ``LIMIT`` hits of every dev request of the four sets under the shipped ranking
(:mod:`skillsearch.bench.lodo`), each with the features search computes
(:data:`~skillsearch.retrieval.confidence.FEATURES`: the hit's own numbers and the request's against the
whole catalog, none of the caller's visible subset) and whether it is a wanted skill.

One model: scikit-learn's ``LogisticRegression`` over the standardised features, each set weighing the same
in the loss, gives every hit its confidence (how often a hit at that confidence is right: the reliability
table). ``no_match``: the top hit's *fit*, a fixed sum of its features (``REFUSALS``), is under
``no_match_below``, the largest threshold under which at most ``QUANTILE`` of each training set's answerable
requests fall. The negatives (the skills set's requests nothing fits) are never fitted on; they only compare
the candidate fits, each scored on them with the skills set left out. The confidence is not the fit: it
learns "is this hit right", leans on ``cos_z``, and ``cos_z`` is high for a request the catalog does not
cover (every cosine is low, so the best one stands out), so it refused almost none of them.

LODO: for each set, the model and the threshold come from the other sets and are scored on it (false
refusals among its answerable requests, no_match among its negatives, the reliability table). ``QUANTILE``
is the largest of ``QUANTILES`` whose worst left-out false-refusal rate is at most ``MAX_FALSE_REFUSAL``;
the report lists every quantile (the trade-off between false refusals and negatives answered ``no_match``).
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from skillsearch.bench.lodo import Plan, rank
from skillsearch.bench.lodo_data import SetData
from skillsearch.retrieval.confidence import DECISION_VERSION, FEATURES, feature_rows, refusal_weights

__all__ = [
    "MAX_FALSE_REFUSAL", "QUANTILES", "REFUSAL", "REFUSALS", "abstention", "fit_model", "hit_table", "lodo_decision", "threshold",
    "write_decision",
]

MAX_FALSE_REFUSAL = 0.01
QUANTILES = (0.03, 0.02, 0.015, 0.01, 0.0075, 0.005, 0.0025, 0.0)
# A request the floor rule refuses counts as scoring this (under every threshold).
FLOORED = -10.0
# The fit ``no_match`` reads: a fixed sum of the top hit's features (``retrieval/confidence.py``). Each is
# scored with the left-out protocol (``refusals`` in the report); ``REFUSAL`` is shipped. Fixed weights, not
# fitted: only the skills set has negatives, so a set left out could not have them in its fit.
REFUSALS: dict[str, dict[str, float]] = {
    "cos + cos_bg + coverage/2": {"cos": 1.0, "cos_bg": 1.0, "coverage": 0.5},
    "cos + cos_bg": {"cos": 1.0, "cos_bg": 1.0},
    "cos + coverage/2": {"cos": 1.0, "coverage": 0.5},
    "cos": {"cos": 1.0},
}
# Shipped: the fewest terms that do best on the negatives at the bound. Half the coverage helped before the
# lexical side's blended IDF (37.5 % against 29.2 %) and no longer does (18.8 % against 20.8 %, run at
# 482b13e, docs/rules.md), so it is left out.
REFUSAL = "cos + cos_bg"
# The rule before: the top hit's confidence (the model, fitted on the other sets' hits).
CONFIDENCE = "confidence"
# Few features, a mild L2 penalty.
C = 1.0
BINS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def floor_refusals(data: SetData, plan: Plan) -> np.ndarray:
    """Per request: no candidate shares a word with it and the top hit's cosine is under the encoder's floor
    (the ``no_good_match`` rule of ``retrieval/search.py``)."""
    sem = data.sem["sentences" if plan.sentences else "whole"]
    out = np.zeros(len(data.qids), bool)
    for i in range(len(data.qids)):
        rows = rank(data, i, plan)
        lex_rows = data.lex["pruned" if plan.pruning else "all"][i][0][: plan.depth]
        out[i] = bool(rows.size) and lex_rows.size == 0 and float(sem[i][int(rows[0])]) < data.no_match_cosine
    return out


def hit_table(data: SetData, plan: Plan) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every hit's features, whether it is wanted, and its request's index; top hits first per request."""
    xs, ys, qs = [], [], []
    sem = data.sem["sentences" if plan.sentences else "whole"]
    for i in range(len(data.qids)):
        rows = rank(data, i, plan)
        lex_rows, lex_scores = data.lex["pruned" if plan.pruning else "all"][i]
        listed = dict(zip(lex_rows[: plan.depth].tolist(), lex_scores[: plan.depth].tolist(), strict=True))
        x = feature_rows(sem[i], rows, [listed.get(int(r), 0.0) for r in rows], data.query_idf[i],
                         [data.card_terms[int(r)] for r in rows])
        xs.append(x)
        ys.append([int(r) in data.relevant[i] for r in rows])
        qs.append(np.full(len(rows), i))
    return np.concatenate(xs), np.concatenate(ys).astype(bool), np.concatenate(qs)


def fit_model(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> dict[str, Any]:
    from sklearn.linear_model import LogisticRegression

    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    model = LogisticRegression(C=C, max_iter=1000)
    model.fit((x - mean) / scale, y, sample_weight=weights)
    return {"version": DECISION_VERSION, "features": list(FEATURES), "mean": mean.round(6).tolist(),
            "scale": scale.round(6).tolist(), "coef": model.coef_[0].round(6).tolist(),
            "intercept": round(float(model.intercept_[0]), 6)}


def _probability(model: dict[str, Any], x: np.ndarray) -> np.ndarray:
    z = (x - np.asarray(model["mean"])) / np.asarray(model["scale"])
    return np.asarray(1.0 / (1.0 + np.exp(-(z @ np.asarray(model["coef"]) + model["intercept"]))))


def _tops(p: np.ndarray, q: np.ndarray, n: int) -> np.ndarray:
    """The top hit's probability per request (0 for a request without hits)."""
    out = np.zeros(n)
    first = np.r_[True, q[1:] != q[:-1]] if q.size else np.zeros(0, bool)
    out[q[first]] = p[first]
    return out


def _counted(tops: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """A request the floor rule refuses counts as under every threshold (it uses up the budget first)."""
    return np.where(floor, FLOORED, tops)


def threshold(tops: Sequence[np.ndarray], quantile: float) -> float:
    """The largest threshold under which at most ``quantile`` of each set's answerable requests fall."""
    best = np.inf
    for t in tops:
        pos = np.sort(t)
        if pos.size:
            k = min(int(np.floor(quantile * pos.size)), pos.size - 1)
            best = min(best, float(pos[k]))
    return round(best - 1e-6, 6) if np.isfinite(best) else 0.0


def abstention(tops: np.ndarray, positive: np.ndarray, below: float, floor: np.ndarray | None = None,
               ) -> dict[str, Any]:
    """False refusals among the positives and no_match among the negatives: the top hit's confidence under
    ``below``, or the floor rule (``floor``, per request)."""
    refused = (tops < below) | (floor if floor is not None else False)
    return {"positives": int(positive.sum()),
            "false_refusals": float(refused[positive].mean()) if positive.any() else 0.0,
            "negatives": int((~positive).sum()),
            "no_match": float(refused[~positive].mean()) if (~positive).any() else 0.0}


def reliability(p: np.ndarray, y: np.ndarray) -> list[dict[str, Any]]:
    out = []
    for lo, hi in itertools.pairwise(BINS):
        inside = (p >= lo) & ((p < hi) | (hi == 1.0))
        out.append({"bin": f"{lo:.1f}-{hi:.1f}", "hits": int(inside.sum()),
                    "right": float(y[inside].mean()) if inside.any() else None})
    return out


def _tops_of(table: tuple[np.ndarray, np.ndarray, np.ndarray], n: int, weights: np.ndarray) -> np.ndarray:
    x, _, q = table
    return _tops(x @ weights, q, n)


def _fixed_tops(tables: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]], n: dict[str, int], weights: np.ndarray,
                _left_out: str, m: str) -> np.ndarray:
    return _tops_of(tables[m], n[m], weights)


def lodo_decision(sets: Sequence[SetData], plan: Plan, log: Callable[[str], None] = lambda _s: None) -> dict[str, Any]:
    """The decision fitted on all sets (shipped) and each set's left-out numbers (see the module docstring)."""
    log("decision: features of every hit")
    tables = {s.name: hit_table(s, plan) for s in sets}
    floors = {s.name: floor_refusals(s, plan) for s in sets}
    positive = {s.name: s.positive for s in sets}
    n = {s.name: len(s.qids) for s in sets}
    names = [s.name for s in sets]

    def fit(names: Sequence[str]) -> dict[str, Any]:
        x = np.concatenate([tables[m][0] for m in names])
        y = np.concatenate([tables[m][1] for m in names])
        w = np.concatenate([np.full(len(tables[m][1]), 1.0 / len(tables[m][1])) for m in names]) * len(y) / len(names)
        return fit_model(x, y, w)

    held_models = {s: fit([m for m in names if m != s]) for s in names}
    probability = {s: {m: _probability(held_models[s], tables[m][0]) for m in names} for s in names}

    def left_out(score: Callable[[str, str], np.ndarray]) -> dict[float, dict[str, dict[str, Any]]]:
        """Per quantile and left-out set ``s``: the threshold from the other sets' positives under
        ``score(s, m)`` (set ``m``'s top hits as scored by the rule fitted without ``s``), applied to ``s``."""
        out: dict[float, dict[str, dict[str, Any]]] = {}
        for quantile in QUANTILES:
            out[quantile] = {}
            for s in names:
                below = threshold([_counted(score(s, m), floors[m])[positive[m]] for m in names if m != s], quantile)
                out[quantile][s] = {**abstention(score(s, s), positive[s], below, floors[s]), "no_match_below": below}
        return out

    def chosen(blocks: dict[float, dict[str, dict[str, Any]]]) -> float:
        ok = [q for q in QUANTILES if max(b["false_refusals"] for b in blocks[q].values()) <= MAX_FALSE_REFUSAL]
        return ok[0] if ok else QUANTILES[-1]

    variants: dict[str, dict[str, Any]] = {}
    for label, weights in {**REFUSALS, CONFIDENCE: None}.items():
        if weights is None:
            blocks = left_out(lambda s, m: _tops(probability[s][m], tables[m][2], n[m]))
        else:
            blocks = left_out(functools.partial(_fixed_tops, tables, n, refusal_weights(weights)))
        q = chosen(blocks)
        variants[label] = {
            "weights": weights, "quantile": q, "worst": max(b["false_refusals"] for b in blocks[q].values()),
            "left_out": {s: {k: b[k] for k in ("false_refusals", "no_match", "negatives")} for s, b in blocks[q].items()},
            "curve": {str(qq): {s: {k: b[k] for k in ("false_refusals", "no_match", "no_match_below")}
                                for s, b in bl.items()} for qq, bl in blocks.items()},
        }
    refusal = refusal_weights(REFUSALS[REFUSAL])
    by_quantile = left_out(lambda _s, m: _tops_of(tables[m], n[m], refusal))
    quantile = chosen(by_quantile)
    for s in names:
        _, y, _ = tables[s]
        p = probability[s][s]
        by_quantile[quantile][s].update({
            "floor_only": abstention(np.full(n[s], np.inf), positive[s], 0.0, floors[s]),
            "confident": {"hits": int((p >= 0.8).sum()), "right": float(y[p >= 0.8].mean()) if (p >= 0.8).any() else None},
            "reliability": reliability(p, y)})
    shipped = fit(names)
    fits = {m: _tops_of(tables[m], n[m], refusal) for m in names}
    below = threshold([_counted(fits[m], floors[m])[positive[m]] for m in names], quantile)
    fitted = {m: abstention(fits[m], positive[m], below, floors[m]) for m in names}
    worst = max(b["false_refusals"] for b in by_quantile[quantile].values())
    return {
        "model": {**shipped, "refusal": dict(REFUSALS[REFUSAL]), "no_match_below": below, "fitted_on": n},
        "refusal": REFUSAL, "quantile": quantile, "worst_left_out_false_refusals": worst, "refusals": variants,
        "by_quantile": {str(q): {s: {k: b[k] for k in ("false_refusals", "no_match", "no_match_below")}
                                 for s, b in blocks.items()} for q, blocks in by_quantile.items()},
        "left_out": by_quantile[quantile], "fitted_on_all": fitted,
        "summary": (f"no_match: the top hit's fit `{REFUSAL}` under the threshold; threshold quantile {quantile}"
                    f" (the largest of {list(QUANTILES)} whose worst left-out false refusals are at most"
                    f" {MAX_FALSE_REFUSAL}); worst left-out false refusals {worst:.4f}."),
    }


DECISIONS = Path(__file__).resolve().parents[1] / "retrieval" / "decisions.json"


def write_decision(model: dict[str, Any], encoder_name: str = "sentence-transformers/all-MiniLM-L6-v2",
                   path: Path = DECISIONS) -> None:
    """Ship ``model`` as the packaged decision of ``encoder_name`` (indexes recalibrate when next opened)."""
    shipped = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    shipped[encoder_name] = {k: model[k] for k in ("version", "features", "mean", "scale", "coef", "intercept",
                                                   "refusal", "no_match_below", "fitted_on")}
    path.write_text(json.dumps(shipped, indent=2) + "\n", encoding="utf-8")
