"""The vector store's files: the saved float32 matrix (``vectors.npy``) kept open as a mapping whose rows a
search re-scores are read by ``pread``, its saved int8 copy (``codes.npy``, ``scales.npy``), the row metadata
as column arrays (``rows.npz``; ``rows.json`` in indexes written before it) and the log of batches applied
since the save (``changes.log``). ``vectors.VectorSnapshot`` saves and loads through these; a removal from an
opened index writes its kept rows as the next matrix file before it is named (:func:`write_kept`)."""

from __future__ import annotations

import errno
import json
import logging
import os
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from skillsearch.retrieval.compact import BLOCK, Compact, quantise
from skillsearch.retrieval.vector_rows import RowTable, VectorRow, found_in, runs

__all__ = [
    "CODES_FILE", "JSON_ROWS_FILE", "LOG_FILE", "MATRIX_FILE", "ROWS_FILE", "SCALES_FILE", "FileRows", "MappedFile",
    "log_batches", "probe_rows", "read_into", "read_json_rows", "read_rows", "remove_temporaries", "row_json",
    "saved_compact", "spare_rows", "write_at", "write_codes", "write_kept", "write_matrix", "write_rows",
]

MATRIX_FILE = "vectors.npy"
ROWS_FILE = "rows.npz"
JSON_ROWS_FILE = "rows.json"  # the rows as JSON lines, as indexes written before rows.npz hold them
LOG_FILE = "changes.log"
CODES_FILE = "codes.npy"
SCALES_FILE = "scales.npy"
log = logging.getLogger("skillsearch")


def _matrix_header(f: BinaryIO, dtype: np.dtype[Any]) -> tuple[tuple[int, int] | None, int]:
    """The shape of the C-ordered 2-d ``.npy`` matrix of ``dtype`` that ``f`` opens with (None when it is
    another array) and the offset of its data; ValueError when ``f`` holds no ``.npy`` header."""
    major, _minor = np.lib.format.read_magic(f)
    read = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
    shape, fortran, found = read(f)
    if fortran or found != dtype or len(shape) != 2:
        return None, f.tell()
    return (int(shape[0]), int(shape[1])), f.tell()


