import re
import sys
from pathlib import Path

import numpy as np

from skillsearch.bench.beir import load_beir
from skillsearch.bench.cache import BenchEncoder
from skillsearch.bench.metrics import evaluate
from skillsearch.retrieval.encoder import MiniLMEncoder

ds = load_beir(Path("/work/shared/data/"+sys.argv[1]), "dev")
qids = ds.query_ids(int(sys.argv[2]))
enc = BenchEncoder(MiniLMEncoder(), Path("benchmarks/.cache"))
Q = enc._cached([ds.queries[q].strip()[:2000] for q in qids], "query", None)
ids = list(ds.corpus)
def camel(s): return re.sub(r"[_]+", " ", re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", s))
tags = lambda d: [t for t in d.get('tags') or [] if t != 'merged-tool']
variants = {
 "title\\ntext": lambda d: f"{d['title']}\n{d['text']}",
 "title\\ntext\\nTags": lambda d: f"{d['title']}\n{d['text']}" + (f"\nTags: {', '.join(d.get('tags'))}" if d.get('tags') else ""),
 "camel: text": lambda d: f"{camel(d['title'])}: {d['text']}",
 "camel: firstline": lambda d: f"{camel(d['title'])}: {d['text'].splitlines()[0]}",
 "camel: text Tags": lambda d: f"{camel(d['title'])}: {d['text']}" + (f"\nTags: {', '.join(tags(d))}" if tags(d) else ""),
}
for name in sys.argv[3].split(","):
  f = variants[name]
  D = enc.encode_documents([f(ds.corpus[i]) for i in ids])
  S = Q @ D.T
  run = {q: [ids[j] for j in np.argsort(-S[k])[:50]] for k, q in enumerate(qids)}
  print(name, {k: round(v,3) for k,v in evaluate({q: ds.qrels[q] for q in qids}, run).items()}, flush=True)
