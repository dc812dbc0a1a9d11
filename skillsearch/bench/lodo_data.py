"""What the leave-one-dataset-out harness searches once per dev set: every retriever output a rule can use.

The ablation (:mod:`skillsearch.bench.lodo`) tries dozens of rule variants on four sets; running the full
search per variant would cost hours on two cores. So each set is searched *once*, as the operator, and the
raw outputs of both retrievers are kept per request:

- the lexical list (vector rows and BM25 scores, ``LEX_DEPTH`` deep, unfiltered), with and without the
  common-term pruning of long requests (``term_weights.COMMON_TERM_SHARE``);
- every row's cosine (the whole catalog), from the request's own vector and, for a request of several
  sentences, from the best of its sentences' vectors (``query_texts``), through the route search uses;
- the rows whose slug or name the request is exactly (the exact-name rule);
- for the decision: the request's terms with their IDF, every row's card terms (``coverage``).

Each variant then runs the search's own fuse and order stages (``retrieval/search.py``) over these arrays
in numpy. Sets: MetaTool (first ``METATOOL_QUERIES`` dev requests by id, a fixed deterministic sample),
Seal-Tools, Gorilla and the skills dev set (English requests; hit@5 over its positives, negatives kept for
the decision). Only dev splits are read.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from skillsearch.bench.baseline import bm25s_run
from skillsearch.bench.beir import load_beir
from skillsearch.bench.cache import BenchEncoder
from skillsearch.bench.dev import common_term_rule
from skillsearch.bench.relevance import open_bench_catalog
from skillsearch.bench.skills import load_queries, open_skills_catalog
from skillsearch.core.language import is_foreign
from skillsearch.core.settings import Settings
from skillsearch.retrieval.confidence import card_text
from skillsearch.retrieval.exact_name import request_slug
from skillsearch.retrieval.indexer import ProgressFactory
from skillsearch.retrieval.search import query_texts, semantic_scores
from skillsearch.service import Catalog

__all__ = ["DATASETS", "LEX_DEPTH", "METATOOL_QUERIES", "SetData", "collect_set", "missing_sets"]

DATASETS: tuple[str, ...] = ("metatool", "sealtools", "skills", "gorilla")
METATOOL_QUERIES = 1500
LEX_DEPTH = 200
SENTENCES = 6


@dataclass
class SetData:
    """One dev set's retriever outputs, aligned by request."""

    name: str
    metric: str  # "ndcg@10", or "hit@5" (skills)
    qids: list[str]
    texts: list[str]
    relevant: list[dict[int, int]]  # row -> grade; empty for a negative
    lex: dict[str, list[tuple[np.ndarray, np.ndarray]]]  # "pruned" / "all" -> per request (rows, scores)
    sem: dict[str, np.ndarray]  # "whole" / "sentences" -> (requests, rows) cosines
    named: list[np.ndarray]  # rows whose slug or name the request is
    query_idf: list[dict[str, float]]
    card_terms: list[frozenset[str]]  # per row
    no_match_cosine: float
    bm25s: list[np.ndarray]  # the outside baseline's rows per request (title + text)

    @property
    def positive(self) -> np.ndarray:
        return np.asarray([bool(r) for r in self.relevant])


