import pickle

import numpy as np

from skillsearch.bench.metrics import evaluate
from skillsearch.core.fusion import minmax, zscore


def load(name, split="dev"): return pickle.load(open(f"/tmp/dump_{name}_{split}.pkl","rb"))
def run(D, cosv, lexb, fn, depth=100):
    ids = D["ids"]; out = {}
    C = D["cos"][cosv]
    for i, q in enumerate(D["qids"]):
        lrows, lsc = D["lex"][lexb][i]
        srows = np.argsort(-C[i])[:depth]
        cand = np.unique(np.concatenate([lrows, srows]))
        lex = np.zeros(cand.size); pos = np.searchsorted(cand, lrows); lex[pos] = lsc
        lrank = np.zeros(cand.size); lrank[pos] = np.arange(1, lrows.size+1)
        srank = np.zeros(cand.size); srank[np.searchsorted(cand, srows)] = np.arange(1, srows.size+1)
        f = fn(lex, C[i, cand], lrank, srank, D["qlen"][i])
        order = np.argsort(-f, kind="stable")[:50]
        out[q] = [ids[int(cand[j])] for j in order]
    return evaluate(D["qrels"], out)
def zs(w): return lambda l, s, lr, sr, n: (1-w)*zscore(l) + w*zscore(s)
def mm(w): return lambda l, s, lr, sr, n: (1-w)*minmax(l) + w*minmax(s)
