"""Updates of the embedding store: the next :class:`vectors.VectorSnapshot` after a batch replaced, added or
removed rows, the one before unchanged (a search that holds it never sees a half-applied batch).

A batch that removes nothing (the usual update) re-quantises only its rows and over a mapped base writes
only its rows into a fresh private mapping, added rows into the room the saved file keeps after its own
(``vector_files.spare_rows``), the row table and key index extended; a batch that only replaces rows keeps
the key index. A removal from a mapped base, given the store's ``folder`` (the writer's, which saves next),
writes the kept rows as the next matrix file there, copied from file to file (``vector_files.write_kept``;
``vector_saves.save`` names it), and so do more added rows than the file's room holds (a large import: at 1M
rows of ``minilm+e5`` the copy in memory was 3 GB). A removal or a growth otherwise (replaying a log, a
matrix in memory) costs one copy of the kept rows into memory (the next ``vector_saves.save_changes`` folds
it into a new file). The int8 copy and the row table are gathered, never made again from the matrix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from skillsearch.retrieval.compact import Compact
from skillsearch.retrieval.cosines import nearest_rows, zero_tiny
from skillsearch.retrieval.key_index import KeyIndex
from skillsearch.retrieval.lexical_schema import skill_key
from skillsearch.retrieval.vector_files import MATRIX_FILE, read_into, spare_rows, write_kept
from skillsearch.retrieval.vector_rows import VectorRow, found_in, runs
from skillsearch.retrieval.vector_stage import COMPACT_FROM

if TYPE_CHECKING:  # vectors.py imports this module for VectorSnapshot.apply
    from skillsearch.retrieval.vectors import VectorSnapshot

Upsert = tuple[VectorRow, np.ndarray]


def applied(
    snapshot: VectorSnapshot, upserts: Sequence[Upsert], deletes: Iterable[str], folder: Path | None = None,
) -> VectorSnapshot:
    """``snapshot`` with the ``upserts`` (a row and its vector; an id upserted twice is added once) written
    and the ids ``deletes`` removed; ``folder``: the store's vector folder, where a removal from a mapped
    base writes the next matrix file (module docstring)."""
    gone = {snapshot.key_to_row[k] for k in (skill_key(s) for s in deletes) if k in snapshot.key_to_row}
    replace: dict[int, Upsert] = {}
    new: dict[str, Upsert] = {}  # by id: an id upserted twice is added once
    for row, vec in upserts:
        i = snapshot.row_of(row.skill_id)
        if i is not None and i not in gone:
            replace[i] = (row, vec)
        else:
            new[row.skill_id] = (row, vec)
    return _changed(snapshot, replace, list(new.values()), gone, folder)


def _stacked(vectors: Sequence[np.ndarray], dim: int) -> np.ndarray:
    """The vectors as one (n, dim) float32 matrix, filled in place: a list of row copies, then their stack,
    held a batch's vectors twice (307 MB for 100k rows of ``minilm+e5``)."""
    out = np.empty((len(vectors), dim), np.float32)
    for k, v in enumerate(vectors):
        out[k] = np.asarray(v, np.float32).reshape(dim)
    return zero_tiny(out)


