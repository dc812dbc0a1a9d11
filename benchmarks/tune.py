"""Tuning sweeps on the dev splits (never test): field boosts, fusion method and weight, RRF k.

Knobs (edit below): DATASETS, MAX_QUERIES, BOOSTS, FUSIONS. Each dataset's corpus is imported through the
normal path once; per query, the product's own lexical index and vector snapshot give the BM25 score and
the cosine of every document, and each fusion setting is then replayed with ``skillsearch.core.fusion.fuse``
over the same candidate set ``run_search`` uses (union of each retriever's top ``candidate_depth``).
Output: one line per setting and dataset; `/tmp/tuning-dev.json`.

    PYTHONPATH=. python benchmarks/tune.py [metatool sealtools] [boosts=default,all]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from skillsearch.bench.beir import load_beir
from skillsearch.bench.cache import BenchEncoder
from skillsearch.bench.metrics import evaluate
from skillsearch.bench.relevance import open_bench_catalog
from skillsearch.core.fusion import Candidates, fuse
from skillsearch.core.settings import Settings
from skillsearch.retrieval.encoder import MiniLMEncoder
from skillsearch.retrieval.lexical import FIELD_BOOSTS

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
DATASETS = [a for a in sys.argv[1:] if "=" not in a] or ["metatool", "sealtools"]
# `boosts=default,all` runs only those field-boost sets.
ONLY = next((a.split("=", 1)[1].split(",") for a in sys.argv[1:] if a.startswith("boosts=")), None)
MAX_QUERIES = 2000
DEPTH = Settings().candidate_depth
# Field sets of the current schema (``all`` + ``name``). The five-field sets measured before (name / slug /
# tags / description / instructions, docs/benchmarks.md) ran against the schema of commit 1250d1e.
BOOSTS: dict[str, dict[str, float]] = {
    "default": dict(FIELD_BOOSTS),
    "all": {"all": 1.0},
    "all+name2": {"all": 1.0, "name": 2.0},
}
FUSIONS = [("lexical", 0.0), ("semantic", 1.0)] + [
    (m, w) for m in ("zscore", "minmax") for w in (0.4, 0.5, 0.6, 0.7)
] + [("rrf", 0.5), ("rrf", 0.6), ("rrf", 0.7)]


def main() -> None:
    results: dict[str, dict[str, dict[str, float]]] = {}
    enc = BenchEncoder(MiniLMEncoder(), Path("benchmarks/.cache"))
    for name in DATASETS:
        ds = load_beir(DATA / name, "dev")
        qids = ds.query_ids(MAX_QUERIES)
        texts = [ds.queries[q].strip()[:2000] for q in qids]
        qrels = {q: ds.qrels[q] for q in qids}
        enc.prime_queries(texts)  # whole queries only: this sweep scores the whole-query cosine
        with tempfile.TemporaryDirectory() as tmp:
            catalog, id_map = open_bench_catalog(ds, Path(tmp) / "data", enc)
            idx = catalog.index()
            snap = idx.snapshot()
            vectors = snap.vectors
            doc_of_row = [id_map[r.skill_id] for r in vectors.rows]
            cos = np.stack([enc.encode_query(t) for t in texts]) @ vectors.matrix.T
            grants = list(vectors.grant_names)
            for bname, boosts in BOOSTS.items():
                if ONLY and bname not in ONLY:
                    continue
                idx.lexical.field_boosts = boosts
                t = time.time()
                lex_lists = []
                for text in texts:
                    hits = idx.lexical.search(text, grants, DEPTH, searcher=snap.searcher)
                    rows = np.asarray([vectors.key_to_row[int(k)] for k in hits.keys], dtype=np.int64)
                    lex_lists.append((rows, hits.scores))
                for method, w in FUSIONS:
                    runs = {}
                    for i, q in enumerate(qids):
                        lrows, lscores = lex_lists[i]
                        srows = np.argsort(-cos[i])[:DEPTH]
                        if method == "lexical":
                            cand = lrows
                        elif method == "semantic":
                            cand = srows
                        else:
                            cand = np.unique(np.concatenate([lrows, srows]))
                        lex = np.zeros(cand.size, np.float32)
                        lrank = np.zeros(cand.size, np.int64)
                        srank = np.zeros(cand.size, np.int64)
                        pos = {int(r): j for j, r in enumerate(cand)}
                        for rank, (r, s) in enumerate(zip(lrows, lscores, strict=True), start=1):
                            if int(r) in pos:
                                lex[pos[int(r)]] = s
                                lrank[pos[int(r)]] = rank
                        for rank, r in enumerate(srows, start=1):
                            if int(r) in pos:
                                srank[pos[int(r)]] = rank
                        c = Candidates(cand, lex, cos[i, cand], lrank, srank)
                        if method in ("lexical", "semantic"):
                            fused = lex if method == "lexical" else cos[i, cand]
                        else:
                            fused = fuse(c, method, w)  # type: ignore[arg-type]
                        order = np.argsort(-fused, kind="stable")[:50]
                        runs[q] = [doc_of_row[int(cand[j])] for j in order]
                    m = evaluate(qrels, runs)
                    key = f"{bname}|{method}|{w}"
                    results.setdefault(key, {})[name] = m["ndcg@10"]
                    print(f"{name:10s} {key:32s} ndcg@10={m['ndcg@10']:.4f} r@10={m['recall@10']:.3f}", flush=True)
                print(f"  ({time.time() - t:.1f}s)", flush=True)
            catalog.close()
    out = Path("/tmp/tuning-dev.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
