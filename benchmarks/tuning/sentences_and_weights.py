import sys; import pickle; sys.path.insert(0, "/tmp")
import numpy as np
from fx import *

Ds = {n: load(n) for n in ("metatool", "sealtools")}
S = {n: pickle.load(open(f"/tmp/sent_{n}.pkl", "rb")) for n in Ds}
cv = "camel: text"
from skillsearch.bench.beir import load_beir


def docmat(n):
    from pathlib import Path

    from skillsearch.bench.cache import BenchEncoder
    from skillsearch.retrieval.lexical import split_identifiers
    ds = load_beir(Path("/work/shared/data/"+n), "dev")
    from skillsearch.retrieval.encoder import MiniLMEncoder
    enc = BenchEncoder(MiniLMEncoder(), Path("benchmarks/.cache"))
    docs = [f"{split_identifiers(ds.corpus[i]['title'])}: {ds.corpus[i]['text']}" for i in D0[n]["ids"]]
    got = list(enc.encode_documents(docs))
    return np.stack(got)
D0 = Ds
for n, D in Ds.items():
    M = docmat(n)
    full = D["cos"][cv]
    mx = full.copy(); mean = full.copy()
    for i, V in enumerate(S[n]):
        if len(V):
            sc = V @ M.T
            mx[i] = np.maximum(full[i], sc.max(axis=0))
            mean[i] = 0.5 * full[i] + 0.5 * sc.max(axis=0)
    D["cos"]["max"] = mx; D["cos"]["mean"] = mean
    print(n, "multi-sentence queries", sum(len(V) > 0 for V in S[n]), "of", len(S[n]))
    for v in (cv, "max", "mean"):
        print(n, v, "sem", round(run(D, v, "flat", lambda l,s,lr,sr,q: s)["ndcg@10"], 4), " ".join(f"zs{w}={run(D, v, 'flat', zs(w))['ndcg@10']:.4f}" for w in (0.3, 0.5, 0.6, 0.7)), flush=True)
print("sweep")
for w in (0.6, 0.65, 0.7, 0.75, 0.8):
    print(w, {n: (round(run(D, "max", "flat", zs(w))["ndcg@10"], 4), round(run(D, "max", "notags", zs(w))["ndcg@10"], 4), round(run(D, "max", "flat", mm(w))["ndcg@10"], 4)) for n, D in Ds.items()}, flush=True)
