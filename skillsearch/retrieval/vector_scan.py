"""Step 1 of the vector stage (``retrieval/vector_stage.py``): every row's approximate best score over a
request's query vectors, read from the compact copy (``compact.Compact``), and the error margin that bounds
the difference from its exact cosine.

- :func:`scan`: the int8 copy, with an int8 dot-product kernel (``int8_kernels.scan_kernel``: our own
  ``_int8dots`` on x86 cores with AVX-512 VNNI or AVX2, numkong's ``cdist`` elsewhere) in blocks of ``BLOCK``
  rows, all the request's query vectors in one call, the rows shared by :data:`SCAN_THREADS` Python threads
  (the kernels release the GIL); one margin for every row (:func:`margin`, six standard deviations of the
  quantisation error).
- :func:`first_pass`: from :data:`INT4_FROM` rows (one part, no language shift, our kernel's AVX-512 VNNI
  path) the int4 copy first (:func:`int4_scan`: half the bytes, each row with its own margin); the stage
  then scores some rows again from the int8 copy where they lie (:func:`rescan`).
- :func:`approximate_scores`: which of the two a search reads; :func:`sample_scores`: a fixed sample's, for
  the decision's background.

What each scan scores of the request's vectors (a derived first vector, the int8 codes) is
``retrieval/query_codes.py``'s.

No caller's mask applies here: the same rows always get the same numbers, so what is read from them (the
background's mean and spread) does not depend on who asks.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache

import numpy as np

from skillsearch.retrieval import int8_kernels
from skillsearch.retrieval.compact import BLOCK, INT4_STEP, Compact, nibbles
from skillsearch.retrieval.cosines import row_max, row_sum
from skillsearch.retrieval.query_codes import derived_error, quantised

__all__ = [
    "INT4_FROM", "SCAN_THREADS", "SPLIT_FROM", "Margins", "Shift", "approximate_scores", "first_pass", "int4_scan",
    "margin", "prepare", "reads_int4", "rescan", "sample_scores", "scan",
]

# Python threads that share a scan, each over its own blocks: numkong's kernels release the GIL (a
# spinning Python thread kept its pace beside them; simsimd's own ``threads`` argument, before, started
# threads per call, which cost more than they saved). Two at most: the
# machines this runs on have few cores, and the model's encoder shares them.
SCAN_THREADS = max(1, min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1))


# A scan shorter than this many rows runs on the calling thread (a hand-off costs tens of microseconds).
SPLIT_FROM = 32_768


# Rows from which a scan reads the int4 copy first and re-scores in int8 only the rows that can still be in the
# top ``depth`` (:func:`first_pass`, ``vector_stage.select_kept``): half the bytes of the int8 copy. Measured with cold
# caches over 80 requests (docs/benchmarks.md, "Four int4 rows at a time, kept rows read in place"): the
# whole stage at 50k rows 2.77 against 2.75 ms for the int8 scan alone, at 100k 4.12 against 4.71.
INT4_FROM = 100_000


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


@dataclass(frozen=True)
class Margins:
    """The int4 tier's error margin of each row (:func:`int4_scan`), made only for the rows asked about: a
    search needs the widest and those of the few thousand rows near its ``depth``-th best, not an array over
    every row. A row's margin is its own part (``own``: ``Compact.int4_margins``) plus the query's (``query``),
    as float32; the patch's rows, scored from their int8 codes, have the int8 scan's margin (``patch``)."""

    own: np.ndarray
    widest_own: float
    query: float
    patch_rows: np.ndarray
    patch: float

    def at(self, rows: np.ndarray) -> np.ndarray:
        """The margins of ``rows`` (row numbers), float32."""
        out: np.ndarray = self.own[rows] + np.float32(self.query)
        if self.patch_rows.size:
            out[np.isin(rows, self.patch_rows)] = self.patch
        return out

    def widest(self) -> float:
        """At least the largest margin of any row (a patched row's int4 part counts, though its margin is
        the int8 scan's)."""
        widest = float(np.float32(self.widest_own) + np.float32(self.query))
        return max(widest, float(np.float32(self.patch))) if self.patch_rows.size else widest

    def every(self) -> np.ndarray:
        """Every row's margin (for tests and reports; a search asks :meth:`at` for the rows it reads)."""
        return self.at(np.arange(len(self.own)))


@cache
def _pool(threads: int, pid: int) -> ThreadPoolExecutor:
    """The scan's helper threads, one pool per process (a forked child inherits no threads: a pool made
    before the fork would never run its work there)."""
    return ThreadPoolExecutor(max_workers=threads, thread_name_prefix="vector-scan")


def _in_runs(n: int, threads: int, run: Callable[[int, int], None]) -> None:
    """``run(first, last)`` over rows ``0:n``: on the calling thread with one thread or under
    :data:`SPLIT_FROM` rows, else cut into ``threads`` runs (at multiples of 64 rows), one per thread, the
    calling thread taking the first."""
    if threads <= 1 or n < SPLIT_FROM:
        run(0, n)
        return
    cuts = [n * i // threads // 64 * 64 for i in range(threads)] + [n]
    runs = [(cuts[i], cuts[i + 1]) for i in range(threads) if cuts[i] < cuts[i + 1]]
    futures = [_pool(threads - 1, os.getpid()).submit(run, first, last) for first, last in runs[1:]]
    run(*runs[0])
    for f in futures:
        f.result()


def scan(
    compact: Compact, columns: slice | None, queries: np.ndarray, shift: Shift | None = None,
    threads: int = SCAN_THREADS, kernel: str | None = None,
) -> tuple[np.ndarray, float]:
    """Step 1: every row's best approximate score over ``queries`` (normalised, (q, dim) float32), whoever
    asks (no mask yet), and the error margin that applies. The same rows always get the same numbers, so
    statistics read from it (the decision's background) do not depend on the caller. With ``threads`` > 1
    a large scan is cut into that many runs of rows, one per thread (the calling thread takes the first).
    ``kernel``: one of ``int8_kernels.KERNELS`` (default: ``int8_kernels.scan_kernel``); every kernel gives the
    same numbers."""
    kernel = int8_kernels.named(kernel)
    pieces = compact.pieces(columns)
    derived, q_codes, q_scales = quantised(queries)
    scores = np.empty(len(compact), dtype=np.float32)
    n = compact.base_rows  # the parts' rows; the patch (changed and added rows) is scored after them
    args = (pieces, compact.scales, q_codes, q_scales, shift, scores)
    norm = None if derived is None else derived[0]
    _in_runs(n, threads, lambda first, last: _scan(*args, first, last, kernel, norm))
    if compact.patch_rows.size:
        rows = compact.patch_rows
        sub_shift = None if shift is None else Shift(shift.by, shift.groups[rows])
        scores[rows] = scan(compact.patched, columns, queries, sub_shift, threads=1, kernel=kernel)[0]
    return scores, _scan_error(compact.peak_scale, q_scales, derived)


def _scan_error(peak_scale: float, q_scales: np.ndarray, derived: tuple[float, float] | None) -> float:
    """:func:`scan`'s error margin for rows of at most ``peak_scale``, the derived first vector's included."""
    err = margin(peak_scale, q_scales)
    if derived is not None:
        spread, distance = derived_error(derived, len(q_scales))
        err = max(err, margin(peak_scale, q_scales * spread) + distance)
    return err


def rescan(compact: Compact, columns: slice | None, rows: np.ndarray, scores: np.ndarray,
           queries: np.ndarray) -> float:
    """:func:`scan`'s numbers for ``rows`` only, into ``scores`` (every row's) at those rows, and the error
    margin for them: the parts' rows read in place by our kernel (``int8_kernels.best`` with ``at``: no copy
    of them made), for one part and no shift as :func:`first_pass` reads. The patch's rows keep what
    ``scores`` holds: :func:`int4_scan` gave them their int8 scores already."""
    pieces = compact.pieces(columns)
    if len(pieces) != 1:
        raise ValueError("a rescan reads one part")
    derived, q_codes, q_scales = quantised(queries)
    base = rows[rows < compact.base_rows]
    if compact.patch_rows.size:
        base = base[~np.isin(base, compact.patch_rows, assume_unique=True)]
    best = np.empty(base.size, dtype=np.float32)
    total = None if derived is None else np.empty(base.size, dtype=np.float32)
    if base.size:
        int8_kernels.best(pieces[0][0], int8_kernels.prepared(pieces, q_codes, "int8dots")[0], best, total,
                          at=base.astype(np.int64, copy=False))
    scores[base] = _finished(best, total, None if derived is None else derived[0], q_scales[0],
                             compact.scales[base])
    peak = float(compact.scales[rows].max()) if rows.size else 0.0
    return _scan_error(peak, q_scales, derived)


def _finished(best: np.ndarray, total: np.ndarray | None, norm: float | None, factor: np.floating,
              scales: np.ndarray) -> np.ndarray:
    """Rows' scores from our kernel's best products and their sums (``best``, changed in place and
    returned): the derived first vector's (``total`` over ``norm``) where it is better, times the query
    vectors' ``factor`` (their scale; for int4 rows times the int4 step), times each row's scale."""
    if total is not None and norm is not None:
        total *= np.float32(1.0 / norm)
        np.maximum(best, total, out=best)
    best *= factor
    best *= scales
    return best


def first_pass(
    compact: Compact, columns: slice | None, queries: np.ndarray, shift: Shift | None = None,
    threads: int = SCAN_THREADS, kernel: str | None = None,
) -> tuple[np.ndarray, Margins] | None:
    """The int4 tier (:func:`int4_scan`) where the stage reads it first: from :data:`INT4_FROM` rows, one
    part, no ``shift``, and our kernel on its AVX-512 VNNI path (``int8_kernels.scans_int4``, where it was
    measured), for at most ``int8_kernels.GROUP_VECTORS`` query vectors (a request embeds at most seven); None
    elsewhere (the stage scans int8 only)."""
    kernel = int8_kernels.named(kernel)
    if not reads_int4(compact, columns, shift, kernel) or len(queries) > int8_kernels.GROUP_VECTORS:
        return None
    return int4_scan(compact, columns, queries, threads, kernel)


def reads_int4(compact: Compact, columns: slice | None, shift: Shift | None = None, kernel: str | None = None) -> bool:
    """Whether a scan of ``columns`` reads the int4 copy first (:func:`first_pass`): from :data:`INT4_FROM` rows,
    over one part of even width, without a ``shift``, with our kernel on its AVX-512 VNNI path."""
    pieces = compact.pieces(columns)
    return (shift is None and len(pieces) == 1 and compact.base_rows >= INT4_FROM and pieces[0][0].shape[1] % 2 == 0
            and int8_kernels.scans_int4(int8_kernels.named(kernel)))


def prepare(compact: Compact, columns: slice | None, kernel: str | None = None) -> bool:
    """Makes the int4 copy (``compact.nibbles``) that a scan of ``columns`` without a shift reads first, and the
    rows' int4 margins and the widest of them (``Compact.int4_margins``, ``Compact.int4_widest``), where it
    reads one: what the first search after an open or a removal would make otherwise (0.34 s at 1M rows).
    Whether it does."""
    if not reads_int4(compact, columns, None, kernel):
        return False
    nibbles(compact.pieces(columns)[0][0])
    _ = compact.int4_widest
    return True


def int4_scan(
    compact: Compact, columns: slice | None, queries: np.ndarray, threads: int = SCAN_THREADS,
    kernel: str | None = None,
) -> tuple[np.ndarray, Margins]:
    """Every row's best approximate score over ``queries`` from the int4 copy of its part
    (``compact.nibbles``; the patch's rows from their int8 codes, ``kernel`` as :func:`scan`) and their error
    margins (:class:`Margins`, made for the rows a search asks about): six standard deviations as
    :func:`margin`, but with the row's own scale. ``columns`` must be one part of even width, and at most
    ``int8_kernels.GROUP_VECTORS`` vectors are scanned (the kernel finishes each row's score). Whoever asks
    gets the same numbers."""
    kernel = int8_kernels.named(kernel)
    pieces = compact.pieces(columns)
    if len(pieces) != 1 or pieces[0][0].shape[1] % 2:
        raise ValueError("the int4 tier reads one part of even width")
    packed = nibbles(pieces[0][0])
    derived, q_codes, q_scales = quantised(queries)
    n = compact.base_rows
    # Each row's margin: its own rounding (``Compact.int4_margins``) plus the query's, six standard deviations
    # each (their sum bounds the joint one); the derived first vector's query term as :func:`scan` takes it.
    query_term = 6.0 * float(q_scales[0]) / np.sqrt(12.0)
    if derived is not None:
        spread, distance = derived_error(derived, len(q_scales))
        query_term = max(query_term, query_term * spread + distance)
    factor = np.float32(q_scales[0] * INT4_STEP)
    inv_norm = 0.0 if derived is None else float(np.float32(1.0 / derived[0]))
    scores = np.empty(len(compact), dtype=np.float32)

    def run(first: int, last: int) -> None:
        # The kernel finishes each row's score as :func:`_finished` would.
        tiles = packed[first // int8_kernels.TILE : -(-last // int8_kernels.TILE)]  # first: a multiple of 64
        int8_kernels.best4(tiles, q_codes, scores[first:last], compact.scales[first:last], factor, inv_norm)

    _in_runs(n, threads, run)
    patch = 0.0
    if compact.patch_rows.size:
        scores[compact.patch_rows], patch = scan(compact.patched, columns, queries, None, threads=1, kernel=kernel)
    return scores, Margins(compact.int4_margins, compact.int4_widest, query_term, compact.patch_rows, patch)


def _scan(
    pieces: list[tuple[np.ndarray, slice]], scales: np.ndarray, q_codes: np.ndarray, q_scales: np.ndarray,
    shift: Shift | None, scores: np.ndarray, first: int, last: int, kernel: str, norm: float | None = None,
) -> None:
    """Rows ``first:last`` of :func:`scan`, a block of rows at a time.

    The integer dot products come from ``kernel`` (``int8_kernels.products``; docs/benchmarks.md, "One pass for
    several query vectors", "The kernel by instruction set" and "Our own int8 kernel"). Every kernel gives
    the same exact integer products (at most 384 * 127 * 127, exact in float32). The query vectors share
    one scale (``compact.quantise_together``), so the best of a row's integer products is its best score before
    scaling. ``norm``: the query vectors scored are a request's sentences, and its first vector (not among
    them) is their sum over ``norm`` (``query_codes.derived_first``): each row's sum of their products over ``norm``
    competes too, and a ``shift`` holds that first vector's offsets in its first row."""
    nq = q_codes.shape[0]
    if kernel == "numkong-packed" and nq == 1:
        kernel = "numkong-cdist"  # nothing to pack
    queries = int8_kernels.prepared(pieces, q_codes, kernel)
    # Our kernel keeps only what the scan needs of a row's products (the best, and their sum for ``norm``)
    # when one part is scanned: no block of every product written and read again. Under a shift it scales
    # and shifts each product itself (up to ``GROUP_VECTORS`` vectors; docs/benchmarks.md, "The language
    # shift in our kernel").
    ours = kernel == "int8dots" and len(pieces) == 1
    if ours and shift is not None and nq <= int8_kernels.GROUP_VECTORS:
        groups = np.ascontiguousarray(shift.groups, dtype=np.int64)
        by = np.ascontiguousarray(shift.by[0 if norm is None else 1 :], dtype=np.float32)
        whole_by = None if norm is None else np.ascontiguousarray(shift.by[0], dtype=np.float32)
        inv_norm = 0.0 if norm is None else float(np.float32(1.0 / norm))
        for start in range(first, last, BLOCK):
            end = min(start + BLOCK, last)
            int8_kernels.best_shifted(pieces[0][0][start:end], queries[0], scores[start:end], scales[start:end],
                                      float(q_scales[0]), groups[start:end], by, whole_by, inv_norm)
        return
    fused = ours and shift is None
    for start in range(first, last, BLOCK):
        end = min(start + BLOCK, last)
        if fused:
            best = scores[start:end]
            total = None if norm is None else np.empty(end - start, dtype=np.float32)
            int8_kernels.best(pieces[0][0][start:end], queries[0], best, total)
            _finished(best, total, norm, q_scales[0], scales[start:end])
            continue
        products = int8_kernels.products(pieces, queries, start, end, kernel)
        whole: np.ndarray | None = None
        if norm is not None:
            whole = row_sum(products, np.empty(end - start, dtype=np.float32))
            whole *= np.float32(1.0 / norm)
        if shift is not None:
            groups = shift.groups[start:end]
            shifted = products.astype(np.float32)
            shifted *= q_scales[0]
            shifted *= scales[start:end, None]
            shifted -= shift.by[0 if whole is None else 1 :, groups].T
            row_max(shifted, scores[start:end])
            if whole is not None:
                whole *= q_scales[0]
                whole *= scales[start:end]
                whole -= shift.by[0, groups]
                np.maximum(scores[start:end], whole, out=scores[start:end])
            continue
        if whole is None:
            best = products[:, 0] if nq == 1 else row_max(products, np.empty(end - start, dtype=products.dtype))
        else:
            best = np.maximum(row_max(products, np.empty(end - start, dtype=np.float32)), whole, out=whole)
        np.multiply(best, q_scales[0], out=scores[start:end], casting="unsafe")
        scores[start:end] *= scales[start:end]


def sample_scores(
    compact: Compact, count: int, columns: slice | None, queries: np.ndarray, shift: Shift | None,
) -> np.ndarray:
    """The approximate best score over ``queries`` of ``count`` evenly spaced rows (``Compact.sample``), each
    within about 1e-3 of its float32 cosine: the decision's background at a large index, read from the
    resident int8 copy instead of gathering rows of a mapped float32 matrix (page faults)."""
    rows, codes, scales = compact.sample(count)
    sub_shift = None if shift is None else Shift(shift.by, shift.groups[rows])
    return scan(Compact.of_codes(codes, scales), columns, queries, sub_shift, threads=1)[0]


def approximate_scores(
    compact: Compact, columns: slice | None, queries: np.ndarray, shift: Shift | None = None,
    threads: int = SCAN_THREADS,
) -> tuple[np.ndarray, float | Margins]:
    """Every row's approximate score, whoever asks, and the error margin: the int4 tier's, one per row
    (:func:`first_pass`), where it applies, else the int8 scan's, one for all rows (:func:`scan`)."""
    first = first_pass(compact, columns, queries, shift, threads)
    return first if first is not None else scan(compact, columns, queries, shift, threads)
