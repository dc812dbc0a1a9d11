"""The vector stage of a search: a request's top ``depth`` rows among those the caller may see, by exact cosine.

Under :data:`COMPACT_FROM` rows the float32 matrix is scanned whole (one matrix product, ``max_cosines``).
From there on every row also has a compact copy, :class:`Compact`: int8 codes and one float32 scale
(``row ~ scale * codes``, a quarter of float32's bytes, so a quarter of the memory traffic that bounds a scan).
A search then

1. scores every row approximately with simsimd's int8 dot-product kernels (SIMD; this module is simsimd's
   home), in blocks of :data:`BLOCK` rows, one pass for all the request's query vectors;
2. sets the rows the caller may not see (``mask``) to ``-inf``, so filtering stays inside the retriever and
   ``depth`` rows come back whenever ``depth`` visible rows exist;
3. takes every visible row whose approximate score is within :func:`margin` (six standard deviations of the
   quantisation error) of the ``depth``-th best approximate score, and re-scores those exactly in float32
   (the matrix may be a file mapping: only these rows are read);
4. returns the top ``depth`` by exact cosine.

The fusion sees exact float32 cosines only: the candidates', and those of the rows the caller names
(``exact_rows``: the lexical candidates). Every other visible row keeps its approximate score, which only
feeds the background's mean and spread (``confidence.Background``), to about 1e-3 per row.
Measured alternatives and the choice: docs/benchmarks.md, "The vector stage at 100k and 1M".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import simsimd

__all__ = ["BLOCK", "COMPACT_FROM", "Compact", "Shift", "margin", "nearest_compact", "quantise"]

# Rows from which a search scans the compact copy; below it the exact float32 product costs under 3 ms.
COMPACT_FROM = 40_000
# Rows scored per kernel call: bounds the scratch buffer (rows x query vectors float32).
BLOCK = 65_536
# At most this many rows per requested one are re-scored exactly (ties of equal stand-in vectors aside,
# the margin admits far fewer).
MAX_RESCORE_FACTOR = 8


@dataclass(frozen=True)
class Compact:
    """int8 codes (n, dim) and float32 scales (n,): row i is about ``scales[i] * codes[i]``."""

    codes: np.ndarray
    scales: np.ndarray

    @classmethod
    def of(cls, matrix: np.ndarray) -> Compact:
        """Quantise ``matrix`` in blocks of rows (no float32 temporary of the whole matrix)."""
        codes = np.empty(matrix.shape, dtype=np.int8)
        scales = np.empty(matrix.shape[0], dtype=np.float32)
        for start in range(0, matrix.shape[0], BLOCK):
            codes[start : start + BLOCK], scales[start : start + BLOCK] = quantise(matrix[start : start + BLOCK])
        codes.setflags(write=False)
        scales.setflags(write=False)
        return cls(codes, scales)

    def __len__(self) -> int:
        return int(self.scales.size)

    @property
    def nbytes(self) -> int:
        return int(self.codes.nbytes + self.scales.nbytes)

    def replaced(self, rows: Sequence[int], vectors: np.ndarray) -> Compact:
        """A copy with these rows quantised anew (the others are copied, not recomputed)."""
        codes, scales = self.codes.copy(), self.scales.copy()
        if len(rows):
            codes[list(rows)], scales[list(rows)] = quantise(np.asarray(vectors, dtype=np.float32))
        codes.setflags(write=False)
        scales.setflags(write=False)
        return Compact(codes, scales)


def quantise(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row as int8 codes and the scale ``max |x| / 127`` (a zero row: codes 0, scale 0)."""
    m = np.asarray(m, dtype=np.float32).reshape(-1, m.shape[-1])
    peak = np.abs(m).max(axis=1) if m.size else np.zeros(m.shape[0], np.float32)
    scales = (peak / 127.0).astype(np.float32)
    safe = np.where(scales > 0, scales, 1.0).astype(np.float32)
    codes = np.rint(m / safe[:, None]).clip(-127, 127).astype(np.int8)
    return codes, scales


def margin(row_scale: float, query_scales: np.ndarray) -> float:
    """Six standard deviations of ``exact - approximate`` for one unit row and unit query, both rounded to
    int8: ``x.q - s_x s_q (c_x.c_q) = s_x c_x.e_q + e_x.q``, each component of ``e`` uniform within half a
    step, so its variance is at most ``(s_q^2 + s_x^2) / 12`` (the largest row scale bounds every row's; a
    route's columns of a routed row are a unit vector too)."""
    sq = float(np.max(query_scales)) if np.size(query_scales) else 0.0
    return 6.0 * float(np.sqrt((sq * sq + row_scale * row_scale) / 12.0))


