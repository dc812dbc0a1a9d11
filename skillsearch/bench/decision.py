"""Fitting the "does anything fit?" decision on the dev sets (``python benchmarks/fit_decision.py``).

Data: every hit (top 10) of every dev request, searched through :meth:`Catalog.search` with abstention off
(``Settings.abstain=False``), its :data:`~skillsearch.retrieval.confidence.FEATURES` and whether it is a wanted
skill: the skills dev set (``queries.dev.jsonl`` over the real skills, requests the encoder can read: the
others get the multilingual-off notice and are never abstained on), MetaTool dev (first 2,000 by id) and
Seal-Tools dev (all). Test splits are never read here.

Model: scikit-learn's ``LogisticRegression`` over the standardised features, each dev set weighing the
same in the loss. ``no_match_below`` is the largest threshold on the top hit's confidence that makes at
most ``MAX_FALSE_ABSTENTION`` of the positive requests of *each* dev set abstain. Cross-validation: the
skills dev set in 5 folds by request (each fold's numbers from a model fitted without it, MetaTool and
Seal-Tools always in), and leave-one-dataset-out, so the report says how the setting does on requests it
was not fitted on.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from skillsearch.bench.beir import load_beir
from skillsearch.bench.cache import BenchEncoder, folder_name
from skillsearch.bench.relevance import open_bench_catalog
from skillsearch.bench.report import run_metadata
from skillsearch.bench.skills import load_queries, open_skills_catalog
from skillsearch.core.domain import Principal
from skillsearch.retrieval.confidence import DECISION_VERSION, FEATURES, HIT_FEATURES, REQUEST_FEATURES
from skillsearch.retrieval.encoder import Encoder, make_encoder
from skillsearch.retrieval.search import SearchRequest
from skillsearch.service import Catalog

__all__ = ["DevHits", "collect", "fit_decision", "load_or_collect", "run_fit"]

LIMIT = 10
MAX_FALSE_ABSTENTION = 0.01
METATOOL_QUERIES = 2000
# Few features, a mild L2 penalty: 260 skills requests and two tool sets cannot support more.
C = 1.0


@dataclass
class DevHits:
    """Aligned arrays over every hit: dataset name, request id, rank (1-based), features, wanted or not;
    plus every request's id and whether it has a wanted skill (a negative has hits, all wrong)."""

    dataset: np.ndarray
    qid: np.ndarray
    rank: np.ndarray
    x: np.ndarray
    y: np.ndarray
    requests: dict[str, dict[str, bool]]


def _search_all(catalog: Catalog, texts: dict[str, str], wanted: Callable[[str, str], bool], name: str,
                rows: list[tuple[Any, ...]], requests: dict[str, bool], skip_notice: bool = False) -> None:
    principal = Principal.operator()
    encoder = catalog.encoder
    inner = getattr(encoder, "inner", None)
    if isinstance(inner, BenchEncoder):  # embed the requests once, in batches, as the relevance harness does
        inner.prime_queries([t.strip()[:2000] for t in texts.values()], catalog.settings.query_sentences)
    for qid, text in texts.items():
        result = catalog.search(principal, SearchRequest(text.strip()[:2000], limit=LIMIT))
        if skip_notice and result.notice is not None:
            continue
        hits = [(h.skill.skill_id, h.skill.slug, h.features) for h in result.hits]
        requests[qid] = any(wanted(qid, h[0]) or wanted(qid, h[1]) for h in hits) or requests.get(qid, False)
        for rank, (skill_id, slug, feats) in enumerate(hits, start=1):
            rows.append((name, qid, rank, [feats[f] for f in FEATURES], wanted(qid, skill_id) or wanted(qid, slug)))


def collect(data_root: Path, encoder: Encoder, cache_dir: Path,
            log: Callable[[str], None] = lambda _s: None) -> DevHits:
    """Search every dev request of the three sets with abstention off; the hits and their labels."""
    settings = {"abstain": False}
    rows: list[tuple[Any, ...]] = []
    requests: dict[str, dict[str, bool]] = {}
    folder = folder_name(encoder.name)

    skills_dir = data_root / "skills-catalog"
    queries = load_queries(skills_dir / "queries.dev.jsonl")
    want = {q.qid: set(q.want) for q in queries}
    log("skills dev: importing and searching")
    catalog, _ = open_skills_catalog(skills_dir, encoder, cache_dir / "skills-index" / folder, settings)
    try:
        seen: dict[str, bool] = {}
        _search_all(catalog, {q.qid: q.text for q in queries}, lambda q, s: s in want[q], "skills", rows, seen,
                    skip_notice=True)
        # A request is positive by its labels, not by whether search found it.
        requests["skills"] = {q: bool(want[q]) for q in seen}
    finally:
        catalog.close()

    for name, limit in (("metatool", METATOOL_QUERIES), ("sealtools", None)):
        log(f"{name} dev: importing and searching")
        dataset = load_beir(data_root / name, "dev")
        qids = dataset.query_ids(limit)
        data_dir = cache_dir / f"{name}-index" / folder
        data_dir.mkdir(parents=True, exist_ok=True)
        catalog, id_map = open_bench_catalog(dataset, data_dir, encoder, settings)
        try:
            rel = {q: {d for d, s in dataset.qrels[q].items() if s > 0} for q in qids}
            seen = {}
            _search_all(catalog, {q: dataset.queries[q] for q in qids},
                        lambda q, s, m=id_map, r=rel: m.get(s) in r[q], name, rows, seen)  # type: ignore[misc]
            requests[name] = {q: True for q in seen}
        finally:
            catalog.close()
    return DevHits(
        np.asarray([r[0] for r in rows]), np.asarray([r[1] for r in rows]), np.asarray([r[2] for r in rows]),
        np.asarray([r[3] for r in rows], np.float64), np.asarray([r[4] for r in rows], bool), requests,
    )


