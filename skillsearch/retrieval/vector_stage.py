"""The vector stage of a search: a request's top ``depth`` rows among those the caller may see, by exact cosine.

Under :data:`COMPACT_FROM` rows the float32 matrix is scanned whole (one matrix product, ``max_cosines``).
From there on every row also has a compact copy, :class:`Compact`: int8 codes and one float32 scale
(``row ~ scale * codes``, a quarter of float32's bytes, so a quarter of the memory traffic that bounds a scan).
A search then

1. scores every row approximately, whoever asks, with an error margin (``vector_scan.approximate_scores``:
   the int8 copy, or from ``vector_scan.INT4_FROM`` rows its int4 copy first, each row with its own margin);
2. sets the rows the caller may not see (``mask``) to ``-inf`` without a branch per row (:func:`hide`), so
   filtering stays inside the retriever and ``depth`` rows come back whenever ``depth`` visible rows exist;
3. takes every visible row whose approximate score is within the margin of the ``depth``-th best
   approximate score (:func:`select`), and re-scores those exactly in float32 (an opened index reads only
   these rows from its saved file: ``vector_files.FileRows``). After the int4 copy (:func:`select_kept`) only
   the rows whose upper bound reaches the ``depth``-th best lower bound among the visible rows are scored
   again from the int8 copy first, where they lie (``vector_scan.rescan``; one or two thousand at 100k rows,
   a few thousand at 1M);
4. returns the top ``depth`` by exact cosine.

The fusion sees exact float32 cosines only: the candidates', and those of the rows the caller names
(``exact_rows``: the lexical candidates). Every other visible row keeps its approximate score, which only
feeds the background's mean and spread (``confidence.Background``), to about 1e-3 per row.
Measured alternatives and the choice: docs/benchmarks.md, "The vector stage at 100k and 1M" (binary codes,
projections and IVF lists needed pools of thousands of rows to keep the exact top 100 on the synthetic
catalog; int8 needs about 100).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from skillsearch.retrieval import int8_kernels
from skillsearch.retrieval.compact import BLOCK, Compact, quantise_together
from skillsearch.retrieval.cosines import nearest_rows, row_max
from skillsearch.retrieval.vector_scan import SCAN_THREADS, Margins, Shift, approximate_scores, margin, rescan

__all__ = ["COMPACT_FROM", "choose", "hide", "nearest_compact", "nearest_of", "select", "select_kept"]

# Rows from which a search scans the compact copy. Measured at 5k and 10k rows (docs/benchmarks.md, "One pass
# for several query vectors"): the int8 scan with re-scoring is already faster there (whole stage 0.57-0.78
# against 0.84-1.67 ms at 5k; 0.66-0.87 against 2.3-2.7 ms at 10k). Every relevance dev set (at most 4,076
# rows) stays on the exact product, so no relevance report moves.
COMPACT_FROM = 5_000
# Added to the reach of :func:`select_kept`'s first filter so that float32 rounding of a bound (some 1e-7)
# can never leave out a row the exact arithmetic keeps.
BOUND_SLACK = 1e-5
# At most this many rows per requested one are re-scored exactly (ties of equal stand-in vectors aside,
# the margin admits far fewer).
MAX_RESCORE_FACTOR = 8
# The most float32 rows :func:`nearest_of` reads at once (24 MB of 768 columns).
RESCORE_ROWS = 8_192


class Rows(Protocol):
    """The float32 rows re-scored exactly: an array, or a reader of a saved file (``vector_files.FileRows``)."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    def __getitem__(self, rows: np.ndarray, /) -> np.ndarray: ...


def hide(scores: np.ndarray, mask: np.ndarray) -> None:
    """Set ``scores`` to ``-inf`` where ``mask`` is False, in place, without a branch per row: adds 0.0 or
    -inf (the bits ``0xFF800000`` times the row's hidden flag). ``scores[~mask] = -inf`` and ``np.where``
    took 20 ms at 1M rows with half of them hidden, this 0.3 ms (docs/benchmarks.md)."""
    hidden = np.logical_not(mask).view(np.uint8).astype(np.uint32)
    hidden *= np.uint32(0xFF800000)
    scores += hidden.view(np.float32)


