"""Would multilingual-e5-small's cosine, blended into MiniLM's, put the right skill first? (all three dev sets)

    PYTHONPATH=. .venv/bin/python benchmarks/tuning/e5_blend.py [--pool 100] [--weights 0,0.1,0.2,0.3,0.5,0.6]
        [--rerank-top 0]

A go/no-go replay before any product code. Every request of the three dev sets (skills dev English positives,
MetaTool dev's first 2,000, Seal-Tools dev) is searched through ``Catalog.search`` over a MiniLM index
(abstention off, ``--pool`` hits); each hit also gets its e5 cosine (the same embedded text, e5's own query
and passage prefixes; vectors cached in ``benchmarks/.cache``). The pool is then re-fused as search fused
when this was measured (z-score over the pool, a fixed semantic weight 0.6; search's weight now follows the
candidates' lexical share, ``core/fusion.adapted_weight``) with the semantic term ``(1 - w) z(MiniLM) + w z(e5)``; with
``--rerank-top K`` only the first K of the unchanged order are re-ordered by the blend. Row ``w = 0``
re-fuses the unchanged scores over the same pool, so the rows compare like with like.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from skillsearch.bench.beir import load_beir
from skillsearch.bench.cache import BenchEncoder
from skillsearch.bench.metrics import evaluate
from skillsearch.bench.relevance import open_bench_catalog
from skillsearch.bench.script import run_script
from skillsearch.bench.skills import load_queries, open_skills_catalog, skills_index_dir
from skillsearch.core.domain import Principal
from skillsearch.core.fusion import zscore
from skillsearch.retrieval.documents import embedded_text
from skillsearch.retrieval.encoders import make_encoder
from skillsearch.retrieval.search import QUERY_SENTENCES
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.service import Catalog

ROOT = Path(__file__).resolve().parents[2]
W = 0.6


def pools(catalog: Catalog, minilm: BenchEncoder, e5: BenchEncoder, texts: dict[str, str],
          pool: int) -> dict[str, list[dict[str, Any]]]:
    """Each request's hybrid pool: skill id and slug, BM25, MiniLM cosine, e5 cosine."""
    rows = list(catalog.store.index_rows())
    docs = np.asarray(e5.encode_documents([embedded_text(r, catalog.settings.embed_instructions_chars) for r in rows]))
    at = {r.skill_id: i for i, r in enumerate(rows)}
    minilm.prime_queries(list(texts.values()), QUERY_SENTENCES)
    out = {}
    for qid, text in texts.items():
        hits = catalog.search(Principal.operator(), SearchRequest(text, limit=pool)).hits
        q = np.asarray(e5.encode_query(text))
        out[qid] = [{"id": h.skill.skill_id, "slug": h.skill.slug, "lex": h.explanation["lexical_score"] or 0.0,
                     "sem": h.explanation["semantic_score"], "e5": float(docs[at[h.skill.skill_id]] @ q)} for h in hits]
    return out


def order(hits: list[dict[str, Any]], w: float, top: int) -> list[int]:
    col = {k: np.asarray([h[k] for h in hits], np.float64) for k in ("lex", "sem", "e5")}
    base = (1 - W) * zscore(col["lex"]) + W * zscore(col["sem"])
    blend = (1 - W) * zscore(col["lex"]) + W * ((1 - w) * zscore(col["sem"]) + w * zscore(col["e5"]))
    if top <= 0:
        return [int(i) for i in np.argsort(-blend, kind="stable")]
    first = np.argsort(-base, kind="stable")
    head = first[:top][np.argsort(-blend[first[:top]], kind="stable")]
    return [int(i) for i in np.concatenate([head, first[top:]])]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-root", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--cache-dir", default=str(ROOT / "benchmarks" / ".cache"))
    parser.add_argument("--pool", type=int, default=100)
    parser.add_argument("--weights", default="0,0.1,0.2,0.3,0.4,0.5,0.6")
    parser.add_argument("--rerank-top", type=int, default=0)
    args = parser.parse_args()
    cache, data = Path(args.cache_dir), Path(args.data_root)
    minilm, e5 = BenchEncoder(make_encoder("minilm"), cache), BenchEncoder(make_encoder("e5"), cache)
    weights = [float(w) for w in args.weights.split(",")]
    settings = {"abstain": False}

    skills = data / "skills-catalog"
    queries = [q for q in load_queries(skills / "queries.dev.jsonl") if q.want and q.lang == "en"]
    catalog, _ = open_skills_catalog(skills, minilm, skills_index_dir(cache, minilm.name, skills),
                                     settings)
    try:
        print("skills dev: searching", file=sys.stderr, flush=True)
        skill_pools = pools(catalog, minilm, e5, {q.qid: q.text for q in queries}, args.pool)
    finally:
        catalog.close()
    tool_pools: dict[str, tuple[dict[str, list[dict[str, Any]]], dict[str, str], Any]] = {}
    for name, limit in (("metatool", 2000), ("sealtools", None)):
        dataset = load_beir(data / name, "dev")
        qids = dataset.query_ids(limit)
        with tempfile.TemporaryDirectory(prefix="skillsearch-e5-blend-") as tmp:
            print(f"{name} dev: importing and searching", file=sys.stderr, flush=True)
            catalog, id_map = open_bench_catalog(dataset, Path(tmp) / "data", minilm, settings)
            try:
                found = pools(catalog, minilm, e5, {q: dataset.queries[q].strip() for q in qids}, args.pool)
            finally:
                catalog.close()
        tool_pools[name] = (found, id_map, {q: dataset.qrels[q] for q in qids})

    print(f"| e5 weight w{f' (top {args.rerank_top} re-ordered)' if args.rerank_top > 0 else ''} | skills English"
          " hit@1 / hit@5 / MRR@10 | MetaTool nDCG@10 | Seal-Tools nDCG@10 |")
    print("| --- | --- | --- | --- |")
    want = {q.qid: set(q.want) for q in queries}
    for w in weights:
        ranks = []
        for qid, hits in skill_pools.items():
            slugs = [hits[i]["slug"] for i in order(hits, w, args.rerank_top)] if hits else []
            ranks.append(next((i for i, s in enumerate(slugs, 1) if s in want[qid]), None))
        n = len(ranks)
        cells = [f"{sum(r == 1 for r in ranks) / n:.3f} / {sum(r is not None and r <= 5 for r in ranks) / n:.3f} /"
                 f" {sum(1 / r for r in ranks if r is not None and r <= 10) / n:.3f}"]
        for found, id_map, qrels in tool_pools.values():
            run = {q: [id_map[hits[i]["id"]] for i in order(hits, w, args.rerank_top)[:50]] if hits else []
                   for q, hits in found.items()}
            cells.append(f"{evaluate(qrels, run)['ndcg@10']:.4f}")
        print(f"| {w:g} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    run_script(main)
