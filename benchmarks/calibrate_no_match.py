"""Calibrate the ``no_match`` cosine threshold on the dev splits (never test).

Method: a query *has* a good match in its own dataset's catalog (every dev query is judged relevant to at
least one document), and mostly has none in the other dataset's catalog (MetaTool's consumer plugins vs
Seal-Tools' enterprise APIs). For each catalog we take each query's best cosine (over the vectors
``run_search`` embeds for it: the query, or its sentences and their mean) for

- positives: its own dev queries, and
- negatives: the other dataset's dev queries.

``run_search`` answers ``no_match`` when no candidate matches lexically and the best cosine is under the
threshold. The threshold is the largest value that flags at most 1% of the positives on either dataset
(so no answerable request is refused for it); the report says what share of the negatives it flags. The
overlap between the sets is real (both have weather and shopping tools), so cosine alone separates them
poorly; the threshold is a floor against nonsense, not a topic detector. The 1st percentile of the
cosine of judged-relevant pairs is reported too: a per-hit cut above it would cost recall.

    PYTHONPATH=. python benchmarks/calibrate_no_match.py    # knobs: MAX_QUERIES, KEEP

Writes ``benchmarks/results/no-match-calibration-dev.json``: an experiment record, not a current result (last in git at ae16ae6).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from skillsearch.bench.beir import load_beir
from skillsearch.bench.cache import BenchEncoder
from skillsearch.catalog.rows import IndexRow
from skillsearch.retrieval.documents import embedded_text
from skillsearch.retrieval.minilm import MiniLMEncoder
from skillsearch.retrieval.search import QUERY_SENTENCES, query_texts

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
MAX_QUERIES = 2000
KEEP = 0.99


def _doc_matrix(enc: BenchEncoder, name: str) -> tuple[list[str], np.ndarray]:
    ds = load_beir(DATA / name, "dev")
    ids = list(ds.corpus)
    rows = [IndexRow(i, i, "team:bench", "knowledge", tuple(t.lower() for t in ds.corpus[i].get("tags") or ()),
                     str(ds.corpus[i]["title"])[:64], str(ds.corpus[i]["text"]), "", "") for i in ids]
    return ids, enc.encode_documents([embedded_text(r, 600) for r in rows])


def _best_cos(enc: BenchEncoder, queries: list[list[str]], docs: np.ndarray) -> np.ndarray:
    """Per query and document, the best cosine over the query's vectors (as ``run_search`` scores it)."""
    out = np.zeros((len(queries), docs.shape[0]), dtype=np.float32)
    for i, texts in enumerate(queries):
        out[i] = (enc.encode_query_parts(texts[0], texts[1:]) @ docs.T).max(axis=0)
    return out


def main() -> None:
    enc = BenchEncoder(MiniLMEncoder(), Path("benchmarks/.cache"))
    names = ["metatool", "sealtools"]
    data = {n: load_beir(DATA / n, "dev") for n in names}
    qids = {n: data[n].query_ids(MAX_QUERIES) for n in names}
    qtexts = {n: [query_texts(data[n].queries[q].strip()[:2000], QUERY_SENTENCES) for q in qids[n]]
              for n in names}
    enc.prime_queries([texts[0] for n in names for texts in qtexts[n]], QUERY_SENTENCES)
    report: dict[str, dict[str, float]] = {}
    pair_cos: list[float] = []
    best: dict[str, dict[str, np.ndarray]] = {}
    for n in names:
        ids, docs = _doc_matrix(enc, n)
        col = {d: j for j, d in enumerate(ids)}
        own = _best_cos(enc, qtexts[n], docs)
        other = _best_cos(enc, qtexts[next(m for m in names if m != n)], docs)
        best[n] = {"pos": own.max(axis=1), "neg": other.max(axis=1)}
        for i, q in enumerate(qids[n]):
            pair_cos.extend(float(own[i, col[d]]) for d in data[n].qrels[q] if d in col)
    threshold = min(float(np.quantile(best[n]["pos"], 1 - KEEP)) for n in names)
    pair_floor = float(np.quantile(np.asarray(pair_cos), 1 - KEEP))
    for n in names:
        report[n] = {
            "positives_flagged": float((best[n]["pos"] < threshold).mean()),
            "negatives_flagged": float((best[n]["neg"] < threshold).mean()),
            "pos_best_cos_p05": float(np.quantile(best[n]["pos"], 0.05)),
            "neg_best_cos_p50": float(np.quantile(best[n]["neg"], 0.5)),
        }
    out = {"encoder": enc.name, "keep_positive_queries": KEEP, "threshold": round(threshold, 3),
           "relevant_pair_cos_p01": round(pair_floor, 3), "datasets": report}
    print(json.dumps(out, indent=1))
    Path("benchmarks/results/no-match-calibration-dev.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
