"""Exact cosines over float32 rows: unit-length rows, the values whose products would be subnormal set to
zero, each row's best product over a request's query vectors, each row's nearest of some vectors, the top k
of a score array, and the row-wise maximum and sum of a tall, narrow array. The vector
store (``vectors.py``) scores small matrices and re-scores the int8 scan's candidates with these; the
encoders normalise with :func:`normalise`."""

from __future__ import annotations

import numpy as np

from skillsearch.retrieval import torch_ops

__all__ = ["TINY", "max_cosines", "nearest_rows", "normalise", "row_max", "row_sum", "top_k", "zero_tiny"]


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Row indices of the k highest finite scores, best first."""
    finite = np.isfinite(scores)
    n = int(finite.sum())
    k = min(k, n)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    if k < scores.size:
        part = np.argpartition(-scores, k - 1)[:k]
    else:
        part = np.arange(scores.size)
    part = part[np.isfinite(scores[part])]
    ordered: np.ndarray = part[np.argsort(-scores[part], kind="stable")]
    return ordered


def normalise(m: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, as float32 (a zero row stays zero)."""
    m = np.asarray(m, dtype=np.float32)
    norms = np.linalg.norm(m, axis=-1, keepdims=True)
    norms[norms == 0] = 1.0
    out: np.ndarray = m / norms
    return out


# Below this a value's square is under float32's smallest normal number (2**-126). MiniLM gives every text
# two such components (dimensions 127 and 223 are about 1e-33), and a product of two of them is a subnormal
# result, which x86 cores finish in microcode: 3 query vectors against 10k rows took 2.1 ms instead of 1.3
# after the model's pass (docs/benchmarks.md, "Subnormal products"). Zeroing them moves a cosine by < 1e-38.
TINY = 2.0**-64
_SCAN_ROWS = 4096


def zero_tiny(m: np.ndarray) -> np.ndarray:
    """``m`` as float32 with every value smaller than :data:`TINY` in magnitude set to 0; ``m`` itself when
    it holds none (a copy otherwise: the caller's array is never written). Scanned in blocks of rows, so a
    100k-row matrix needs no second matrix's worth of temporaries."""
    m = np.asarray(m, dtype=np.float32)
    rows = m.reshape(1, -1) if m.ndim < 2 else m.reshape(-1, m.shape[-1])
    out: np.ndarray | None = None
    for start in range(0, rows.shape[0], _SCAN_ROWS):
        block = rows[start : start + _SCAN_ROWS]
        tiny = (np.abs(block) < TINY) & (block != 0)
        if tiny.any():
            if out is None:
                out = rows.copy()
            out[start : start + _SCAN_ROWS][tiny] = 0.0
    return m if out is None else out.reshape(m.shape)


def max_cosines(matrix: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Each row's best cosine over the query vectors (rows and queries normalised), as float32.

    One vector (most requests) is numpy's matrix-vector product; several go through torch's matrix product
    (:mod:`skillsearch.retrieval.torch_ops`) when the matrix is C-contiguous. Measured on 2 cores right after
    a model pass, torch at the one intra-op thread the batching service sets, real MiniLM vectors with
    :func:`zero_tiny` applied (ms, 10k / 100k rows): one vector 0.69 / 6.5 with numpy, 0.88 / 7.6 with torch;
    three vectors 1.2 / 11.0 with torch (numpy's GEMM 1.8 / 18.9). Before :func:`zero_tiny`, torch's three
    vectors took 2.0 / 19.1 (docs/benchmarks.md, "Subnormal products"). A column view
    (one route of a routed index) is strided, and torch would copy it: numpy scores those in place.
    """
    queries = np.ascontiguousarray(zero_tiny(queries)).reshape(-1, matrix.shape[1])
    if matrix.shape[0] == 0:
        return np.zeros(0, dtype=np.float32)
    if len(queries) == 1:
        return np.asarray(matrix @ queries[0], dtype=np.float32)
    if not matrix.flags.c_contiguous or matrix.dtype != np.float32:
        product: np.ndarray = matrix @ queries.T
        return row_max(product, np.empty(product.shape[0], dtype=np.float32))
    return torch_ops.max_cosines(matrix, queries)


# Rows per float64 product in :func:`nearest_rows` (12 MB of float64 at 384 columns).
NEAREST_ROWS = 4_096


def nearest_rows(rows: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """Each row's index in ``vectors`` of its largest product: the one computation every path to a
    document's language takes (``calibration.language_codes``, ``VectorSnapshot.nearest_of`` and the int8
    stage's close calls), so they agree row for row. The products are taken in float64 over the float32
    values: a float32 product's rounding depends on how the BLAS blocks the call (how many rows it holds),
    which flipped a near tie between two reference vectors between a whole-matrix call and the stage's
    chunks of close calls (numpy 2.4.6's OpenBLAS, 2026-12-06); in float64 a row's answer does not depend
    on the other rows of the call."""
    if not len(rows):
        return np.zeros(0, np.int64)
    wide = np.asarray(vectors, np.float32).astype(np.float64).T
    out = np.empty(len(rows), dtype=np.int64)
    for start in range(0, len(rows), NEAREST_ROWS):
        chunk = np.asarray(rows[start : start + NEAREST_ROWS], dtype=np.float64)
        out[start : start + len(chunk)] = np.argmax(chunk @ wide, axis=1)
    return out


def row_max(m: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Each row's largest value of a tall, narrow ``m`` (rows x query vectors), into ``out``: one
    vectorised maximum per column. numpy's ``max(axis=1)`` over a few columns costs 1.7 ms per 65,536 rows
    here, this 0.13 ms for four columns (docs/benchmarks.md, "One pass for several query vectors")."""
    return _by_column(np.maximum, m, out)


def row_sum(m: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Each row's sum of a tall, narrow ``m`` into ``out``, one vectorised addition per column (as
    :func:`row_max`)."""
    return _by_column(np.add, m, out)


def _by_column(op: np.ufunc, m: np.ndarray, out: np.ndarray) -> np.ndarray:
    np.copyto(out, m[:, 0], casting="unsafe")
    for j in range(1, m.shape[1]):
        op(out, m[:, j], out=out, casting="unsafe")
    return out