def _changed(
    snapshot: VectorSnapshot, replace: dict[int, Upsert], added: Sequence[Upsert], gone: set[int],
    folder: Path | None,
) -> VectorSnapshot:
    """:func:`applied` of ``replace`` (by row), ``added`` (new ids) and the rows ``gone``."""
    n, dim = len(snapshot), snapshot.dim
    keep = np.setdiff1d(np.arange(n, dtype=np.int64), np.fromiter(gone, np.int64, len(gone))) if gone else None
    kept = n if keep is None else int(keep.size)
    moved = replace if keep is None else {int(np.searchsorted(keep, i)): rv for i, rv in replace.items()}
    changed = sorted(moved)

    vectors, fresh = _stacked([moved[i][1] for i in changed], dim), _stacked([v for _, v in added], dim)
    size, base, overlay = kept + len(fresh), snapshot.base, snapshot.overlay
    if keep is None and base is not None and size <= base.capacity:
        matrix = base.view(size)
        carried = sorted(snapshot.overlay - set(changed))
        if carried:
            matrix[carried] = snapshot.matrix[carried]
        overlay = snapshot.overlay | set(changed) | set(range(n, size))
    elif base is not None and folder is not None:  # a removal, or more rows than the room: file to file
        every = keep if keep is not None else np.arange(n, dtype=np.int64)
        base = write_kept(base, snapshot.matrix, snapshot.overlay, every, folder / (MATRIX_FILE + ".tmp"), size,
                          spare_rows(size))
        matrix = base.view(size)
        overlay = frozenset(changed) | frozenset(range(kept, size))
    else:  # in memory: no saved file, or replaying its log (no folder to write a new file in)
        matrix = np.empty((size, dim), dtype=np.float32)
        _gather(snapshot, keep, matrix[:kept])
        base, overlay = None, frozenset()
    matrix[changed] = vectors
    matrix[kept:] = fresh
    compact = snapshot.compact.replaced(changed, vectors, fresh, keep) if snapshot.compact is not None else None
    if compact is None and size >= COMPACT_FROM:
        compact = Compact.of(matrix)
    table = snapshot.rows if keep is None else snapshot.rows.take(keep)
    rows = table.replaced({i: moved[i][0] for i in changed}).extended([r for r, _ in added])
    extra = np.fromiter((skill_key(r.skill_id) for r, _ in added), dtype=np.uint64, count=len(added))
    keys = snapshot.keys if keep is None else snapshot.keys[keep]
    if keep is not None:
        keys = np.concatenate([keys, extra])
        key_to_row = KeyIndex(keys)
    elif added:
        key_to_row, keys = snapshot.key_to_row.extended(extra), np.concatenate([keys, extra])
    else:
        key_to_row = snapshot.key_to_row
    matrix.setflags(write=False)
    keys.setflags(write=False)
    # Each kept row's nearest vector is what it was; the batch's rows are computed from their vectors.
    nearest_cache = {}
    for key, (near, cols, codes) in snapshot.nearest_cache.items():
        moved_codes = np.empty(size, dtype=codes.dtype)
        moved_codes[:kept] = codes if keep is None else codes[keep]
        for at, written in ((changed, vectors), (slice(kept, size), fresh)):
            if len(written):
                moved_codes[at] = nearest_rows(written if cols is None else written[:, cols], near)
        moved_codes.setflags(write=False)
        nearest_cache[key] = (near, cols, moved_codes)
    return dataclasses.replace(
        snapshot, matrix=matrix, rows=rows, key_to_row=key_to_row, keys=keys, grant_names=rows.grant_names,
        grant_codes=rows.grant_codes, kind_names=rows.kind_names, kind_codes=rows.kind_codes, compact=compact,
        base=base, overlay=overlay, nearest_cache=nearest_cache,
    )


def _gather(snapshot: VectorSnapshot, keep: np.ndarray | None, out: np.ndarray) -> None:
    """``out[:] = snapshot.matrix[keep]`` (every row when None) with no temporary of the matrix: from memory
    by ``np.take``; from a mapped base by ``pread``, a run of consecutive rows at a time, so the old file's
    pages never map into the process (1.5 GB at 1M rows), then the rows written over the mapping."""
    if snapshot.base is None:
        if keep is None:
            out[:] = snapshot.matrix
        else:
            np.take(snapshot.matrix, keep, axis=0, out=out)
        return
    rows = np.arange(len(snapshot), dtype=np.int64) if keep is None else keep
    if rows.size == 0:
        return
    for a, b in runs(rows):
        read_into(snapshot.base, int(rows[a]), out[a:b])
    if snapshot.overlay:
        mine = np.fromiter(sorted(snapshot.overlay), np.int64, len(snapshot.overlay))
        hit, at = found_in(rows, mine)
        out[at[hit]] = snapshot.matrix[mine[hit]]
