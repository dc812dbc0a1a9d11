"""Per-sentence query vectors: encoded one by one (each sentence alone) vs pooled from one pass over the request.

Dev splits only. For each multi-sentence request, strategy ``separate`` encodes the request and each of its
sentences independently (what search did first: up to 7 encoder calls); ``pooled`` runs the encoder once over
the whole request and mean-pools the token embeddings of each sentence's character span (one call);
``sentmean`` encodes the sentences alone in one batch and stands their normalised mean in for the whole
request (one call over about as many tokens as the request); ``whole`` is the request alone. A skill's
cosine is its best over the vectors either way. Semantic and hybrid (z-score, w=0.7) nDCG@10, replayed as
``run_search`` does (union of each side's top 100).

    PYTHONPATH=. python benchmarks/tuning/query_vectors.py [metatool sealtools]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from skillsearch.bench.beir import load_beir
from skillsearch.bench.cache import BenchEncoder
from skillsearch.bench.metrics import evaluate
from skillsearch.bench.relevance import open_bench_catalog
from skillsearch.retrieval.encoder import MiniLMEncoder
from skillsearch.core.fusion import candidates, fuse
from skillsearch.retrieval.search import query_texts
from skillsearch.core.settings import Settings

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
DATASETS = [a for a in sys.argv[1:] if "=" not in a] or ["metatool", "sealtools"]
# `strategies=pooled,whole` runs only those.
ONLY = next((a.split("=", 1)[1].split(",") for a in sys.argv[1:] if a.startswith("strategies=")), None)
MAX_QUERIES = 2000
DEPTH = Settings().candidate_depth
SENTENCES = Settings().query_sentences


def sentences_and_mean(model: MiniLMEncoder, text: str) -> np.ndarray:
    """The sentences in one batch, and their normalised mean standing in for the whole request."""
    parts = query_texts(text, SENTENCES)[1:]
    if not parts:
        return model.encode_query(text)[None, :]
    v = model.model.encode(parts, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    mean = v.mean(axis=0)
    return np.vstack([mean / np.linalg.norm(mean), v])


def main() -> None:
    model = MiniLMEncoder()
    enc = BenchEncoder(model, Path("benchmarks/.cache"))
    for name in DATASETS:
        ds = load_beir(DATA / name, "dev")
        qids = ds.query_ids(MAX_QUERIES)
        texts = [ds.queries[q].strip()[:2000] for q in qids]
        qrels = {q: ds.qrels[q] for q in qids}
        with tempfile.TemporaryDirectory() as tmp:
            catalog, id_map = open_bench_catalog(ds, Path(tmp) / "data", enc)
            snap = catalog.index().snapshot()
            vectors = snap.vectors
            doc_of_row = [id_map[r.skill_id] for r in vectors.rows]
            grants = list(vectors.grant_names)
            lex = []
            for text in texts:
                hits = catalog.index().lexical.search(text, grants, DEPTH, searcher=snap.searcher)
                lex.append((np.asarray([vectors.key_to_row[int(k)] for k in hits.keys], np.int64), hits.scores))
            strategies = {
                "separate": lambda t: np.stack([model.encode_query(s) for s in query_texts(t, SENTENCES)]),
                "pooled": lambda t: model.encode_query_parts(t, query_texts(t, SENTENCES)[1:]),
                "whole": lambda t: model.encode_query(t)[None, :],
                "sentmean": lambda t: sentences_and_mean(model, t),
            }
            for label, encode in strategies.items():
                if ONLY and label not in ONLY:
                    continue
                started = time.perf_counter()
                cos = np.stack([(vectors.matrix @ encode(t).T).max(axis=1) for t in texts])
                secs = time.perf_counter() - started
                runs_sem, runs_hyb = {}, {}
                for i, q in enumerate(qids):
                    lrows, lscores = lex[i]
                    srows = np.argsort(-cos[i])[:DEPTH]
                    runs_sem[q] = [doc_of_row[int(r)] for r in srows[:50]]
                    cand = candidates(lrows, lscores, srows, cos[i])
                    order = np.argsort(-fuse(cand, "zscore", 0.7), kind="stable")[:50]
                    runs_hyb[q] = [doc_of_row[int(cand.rows[j])] for j in order]
                sem, hyb = evaluate(qrels, runs_sem)["ndcg@10"], evaluate(qrels, runs_hyb)["ndcg@10"]
                print(f"{name:10s} {label:9s} semantic {sem:.4f}  hybrid {hyb:.4f}  encode {secs:.0f}s", flush=True)
            catalog.close()


if __name__ == "__main__":
    main()
