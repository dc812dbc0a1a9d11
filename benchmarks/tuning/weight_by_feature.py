import sys; sys.path.insert(0, "/tmp")
import numpy as np
from fx import *

from skillsearch.bench.metrics import per_query

Ds = {n: load(n) for n in ("metatool", "sealtools")}
cv = {"metatool": "camel: text", "sealtools": "title\\ntext"}
WS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
for n, D in Ds.items():
    C = D["cos"][cv[n]]
    feats = {"toplex/len": [], "zl_top": [], "zs_top": [], "nlex": []}
    res = {w: [] for w in WS}
    ids = D["ids"]
    for i, q in enumerate(D["qids"]):
        lrows, lsc = D["lex"]["flat"][i]
        srows = np.argsort(-C[i])[:100]
        cand = np.unique(np.concatenate([lrows, srows]))
        lex = np.zeros(cand.size); lex[np.searchsorted(cand, lrows)] = lsc
        zl, zs_ = zscore(lex), zscore(C[i, cand])
        feats["toplex/len"].append(lsc[0] / max(1, D["qlen"][i]) if lsc.size else 0)
        feats["zl_top"].append(zl.max() if zl.size else 0)
        feats["zs_top"].append(zs_.max())
        feats["nlex"].append(lsc.size)
        for w in WS:
            f = (1-w)*zl + w*zs_
            res[w].append((q, [ids[int(cand[j])] for j in np.argsort(-f, kind="stable")[:10]]))
    nd = {}
    for w in WS:
        pq = per_query(D["qrels"], dict(res[w]))
        nd[w] = np.array([pq[q]["ndcg@10"] for q in D["qids"]])
    for fname, vals in feats.items():
        v = np.array(vals, dtype=float)
        edges = np.percentile(v, [0, 25, 50, 75, 100])
        print(n, fname)
        for b in range(4):
            m = (v >= edges[b]) & (v <= edges[b+1])
            print(f"   [{edges[b]:.2f},{edges[b+1]:.2f}]", " ".join(f"{w}:{nd[w][m].mean():.3f}" for w in WS))