def nearest_of(
    matrix: Rows, compact: Compact, columns: slice | None, vectors: np.ndarray, kernel: str | None = None,
) -> np.ndarray:
    """Each row's index in ``vectors`` (k, dim; any length) of its largest product, as the exact argmax
    (``cosines.nearest_rows``) gives it, from the int8 copy: the products of every row approximated a block at a time (``kernel``:
    one of ``int8_kernels.KERNELS``, default this core's), and the rows whose best two lie within twice the
    error margin re-scored exactly from ``matrix`` (the route's float32 rows, read as :func:`select` reads
    them). A route's languages (``routing.RequestRoute``) were an
    argmax over the whole float32 matrix: at 1M rows of ``minilm+e5`` it read 3 GB through the mapping into
    the serving process at the first search after every update (docs/benchmarks.md)."""
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    n = len(compact)
    out = np.zeros(n, dtype=np.int64)
    if n == 0 or len(vectors) == 0:
        return out
    pieces = compact.pieces(columns)
    q_codes, q_scales = quantise_together(vectors)
    n = compact.base_rows  # the patch's rows (changed and added since the parts were made) are exact below
    kernel = int8_kernels.named(kernel)
    if kernel == "numkong-packed":  # its products are what cdist gives; nothing to pack for a one-off
        kernel = "numkong-cdist"
    queries = int8_kernels.prepared(pieces, q_codes, kernel)
    # The row's rounding error meets a vector of this length, not a unit one (margin's e_x.q term).
    longest = float(np.linalg.norm(vectors, axis=1).max())
    err = margin(compact.peak_scale * max(longest, 1.0), q_scales)
    unsure = []
    for start in range(0, n, BLOCK):
        end = min(start + BLOCK, n)
        products = int8_kernels.products(pieces, queries, start, end, kernel)
        products *= q_scales[0]
        products *= compact.scales[start:end, None]
        best = products.argmax(axis=1)
        top = products[np.arange(end - start), best]
        products[np.arange(end - start), best] = -np.inf
        out[start:end] = best
        unsure.append(start + np.flatnonzero(top - products.max(axis=1) <= 2.0 * err))
    rows = np.union1d(np.concatenate(unsure) if unsure else np.zeros(0, np.int64), compact.patch_rows)
    # A chunk of rows at a time: the close calls can be tens of thousands of rows (near ties between two
    # reference vectors), and their float32 rows read at once were that many 3 KB rows in memory.
    for start in range(0, rows.size, RESCORE_ROWS):
        chunk = rows[start : start + RESCORE_ROWS]
        out[chunk] = nearest_rows(np.asarray(matrix[chunk]), vectors)
    return out


def _depth_threshold(scores: np.ndarray, k: int) -> float:
    """The ``k``-th largest of ``scores`` (``-inf`` when fewer than ``k`` are finite), from a sample first:
    a full partition of 1M scores costs tens of ms, a sample's and a filter's well under one. A sample of
    about 8,192 rows keeps some hundreds above its estimate (at most 554 over 60 dev requests at 100k rows,
    against at most 302 for 32,768) in 0.11 ms against 0.30 (``/tmp`` scratch timing, 2026-12-03)."""
    n = scores.size
    step = n // 8_192
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


def _depth_and_near(scores: np.ndarray, k: int, widest: float) -> tuple[float, np.ndarray]:
    """:func:`_depth_threshold`'s ``k``-th largest score and the rows whose score is at least that minus twice
    ``widest`` (and :data:`BOUND_SLACK`); no rows when the ``k``-th is ``-inf``. Two passes over ``scores``:
    taking the row numbers in one pass, from the sample's estimate (below the ``k``-th) minus the reach, took
    3.19 ms at 1M rows against 1.36, as ``np.flatnonzero`` costs with the rows it returns (86k there against
    18k; docs/benchmarks.md)."""
    best = _depth_threshold(scores, k)
    if not np.isfinite(best):
        return best, np.zeros(0, np.int64)
    return best, np.flatnonzero(scores >= best - 2.0 * widest - BOUND_SLACK)


