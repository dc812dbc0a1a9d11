"""Subnormal products: the vector stage's matrix product with MiniLM's near-zero components kept, and with
them set to zero (``skillsearch.retrieval.cosines.zero_tiny``).

Why it matters (docs/benchmarks.md, "Subnormal products"): MiniLM gives every text two components of about
1e-33 (dimensions 127 and 223). The product of two of them is below float32's smallest normal number, and
x86 cores finish such a result in microcode, so a query's vectors against a matrix holding them run slower.

What is timed: each row's best product over 1 or 3 query vectors (torch at the one intra-op thread the
batching service sets; numpy's matrix-vector product for one vector), each call right after a model pass
(as in a search: the pass evicts the matrix from cache), interleaved, medians. The matrix is the cached real
MiniLM vectors of the skills and tool corpora (``benchmarks/.cache``, built by ``bench relevance``), repeated
to 10k and 100k rows.

Run: ``HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/subnormal.py`` (writes
``benchmarks/results/subnormal.{md,json}``). Not collected by pytest.
Output: an experiment record behind a past choice, not a current result; the last run is in git at 409896a.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CACHE = ROOT / "benchmarks" / ".cache" / "sentence-transformers_all-MiniLM-L6-v2"
REQUEST = "review this pull request for security problems. Write a summary of the findings. Keep it short."


def main() -> None:
    from skillsearch.bench.report import run_started

    run_started()  # the commit its report names: HEAD as the run starts, not when it writes
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy as np
    import torch

    from skillsearch.bench.report import write_script_report
    from skillsearch.retrieval.cosines import TINY, zero_tiny
    from skillsearch.retrieval.minilm import MiniLMEncoder
    from skillsearch.retrieval.search import query_texts

    torch.set_num_threads(1)
    chunks = sorted(CACHE.glob("chunk-*.npz"))
    if not chunks:
        sys.exit(f"no cached vectors under {CACHE}: run `skillsearch bench relevance --dataset "
                 "../shared/data/skills-catalog --split dev` first")
    cached = np.concatenate([np.load(c)["vectors"] for c in chunks]).astype(np.float32)
    encoder = MiniLMEncoder()
    texts = query_texts(REQUEST, 3)
    raw_queries = np.asarray(encoder.encode_query_parts(texts[0], texts[1:]), np.float32)
    tiny_share = float(((np.abs(cached) < TINY) & (cached != 0)).mean())
    dims = sorted(set(np.nonzero((np.abs(cached) < TINY) & (cached != 0))[1].tolist()))

    def product(matrix: np.ndarray, queries: np.ndarray) -> None:
        if len(queries) == 1:
            matrix @ queries[0]
        else:
            torch.mm(torch.from_numpy(matrix), torch.from_numpy(queries).T).amax(dim=1)

    rows = []
    for n in (10_000, 100_000):
        kept = np.ascontiguousarray(np.resize(cached, (n, cached.shape[1])))
        zeroed = zero_tiny(kept)
        times: dict[tuple[int, str], list[float]] = {}
        for _ in range(30):
            for k in (1, 3):
                for label, matrix, queries in (("kept", kept, raw_queries), ("zeroed", zeroed, zero_tiny(raw_queries))):
                    encoder.encode_query(REQUEST)
                    started = time.perf_counter()
                    product(matrix, np.ascontiguousarray(queries[:k]))
                    times.setdefault((k, label), []).append((time.perf_counter() - started) * 1000)
        for k in (1, 3):
            kept_ms = round(float(np.median(times[(k, "kept")])), 2)
            zeroed_ms = round(float(np.median(times[(k, "zeroed")])), 2)
            rows.append({"rows": n, "query vectors": k, "product": "numpy" if k == 1 else "torch",
                         "tiny values kept (ms)": kept_ms, "zeroed (ms)": zeroed_ms,
                         "kept / zeroed": round(kept_ms / zeroed_ms, 2)})
    print(write_script_report(
        ROOT / "benchmarks" / "results", "subnormal",
        "Subnormal products: the vector stage with MiniLM's near-zero components kept and zeroed (median)",
        "python benchmarks/subnormal.py", "one torch thread; each call right after a model pass", rows,
        text_columns=3, notes=(f"{len(cached)} cached MiniLM vectors: {tiny_share:.4%} of their values are under"
                               f" 2**-64, all in dimensions {dims}",),
        extra={"dims": dims, "tiny_share": tiny_share}), end="")


if __name__ == "__main__":
    main()
