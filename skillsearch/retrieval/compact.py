"""The int8 copy of a large vector matrix that the vector stage scans (``retrieval/vector_scan.py``).

Each row is kept as int8 codes and one float32 scale (``max |x| / 127``, so ``row ~ scale * codes``): a
quarter of float32's bytes, so a quarter of the memory traffic that bounds a scan. The codes are kept as
contiguous parts of :data:`PART_COLUMNS` columns, so each route of a routed index (both models' columns side
by side in a row) scans one array; the copy is made a block of rows at a time, sampled for the decision's
background, and re-quantised one changed or added row at a time. A large part also gets an int4 copy
(:func:`nibbles`, half the bytes again), which the vector stage reads first from ``vector_scan.INT4_FROM``
rows.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from skillsearch.retrieval import int8_kernels

__all__ = [
    "BLOCK", "INT4_STEP", "PART_COLUMNS", "Compact", "nibbles", "nibbles_made", "patch_limit", "quantise", "quantise_together",
]

# Columns of one part of the int8 copy (``Compact``): one model's vectors (MiniLM and multilingual-e5-small
# both have 384), so each route of a routed index is one contiguous part.
PART_COLUMNS = 384
# Rows scored per kernel call: bounds the products a call returns (rows x query vectors).
BLOCK = 65_536
# Rows quantised at a time (:func:`quantise`): 12 MB of float32 temporaries at 768 columns.
QUANTISE_ROWS = 4_096
# An int4 code's step over an int8 code's (:func:`nibbles`): codes -7..7 for -127..127.
INT4_STEP = 127.0 / 7.0


@dataclass(frozen=True)
class Compact:
    """int8 codes and float32 scales (n,): row i is about ``scales[i] * codes[i]``. The codes are kept as
    column parts of :data:`PART_COLUMNS` columns, each a contiguous (n, width) array: a routed index's rows
    hold both models' columns side by side, and a route scans its own part as one contiguous array (a
    strided half of the whole codes scans about twice as slowly from some 30k rows, docs/benchmarks.md).

    A copy made by :meth:`replaced` (a one-skill update) shares the parts with the copy it came from and
    keeps the rows it changed or added in a small patch (``patch_rows``, sorted, and their ``patch_codes``):
    the parts hold the first :attr:`base_rows` rows, the patch overrides some of them and holds every row
    past them. Copying the parts at every update held the codes twice while both snapshots lived (768 MB
    more at 1M rows of ``minilm+e5``, docs/benchmarks.md); the patch is folded into new parts when it
    passes :func:`patch_limit` rows, or at a removal."""

    parts: tuple[np.ndarray, ...]
    scales: np.ndarray
    patch_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    patch_codes: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int8))

    @classmethod
    def of(cls, matrix: np.ndarray) -> Compact:
        """Quantise ``matrix`` in blocks of rows (no float32 temporary of the whole matrix)."""
        n, dim = matrix.shape
        scales = np.empty(n, dtype=np.float32)

        def blocks() -> Iterator[tuple[int, np.ndarray]]:  # fills ``scales`` as the parts are filled
            for start in range(0, n, BLOCK):
                codes, scales[start : start + BLOCK] = quantise(matrix[start : start + BLOCK])
                yield start, codes

        return cls.of_blocks(n, dim, blocks(), scales)

    @classmethod
    def of_blocks(cls, n: int, dim: int, blocks: Iterable[tuple[int, np.ndarray]], scales: np.ndarray) -> Compact:
        """Codes (n, dim) given a block of rows at a time (``(start, codes)``, together every row once), each
        block copied into the parts as it comes, so the whole codes are never held twice (a saved
        ``codes.npy`` read by ``pread``, ``vector_files.saved_compact``). A block may be a reused buffer."""
        parts = tuple(np.empty((n, b - a), dtype=np.int8) for a, b in _bounds(dim))
        for start, codes in blocks:
            for part, (a, b) in zip(parts, _bounds(dim), strict=True):
                part[start : start + len(codes)] = codes[:, a:b]
        return cls._frozen(parts, np.asarray(scales, dtype=np.float32))

    @classmethod
    def of_codes(cls, codes: np.ndarray, scales: np.ndarray) -> Compact:
        """Codes (n, dim) already made, in memory, as parts: each part a contiguous copy when there are
        several, else ``codes`` itself (a saved ``codes.npy`` is read by :meth:`of_blocks`)."""
        bounds = _bounds(codes.shape[1])
        parts = (codes,) if len(bounds) == 1 else tuple(np.ascontiguousarray(codes[:, a:b]) for a, b in bounds)
        return cls._frozen(parts, np.asarray(scales, dtype=np.float32))

    @classmethod
    def _frozen(cls, parts: tuple[np.ndarray, ...], scales: np.ndarray, patch_rows: np.ndarray | None = None,
                patch_codes: np.ndarray | None = None) -> Compact:
        dim = sum(int(p.shape[1]) for p in parts)
        rows = np.zeros(0, dtype=np.int64) if patch_rows is None else patch_rows
        codes = np.zeros((0, dim), dtype=np.int8) if patch_codes is None else patch_codes
        for array in (*parts, scales, rows, codes):
            array.setflags(write=False)
        return cls(parts, scales, rows, codes)

    def __len__(self) -> int:
        return int(self.scales.size)

    @property
    def dim(self) -> int:
        return sum(int(p.shape[1]) for p in self.parts)

    @property
    def base_rows(self) -> int:
        """The rows the parts hold (the first ones); any row past them is in the patch."""
        return int(self.parts[0].shape[0]) if self.parts else 0

    @property
    def codes(self) -> np.ndarray:
        """The codes (n, dim) whole: the one part, or the parts side by side (a copy), the patch applied."""
        if len(self.parts) == 1 and not self.patch_rows.size:
            return self.parts[0]
        return self.block(0, len(self))

    @property
    def nbytes(self) -> int:
        return int(sum(p.nbytes for p in self.parts) + self.scales.nbytes + self.patch_codes.nbytes)

    def block(self, start: int, stop: int) -> np.ndarray:
        """The codes of rows ``start:stop``, whole (the parts side by side, the patch applied)."""
        stop = min(stop, len(self))
        return self.rows(np.arange(start, stop, dtype=np.int64))

    @cached_property
    def int4_margins(self) -> np.ndarray:
        """Each row's part of its int4 error margin (``vector_scan.first_pass``): six standard deviations of
        its rounding, int8 then int4 (each uniform within half a step: variance ``(s8^2 + s4^2) / 12`` per
        column for a unit query), taken apart from the query's so that a search adds one number to it
        (``sqrt(a + b) <= sqrt(a) + sqrt(b)``)."""
        margins: np.ndarray = (6.0 / np.sqrt(12.0) * np.sqrt(1.0 + INT4_STEP * INT4_STEP) * self.scales)
        return margins.astype(np.float32)

    @cached_property
    def int4_widest(self) -> float:
        """The largest of :attr:`int4_margins` (0 without rows)."""
        return float(self.int4_margins.max()) if len(self.int4_margins) else 0.0

    def rows(self, rows: np.ndarray) -> np.ndarray:
        """The codes of these rows, whole (k, dim), the patch applied."""
        rows = np.asarray(rows, dtype=np.int64)
        base = np.minimum(rows, self.base_rows - 1) if self.base_rows else None
        out = np.empty((rows.size, self.dim), dtype=np.int8)
        if base is not None:
            for part, (a, b) in zip(self.parts, _bounds(self.dim), strict=True):
                out[:, a:b] = part[base]
        if self.patch_rows.size:
            at = np.minimum(np.searchsorted(self.patch_rows, rows), self.patch_rows.size - 1)
            hit = self.patch_rows[at] == rows
            out[hit] = self.patch_codes[at[hit]]
        return out

    @cached_property
    def patched(self) -> Compact:
        """The patch's rows (``patch_rows``, in that order) as a copy of their own, to be scanned apart (made
        once per copy: every search scans it)."""
        codes = self.patch_codes
        return Compact._frozen(tuple(np.ascontiguousarray(codes[:, a:b]) for a, b in _bounds(self.dim)),
                               np.ascontiguousarray(self.scales[self.patch_rows]))

    def pieces(self, columns: slice | None) -> list[tuple[np.ndarray, slice]]:
        """What a scan of ``columns`` (all when None) reads: each part it covers, with that part's columns
        within ``columns``; a slice that cuts a part is copied out (no route does that)."""
        dim = self.dim
        first, stop, step = (0, dim, 1) if columns is None else columns.indices(dim)
        out: list[tuple[np.ndarray, slice]] = []
        for part, (a, b) in zip(self.parts, _bounds(dim), strict=True):
            if columns is not None and (step != 1 or (a < stop and b > first and (a < first or b > stop))):
                whole = np.ascontiguousarray(np.hstack(self.parts)[:, columns])  # the parts' rows only
                return [(whole, slice(0, whole.shape[1]))]
            if first <= a and b <= stop:
                out.append((part, slice(a - first, b - first)))
        return out

    def sample(self, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``count`` evenly spaced rows (a fixed sample: the decision's background), their codes and scales,
        made contiguous on the first call; a replaced copy gathers them again."""
        cached = self._samples.get(count)
        if cached is None:
            rows = np.linspace(0, len(self) - 1, count).astype(np.int64) if len(self) else np.zeros(0, np.int64)
            cached = (rows, np.ascontiguousarray(self.rows(rows)), np.ascontiguousarray(self.scales[rows]))
            self._samples[count] = cached
        return cached

    @cached_property
    def peak_scale(self) -> float:
        """The largest row scale (bounds every row's quantisation error: :func:`margin`)."""
        return float(self.scales.max()) if self.scales.size else 0.0

    @cached_property
    def _samples(self) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        return {}

    def replaced(self, rows: Sequence[int], vectors: np.ndarray, added: np.ndarray | None = None,
                 keep: np.ndarray | None = None) -> Compact:
        """A copy of the rows ``keep`` (all when None, in this order) with ``rows`` (positions in the copy)
        quantised anew and the rows of ``added`` (k, dim) quantised after them. Without ``keep`` the copy
        shares the parts and puts the changed and added rows in its patch (the scales, 4 bytes a row, are
        copied); with ``keep`` (a removal), or once the patch passes :func:`patch_limit` rows, the kept rows
        are copied into new parts (one copy into arrays of the new length)."""
        n, k = len(self) if keep is None else len(keep), 0 if added is None else len(added)
        scales = np.empty(n + k, dtype=np.float32)
        scales[:n] = self.scales if keep is None else self.scales[keep]
        at = np.asarray(list(rows) + list(range(n, n + k)), dtype=np.int64)
        codes = np.empty((at.size, self.dim), dtype=np.int8)
        done = 0
        for values in (vectors, added if k else None):  # each quantised where it lies: no joined float copy
            if values is not None and len(values):
                values = np.asarray(values, dtype=np.float32).reshape(-1, self.dim)
                codes[done : done + len(values)], scales[at[done : done + len(values)]] = quantise(values)
                done += len(values)
        if keep is None:
            merged = dict(zip(self.patch_rows.tolist(), self.patch_codes, strict=True))
            merged.update(zip(at.tolist(), codes, strict=True))
            patch_rows = np.fromiter(sorted(merged), dtype=np.int64, count=len(merged))
            patch_codes = (np.stack([merged[r] for r in patch_rows.tolist()]) if merged
                           else np.zeros((0, self.dim), np.int8))
            if patch_rows.size <= patch_limit(n + k):
                return Compact._frozen(self.parts, scales, patch_rows, patch_codes)
            keep = np.arange(n, dtype=np.int64)
            changes = [(patch_rows, patch_codes)]
        else:
            kept_patch = np.searchsorted(keep, self.patch_rows)
            hit = kept_patch < keep.size
            hit[hit] = keep[kept_patch[hit]] == self.patch_rows[hit]
            changes = [(kept_patch[hit], self.patch_codes[hit]), (at, codes)]
        parts = [np.empty((n + k, p.shape[1]), dtype=np.int8) for p in self.parts]
        from_parts = keep[keep < self.base_rows]  # the kept rows the parts hold (a prefix of ``keep``: sorted)
        for part, old in zip(parts, self.parts, strict=True):
            np.take(old, from_parts, axis=0, out=part[: from_parts.size])
        for where, values_codes in changes:
            for part, (a, b) in zip(parts, _bounds(self.dim), strict=True):
                part[where] = values_codes[:, a:b]
        return Compact._frozen(tuple(parts), scales)