@dataclass(frozen=True)
class Shift:
    """A per-row offset subtracted from each query vector's score before the best is taken: row ``i`` loses
    ``by[j, groups[i]]`` for query vector ``j`` (language centering: ``calibration.centered_cosines``)."""

    by: np.ndarray
    groups: np.ndarray


def _approximate(
    compact: Compact, columns: slice | None, queries: np.ndarray, threads: int, shift: Shift | None,
) -> tuple[np.ndarray, float]:
    """Every row's best approximate score over ``queries`` (float32), and the error margin that applies."""
    codes = compact.codes if columns is None else compact.codes[:, columns]
    q_codes, q_scales = quantise(queries)
    n, nq = codes.shape[0], q_codes.shape[0]
    scores = np.empty(n, dtype=np.float32)
    scratch = np.empty((min(n, BLOCK), nq), dtype=np.float32)
    for start in range(0, n, BLOCK):
        block = codes[start : start + BLOCK]
        out = scratch[: block.shape[0]]
        simsimd.cdist(block, q_codes, metric="dot", out=out, threads=threads)
        end = start + block.shape[0]
        if shift is None and nq == 1:
            np.multiply(out[:, 0], q_scales[0], out=scores[start:end])
            scores[start:end] *= compact.scales[start:end]
            continue
        out *= q_scales[None, :]
        out *= compact.scales[start:end, None]
        if shift is not None:
            out -= shift.by[:, shift.groups[start:end]].T
        out.max(axis=1, out=scores[start:end])
    return scores, margin(float(compact.scales.max()) if n else 0.0, q_scales)


def _depth_threshold(scores: np.ndarray, k: int) -> float:
    """The ``k``-th largest of ``scores`` (``-inf`` when fewer than ``k`` are finite), from a sample first:
    a full partition of 1M scores costs tens of ms, a sample's and a filter's well under one."""
    n = scores.size
    step = n // 32_768
    if step >= 2 and k * 4 < n:
        sample = scores[::step]
        rank = min(sample.size, 2 * (k // step) + 16)  # deeper than k/step: the estimate errs low, not high
        low = float(np.partition(sample, sample.size - rank)[sample.size - rank])
        if np.isfinite(low):
            above = scores[scores >= low]
            if above.size >= k:
                return float(np.partition(above, above.size - k)[above.size - k])
    finite = scores[np.isfinite(scores)]
    if finite.size < k:
        return float("-inf")
    return float(np.partition(finite, finite.size - k)[finite.size - k])


def nearest_compact(
    matrix: np.ndarray,
    compact: Compact,
    columns: slice | None,
    queries: np.ndarray,
    depth: int,
    mask: np.ndarray | None,
    exact_rows: np.ndarray | None = None,
    threads: int = 1,
    shift: Shift | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The top ``depth`` visible rows (best first) and every row's score: exact float32 cosines for those
    rows and for ``exact_rows``, approximate ones elsewhere, ``-inf`` where ``mask`` is False.

    ``matrix`` is the float32 matrix scored (a route's column view when ``columns`` is set), ``compact``
    the whole matrix's compact copy; ``queries`` (q, dim) normalised; ``shift`` a per-row offset of each
    query vector's score (exact, so the margin is the same)."""
    queries = np.ascontiguousarray(queries, dtype=np.float32).reshape(-1, matrix.shape[1])
    scores, err = _approximate(compact, columns, queries, threads, shift)
    if mask is not None:
        scores[~mask] = -np.inf
    threshold = _depth_threshold(scores, depth)
    if np.isfinite(threshold):
        picked = np.flatnonzero(scores >= threshold - 2.0 * err)
    else:  # fewer than ``depth`` visible rows: all of them
        picked = np.flatnonzero(np.isfinite(scores))
    cap = MAX_RESCORE_FACTOR * depth + 512
    if picked.size > cap:
        picked = picked[np.argpartition(-scores[picked], cap - 1)[:cap]]
        picked.sort()
    exact = _exact(matrix, picked, queries, shift)
    scores[picked] = exact
    order = np.argsort(-exact, kind="stable")[:depth]
    if exact_rows is not None and exact_rows.size:
        named = np.unique(exact_rows)
        named = named[np.isfinite(scores[named])]
        scores[named] = _exact(matrix, named, queries, shift)
    return picked[order].astype(np.int64), scores


def _exact(matrix: np.ndarray, rows: np.ndarray, queries: np.ndarray, shift: Shift | None) -> np.ndarray:
    """The float32 scores of these rows (read from ``matrix``, which may be a file mapping)."""
    if rows.size == 0:
        return np.zeros(0, dtype=np.float32)
    products = np.asarray(matrix[rows], dtype=np.float32) @ queries.T
    if shift is not None:
        products = products - shift.by[:, shift.groups[rows]].T
    best: np.ndarray = products.max(axis=1).astype(np.float32)
    return best
