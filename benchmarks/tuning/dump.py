import pickle
import sys
import tempfile
from pathlib import Path

import numpy as np

from skillsearch.bench.beir import load_beir
from skillsearch.bench.cache import BenchEncoder
from skillsearch.bench.relevance import open_bench_catalog
from skillsearch.retrieval.encoder import HashingEncoder, MiniLMEncoder
from skillsearch.retrieval.lexical import split_identifiers

name, n = sys.argv[1], int(sys.argv[2]); split = sys.argv[3] if len(sys.argv) > 3 else "dev"
ds = load_beir(Path("/work/shared/data/"+name), split)
qids = ds.query_ids(n)
texts = [ds.queries[q].strip()[:2000] for q in qids]
enc = BenchEncoder(MiniLMEncoder(), Path("benchmarks/.cache"))
Q = enc._cached(texts, "query", None)
ids = list(ds.corpus)
variants = {
 "title\\ntext": lambda d: f"{d['title']}\n{d['text']}",
 "camel: text": lambda d: f"{split_identifiers(d['title'])}: {d['text']}",
 "camel: text Tags": lambda d: f"{split_identifiers(d['title'])}: {d['text']}" + (f"\nTags: {', '.join(d['tags'])}" if d.get('tags') else ""),
}
cos = {}
for v, f in variants.items():
    docs = [f(ds.corpus[i]) for i in ids]
    got = enc.cached_documents(docs)
    if sum(g is None for g in got) < 200:
        cos[v] = Q @ enc.encode_documents(docs).T
print("variants", list(cos))
tmp = tempfile.mkdtemp()
cat, idm = open_bench_catalog(ds, Path(tmp)/"data", HashingEncoder())
idx = cat.index(); snap = idx.snapshot(); vec = snap.vectors
row_doc = [idm[r.skill_id] for r in vec.rows]
col = {d: j for j, d in enumerate(ids)}
boosts = {"flat": {"name": 1.0, "slug": 1.0, "tags_text": 1.0, "description": 1.0, "instructions": 1.0},
          "default": dict(idx.lexical.field_boosts),
          "notags": {"name": 1.0, "slug": 1.0, "tags_text": 0.0, "description": 1.0, "instructions": 1.0},
          "name2": {"name": 2.0, "slug": 1.0, "tags_text": 1.0, "description": 1.0, "instructions": 1.0}}
lex = {}
for b, fb in boosts.items():
    idx.lexical.field_boosts = fb
    L = []
    for t in texts:
        h = idx.lexical.search(t, list(vec.grant_names), 100, searcher=snap.searcher)
        L.append((np.asarray([col[row_doc[vec.key_to_row[int(k)]]] for k in h.keys], dtype=np.int64), h.scores.copy()))
    lex[b] = L
pickle.dump({"qids": qids, "ids": ids, "qrels": {q: ds.qrels[q] for q in qids}, "cos": cos, "lex": lex, "qlen": [len(t.split()) for t in texts]}, open(f"/tmp/dump_{name}_{split}.pkl", "wb"))
print("done")