class MappedFile:
    """A saved ``.npy`` matrix kept open: every snapshot of it maps the same bytes, also after a newer base
    has replaced the file's name. :meth:`view` is a private (copy-on-write) mapping: rows written into it
    (a batch's replaced rows) cost their pages only, and the rows a search re-scores are the only ones read."""

    def __init__(self, path: Path) -> None:
        self.file = open(path, "rb")  # noqa: SIM115 - open while any snapshot maps it; closed when collected
        shape, self.offset = _matrix_header(self.file, np.dtype("<f4"))
        if shape is None:
            raise ValueError(f"{path} is not a C-ordered float32 matrix")
        self.shape: tuple[int, int] = shape
        # Rows the file has room for: its own, then the zero rows :func:`write_matrix` left after them.
        width = max(self.shape[1], 1) * 4
        self.capacity = max(self.shape[0], (os.fstat(self.file.fileno()).st_size - self.offset) // width)
        # A removal's new matrix file, written under its temporary name and not yet named by a save
        # (:func:`write_kept`).
        self.pending = False

    def view(self, rows: int | None = None) -> np.ndarray:
        """The matrix as a private mapping; ``rows`` past the saved ones (up to :attr:`capacity`) map the
        spare room, zeros until a snapshot writes its added rows there (into its own pages only)."""
        rows = self.shape[0] if rows is None else rows
        if not 0 <= rows <= self.capacity:
            raise ValueError(f"{self.file.name} has room for {self.capacity} rows, not {rows}")
        if rows == 0:
            return np.zeros((0, self.shape[1]), dtype=np.float32)
        return np.memmap(self.file, dtype=np.float32, mode="c", shape=(rows, self.shape[1]), offset=self.offset)

    def __del__(self) -> None:
        self.file.close()


class FileRows:
    """The rows a search re-scores exactly, read from the saved file with ``pread`` (the rows written since
    it was saved from the snapshot's own mapping). Read through the mapping instead, each row maps its page
    and, by the kernel's fault-around, up to 15 neighbours (64 KiB) into the process: after a few hundred
    searches most of a 1.5 GB matrix counted in the serving RSS (docs/benchmarks.md). The file's pages stay
    in the page cache, which is not this process's memory."""

    def __init__(self, base: MappedFile, matrix: np.ndarray, overlay: frozenset[int], columns: slice | None) -> None:
        self.base, self.matrix, self.overlay, self.columns = base, matrix, overlay, columns
        self.shape = (matrix.shape[0], len(range(base.shape[1])[columns]) if columns is not None else base.shape[1])

    def __getitem__(self, rows: np.ndarray) -> np.ndarray:
        dim = self.base.shape[1]
        out = np.empty((len(rows), dim), dtype=np.float32)
        fd, width = self.base.file.fileno(), dim * 4
        for j, r in enumerate(np.asarray(rows, dtype=np.int64).tolist()):
            if r in self.overlay:
                out[j] = self.matrix[r]
            elif os.preadv(fd, [out[j]], self.base.offset + r * width) != width:
                raise OSError(f"short read of row {r} from {self.base.file.name}")
        return out if self.columns is None else out[:, self.columns]


def read_into(base: MappedFile, start: int, out: np.ndarray) -> None:
    """The saved rows ``start:start + len(out)`` into ``out`` (C-contiguous) by ``pread``, 64 MiB a call:
    a removal's copy of a large matrix reads the file without mapping its pages into the process."""
    if not out.flags.c_contiguous or out.dtype != np.float32:
        raise ValueError("read_into needs a C-contiguous float32 destination")
    _read_fully(base.file.fileno(), out.reshape(-1), base.offset + start * base.shape[1] * 4, base.file.name)


def _read_fully(fd: int, out: np.ndarray, offset: int, name: object) -> None:
    """``out.nbytes`` bytes of the file at ``offset`` into ``out`` (C-contiguous) by ``pread``, 64 MiB a call;
    OSError when the file ends first."""
    flat: Any = out.view(np.uint8)  # a buffer preadv writes into
    done = 0
    while done < flat.size:
        got = os.preadv(fd, [flat[done : done + (64 << 20)]], offset + done)
        if got <= 0:
            raise OSError(f"short read at byte {offset + done} of {name}")
        done += got


def write_kept(
    base: MappedFile, matrix: np.ndarray, overlay: frozenset[int], keep: np.ndarray, path: Path, rows: int,
    spare: int,
) -> MappedFile:
    """A removal's new matrix file at ``path``, mapped: a header for ``rows`` rows, the kept rows of the
    snapshot over ``base`` (``keep``, in order) first, room for ``spare`` more after the ``rows``. The saved
    rows are copied from file to file by ``copy_file_range``, a run of consecutive rows at a time, so neither
    file's pages come into this process (at 1M rows a copy into memory held 1.5 GB more at the peak); the rows
    written over the old mapping since its save (``overlay``, in ``matrix``) are written after them. Rows past
    the kept ones are zeros until the caller writes them. The file is a new one whatever ``path`` held: a
    snapshot may still map an older file of that name. :meth:`VectorSnapshot.save` names it."""
    dim = base.shape[1]
    width = dim * 4
    path.unlink(missing_ok=True)
    with open(path, "xb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (rows, dim)})
        offset = f.tell()
        f.truncate(offset + (rows + spare) * width)
        src, dst = base.file.fileno(), f.fileno()
        for a, b in runs(keep):
            _copy_range(src, base.offset + int(keep[a]) * width, dst, offset + a * width, (b - a) * width)
        written = np.fromiter(sorted(overlay), np.int64, len(overlay))
        kept, at = found_in(keep, written)
        write_at(dst, offset, np.asarray(matrix[written[kept]]), at[kept])
    out = MappedFile(path)
    out.pending = True
    return out


def remove_temporaries(folder: Path) -> list[str]:
    """Remove the files a save or a removal left under their temporary names (``<name>.tmp``) when its process
    died before naming them: at 1M rows a removal's matrix file is 1.5 GB. Only for the writer, holding the
    write lock: then no save or removal is under way. Returns the names removed; a folder this process may not
    write keeps them."""
    removed = []
    for name in (MATRIX_FILE, CODES_FILE, SCALES_FILE, ROWS_FILE):
        path = folder / (name + ".tmp")
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            log.warning("cannot remove %s (%s)", path, exc)
            continue
        removed.append(path.name)
    return removed


def write_at(fd: int, offset: int, vectors: np.ndarray, positions: np.ndarray) -> None:
    """``vectors`` written into a matrix file at row ``positions`` (ascending), one ``pwrite`` per run of
    consecutive positions."""
    vectors = np.ascontiguousarray(vectors, dtype="<f4")
    width = vectors.shape[1] * 4 if vectors.ndim == 2 else 0
    for a, b in runs(positions):
        data, at = memoryview(vectors[a:b].reshape(-1).view(np.uint8)), offset + int(positions[a]) * width  # type: ignore[arg-type]
        while data:
            done = os.pwrite(fd, data, at)
            data, at = data[done:], at + done


def _copy_range(src: int, src_offset: int, dst: int, dst_offset: int, count: int) -> None:
    """``count`` bytes of ``src`` at ``src_offset`` into ``dst`` at ``dst_offset``: by ``copy_file_range``
    (in the kernel), or where the system or the file system cannot (``copy_file_range`` is Linux's), through
    a buffer of at most 64 MiB."""
    while count > 0:
        try:
            if not hasattr(os, "copy_file_range"):
                raise OSError(errno.ENOSYS, "no copy_file_range on this system")
            done = os.copy_file_range(src, dst, count, src_offset, dst_offset)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM):
                raise
            done = _copy_buffered(src, src_offset, dst, dst_offset, min(count, 64 << 20))
        if done <= 0:
            raise OSError(f"short copy of {count} bytes at {src_offset}")
        src_offset, dst_offset, count = src_offset + done, dst_offset + done, count - done


def _copy_buffered(src: int, src_offset: int, dst: int, dst_offset: int, count: int) -> int:
    data = os.pread(src, count, src_offset)
    view = memoryview(data)
    while view:
        done = os.pwrite(dst, view, dst_offset)
        view, dst_offset = view[done:], dst_offset + done
    return len(data)


def spare_rows(rows: int) -> int:
    """Zero rows a saved large matrix leaves after its own (:func:`write_matrix`): room for the skills added
    before the next fold, about 3 % (at least 4,096), so adding one writes its row into the mapping instead
    of copying the whole matrix into memory (1.5 GB at 1M rows of MiniLM). The room is a hole in the file:
    no disk block and no page of memory until a row is written there."""
    return max(4096, rows // 32)


def write_matrix(f: BinaryIO, matrix: np.ndarray, spare: int) -> None:
    """``vectors.npy``: the matrix (its header says its own shape), then ``spare`` rows of room as a hole
    (the file extended, not written), which :class:`MappedFile` maps as zeros."""
    np.save(f, np.asarray(matrix))
    f.flush()
    f.truncate(f.tell() + spare * matrix.shape[1] * 4)


def write_codes(f: BinaryIO, compact: Compact) -> None:
    """``codes.npy``: the int8 copy's codes whole (n, dim), written a block of rows at a time, so a routed
    index's column parts are never joined into one temporary (768 MB at 1M rows of ``minilm+e5``)."""
    n = len(compact)
    header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.int8)), "fortran_order": False,
              "shape": (n, compact.dim)}
    np.lib.format.write_array_header_1_0(f, header)
    for start in range(0, n, BLOCK):
        f.write(np.ascontiguousarray(compact.block(start, start + BLOCK)).data)


