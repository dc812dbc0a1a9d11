import sys; sys.path.insert(0, "/tmp")
import numpy as np
from fx import *

Ds = {n: load(n) for n in ("metatool", "sealtools")}
cv = {"metatool": "camel: text", "sealtools": "title\\ntext"}
def zmax(a, p=1.0):
    def f(l, s, lr, sr, n):
        zl, zs_ = zscore(l), zscore(s)
        tl, ts = max(zl.max(), 1e-6), max(zs_.max(), 1e-6)
        w = a * ts**p / (a * ts**p + tl**p)
        return (1-w)*zl + w*zs_
    return f
def gap(a):
    def f(l, s, lr, sr, n):
        zl, zs_ = zscore(l), zscore(s)
        ls, ss = np.sort(zl)[::-1], np.sort(zs_)[::-1]
        gl, gs = max(ls[0]-ls[min(5,len(ls)-1)], 1e-6), max(ss[0]-ss[min(5,len(ss)-1)], 1e-6)
        w = a*gs/(a*gs+gl)
        return (1-w)*zl + w*zs_
    return f
for name, fn in [("zmax1", zmax(1)), ("zmax1.5", zmax(1.5)), ("zmax2", zmax(1, 2)), ("zmax1.5p2", zmax(1.5, 2)), ("zmax2p2", zmax(2, 2)), ("zmax3p3", zmax(3, 3)), ("gap1", gap(1)), ("gap2", gap(2))]:
    print(name, {n: round(run(D, cv[n], "flat", fn)["ndcg@10"], 4) for n, D in Ds.items()}, flush=True)
