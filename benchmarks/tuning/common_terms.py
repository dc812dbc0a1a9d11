"""Leaving a long request's most common terms out of its lexical query, on the dev splits only.

``skillsearch.retrieval.lexical`` drops the terms of a request of more than ``SHORT_REQUEST_TERMS`` terms that are
found in more than ``COMMON_TERM_SHARE`` of the documents (a speed rule: their posting lists are the longest
to walk). This replays the dev queries through ``Catalog.search`` (``search_runs``, limit 50) with the rule off and at several shares,
and prints lexical and hybrid nDCG@10 / Recall@50, and how many requests lost a term.

    PYTHONPATH=. python benchmarks/tuning/common_terms.py [metatool sealtools]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from skillsearch.retrieval import lexical
from skillsearch.bench.beir import load_beir
from skillsearch.bench.cache import BenchEncoder
from skillsearch.bench.metrics import evaluate
from skillsearch.bench.relevance import open_bench_catalog, search_runs
from skillsearch.retrieval.encoder import MiniLMEncoder
from skillsearch.core.settings import Settings

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
DATASETS = sys.argv[1:] or ["metatool", "sealtools"]
MAX_QUERIES = 2000
# (label, share, short-request terms); share 1.0 never drops a term.
RULES = [("off", 1.0, 8), ("share 0.5, >8 terms", 0.5, 8), ("share 0.5, any length", 0.5, 0),
         ("share 0.25, >8 terms", 0.25, 8)]


def main() -> None:
    enc = BenchEncoder(MiniLMEncoder(), Path("benchmarks/.cache"))
    for name in DATASETS:
        ds = load_beir(DATA / name, "dev")
        qids = ds.query_ids(MAX_QUERIES)
        texts = {q: ds.queries[q].strip()[:2000] for q in qids}
        qrels = {q: ds.qrels[q] for q in qids}
        enc.prime_queries(list(texts.values()), Settings().query_sentences)
        with tempfile.TemporaryDirectory() as tmp:
            # No result cache: the same requests are asked again under each rule.
            catalog, id_map = open_bench_catalog(ds, Path(tmp) / "data", enc, {"result_cache_size": 0})
            index = catalog.index()
            searcher = index.snapshot().searcher
            for label, share, short in RULES:
                lexical.COMMON_TERM_SHARE, lexical.SHORT_REQUEST_TERMS = share, short
                dropped = 0  # requests that lost a term found in some document
                for t in texts.values():
                    terms = sorted(set(index.lexical._english.analyze(t.lower())))
                    matching = {x for x in terms if searcher.doc_freq("all", x) > 0}
                    if len(terms) > short and set(lexical._informative_terms(terms, searcher)) != matching:
                        dropped += bool(matching)
                runs, _ = search_runs(catalog, id_map, texts, ("lexical", "hybrid"))
                for mode, run in runs.items():
                    m = evaluate(qrels, run)
                    print(f"{name:10s} {label:22s} {mode:8s} ndcg@10={m['ndcg@10']:.4f} "
                          f"recall@50={m['recall@50']:.4f}  requests with a term left out: {dropped}/{len(texts)}",
                          flush=True)
            catalog.close()


if __name__ == "__main__":
    main()
