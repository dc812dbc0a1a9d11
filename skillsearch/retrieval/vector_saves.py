"""The vector store on disk: a whole snapshot saved, one applied batch appended to the change log, and an
index opened again (the files themselves are ``vector_files.py``'s).

``vectors.npy`` + ``rows.npz`` hold a whole snapshot; ``changes.log`` holds the batches applied since, one
JSON line each (rows with their vector as base64 float32, and removed ids), appended and fsynced. A
one-skill update thus writes a few KiB instead of the whole matrix (150 MB at 100k rows). Loading replays the
log over the base; replaying a batch twice gives the same rows, so a crash between writing a new base and
removing the old log loses nothing. The log is folded into a new base when it outgrows a quarter of the
matrix or :data:`MAX_LOG_BYTES`.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
import json
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

import numpy as np

from skillsearch.core.errors import IndexNotReadyError
from skillsearch.core.refusals import refusal_advice
from skillsearch.retrieval.lexical_schema import skill_key
from skillsearch.retrieval.vector_files import (
    CODES_FILE,
    JSON_ROWS_FILE,
    LOG_FILE,
    MATRIX_FILE,
    ROWS_FILE,
    SCALES_FILE,
    MappedFile,
    log_batches,
    probe_rows,
    read_rows,
    remove_temporaries,
    row_json,
    saved_compact,
    spare_rows,
    write_at,
    write_codes,
    write_matrix,
    write_rows,
)
from skillsearch.retrieval.vector_rows import VectorRow
from skillsearch.retrieval.vector_stage import COMPACT_FROM
from skillsearch.retrieval.vectors import VectorSnapshot

# Rows from which an opened index keeps its float32 matrix a file mapping (copy-on-write: an update writes its
# rows only; ``vector_files.MappedFile``): below it the matrix (at most 61 MB) is read into memory.
MAPPED_FROM = 40_000
# The change log is folded into a new base past a quarter of the matrix, and at most past this: opening
# replays the log (about 2 KiB a MiniLM row, parsed and applied), so at 1M rows a quarter of the matrix
# (375 MB) took 38 s to open and 6.3 GB at its peak; 64 MiB is some 30k rows, about the file's spare room.
MAX_LOG_BYTES = 64 << 20

__all__ = ["load", "save", "save_changes"]

log = logging.getLogger("skillsearch")


def save(snapshot: VectorSnapshot, folder: Path) -> VectorSnapshot:
    """Write the whole snapshot through temporary names and atomic renames, then drop the change log.
    A large snapshot's int8 copy is saved beside it (``codes.npy``, ``scales.npy``), so that opening
    it reads a quarter of the bytes and never the whole float32 matrix. Returns the snapshot to keep:
    a large one now maps the file it was written to (its matrix leaves memory), a small one is this.

    A write the disk refuses (full, a file size limit, permissions; numpy says only "N requested and M
    written") is :class:`IndexNotReadyError` naming the folder: its temporary files are removed, the files
    in use are untouched, and the manifest (written after this) stays behind the store, so the next open
    repairs the index once the disk has room."""
    try:
        return _save(snapshot, folder)
    except OSError as exc:
        remove_temporaries(folder)
        raise _unwritable(folder, exc) from exc


def _unwritable(folder: Path, exc: OSError) -> IndexNotReadyError:
    return IndexNotReadyError(
        f"the vectors in {folder} could not be written ({exc.strerror or exc}); nothing in use was changed:"
        f" {refusal_advice(exc)}, then run the command again",
        {"path": str(folder), "reason": "unwritable"},
    )


def _save(snapshot: VectorSnapshot, folder: Path) -> VectorSnapshot:
    folder.mkdir(parents=True, exist_ok=True)
    compact = snapshot.compact
    spare = spare_rows(len(snapshot)) if len(snapshot) >= MAPPED_FROM else 0
    # A removal's file, written already (``write_kept``), has its rows completed and is named, not written.
    named = [MATRIX_FILE] if _complete_pending(snapshot, folder) else []
    writers: dict[str, Callable[[BinaryIO], None]] = {} if named else {
        MATRIX_FILE: lambda f: write_matrix(f, snapshot.matrix, spare)}
    if compact is not None:
        writers[CODES_FILE] = lambda f: write_codes(f, compact)
        writers[SCALES_FILE] = lambda f: np.save(f, compact.scales)
    for name, write in writers.items():
        # A new file, never the old one truncated: a snapshot may map a file of that name (the removal's).
        (folder / (name + ".tmp")).unlink(missing_ok=True)
        _write_new(folder / (name + ".tmp"), write)
    # The rows last: their file names the rows the matrix must hold when the index is opened.
    tmp_rows = folder / (ROWS_FILE + ".tmp")
    tmp_rows.unlink(missing_ok=True)
    _write_new(tmp_rows, lambda f: write_rows(f, snapshot.dim, snapshot.rows, snapshot.keys))
    for name in [*writers, *named]:
        os.replace(folder / (name + ".tmp"), folder / name)
    if named and snapshot.base is not None:
        snapshot.base.pending = False
    if snapshot.compact is None:
        for name in (CODES_FILE, SCALES_FILE):
            (folder / name).unlink(missing_ok=True)
    os.replace(tmp_rows, folder / ROWS_FILE)
    (folder / JSON_ROWS_FILE).unlink(missing_ok=True)
    (folder / LOG_FILE).unlink(missing_ok=True)
    if snapshot.compact is None:
        return snapshot
    base = MappedFile(folder / MATRIX_FILE)
    matrix = base.view()
    matrix.setflags(write=False)
    return dataclasses.replace(snapshot, matrix=matrix, base=base, overlay=frozenset())


def _write_new(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Write the new file ``path`` and sync it. numpy reports a short write as ``N requested and M written``,
    without the system's error number; one byte more at the file's end is refused again for the same cause,
    whose number says what to do (a full disk: free space; a file size limit: raise it)."""
    with open(path, "xb") as out:
        try:
            write(out)
            out.flush()
        except OSError as exc:
            if exc.errno is not None:
                raise
            try:
                os.pwrite(out.fileno(), b"\0", os.fstat(out.fileno()).st_size)
            except OSError as cause:
                raise cause from exc
            raise
        os.fsync(out.fileno())


def _complete_pending(snapshot: VectorSnapshot, folder: Path) -> bool:
    """Whether this snapshot maps the removal's new matrix file of ``folder`` (``vector_files.write_kept``)
    with a row count that still matches: then the rows written over the mapping since are written into the
    file, which is synced, and :func:`save` names it instead of writing the matrix again."""
    base = snapshot.base
    path = folder / (MATRIX_FILE + ".tmp")
    if base is None or not base.pending or base.shape[0] != len(snapshot):
        return False
    try:
        if not os.path.samestat(os.fstat(base.file.fileno()), os.stat(path)):
            return False
    except OSError:
        return False
    fd = os.open(path, os.O_WRONLY)
    try:
        rows = np.fromiter(sorted(snapshot.overlay), np.int64, len(snapshot.overlay))
        write_at(fd, base.offset, np.asarray(snapshot.matrix[rows]), rows)
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def save_changes(
    snapshot: VectorSnapshot,
    folder: Path,
    upserts: Sequence[tuple[VectorRow, np.ndarray]],
    deletes: Sequence[str],
    max_log_bytes: int | None = None,
) -> VectorSnapshot:
    """Persist one applied batch (``snapshot`` is the snapshot after it): append it to the change log, or
    write a whole new base when the log has outgrown ``max_log_bytes`` (default: a quarter of the matrix,
    at least 1 MiB and at most :data:`MAX_LOG_BYTES`), when no base exists yet, when a large snapshot
    holds its matrix in memory (a removal or more added rows than its file had room for, applied without the
    store's folder), or
    when it maps a removal's new file (named then, not written again): saved, it maps its file again.
    Returns the snapshot to keep, as :func:`save` does. An append the disk refuses is the same
    :class:`IndexNotReadyError` as :func:`save`'s, the log cut back to the batches it held before."""
    log = folder / LOG_FILE
    logged = log.stat().st_size if log.exists() else 0
    limit = min(max(snapshot.matrix.nbytes // 4, 1 << 20), MAX_LOG_BYTES) if max_log_bytes is None else max_log_bytes
    in_memory = snapshot.base is None and len(snapshot) >= MAPPED_FROM
    pending = snapshot.base is not None and snapshot.base.pending
    if not (folder / MATRIX_FILE).exists() or logged > limit or in_memory or pending:
        return save(snapshot, folder)
    line = json.dumps({
        "upserts": [[*row_json(r), base64.b64encode(np.asarray(v, "<f4").tobytes()).decode()] for r, v in upserts],
        "deletes": list(deletes),
    })
    try:
        with open(log, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        # A write the disk refused may have left part of the line: cut back to the batches before it, else
        # the next batch appended after that part makes a line no open can read (the whole log refused).
        with contextlib.suppress(OSError):
            os.truncate(log, logged)
        raise _unwritable(folder, exc) from exc
    return snapshot


def load(folder: Path) -> VectorSnapshot:
    """The saved snapshot with its logged batches applied. A large one keeps its matrix a file mapping
    and loads the saved int8 copy when it matches the matrix (checked on a sample of rows)."""
    try:
        dim, rows, keys = read_rows(folder)
        base = MappedFile(folder / MATRIX_FILE) if len(rows) >= MAPPED_FROM else None
        matrix = base.view() if base is not None else np.load(folder / MATRIX_FILE, allow_pickle=False)
        if matrix.shape != (len(rows), dim):
            raise ValueError(f"matrix shape {matrix.shape} does not match {len(rows)} rows of {dim} dims")
        compact = saved_compact(folder, matrix) if len(rows) >= COMPACT_FROM else None
        # Saved keys are trusted when 64 rows spread over them agree with their ids.
        if keys is not None and any(skill_key(rows.skill_id(i)) != int(keys[i])
                                    for i in probe_rows(len(rows)).tolist()):
            log.warning("the saved row keys in %s do not match their ids; hashing them again", folder)
            keys = None
        snapshot = VectorSnapshot.build(dim, matrix, rows, keys, compact=compact, base=base)
        # The batches are folded into one change first, so opening copies the matrix once, not once per
        # logged batch. A removed id stays removed (a later upsert adds it back at the end, as applying
        # the batches one by one would); the last upsert of an id wins.
        upserts: dict[str, tuple[VectorRow, np.ndarray]] = {}
        deletes: set[str] = set()
        for batch in log_batches(folder / LOG_FILE):
            for skill_id in batch["deletes"]:
                upserts.pop(skill_id, None)
                deletes.add(skill_id)
            for s, g, k, t, d, e, vec in batch["upserts"]:
                v = np.frombuffer(base64.b64decode(vec), dtype="<f4")
                if v.shape != (dim,):
                    raise ValueError(f"a logged vector has {v.size} values, not {dim}")
                upserts[s] = (VectorRow(s, g, k, tuple(t), d, e), v)
        if upserts or deletes:
            snapshot = snapshot.apply(list(upserts.values()), deletes)
    except (OSError, ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise IndexNotReadyError(
            f"the vector store at {folder} is unreadable ({exc}); run `skillsearch reindex`",
            {"path": str(folder)},
        ) from exc
    return snapshot
