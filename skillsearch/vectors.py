"""The embedding store: one L2-normalised float32 matrix in numpy, its row metadata, and exact search.

A :class:`VectorSnapshot` is immutable: updates build a new one and the caller swaps it in, so a search
that holds a snapshot never sees a half-applied batch. Filtering happens inside the retriever: every row
is scored with one matrix product and rows the caller may not see are set to ``-inf`` before the top k
are taken, so k visible results come back whenever k visible rows exist.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from skillsearch.errors import IndexNotReadyError
from skillsearch.lexical import skill_key

__all__ = ["VectorHits", "VectorRow", "VectorSnapshot", "top_k"]

MATRIX_FILE = "vectors.npy"
ROWS_FILE = "rows.json"


@dataclass(frozen=True)
class VectorRow:
    """Metadata of one row: whose vector it is, what filters apply, and the hashes that keep it fresh."""

    skill_id: str
    grant: str
    kind: str
    tags: tuple[str, ...]
    doc_hash: str
    embed_hash: str


class VectorHits(NamedTuple):
    rows: np.ndarray
    scores: np.ndarray


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


@dataclass(frozen=True)
class VectorSnapshot:
    dim: int
    matrix: np.ndarray
    rows: tuple[VectorRow, ...]
    key_to_row: dict[int, int] = field(repr=False)
    grant_names: tuple[str, ...] = ()
    grant_codes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32), repr=False)
    kind_names: tuple[str, ...] = ()
    kind_codes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32), repr=False)
    tag_rows: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    @classmethod
    def build(cls, dim: int, matrix: np.ndarray, rows: Sequence[VectorRow]) -> VectorSnapshot:
        matrix = np.ascontiguousarray(matrix, dtype=np.float32).reshape(len(rows), dim)
        grant_names = tuple(sorted({r.grant for r in rows}))
        kind_names = tuple(sorted({r.kind for r in rows}))
        g_index = {g: i for i, g in enumerate(grant_names)}
        k_index = {k: i for i, k in enumerate(kind_names)}
        tag_lists: dict[str, list[int]] = {}
        for i, r in enumerate(rows):
            for t in r.tags:
                tag_lists.setdefault(t, []).append(i)
        matrix.setflags(write=False)
        return cls(
            dim=dim,
            matrix=matrix,
            rows=tuple(rows),
            key_to_row={skill_key(r.skill_id): i for i, r in enumerate(rows)},
            grant_names=grant_names,
            grant_codes=np.fromiter((g_index[r.grant] for r in rows), dtype=np.int32, count=len(rows)),
            kind_names=kind_names,
            kind_codes=np.fromiter((k_index[r.kind] for r in rows), dtype=np.int32, count=len(rows)),
            tag_rows={t: np.asarray(v, dtype=np.int64) for t, v in tag_lists.items()},
        )

    @classmethod
    def empty(cls, dim: int) -> VectorSnapshot:
        return cls.build(dim, np.zeros((0, dim), np.float32), [])

    def __len__(self) -> int:
        return len(self.rows)

    def row_of(self, skill_id: str) -> int | None:
        return self.key_to_row.get(skill_key(skill_id))

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
            tag_mask[self.tag_rows.get(t, np.zeros(0, np.int64))] = True
            m &= tag_mask
        return m

    def scores(self, query: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Cosine of every row (vectors are normalised), ``-inf`` where the mask is false."""
        if len(self.rows) == 0:
            return np.zeros(0, dtype=np.float32)
        s = self.matrix @ np.asarray(query, dtype=np.float32)
        s[~mask] = -np.inf
        return s

    # -- updates ----------------------------------------------------------------------------------

    def apply(self, upserts: Sequence[tuple[VectorRow, np.ndarray]], deletes: Iterable[str]) -> VectorSnapshot:
        """A new snapshot with rows replaced, added or removed; this one is unchanged."""
        gone = {self.key_to_row[k] for k in (skill_key(s) for s in deletes) if k in self.key_to_row}
        replace: dict[int, tuple[VectorRow, np.ndarray]] = {}
        added: list[tuple[VectorRow, np.ndarray]] = []
        for row, vec in upserts:
            i = self.row_of(row.skill_id)
            if i is not None and i not in gone:
                replace[i] = (row, vec)
            else:
                added.append((row, vec))
        keep = [i for i in range(len(self.rows)) if i not in gone]
        matrix = self.matrix[keep] if gone else self.matrix.copy()
        rows = [self.rows[i] for i in keep]
        new_pos = {old: new for new, old in enumerate(keep)}
        for old, (row, vec) in replace.items():
            matrix[new_pos[old]] = vec
            rows[new_pos[old]] = row
        if added:
            matrix = np.concatenate([matrix, np.stack([v for _, v in added]).astype(np.float32)])
            rows.extend(r for r, _ in added)
        return VectorSnapshot.build(self.dim, matrix, rows)

    # -- persistence ------------------------------------------------------------------------------

    def save(self, folder: Path) -> None:
        """Write both files through temporary names and atomic renames."""
        folder.mkdir(parents=True, exist_ok=True)
        tmp_matrix = folder / (MATRIX_FILE + ".tmp")
        with open(tmp_matrix, "wb") as f:
            np.save(f, np.asarray(self.matrix))
            f.flush()
            os.fsync(f.fileno())
        tmp_rows = folder / (ROWS_FILE + ".tmp")
        payload = {
            "dim": self.dim,
            "rows": [[r.skill_id, r.grant, r.kind, list(r.tags), r.doc_hash, r.embed_hash] for r in self.rows],
        }
        tmp_rows.write_text(json.dumps(payload), encoding="utf-8")
        os.replace(tmp_matrix, folder / MATRIX_FILE)
        os.replace(tmp_rows, folder / ROWS_FILE)

    @classmethod
    def load(cls, folder: Path) -> VectorSnapshot:
        try:
            payload = json.loads((folder / ROWS_FILE).read_text(encoding="utf-8"))
            matrix = np.load(folder / MATRIX_FILE, allow_pickle=False)
            rows = [VectorRow(s, g, k, tuple(t), d, e) for s, g, k, t, d, e in payload["rows"]]
            dim = int(payload["dim"])
            if matrix.shape != (len(rows), dim):
                raise ValueError(f"matrix shape {matrix.shape} does not match {len(rows)} rows of {dim} dims")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IndexNotReadyError(
                f"the vector store at {folder} is unreadable ({exc}); run `skillsearch reindex`",
                {"path": str(folder)},
            ) from exc
        return cls.build(dim, matrix, rows)
