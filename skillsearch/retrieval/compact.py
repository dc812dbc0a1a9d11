"""The int8 copy of a large vector matrix that the vector stage scans (``retrieval/vector_stage.py``).

Each row is kept as int8 codes and one float32 scale (``max |x| / 127``, so ``row ~ scale * codes``): a
quarter of float32's bytes, so a quarter of the memory traffic that bounds a scan. The codes are kept as
contiguous parts of :data:`PART_COLUMNS` columns, so each route of a routed index (both models' columns side
by side in a row) scans one array; the copy is made a block of rows at a time, sampled for the decision's
background, and re-quantised one changed or added row at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

__all__ = ["BLOCK", "PART_COLUMNS", "Compact", "quantise", "quantise_together"]

# Columns of one part of the int8 copy (``Compact``): one model's vectors (MiniLM and multilingual-e5-small
# both have 384), so each route of a routed index is one contiguous part.
PART_COLUMNS = 384
# Rows scored per kernel call: bounds the products a call returns (rows x query vectors).
BLOCK = 65_536


@dataclass(frozen=True)
class Compact:
    """int8 codes and float32 scales (n,): row i is about ``scales[i] * codes[i]``. The codes are kept as
    column parts of :data:`PART_COLUMNS` columns, each a contiguous (n, width) array: a routed index's rows
    hold both models' columns side by side, and a route scans its own part as one contiguous array (a
    strided half of the whole codes scans about twice as slowly from some 30k rows, docs/benchmarks.md)."""

    parts: tuple[np.ndarray, ...]
    scales: np.ndarray

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
        """Codes (n, dim) already made, as parts: each part a contiguous copy when there are several, the
        one part a copy in memory when ``codes`` maps a file (a saved ``codes.npy``), else ``codes`` itself."""
        bounds = _bounds(codes.shape[1])
        if len(bounds) == 1:
            parts: tuple[np.ndarray, ...] = (np.array(codes) if isinstance(codes, np.memmap) else codes,)
        else:
            parts = tuple(np.ascontiguousarray(codes[:, a:b]) for a, b in bounds)
        return cls._frozen(parts, np.asarray(scales, dtype=np.float32))

    @classmethod
    def _frozen(cls, parts: tuple[np.ndarray, ...], scales: np.ndarray) -> Compact:
        for array in (*parts, scales):
            array.setflags(write=False)
        return cls(parts, scales)

    def __len__(self) -> int:
        return int(self.scales.size)

    @property
    def dim(self) -> int:
        return sum(int(p.shape[1]) for p in self.parts)

    @property
    def codes(self) -> np.ndarray:
        """The codes (n, dim) whole: the one part, or the parts side by side (a copy)."""
        return self.parts[0] if len(self.parts) == 1 else np.hstack(self.parts)

    @property
    def nbytes(self) -> int:
        return int(sum(p.nbytes for p in self.parts) + self.scales.nbytes)

    def block(self, start: int, stop: int) -> np.ndarray:
        """The codes of rows ``start:stop``, whole (the parts side by side)."""
        return self.parts[0][start:stop] if len(self.parts) == 1 else np.hstack([p[start:stop] for p in self.parts])

    def rows(self, rows: np.ndarray) -> np.ndarray:
        """The codes of these rows, whole (k, dim)."""
        return np.hstack([p[rows] for p in self.parts]) if len(self.parts) > 1 else self.parts[0][rows]

    def pieces(self, columns: slice | None) -> list[tuple[np.ndarray, slice]]:
        """What a scan of ``columns`` (all when None) reads: each part it covers, with that part's columns
        within ``columns``; a slice that cuts a part is copied out (no route does that)."""
        dim = self.dim
        first, stop, step = (0, dim, 1) if columns is None else columns.indices(dim)
        out: list[tuple[np.ndarray, slice]] = []
        for part, (a, b) in zip(self.parts, _bounds(dim), strict=True):
            if columns is not None and (step != 1 or (a < stop and b > first and (a < first or b > stop))):
                whole = np.ascontiguousarray(self.codes[:, columns])
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
        quantised anew and the rows of ``added`` (k, dim) quantised after them; the kept rows are copied, not
        recomputed (one copy into arrays of the new length)."""
        n, k = len(self) if keep is None else len(keep), 0 if added is None else len(added)
        parts = [np.empty((n + k, p.shape[1]), dtype=np.int8) for p in self.parts]
        scales = np.empty(n + k, dtype=np.float32)
        for part, old in zip(parts, self.parts, strict=True):
            if keep is None:
                part[:n] = old
            else:
                np.take(old, keep, axis=0, out=part[:n])
        scales[:n] = self.scales if keep is None else self.scales[keep]
        changes = [(list(rows), np.asarray(vectors, dtype=np.float32))] if len(rows) else []
        if k:
            changes.append((list(range(n, n + k)), np.asarray(added, dtype=np.float32)))
        for at, values in changes:
            codes, scales[at] = quantise(values)
            for part, (a, b) in zip(parts, _bounds(self.dim), strict=True):
                part[at] = codes[:, a:b]
        return Compact._frozen(tuple(parts), scales)


def _bounds(dim: int) -> list[tuple[int, int]]:
    """The column parts of a ``dim``-wide matrix: :data:`PART_COLUMNS` columns each, the last what is left."""
    return [(a, min(a + PART_COLUMNS, dim)) for a in range(0, dim, PART_COLUMNS)] or [(0, 0)]


def quantise(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row as int8 codes and the scale ``max |x| / 127`` (a zero row: codes 0, scale 0)."""
    m = np.asarray(m, dtype=np.float32).reshape(-1, m.shape[-1])
    peak = np.abs(m).max(axis=1) if m.size else np.zeros(m.shape[0], np.float32)
    scales = (peak / 127.0).astype(np.float32)
    return _rounded(m, scales[:, None]), scales


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
