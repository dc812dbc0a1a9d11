import pickle
import re
import sys
from pathlib import Path

sys.path.insert(0, "/tmp")
from skillsearch.bench.beir import load_beir
from skillsearch.bench.cache import BenchEncoder
from skillsearch.retrieval.encoder import MiniLMEncoder

SPLIT = re.compile(r"(?<=[.!?])\s+")
enc = BenchEncoder(MiniLMEncoder(), Path("/work/wt-bench/benchmarks/.cache"))
for name in sys.argv[1:]:
    D = pickle.load(open(f"/tmp/dump_{name}_dev.pkl", "rb"))
    ds = load_beir(Path("/work/shared/data/"+name), "dev")
    sents = []
    for q in D["qids"]:
        parts = [p for p in SPLIT.split(ds.queries[q].strip()[:2000]) if len(p.split()) >= 3]
        sents.append(parts if len(parts) > 1 else [])
    flat = [s for ss in sents for s in ss]
    print(name, len(flat), "sentences", flush=True)
    V = enc._cached(flat, "query", None)
    out, k = [], 0
    for ss in sents:
        out.append(V[k:k+len(ss)]); k += len(ss)
    pickle.dump(out, open(f"/tmp/sent_{name}.pkl", "wb"))