def _outputs(name: str, metric: str, catalog: Catalog, texts: dict[str, str], relevant: list[dict[int, int]],
             encoder: BenchEncoder, log: Callable[[str], None], progress: ProgressFactory | None = None,
             corpus: dict[str, dict[str, Any]] | None = None, doc_row: dict[str, int] | None = None) -> SetData:
    index = catalog.index()
    snapshot = index.snapshot()
    vectors, lexical = snapshot.vectors, index.lexical
    qids, qtexts = list(texts), list(texts.values())
    log(f"{name}: {len(qids)} requests over {len(vectors)} rows: embedding")
    # Counted as ``bench relevance`` counts its queries (1,500 MetaTool requests: a minute on 2 cores): the
    # whole requests, then the sentences of those of several (the rest are the vectors just made).
    distinct = len(set(qtexts))
    for sentences, label in ((0, "embedding requests"), (SENTENCES, "embedding requests' sentences")):
        tick = progress(distinct, f"{name}: {label}") if progress and distinct else None
        encoder.prime_queries(qtexts, sentences, tick)
    whole = np.zeros((len(qids), len(vectors)), np.float32)
    sent = np.zeros_like(whole)
    for i, text in enumerate(qtexts):
        route = snapshot.routing.route(text)
        parts = query_texts(text, SENTENCES)[1:]
        whole[i] = semantic_scores(route, encoder.encode_query(text)[None, :])
        sent[i] = semantic_scores(route, encoder.encode_query_parts(text, parts)) if parts else whole[i]
    log(f"{name}: lexical lists")

    def lexical_lists() -> list[tuple[np.ndarray, np.ndarray]]:
        out = []
        for text in qtexts:
            keys, scores = lexical.search(text, None, LEX_DEPTH, searcher=snapshot.searcher)
            rows = np.asarray([vectors.key_to_row.get(k, -1) for k in keys.tolist()], np.int64)
            out.append((rows[rows >= 0], scores[rows >= 0].astype(np.float32)))
        return out

    pruned = lexical_lists()
    with common_term_rule(1.0, 0):
        unpruned = lexical_lists()
    skills = catalog.store.skills([r.skill_id for r in vectors.rows])
    by_slug: dict[str, list[int]] = {}
    cards: list[frozenset[str]] = []
    for row, r in enumerate(vectors.rows):
        skill = skills[r.skill_id]
        by_slug.setdefault(skill.slug, []).append(row)
        cards.append(lexical.card_terms(card_text(skill)))
    named = []
    for text in qtexts:
        slug = request_slug(text)  # the search's own rule
        named.append(np.asarray(sorted(by_slug.get(slug, [])) if slug else [], np.int64))
    calibration = snapshot.routing.calibration or {}
    if corpus is None or doc_row is None:  # the skills: the text bm25s reads is the skill's own
        bodies = {r.skill_id: f"{r.description}\n{r.instructions}" for r in catalog.store.index_rows()}
        corpus = {str(row): {"title": skills[r.skill_id].name, "text": bodies.get(r.skill_id, "")}
                  for row, r in enumerate(vectors.rows)}
        doc_row = {str(row): row for row in range(len(vectors.rows))}
    base = bm25s_run(corpus, dict(zip(qids, qtexts, strict=True)), qids, 10)
    bm25s_rows = [np.asarray([doc_row[d] for d in base.get(q, []) if d in doc_row], np.int64) for q in qids]
    return SetData(name, metric, qids, qtexts, relevant, {"pruned": pruned, "all": unpruned},
                   {"whole": whole, "sentences": sent}, named,
                   [lexical.query_idf(t, snapshot.searcher) for t in qtexts], cards,
                   float(calibration.get("no_match_cosine", 0.27)), bm25s_rows)


def missing_sets(data_root: Path, names: Sequence[str]) -> list[str]:
    """The files ``data_root`` lacks for these dev sets (each BEIR set's corpus, queries and dev qrels, the
    skills set's folder and ``queries.dev.jsonl``); empty when nothing is missing. Checked before the run:
    a set missing at the end was found after the others' minutes of import and search."""
    if not data_root.is_dir():
        return [f"{data_root}/ (no such folder)"]
    need = {name: ("skills-catalog/queries.dev.jsonl",) if name == "skills"
            else tuple(f"{name}/{f}" for f in ("corpus.jsonl", "queries.jsonl", "qrels.dev.tsv")) for name in names}
    return [str(data_root / f) for files in need.values() for f in files if not (data_root / f).is_file()]


def collect_set(name: str, data_root: Path, encoder: BenchEncoder, cache_dir: Path,
                log: Callable[[str], None] = lambda _s: None, progress: ProgressFactory | None = None) -> SetData:
    """Search one dev set once (see the module docstring)."""
    limit = Settings().max_query_chars
    settings = {"result_cache_size": 0}
    if name == "skills":
        folder = data_root / "skills-catalog"
        queries = [q for q in load_queries(folder / "queries.dev.jsonl") if q.lang == "en" and not is_foreign(q.text)]
        with tempfile.TemporaryDirectory(prefix="skillsearch-lodo-") as tmp:
            log(f"{name}: importing {folder} ({len(queries)} requests)")  # 883 skills: minutes when not cached
            catalog, _ = open_skills_catalog(folder, encoder, Path(tmp) / "data", settings, progress)
            try:
                vrows = catalog.index().snapshot().vectors.rows
                skills = catalog.store.skills([r.skill_id for r in vrows])
                slug_row = {skills[r.skill_id].slug: row for row, r in enumerate(vrows)}
                relevant = [{slug_row[s]: 1 for s in q.want if s in slug_row} for q in queries]
                texts = {q.qid: q.text.strip()[:limit] for q in queries}
                return _outputs(name, "hit@5", catalog, texts, relevant, encoder, log, progress)
            finally:
                catalog.close()
    ds = load_beir(data_root / name, "dev")
    qids = ds.query_ids(METATOOL_QUERIES if name == "metatool" else None)
    with tempfile.TemporaryDirectory(prefix="skillsearch-lodo-") as tmp:
        log(f"{name}: importing {len(ds.corpus)} documents ({len(qids)} requests)")  # 4,076 Seal-Tools APIs: minutes
        catalog, id_map = open_bench_catalog(ds, Path(tmp) / "data", encoder, settings, progress)
        try:
            doc_row = {}
            for row, r in enumerate(catalog.index().snapshot().vectors.rows):
                doc_row[id_map[r.skill_id]] = row
            relevant = [{doc_row[d]: int(g) for d, g in ds.qrels[q].items() if g > 0 and d in doc_row} for q in qids]
            texts = {q: ds.queries[q].strip()[:limit] for q in qids}
            return _outputs(name, "ndcg@10", catalog, texts, relevant, encoder, log, progress, ds.corpus, doc_row)
        finally:
            catalog.close()