def _weights(dataset: np.ndarray) -> np.ndarray:
    names, counts = np.unique(dataset, return_counts=True)
    per = {n: len(dataset) / (len(names) * c) for n, c in zip(names, counts, strict=True)}
    return np.asarray([per[d] for d in dataset])


def fit_model(x: np.ndarray, y: np.ndarray, weights: np.ndarray, features: Sequence[str]) -> dict[str, Any]:
    from sklearn.linear_model import LogisticRegression

    cols = [FEATURES.index(f) for f in features]
    xs = x[:, cols]
    mean, scale = xs.mean(axis=0), xs.std(axis=0)
    scale[scale == 0] = 1.0
    model = LogisticRegression(C=C, max_iter=1000)
    model.fit((xs - mean) / scale, y, sample_weight=weights)
    return {"version": DECISION_VERSION, "features": list(features), "mean": mean.round(6).tolist(),
            "scale": scale.round(6).tolist(), "coef": model.coef_[0].round(6).tolist(),
            "intercept": round(float(model.intercept_[0]), 6)}


def confidences(model: dict[str, Any], hits: DevHits, mask: np.ndarray) -> np.ndarray:
    """Monotone confidences (as search computes them) for the hits under ``mask``."""
    from skillsearch.retrieval.confidence import Decision

    decision = Decision.from_dict({**model, "request": {**model, "no_match_below": 0.0}})
    out = np.zeros(int(mask.sum()))
    idx = np.flatnonzero(mask)
    keys = list(zip(hits.dataset[idx], hits.qid[idx], strict=True))
    start = 0
    while start < len(idx):
        end = start
        while end < len(idx) and keys[end] == keys[start]:
            end += 1
        out[start:end] = decision.confidences(hits.x[idx[start:end]])
        start = end
    return out


def request_scores(model: dict[str, Any], hits: DevHits, mask: np.ndarray) -> dict[tuple[str, str], float]:
    """The request model's "something fits" probability of each request under ``mask`` (its top hit's row)."""
    from skillsearch.retrieval.confidence import Linear

    linear = Linear.from_dict(model)
    idx = np.flatnonzero(mask & (hits.rank == 1))
    p = linear.probability(hits.x[idx]) if idx.size else np.zeros(0)
    return {(str(hits.dataset[i]), str(hits.qid[i])): float(v) for i, v in zip(idx, p, strict=True)}


def threshold(tops: dict[tuple[str, str], float], requests: dict[str, dict[str, bool]], max_false: float) -> float:
    """The largest threshold under which at most ``max_false`` of each set's positive requests fall."""
    best = 1.0
    for name, reqs in requests.items():
        pos = sorted(tops[(name, q)] for q, positive in reqs.items() if positive and (name, q) in tops)
        if pos:
            k = int(np.floor(max_false * len(pos)))
            best = min(best, pos[k] if k < len(pos) else 1.0)
    return round(float(best) - 1e-6, 6)


