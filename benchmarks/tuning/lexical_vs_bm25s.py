"""The lexical side alone against bm25s on every dev set: nDCG@10 (and hit@5 on the skills set).

Each dataset's corpus is imported the way ``bench relevance`` / the skills harness import it (the hashing
encoder stands in for the model: only the Tantivy side is measured), its lexical index searched directly
(``LexicalIndex.search``, unfiltered, as the operator's lexical mode does) and scored with pytrec_eval next
to ``bm25s`` (Lucene BM25, English Snowball stemmer and stop words, one field title + text) on the same
queries. The skills set counts its English positives (``lang == "en"``, ``want`` not empty); bm25s reads a
skill's name, description and instructions. Dev splits for tuning; ``--split test`` once, at the end (the
skills set has no test split here).

Usage: ``PYTHONPATH=. python benchmarks/tuning/lexical_vs_bm25s.py [metatool sealtools gorilla skills-catalog]
[--data-root ../shared/data] [--split dev]``. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from skillsearch.bench.baseline import bm25s_run
from skillsearch.bench.beir import load_beir
from skillsearch.bench.metrics import evaluate
from skillsearch.bench.relevance import open_bench_catalog
from skillsearch.bench.script import run_script
from skillsearch.bench.skills import load_queries, open_skills_catalog
from skillsearch.retrieval.documents import lexical_doc
from skillsearch.retrieval.hashing_encoder import HashingEncoder
from skillsearch.retrieval.lexical import LexicalIndex
from skillsearch.retrieval.lexical_schema import skill_key

DATASETS = ("metatool", "sealtools", "gorilla", "skills-catalog")


Loaded = tuple[Any, dict[str, str], dict[str, dict[str, int]], dict[str, Any], Any]


def _load(root: Path, name: str, tmp: Path, split: str) -> Loaded:
    if name == "skills-catalog":
        catalog, _ = open_skills_catalog(root / name, HashingEncoder(), tmp / "data")
        queries = [q for q in load_queries(root / name / "queries.dev.jsonl") if q.want and q.lang == "en"]
        texts = {q.qid: q.text for q in queries}
        qrels = {q.qid: {w: 1 for w in q.want} for q in queries}
        rows = list(catalog.store.index_rows())
        ids = {r.skill_id: r.slug for r in rows}
        corpus = {r.slug: {"title": r.name, "text": f"{r.description} {r.instructions}"} for r in rows}
        return catalog, texts, qrels, corpus, ids
    dataset = load_beir(root / name, split)
    catalog, ids = open_bench_catalog(dataset, tmp / "data", HashingEncoder())
    qids = dataset.query_ids()
    return catalog, {q: dataset.queries[q] for q in qids}, {q: dataset.qrels[q] for q in qids}, dataset.corpus, ids


def measure(root: Path, name: str, split: str = "dev") -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="lexical-vs-bm25s-") as tmp:
        catalog, queries, qrels, corpus, ids = _load(root, name, Path(tmp), split)
        docs = [lexical_doc(r) for r in catalog.store.index_rows()]
        catalog.close()
        index = LexicalIndex(Path(tmp) / "lexical", create=True)
        index.apply(docs, [])
        searcher = index.searcher()
        by_key = {skill_key(d.skill_id): ids[d.skill_id] for d in docs}
        ours = {q: [by_key[int(k)] for k in index.search(t.strip()[:2000], None, 50, searcher=searcher).keys]
                for q, t in queries.items()}
        index.close()
    theirs = bm25s_run(corpus, queries, list(queries), 50)
    out: dict[str, Any] = {"queries": len(qrels)}
    for label, run in (("lexical", ours), ("bm25s", theirs)):
        scores = evaluate(qrels, run)
        scores["hit@5"] = sum(bool(set(run.get(q, [])[:5]) & set(rel)) for q, rel in qrels.items()) / len(qrels)
        out[label] = scores
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="*", default=list(DATASETS))
    parser.add_argument("--data-root", type=Path, default=Path("../shared/data"))
    parser.add_argument("--split", default="dev", help="test only once, at the end (the skills set has dev only)")
    args = parser.parse_args()
    print("| dev set | queries | lexical nDCG@10 | bm25s nDCG@10 | lexical hit@5 | bm25s hit@5 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in args.datasets:
        r = measure(args.data_root, name, args.split)
        print(f"| {name} | {r['queries']:.0f} | {r['lexical']['ndcg@10']:.4f} | {r['bm25s']['ndcg@10']:.4f} "
              f"| {r['lexical']['hit@5']:.4f} | {r['bm25s']['hit@5']:.4f} |", flush=True)


if __name__ == "__main__":
    run_script(main)