_NIBBLES: dict[int, tuple[weakref.ref[np.ndarray], np.ndarray]] = {}
_NIBBLES_LOCK = threading.Lock()


def nibbles(part: np.ndarray) -> np.ndarray:
    """The int4 copy of an int8 part (n, width), made on first use and kept while the part lives (the copies
    of a store made by one-skill updates share their parts, so they share this too): each code rounded to
    ``code * 7 / 127`` (-7..7, so a row's int4 scale is its int8 scale times :data:`INT4_STEP`) and stored
    plus 8, two a byte, column k in the low four bits and column ``width / 2 + k`` in the high four, in tiles
    of :data:`int8_kernels.TILE` rows interleaved four bytes at a time (``int8_kernels.to_int4``: the layout
    ``_int8dots.best4`` reads). A patched row's codes here are stale: a scan scores the patch apart."""
    key = id(part)
    with _NIBBLES_LOCK:
        kept = _NIBBLES.get(key)
        if kept is not None and kept[0]() is part:
            return kept[1]
        out = np.empty(int8_kernels.tile_shape(*part.shape), dtype=np.uint8)
        int8_kernels.to_int4(part, out)
        out.setflags(write=False)
        _NIBBLES[key] = (weakref.ref(part, lambda _: _NIBBLES.pop(key, None)), out)
        return out