def abstention(tops: dict[tuple[str, str], float], requests: dict[str, dict[str, bool]],
               below: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, reqs in requests.items():
        pos = [tops.get((name, q), 0.0) for q, p in reqs.items() if p]
        neg = [tops.get((name, q), 0.0) for q, p in reqs.items() if not p]
        out[name] = {"positives": len(pos), "false_abstention": float(np.mean([t < below for t in pos])) if pos else None,
                     "negatives": len(neg), "abstention": float(np.mean([t < below for t in neg])) if neg else None}
    return out


def confident(conf: np.ndarray, labels: np.ndarray, at: float = 0.8) -> dict[str, Any]:
    sel = conf >= at
    return {"hits": int(sel.sum()), "right": float(labels[sel].mean()) if sel.any() else None}


def _request_labels(hits: DevHits) -> np.ndarray:
    return np.asarray([hits.requests[str(d)].get(str(q), False) for d, q in zip(hits.dataset, hits.qid, strict=True)])


def fit_decision(hits: DevHits, features: Sequence[str] = HIT_FEATURES,
                 request_features: Sequence[str] = REQUEST_FEATURES, folds: int = 5, seed: int = 0,
                 max_false: float = MAX_FALSE_ABSTENTION) -> dict[str, Any]:
    """Both models fitted on every dev hit (threshold included: at most ``max_false`` of each set's positive
    requests under it), with cross-validated numbers."""
    w = _weights(hits.dataset)
    everything = np.ones(len(hits.y), bool)
    positive = _request_labels(hits)
    top = hits.rank == 1
    hit_model = fit_model(hits.x, hits.y, w, features)
    request_model = fit_model(hits.x[top], positive[top], w[top], request_features)
    tops = request_scores(request_model, hits, everything)
    below = threshold(tops, hits.requests, max_false)
    fitted = {**abstention(tops, hits.requests, below),
              "confidence>=0.8": confident(confidences(hit_model, hits, everything), hits.y)}
    for name in hits.requests:
        fitted[f"confidence>=0.8 {name}"] = confident(confidences(hit_model, hits, hits.dataset == name),
                                                      hits.y[hits.dataset == name])

    # Skills dev in folds by request: each fold scored by models (and a threshold) fitted without it.
    rng = np.random.default_rng(seed)
    skill_q = np.asarray(sorted(hits.requests["skills"]))
    fold_of = dict(zip(skill_q, rng.permutation(len(skill_q)) % folds, strict=True))
    is_skills = hits.dataset == "skills"
    abstained = {"positives": 0, "false": 0, "negatives": 0, "abstained": 0}
    cv_conf, cv_y = [], []
    for k in range(folds):
        held = is_skills & np.asarray([fold_of.get(str(q), -1) == k for q in hits.qid])
        hm = fit_model(hits.x[~held], hits.y[~held], w[~held], features)
        train = ~held & top
        rm = fit_model(hits.x[train], positive[train], w[train], request_features)
        b = threshold(request_scores(rm, hits, ~held), hits.requests, max_false)
        for (_, q), v in request_scores(rm, hits, held).items():
            pos = hits.requests["skills"][q]
            abstained["positives" if pos else "negatives"] += 1
            abstained["false" if pos else "abstained"] += int(v < b)
        cv_conf.append(confidences(hm, hits, held))
        cv_y.append(hits.y[held])
    cv = {"skills": {"positives": abstained["positives"],
                     "false_abstention": abstained["false"] / max(abstained["positives"], 1),
                     "negatives": abstained["negatives"],
                     "abstention": abstained["abstained"] / max(abstained["negatives"], 1)},
          "confidence>=0.8": confident(np.concatenate(cv_conf), np.concatenate(cv_y))}

    # Leave one dataset out: both models and the threshold fitted on the other two, scored on it (the request
    # model needs negatives, which only the skills set has, so it is always fitted with the skills set).
    lodo: dict[str, Any] = {}
    for name in hits.requests:
        held = hits.dataset == name
        hm = fit_model(hits.x[~held], hits.y[~held], w[~held], features)
        block: dict[str, Any] = {"confidence>=0.8": confident(confidences(hm, hits, held), hits.y[held])}
        if name != "skills":
            train = ~held & top
            rm = fit_model(hits.x[train], positive[train], w[train], request_features)
            others = {n: r for n, r in hits.requests.items() if n != name}
            b = threshold(request_scores(rm, hits, ~held), others, max_false)
            block.update(abstention(request_scores(rm, hits, held), {name: hits.requests[name]}, b))
        lodo[name] = block
    return {**hit_model, "request": {**request_model, "no_match_below": below},
            "fitted_on": {n: len(r) for n, r in hits.requests.items()},
            "dev": fitted, "cv_skills_5fold": cv, "leave_one_dataset_out": lodo}


def load_or_collect(data_root: Path, cache_dir: Path, bench_encoder: BenchEncoder, reuse: bool,
                    log: Callable[[str], None] = lambda _s: None) -> DevHits:
    """The dev hits: collected now, or with ``reuse`` those the last collection saved (if it saw every
    feature this code computes)."""
    saved = cache_dir / f"decision-hits-{folder_name(bench_encoder.name)}.pkl"
    if reuse and saved.is_file():
        hits: DevHits = pickle.loads(saved.read_bytes())  # our own cache file, written below
        if hits.x.shape[1] == len(FEATURES):
            return hits
        log("the saved hits lack features this code computes: collecting again")
    hits = collect(data_root, bench_encoder, cache_dir, log)
    saved.write_bytes(pickle.dumps(hits))
    return hits


def run_fit(data_root: Path, cache_dir: Path, encoder: Encoder | None = None, features: Sequence[str] = HIT_FEATURES,
            log: Callable[[str], None] = lambda _s: None, command: str | None = None,
            reuse: bool = False, request_features: Sequence[str] = REQUEST_FEATURES) -> dict[str, Any]:
    """Collect (or, with ``reuse``, read the hits the last collection saved) and fit."""
    started = time.time()
    bench_encoder = BenchEncoder(encoder or make_encoder("minilm"), cache_dir)
    hits = load_or_collect(data_root, cache_dir, bench_encoder, reuse, log)
    log(f"fitting on {len(hits.y)} hits of {sum(len(r) for r in hits.requests.values())} requests")
    decision = fit_decision(hits, features, request_features)
    return {**run_metadata(command), "kind": "decision-fit", "encoder": bench_encoder.name,
            "decision": decision, "seconds": round(time.time() - started, 1)}
