"""The embedding store: one L2-normalised float32 matrix in numpy, its row metadata, and its search.

A :class:`VectorSnapshot` is immutable: updates build a new one and the caller swaps it in, so a search
that holds a snapshot never sees a half-applied batch. Filtering happens inside the retriever
(:meth:`VectorSnapshot.nearest`): rows the caller may not see are set to ``-inf`` before the top k are
taken, so k visible results come back whenever k visible rows exist. A small matrix is scored with one
exact matrix product; from ``vector_stage.COMPACT_FROM`` rows on, its int8 copy is scanned and the best
rows re-scored exactly (``retrieval/vector_stage.py``); a loaded matrix stays a file mapping whose
re-scored rows are read with ``pread`` (``vector_files.FileRows``), and the row metadata are numpy columns
(``retrieval/vector_rows.py``), so serving memory is the int8 copy's quarter of the matrix and about
130 bytes a row beside it. The next snapshot after an update is ``retrieval/vector_updates.py``'s
(:meth:`VectorSnapshot.apply`); saving a snapshot and opening it again are ``retrieval/vector_saves.py``'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from skillsearch.core.domain import tag_key
from skillsearch.retrieval import vector_stage
from skillsearch.retrieval.compact import Compact
from skillsearch.retrieval.cosines import max_cosines, nearest_rows, top_k, zero_tiny
from skillsearch.retrieval.key_index import KeyIndex
from skillsearch.retrieval.lexical_schema import skill_key
from skillsearch.retrieval.vector_files import FileRows, MappedFile
from skillsearch.retrieval.vector_rows import RowTable, VectorRow
from skillsearch.retrieval.vector_scan import Shift, approximate_scores, first_pass, sample_scores, scan
from skillsearch.retrieval.vector_stage import COMPACT_FROM, choose, hide, nearest_compact
from skillsearch.retrieval.vector_updates import applied

# Up to this many bytes of float32 matrix, a mapped index re-scores its rows through the mapping (its pages are
# the page cache's, shared by every process that maps the file): about 0.1 ms for 250 rows at 100k, against
# 0.8 ms by ``pread`` (``vector_files.FileRows``), one system call per row. Past it, reading through the
# mapping would leave most of the matrix counted in the serving RSS after a few hundred searches (1.5 GB at
# 1M rows). 512 MiB holds a 100k-row index of ``minilm+e5`` (307 MB) or 340k rows of MiniLM.
PREAD_FROM_BYTES = 512 << 20
# Rows the decision's background statistics read (``VectorSnapshot.background``): each dev set fits whole.
BACKGROUND_ROWS = 16_384

__all__ = ["VectorRow", "VectorSnapshot"]


@dataclass(frozen=True)
class VectorSnapshot:
    dim: int
    matrix: np.ndarray
    rows: RowTable  # row metadata as columns (``vector_rows.py``): a VectorRow is built per row asked for
    key_to_row: KeyIndex = field(repr=False)
    keys: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64), repr=False)
    grant_names: tuple[str, ...] = ()
    grant_codes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32), repr=False)
    kind_names: tuple[str, ...] = ()
    kind_codes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32), repr=False)
    # The int8 copy the vector stage scans (from ``COMPACT_FROM`` rows on; None below).
    compact: Compact | None = field(default=None, repr=False)
    # The saved file ``matrix`` maps (None: ``matrix`` is in memory) and the rows written over it since.
    base: MappedFile | None = field(default=None, repr=False)
    overlay: frozenset[int] = field(default=frozenset(), repr=False)
    # Each row's nearest of some vectors over some columns (:meth:`nearest_of`, by the vectors' bytes and the
    # columns): kept for the snapshot, and carried to those :meth:`apply` makes from it, where only the
    # changed and added rows are computed again.
    nearest_cache: dict[tuple[bytes, tuple[int | None, ...] | None], tuple[np.ndarray, slice | None, np.ndarray]] = \
        field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def build(
        cls, dim: int, matrix: np.ndarray, rows: Sequence[VectorRow], keys: np.ndarray | None = None,
        compact: Compact | None = None, base: MappedFile | None = None, overlay: frozenset[int] = frozenset(),
    ) -> VectorSnapshot:
        """A snapshot over these rows; ``keys`` (each row's :func:`skill_key`) saves hashing every id again.
        The matrix keeps no value under :data:`TINY` (:func:`zero_tiny`), whatever wrote it; a mapped
        ``base`` is a matrix this class saved, so it is not scanned again (that would read every page).
        ``compact``: the matrix's int8 copy when the caller has it (else made here for a large matrix)."""
        if base is None:
            matrix = np.ascontiguousarray(zero_tiny(matrix))
        matrix = matrix.reshape(len(rows), dim)
        if compact is None and len(rows) >= COMPACT_FROM:
            compact = Compact.of(matrix)
        table = RowTable.of(rows)
        if keys is None:
            keys = np.fromiter((skill_key(s) for s in table.skill_ids()), dtype=np.uint64, count=len(table))
        matrix.setflags(write=False)
        keys.setflags(write=False)
        return cls(
            dim=dim,
            matrix=matrix,
            rows=table,
            key_to_row=KeyIndex(keys),
            keys=keys,
            grant_names=table.grant_names,
            grant_codes=table.grant_codes,
            kind_names=table.kind_names,
            kind_codes=table.kind_codes,
            compact=compact,
            base=base,
            overlay=overlay,
        )

    @classmethod
    def empty(cls, dim: int) -> VectorSnapshot:
        return cls.build(dim, np.zeros((0, dim), np.float32), [])

    def __len__(self) -> int:
        return len(self.rows)

    def row_of(self, skill_id: str) -> int | None:
        return self.key_to_row.get(skill_key(skill_id))

    def rows_of(self, skill_ids: Sequence[str]) -> np.ndarray:
        """The row of each id, -1 where none has it (one search over the sorted keys for all of them)."""
        keys = np.fromiter((skill_key(s) for s in skill_ids), dtype=np.uint64, count=len(skill_ids))
        return self.key_to_row.rows_of(keys)

    @cached_property
    def tag_rows(self) -> dict[str, np.ndarray]:
        """Rows of each tag, by its case-folded spelling (a filter by ``Kubernetes`` finds ``kubernetes``),
        built on the first search that filters by tag (most snapshots never need it)."""
        table = self.rows
        order = np.argsort(table.tag_codes, kind="stable")
        bounds = np.searchsorted(table.tag_codes[order], np.arange(len(table.tag_sets) + 1))
        lists: dict[str, list[np.ndarray]] = {}
        for code, tags in enumerate(table.tag_sets):
            for t in {tag_key(t) for t in tags}:
                lists.setdefault(t, []).append(order[bounds[code] : bounds[code + 1]])
        return {t: np.unique(np.concatenate(v)).astype(np.int64) for t, v in lists.items()}

    @cached_property
    def _tag_spellings(self) -> dict[str, list[str]]:
        spellings: dict[str, set[str]] = {}
        for tags in self.rows.tag_sets:
            for t in tags:
                spellings.setdefault(tag_key(t), set()).add(t)
        return {k: sorted(v) for k, v in spellings.items()}

    def tag_spellings(self, tag: str) -> list[str]:
        """The spellings of ``tag`` the index holds, whatever their case (the lexical side's tag terms are
        exact); ``[tag]`` when it holds none."""
        return self._tag_spellings.get(tag_key(tag)) or [tag]

    # -- search -----------------------------------------------------------------------------------

    def mask(self, grants: Iterable[str], kind: str | None = None, tags: Sequence[str] = ()) -> np.ndarray:
        """Rows the caller may see and asked for."""
        wanted = set(grants)
        codes = [i for i, g in enumerate(self.grant_names) if g in wanted]
        m = np.isin(self.grant_codes, np.asarray(codes, dtype=np.int32))
        if kind is not None:
            m &= self.kind_codes == (self.kind_names.index(kind) if kind in self.kind_names else -1)
        for t in tags:
            tag_mask = np.zeros(len(self.rows), dtype=bool)
            tag_mask[self.tag_rows.get(tag_key(t), np.zeros(0, np.int64))] = True
            m &= tag_mask
        return m

    def nearest(
        self,
        queries: np.ndarray,
        depth: int,
        mask: np.ndarray | None = None,
        columns: slice | None = None,
        exact_rows: np.ndarray | None = None,
        shift: Shift | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The vector stage: the ``depth`` rows with the best cosine over ``queries`` among those ``mask``
        allows (all when None), best first, and every row's score (``-inf`` where the mask is False).

        The returned rows and ``exact_rows`` (the lexical candidates, whose cosines fusion reads too) hold
        exact float32 cosines, best over the query vectors; any other row's score may be the int8 scan's
        approximation (large snapshots, ``retrieval/vector_stage.py``). ``columns``: the route's columns of
        a routed matrix; ``shift``: a per-row offset of each query vector's cosine (language centering)."""
        matrix = self.matrix if columns is None else self.matrix[:, columns]
        queries = np.ascontiguousarray(zero_tiny(queries)).reshape(-1, matrix.shape[1])
        if self.compact is None or len(self) < COMPACT_FROM:
            if shift is None:
                scores = max_cosines(matrix, queries)
            else:
                scores = (queries @ matrix.T - shift.by[:, shift.groups]).max(axis=0).astype(np.float32)
            if mask is not None:
                hide(scores, mask)
            return top_k(scores, depth), scores
        return nearest_compact(self._exact_rows(columns), self.compact, columns, queries, depth, mask, exact_rows,
                               shift=shift)

    def nearest_of(self, vectors: np.ndarray, columns: slice | None = None) -> np.ndarray:
        """Each row's index in ``vectors`` (k, dim of ``columns``) of its largest product with the row's
        ``columns``, as the float32 argmax gives it: under ``COMPACT_FROM`` rows that argmax, beyond from the
        int8 copy with the close calls re-scored (``vector_stage.nearest_of``), so the float32 matrix is not
        read whole (a route's document languages, ``routing.RequestRoute.language_codes``). Kept, and carried
        to the snapshots :meth:`apply` makes from this one."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        key = (vectors.tobytes(), None if columns is None else (columns.start, columns.stop, columns.step))
        if (hit := self.nearest_cache.get(key)) is not None:
            return hit[2]
        if self.compact is None or len(self) < COMPACT_FROM:
            codes = nearest_rows(self.matrix if columns is None else self.matrix[:, columns], vectors)
        else:
            codes = vector_stage.nearest_of(self._exact_rows(columns), self.compact, columns, vectors)
        codes.setflags(write=False)
        self.nearest_cache[key] = (vectors, columns, codes)
        return codes

    def _exact_rows(self, columns: slice | None) -> np.ndarray | FileRows:
        """Where the vector stage reads the float32 rows it re-scores: the matrix (a route's column view;
        an opened index's mapping up to ``PREAD_FROM_BYTES``), or past that the saved file by ``pread``."""
        if self.base is not None and self.matrix.nbytes > PREAD_FROM_BYTES:
            return FileRows(self.base, self.matrix, self.overlay, columns)
        return self.matrix if columns is None else self.matrix[:, columns]

    def nearest_and_background(
        self,
        queries: np.ndarray,
        depth: int,
        mask: np.ndarray | None = None,
        columns: slice | None = None,
        exact_rows: np.ndarray | None = None,
        shift: Shift | None = None,
    ) -> tuple[np.ndarray, np.ndarray, tuple[float, float]]:
        """The vector stage of a search: :meth:`nearest` and :meth:`background` together, with the same
        results as the two calls. With an int8 copy the background is read from the one scan that
        :meth:`nearest` makes anyway (its approximate scores before the caller's mask), not from a second
        pass over the rows."""
        if self.compact is None or len(self) < COMPACT_FROM:
            rows, scores = self.nearest(queries, depth, mask, columns, exact_rows, shift)
            return rows, scores, self.background(queries, columns, shift, scores if mask is None else None)
        q = self._queries(queries, columns)
        approximate, err = approximate_scores(self.compact, columns, q, shift)
        background = self._moments(approximate[self._background_rows] if self._background_rows is not None
                                    else approximate)
        found, scores = choose(self._exact_rows(columns), self.compact, columns, approximate, err, q, depth, mask,
                               exact_rows, shift)
        return found, scores, background

    def background(
        self, queries: np.ndarray, columns: slice | None = None, shift: Shift | None = None,
        scores: np.ndarray | None = None,
    ) -> tuple[float, float]:
        """The mean and standard deviation of the request's best cosine over the whole index, whoever asks
        (the decision's ``cos_bg`` and the scale of ``cos_z``, ``retrieval/confidence.py``): every row up to
        ``BACKGROUND_ROWS``, beyond that a fixed, evenly spaced sample of that many rows, so the cost stays
        flat at a million skills. With an int8 copy (from ``COMPACT_FROM`` rows) the rows are scored from
        that copy (each cosine within about 1e-3; the mean over the rows far closer), or from its int4 copy
        where the stage reads that first (``vector_scan.first_pass``: each within about 0.05, the mean
        unbiased, the spread some 1 % wider), the numbers the vector stage's own scan gives them
        (:meth:`nearest_and_background`). ``scores``: :meth:`nearest`'s
        unmasked, exact scores, when it has them (below ``COMPACT_FROM``)."""
        n = len(self)
        q = self._queries(queries, columns)
        if self.compact is not None and n >= COMPACT_FROM:
            first = first_pass(self.compact, columns, q, shift)
            if first is not None:  # what the stage's int4 tier gives these rows (each within its margin)
                rows = self._background_rows
                return self._moments(first[0] if rows is None else first[0][rows])
            if self._background_rows is None:
                return self._moments(scan(self.compact, columns, q, shift)[0])
            return self._moments(sample_scores(self.compact, BACKGROUND_ROWS, columns, q, shift))
        if scores is not None and n <= BACKGROUND_ROWS:
            return self._moments(scores)
        rows = self._background_rows
        matrix = self.matrix if rows is None else self.matrix[rows]
        if columns is not None:
            matrix = matrix[:, columns]
        if shift is None:
            sample = max_cosines(np.ascontiguousarray(matrix), q)
        else:
            groups = shift.groups if rows is None else shift.groups[rows]
            sample = (q @ matrix.T - shift.by[:, groups]).max(axis=0).astype(np.float32)
        return self._moments(sample)

    @cached_property
    def _background_rows(self) -> np.ndarray | None:
        """The rows the background reads: all (None) up to ``BACKGROUND_ROWS``, else that many evenly spaced
        (``Compact.sample``'s rows when there is an int8 copy)."""
        n = len(self)
        if n <= BACKGROUND_ROWS:
            return None
        if self.compact is not None and n >= COMPACT_FROM:
            return self.compact.sample(BACKGROUND_ROWS)[0]
        return np.linspace(0, n - 1, BACKGROUND_ROWS).astype(np.int64)

    def _queries(self, queries: np.ndarray, columns: slice | None) -> np.ndarray:
        dim = self.dim if columns is None else len(range(self.dim)[columns])
        return np.ascontiguousarray(zero_tiny(queries), dtype=np.float32).reshape(-1, dim)

    @staticmethod
    def _moments(sample: np.ndarray) -> tuple[float, float]:
        return float(sample.mean(dtype=np.float64)), float(sample.std(dtype=np.float64))

    def apply(
        self, upserts: Sequence[tuple[VectorRow, np.ndarray]], deletes: Iterable[str], folder: Path | None = None,
    ) -> VectorSnapshot:
        """A new snapshot with rows replaced, added or removed; this one is unchanged
        (``vector_updates.applied``)."""
        return applied(self, upserts, deletes, folder)