def nibbles_made(part: np.ndarray) -> bool:
    """Whether :func:`nibbles` has made the int4 copy of ``part`` (and keeps it)."""
    with _NIBBLES_LOCK:
        kept = _NIBBLES.get(id(part))
        return kept is not None and kept[0]() is part


def patch_limit(n: int) -> int:
    """The most rows a copy keeps in its patch before :meth:`Compact.replaced` folds it into new parts: a
    scan re-scores the patch apart, so it stays a small share of the rows (1/64, at least 1,024)."""
    return max(1_024, n // 64)


def _bounds(dim: int) -> list[tuple[int, int]]:
    """The column parts of a ``dim``-wide matrix: :data:`PART_COLUMNS` columns each, the last what is left."""
    return [(a, min(a + PART_COLUMNS, dim)) for a in range(0, dim, PART_COLUMNS)] or [(0, 0)]


def quantise(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row as int8 codes and the scale ``max |x| / 127`` (a zero row: codes 0, scale 0), in blocks of
    :data:`QUANTISE_ROWS` rows: the float temporaries of a large batch (100k rows of ``minilm+e5`` added by an
    import) were three of its size at once, 900 MB."""
    m = np.asarray(m, dtype=np.float32).reshape(-1, m.shape[-1])
    codes = np.empty(m.shape, dtype=np.int8)
    scales = np.zeros(m.shape[0], dtype=np.float32)
    if m.size:
        for start in range(0, m.shape[0], QUANTISE_ROWS):
            block = m[start : start + QUANTISE_ROWS]
            peak = np.abs(block).max(axis=1)
            scales[start : start + QUANTISE_ROWS] = (peak / 127.0).astype(np.float32)
            codes[start : start + QUANTISE_ROWS] = _rounded(block, scales[start : start + QUANTISE_ROWS, None])
    return codes, scales


def quantise_together(queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A request's query vectors as int8 codes with one scale for all (the largest ``max |x| / 127``): the
    error bound of :func:`margin` is the largest scale's anyway, and with one scale the best integer
    product of a row is its best approximate score."""
    m = np.asarray(queries, dtype=np.float32).reshape(-1, queries.shape[-1])
    peak = float(np.abs(m).max()) if m.size else 0.0
    scale = np.float32(peak / 127.0)
    return _rounded(m, np.asarray(scale)), np.full(m.shape[0], scale, dtype=np.float32)


def _rounded(m: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """``m / scales`` rounded to int8 codes (a zero scale: codes 0)."""
    safe = np.where(scales > 0, scales, 1.0).astype(np.float32)
    return np.rint(m / safe).clip(-127, 127).astype(np.int8)
