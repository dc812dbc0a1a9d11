"""skillsearch: a search-first skill catalog for LLM agents."""

import os as _os

# One query's cosine scores are a matrix-vector product: memory-bound, so OpenBLAS threads only contend
# with the encoder's torch threads. Measured on 2 cores with 4,076 rows: 11 ms per product with the
# default thread pool, 0.2 ms with one thread (docs/benchmarks.md). A value set by the user wins.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