def probe_rows(n: int) -> np.ndarray:
    """64 rows spread over ``n`` (fewer when ``n`` is smaller): what a saved file derived from the matrix or
    the ids is checked on before it is trusted."""
    return np.unique(np.linspace(0, n - 1, 64).astype(np.int64)) if n else np.zeros(0, np.int64)


def saved_compact(folder: Path, matrix: np.ndarray) -> Compact | None:
    """The saved int8 copy of ``matrix``, or None when it is missing, cut short or was not made from this
    matrix (quantising is deterministic: 64 rows spread over the matrix must come out the same). The file is
    read by ``pread`` a block of rows at a time into the copy's column parts: copied out of a mapping, every
    page of the file stayed counted in the process beside the copy until the mapping closed, so opening held
    the codes twice (1.5 GB at 1M rows of ``minilm+e5``, docs/benchmarks.md)."""
    path = folder / CODES_FILE
    try:
        scales = np.load(folder / SCALES_FILE, allow_pickle=False)
        f = open(path, "rb")  # noqa: SIM115 - closed below
    except (OSError, ValueError):
        return None
    with f:
        try:
            shape, offset = _matrix_header(f, np.dtype(np.int8))
        except ValueError:
            return None
        if shape != matrix.shape or scales.shape != (matrix.shape[0],):
            return None
        n, dim = matrix.shape
        step = max(1, (64 << 20) // max(dim, 1))

        def blocks() -> Iterator[tuple[int, np.ndarray]]:
            buffer = np.empty((min(step, n), dim), dtype=np.int8)
            for start in range(0, n, step):
                block = buffer[: min(step, n - start)]
                _read_fully(f.fileno(), block.reshape(-1), offset + start * dim, path)
                yield start, block

        try:
            compact = Compact.of_blocks(n, dim, blocks(), scales)
        except OSError:
            return None
    probe = probe_rows(n)
    want_codes, want_scales = quantise(np.asarray(matrix[probe]))
    if not (np.array_equal(compact.rows(probe), want_codes) and np.array_equal(compact.scales[probe], want_scales)):
        log.warning("the saved int8 copy in %s does not match the matrix; quantising again", folder)
        return None
    return compact


# The members of ``rows.npz``: a JSON header, each row's key, and ``RowTable.arrays``.
ROWS_MEMBERS = ("header", "keys", "ids", "id_ends", "grant_codes", "kind_codes", "tag_codes", "doc", "embed")


def write_rows(f: BinaryIO, dim: int, rows: RowTable, keys: np.ndarray) -> None:
    """``rows.npz``: the row table's columns as arrays (``RowTable.arrays``), each row's key, and the
    dimension, names and layout as one JSON member; read back without a JSON line or a key hashed per row."""
    arrays, names = rows.arrays()
    header = json.dumps({"dim": dim, "rows": len(rows), **names}).encode("utf-8")
    np.savez(f, header=np.frombuffer(header, np.uint8), keys=np.asarray(keys, np.uint64), **arrays)  # type: ignore[arg-type]


def read_rows(folder: Path) -> tuple[int, RowTable, np.ndarray | None]:
    """The dimension, the rows and each row's key (None when the file has none) of ``rows.npz``, or of
    ``rows.json`` when an index written before has no ``rows.npz``."""
    if not (folder / ROWS_FILE).exists() and (folder / JSON_ROWS_FILE).exists():
        return (*read_json_rows(folder / JSON_ROWS_FILE), None)
    try:
        with open(folder / ROWS_FILE, "rb") as f, np.load(f, allow_pickle=False) as saved:
            # Only what write_rows writes: its members, stored as they are, checked before any is read. A
            # compressed member could unpack to any size from a small file (the index may come from a
            # snapshot bundle).
            stored = {i.filename: i.compress_type for i in saved.zip.infolist()}
            if set(stored) != {m + ".npy" for m in ROWS_MEMBERS} or set(stored.values()) != {zipfile.ZIP_STORED}:
                raise ValueError(f"{folder / ROWS_FILE} holds other members than a rows file: {sorted(stored)}")
            members = {name: saved[name] for name in ROWS_MEMBERS}
    except (zipfile.BadZipFile, EOFError, MemoryError) as exc:  # MemoryError: a member says it is huge
        raise ValueError(f"{folder / ROWS_FILE} is not a complete rows file ({exc})") from exc
    header = json.loads(members.pop("header").tobytes().decode("utf-8"))
    keys = members.pop("keys")
    rows = RowTable.from_arrays(members, header)
    if len(rows) != int(header["rows"]) or keys.dtype != np.uint64 or keys.shape != (len(rows),):
        raise ValueError(f"{folder / ROWS_FILE} holds {len(rows)} rows and {keys.shape} keys, its header says "
                         f"{header['rows']}")
    return int(header["dim"]), rows, keys


def read_json_rows(path: Path) -> tuple[int, RowTable]:
    """The dimension and the rows of ``rows.json`` (written before ``rows.npz``): a header line and one row
    per line, or (before that) one JSON object holding every row. Read a line at a time into columns."""
    columns: tuple[list[Any], ...] = ([], [], [], [], [], [])
    with open(path, encoding="utf-8") as f:
        header = json.loads(f.readline())
        lines = (json.loads(line) for line in f) if header.get("layout") == "lines" else iter(header["rows"])
        for r in lines:
            s, g, k, t, d, e = r
            for column, value in zip(columns, (s, g, k, tuple(t), d, e), strict=True):
                column.append(value)
        if header.get("layout") == "lines" and len(columns[0]) != int(header["rows"]):
            raise ValueError(f"{path} holds {len(columns[0])} rows, its header says {header['rows']}")
    return int(header["dim"]), RowTable.from_columns(*columns)


def row_json(r: VectorRow) -> list[object]:
    return [r.skill_id, r.grant, r.kind, list(r.tags), r.doc_hash, r.embed_hash]


def log_batches(path: Path) -> Iterator[dict[str, Any]]:
    """The logged batches, in order. A last line cut short by a crash is the one batch that never
    completed (its manifest was not written, so the index repairs itself from the store): it is skipped."""
    try:
        lines = path.read_text(encoding="utf-8").split("\n")
    except FileNotFoundError:
        return
    complete, torn = lines[:-1], lines[-1]
    for line in complete:
        yield dict(json.loads(line))
    if torn.strip():
        log.warning("ignoring an unfinished batch at the end of %s", path)
