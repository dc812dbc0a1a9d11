"""Fusion method and semantic weight through the product's own search path, on the dev splits only.

Each dataset's corpus is imported as skills (``open_bench_catalog``), its dev queries are embedded once
(``prime_queries``: what search embeds, sentences included), then every (fusion, weight) runs through
``Catalog.search`` with the request's ``fusion`` and ``semantic_weight``. Prints nDCG@10 per setting next
to the lexical and semantic modes, and the margin of each setting over the better single mode.

    PYTHONPATH=. python benchmarks/tuning/fusion_dev.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from skillsearch.bench.beir import load_beir
from skillsearch.bench.cache import BenchEncoder
from skillsearch.bench.metrics import evaluate
from skillsearch.bench.relevance import open_bench_catalog
from skillsearch.core.domain import Principal
from skillsearch.retrieval.encoder import MiniLMEncoder
from skillsearch.retrieval.search import SearchRequest
from skillsearch.core.settings import Settings

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
DATASETS = sys.argv[1:] or ["metatool", "sealtools"]
MAX_QUERIES = 2000
SETTINGS = [("lexical", None, None), ("semantic", None, None)] + [
    ("hybrid", fusion, w) for fusion in ("zscore", "minmax") for w in (0.55, 0.6, 0.65, 0.7, 0.75)
]


def main() -> None:
    enc = BenchEncoder(MiniLMEncoder(), Path("benchmarks/.cache"))
    operator = Principal.operator()
    out: dict[str, dict[str, float]] = {}
    for name in DATASETS:
        ds = load_beir(DATA / name, "dev")
        qids = ds.query_ids(MAX_QUERIES)
        texts = {q: ds.queries[q].strip()[:2000] for q in qids}
        qrels = {q: ds.qrels[q] for q in qids}
        enc.prime_queries(list(texts.values()), Settings().query_sentences)
        with tempfile.TemporaryDirectory() as tmp:
            catalog, id_map = open_bench_catalog(ds, Path(tmp) / "data", enc)
            for mode, fusion, weight in SETTINGS:
                run = {
                    q: [id_map[h.skill.skill_id] for h in catalog.search(
                        operator, SearchRequest(t, limit=50, mode=mode, fusion=fusion, semantic_weight=weight)).hits]
                    for q, t in texts.items()
                }
                key = mode if fusion is None else f"{fusion} w={weight}"
                out.setdefault(key, {})[name] = evaluate(qrels, run)["ndcg@10"]
                print(f"{name:10s} {key:16s} ndcg@10={out[key][name]:.4f}", flush=True)
            catalog.close()
    best_single = {n: max(out["lexical"][n], out["semantic"][n]) for n in DATASETS}
    for key, scores in out.items():
        margins = {n: round(scores[n] - best_single[n], 4) for n in DATASETS}
        print(f"{key:16s} {json.dumps({n: round(v, 4) for n, v in scores.items()})} margin {margins}")


if __name__ == "__main__":
    main()