def nearest_compact(
    matrix: Rows,
    compact: Compact,
    columns: slice | None,
    queries: np.ndarray,
    depth: int,
    mask: np.ndarray | None,
    exact_rows: np.ndarray | None = None,
    threads: int = SCAN_THREADS,
    shift: Shift | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The top ``depth`` visible rows (best first) and every row's score: exact float32 cosines for those
    rows and for ``exact_rows``, approximate ones elsewhere, ``-inf`` where ``mask`` is False.

    ``matrix`` is the float32 matrix scored (a route's column view when ``columns`` is set), ``compact``
    the whole matrix's compact copy; ``queries`` (q, dim) normalised; ``shift`` a per-row offset of each
    query vector's score (exact, so the margin is the same)."""
    queries = np.ascontiguousarray(queries, dtype=np.float32).reshape(-1, matrix.shape[1])
    scores, err = approximate_scores(compact, columns, queries, shift, threads)
    return choose(matrix, compact, columns, scores, err, queries, depth, mask, exact_rows, shift)


def choose(
    matrix: Rows, compact: Compact, columns: slice | None, scores: np.ndarray, err: float | Margins,
    queries: np.ndarray, depth: int, mask: np.ndarray | None, exact_rows: np.ndarray | None = None,
    shift: Shift | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Steps 2-4 over ``vector_scan.approximate_scores``'s ``scores`` (changed in place) and margin: the two tiers'
    choice for per-row margins (:func:`select_kept`), else the int8 stage's (:func:`select`)."""
    if isinstance(err, Margins):
        return select_kept(matrix, compact, columns, scores, err, queries, depth, mask, exact_rows)
    return select(matrix, scores, err, queries, depth, mask, exact_rows, shift)


def select(
    matrix: Rows,
    scores: np.ndarray,
    err: float,
    queries: np.ndarray,
    depth: int,
    mask: np.ndarray | None,
    exact_rows: np.ndarray | None = None,
    shift: Shift | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Steps 2-4 of the stage over a scan's approximate ``scores`` (``vector_scan.scan``; changed in place) and its
    error margin ``err``: what :func:`nearest_compact` returns."""
    if mask is not None:
        hide(scores, mask)
    threshold = _depth_threshold(scores, depth)
    if np.isfinite(threshold):
        picked = np.flatnonzero(scores >= threshold - 2.0 * err)
    else:  # fewer than ``depth`` visible rows: all of them
        picked = np.flatnonzero(np.isfinite(scores))
    return _rescored(matrix, scores, picked, queries, depth, exact_rows, shift)


def select_kept(
    matrix: Rows,
    compact: Compact,
    columns: slice | None,
    scores: np.ndarray,
    margins: Margins,
    queries: np.ndarray,
    depth: int,
    mask: np.ndarray | None,
    exact_rows: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`select` after :func:`first_pass` (its ``scores``, changed in place, and ``margins``): the
    ``depth``-th largest lower bound (score minus margin) among the visible rows bounds the exact ``depth``-th
    best from below, so only the rows whose upper bound reaches it can be in the top ``depth``; those (a few
    thousand at 1M rows, ``benchmarks/results/first-pass-pools.md`` at 40b06d3) are scored again from the int8
    copy, then chosen and re-scored exactly as :func:`select` does. Every other visible row keeps its int4 score."""
    if mask is not None:
        hide(scores, mask)
    # Both bounds are taken only over the rows within twice the widest margin ``w`` of the ``depth``-th best
    # score ``s`` (one pass over the scores, no array of bounds): the ``depth`` best rows have lower bounds of
    # at least ``s - w``, so the ``depth``-th best lower bound ``l`` is at least that, and every row whose
    # lower or upper bound reaches ``l`` scores at least ``l - w >= s - 2w``.
    best, near = _depth_and_near(scores, depth, margins.widest())
    if np.isfinite(best):
        near_scores, near_margins = scores[near], margins.at(near)
        lowest = _depth_threshold(near_scores - near_margins, depth)
        kept = near[near_scores + near_margins >= lowest]
    else:  # fewer than ``depth`` visible rows: all of them
        kept = np.flatnonzero(np.isfinite(scores))
    err = rescan(compact, columns, kept, scores, queries)
    again = scores[kept]
    threshold = _depth_threshold(again, depth)
    picked = kept[again >= threshold - 2.0 * err] if np.isfinite(threshold) else kept
    return _rescored(matrix, scores, picked, queries, depth, exact_rows, None)


def _rescored(
    matrix: Rows, scores: np.ndarray, picked: np.ndarray, queries: np.ndarray, depth: int,
    exact_rows: np.ndarray | None, shift: Shift | None,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``picked`` rows (at most a cap of them, by approximate score) and the visible ``exact_rows``
    re-scored exactly into ``scores``; the top ``depth`` picked rows, best first, and the scores."""
    cap = MAX_RESCORE_FACTOR * depth + 512
    if picked.size > cap:
        picked = picked[np.argpartition(-scores[picked], cap - 1)[:cap]]
        picked.sort()
    exact = _exact(matrix, picked, queries, shift)
    scores[picked] = exact
    order = np.argsort(-exact, kind="stable")[:depth]
    if exact_rows is not None and exact_rows.size:
        named = np.setdiff1d(exact_rows, picked)  # sorted and unique; the picked rows are exact already
        named = named[np.isfinite(scores[named])]
        scores[named] = _exact(matrix, named, queries, shift)
    return picked[order].astype(np.int64), scores


def _exact(matrix: Rows, rows: np.ndarray, queries: np.ndarray, shift: Shift | None) -> np.ndarray:
    """The float32 scores of these rows (read from ``matrix``: an array, or rows read from a saved file)."""
    if rows.size == 0:
        return np.zeros(0, dtype=np.float32)
    products = np.asarray(matrix[rows], dtype=np.float32) @ queries.T
    if shift is not None:
        products = products - shift.by[:, shift.groups[rows]].T
    return row_max(products, np.empty(products.shape[0], dtype=np.float32))
