"""Snapshots of a data directory, taken while it serves (``skillsearch snapshot create``).

A snapshot is a folder laid out like a data directory, plus ``snapshot.json`` written last::

    catalog.sqlite3     the catalog as of one commit (SQLite's online backup; sync cursors included)
    manifest.json       the index manifest (encoder, model fingerprint, calibration, store generation)
    lexical/ vectors/   the index files of that generation
    snapshot.json       format, store and index generation, encoder and model fingerprint, the sync
                        cursors, and the size and sha256 of every file above

The index files are copied under the data directory's write lock (``retrieval/writelock.py``), so no
process writes them meanwhile; the catalog is copied under the same hold, and the pair is kept only when
the catalog's generation is the one the index reflects, so a restored replica opens it without embedding
anything. While imports or a sync move the catalog ahead of its index, create waits for the index to catch
up (``wait_s``); past that it keeps a pair whose index is behind and says so (``consistent: false``: the
restored replica then embeds the skills changed in between, as any replica repairs a stale index). The
write lock is waited for within the same ``wait_s``: a writer changes the index files in place, so while one
holds the lock for the whole wait (an import or a ``reindex`` holds it for its whole run) no generation can
be copied, and create fails with ``INDEX_NOT_READY`` naming the holder's pid, having written nothing.

Everything is written into a hidden temporary folder beside ``PATH`` (``.NAME.partial-PID-XXXXXXXX``) and
renamed to ``PATH`` at the end, so a folder named ``PATH`` is always a whole snapshot; such a folder left by a
killed create (its process gone) is deleted by the next create of ``PATH``. Restoring is :mod:`skillsearch.usecases.restore`.
Configuration is per replica and never in a snapshot: ``principals.toml``, ``sync.toml`` (its secrets),
local sources' git caches.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillsearch.catalog.backup import backup_catalog, catalog_generation
from skillsearch.catalog.store import CatalogStore
from skillsearch.core.errors import IndexNotReadyError, ValidationError
from skillsearch.core.refusals import refusal_advice
from skillsearch.retrieval.manifest import FORMAT_VERSION, MANIFEST
from skillsearch.retrieval.writelock import WriteLock

__all__ = [
    "CATALOG",
    "FORMAT",
    "INDEX_DIRS",
    "SNAPSHOT_MANIFEST",
    "FileEntry",
    "SnapshotInfo",
    "copy_hashed",
    "create_snapshot",
    "default_dir_mode",
    "fsync_dir",
    "remove_stale",
    "work_folder",
]

log = logging.getLogger("skillsearch")

FORMAT = "skillsearch.snapshot.v1"
SNAPSHOT_MANIFEST = "snapshot.json"
CATALOG = CatalogStore.FILENAME
INDEX_DIRS = ("lexical", "vectors")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class FileEntry:
    path: str  # relative, with "/"
    size: int
    sha256: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "sha256": self.sha256}


@dataclass(frozen=True)
class SnapshotInfo:
    """What ``snapshot create`` reports (and ``snapshot.json`` holds, less the file list)."""

    path: str
    store_generation: int
    index_generation: int
    consistent: bool
    skills: int
    documents: int
    encoder: dict[str, Any]
    cursors: dict[str, str | None]
    files: int
    bytes: int
    seconds: float
    created_at: str = ""
    waited_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    removed_stale: list[str] = field(default_factory=list)  # hidden folders of killed creates, deleted first

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


def copy_hashed(src_fd: int, dest: Path, limit: int) -> tuple[int, str]:
    """Copy at most ``limit + 1`` bytes from an open file into a new file ``dest`` (fsynced); returns the
    bytes copied and their sha256 (a file longer than ``limit`` shows as ``limit + 1`` bytes)."""
    h = hashlib.sha256()
    copied = 0
    dest.parent.mkdir(parents=True, exist_ok=True)
    out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        while copied <= limit:
            block = os.read(src_fd, min(_CHUNK, limit + 1 - copied))
            if not block:
                break
            h.update(block)
            try:
                _write_all(out, block)
            except OSError as exc:  # a full disk: name the file, as every refused write does (os.write does not)
                raise OSError(exc.errno, exc.strerror, str(dest)) from exc
            copied += len(block)
        try:
            os.fsync(out)
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(dest)) from exc
    finally:
        os.close(out)
    return copied, h.hexdigest()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def default_dir_mode() -> int:
    """What ``mkdir`` would give a new folder (``mkdtemp`` gives 0700)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o777 & ~umask


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def work_folder(dest: Path, kind: str) -> Path:
    """A new hidden folder beside ``dest`` for a ``kind`` (``partial``: a create; ``restore``) to write into,
    named ``.NAME.KIND-PID-XXXXXXXX`` so that a later run can tell when its owner is gone."""
    return Path(tempfile.mkdtemp(prefix=f".{dest.name}.{kind}-{os.getpid()}-", dir=dest.parent))


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_stale(dest: Path, kind: str, started: float) -> list[str]:
    """Delete the hidden folders of ``dest``'s earlier ``kind`` runs that were killed (``kill -9``, a power
    cut) before they could delete their own: a name ``.NAME.KIND-PID-XXXXXXXX`` whose process is gone, and
    one of an older version, ``.NAME.KIND-XXXXXXXX`` (no pid), last changed before ``started`` (this run's
    ``time.time()``). Returns the folders deleted."""
    pattern = re.compile(rf"\.{re.escape(dest.name)}\.{re.escape(kind)}-(?:(\d+)-)?[A-Za-z0-9_]{{8}}")
    removed = []
    try:
        names = sorted(os.listdir(dest.parent))
    except FileNotFoundError:
        return []
    for name in names:
        match = pattern.fullmatch(name)
        path = dest.parent / name
        if match is None or path.is_symlink() or not path.is_dir():
            continue
        pid = match.group(1)
        try:
            stale = not _alive(int(pid)) if pid is not None else path.stat().st_mtime < started
        except (OSError, OverflowError):
            continue
        if stale:
            shutil.rmtree(path, ignore_errors=True)
            if not path.exists():
                removed.append(str(path))
    return removed


def _hash_file(root: Path, rel: str) -> FileEntry:
    h = hashlib.sha256()
    size = 0
    with (root / rel).open("rb") as f:
        while block := f.read(_CHUNK):
            h.update(block)
            size += len(block)
    return FileEntry(rel, size, h.hexdigest())


def _index_files(data_dir: Path) -> list[str]:
    """The index's files, relative: the manifest, then every regular file of ``lexical/`` and ``vectors/``
    but Tantivy's lock files. A link in there is refused: the index is never a link to elsewhere."""
    names = [MANIFEST]
    for top in INDEX_DIRS:
        root = data_dir / top
        if root.is_symlink() or not root.is_dir():
            raise IndexNotReadyError(f"the index in {data_dir} has no {top}/ folder; run `skillsearch reindex`")
        for dirpath, dirs, files in os.walk(root):
            dirs.sort()
            for name in sorted(files + [d for d in dirs if Path(dirpath, d).is_symlink()]):
                path = Path(dirpath) / name
                if path.is_symlink() or not path.is_file():
                    raise IndexNotReadyError(f"{path} is not a regular file; a snapshot copies only regular files")
                if name.startswith(".tantivy-") and name.endswith(".lock"):
                    continue
                names.append(path.relative_to(data_dir).as_posix())
    return names


def _copy_file(data_dir: Path, rel: str, dest_root: Path) -> FileEntry:
    fd = os.open(data_dir / rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        size = os.fstat(fd).st_size
        copied, digest = copy_hashed(fd, dest_root / rel, size)
    finally:
        os.close(fd)
    if copied != size:
        raise IndexNotReadyError(f"{data_dir / rel} changed while it was copied (is another process writing it"
                                 " without the write lock?)")
    return FileEntry(rel, copied, digest)


def _read_index_manifest(data_dir: Path) -> dict[str, Any]:
    path = data_dir / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise IndexNotReadyError(f"there is no index in {data_dir} to snapshot; open or `reindex` it first") from None
    except (OSError, ValueError) as exc:
        raise IndexNotReadyError(f"the index manifest {path} is unreadable ({exc})") from exc
    if not isinstance(manifest, dict):
        raise IndexNotReadyError(f"the index manifest {path} is not an object")
    if manifest.get("format_version") != FORMAT_VERSION:  # a replica restored from it could not serve it
        raise IndexNotReadyError(
            f"the index in {data_dir} is format {manifest.get('format_version')}, which this version does not"
            f" serve (format {FORMAT_VERSION}); run `skillsearch reindex` on it, then snapshot it again"
        )
    encoder = manifest.get("encoder") or {}
    if not encoder.get("fingerprint"):
        raise IndexNotReadyError(
            f"the index in {data_dir} records no model fingerprint (written by an older version); open it once with"
            " this version (e.g. `skillsearch search test`), then snapshot it again"
        )
    return manifest


def _take(data_dir: Path, tmp: Path, wait_s: float) -> tuple[dict[str, Any], Any, list[FileEntry], bool, float]:
    """Under the write lock: the index files of one generation and the catalog at that generation, when the
    catalog stops moving ahead of the index within ``wait_s``; else the last pair tried. The whole wait,
    for the lock included, is ``wait_s``: a writer that holds the lock all that time (an import or a
    reindex holds it for its whole run) fails the snapshot, since a writer changes the index files in
    place (``vectors.npy`` rows, ``changes.log``, Tantivy's segments) and no whole generation can be
    copied beside it."""
    lock = WriteLock(data_dir)
    catalog = data_dir / CATALOG
    started = time.monotonic()
    said = False
    while True:
        with lock.try_hold() as got:
            if got:
                manifest = _read_index_manifest(data_dir)
                index_generation = int(manifest.get("store_generation", -1))
                last_try = time.monotonic() - started >= wait_s
                if last_try or catalog_generation(catalog) == index_generation:
                    (tmp / CATALOG).unlink(missing_ok=True)
                    copy = backup_catalog(catalog, tmp / CATALOG)
                    if copy.generation == index_generation or last_try:
                        files = [_copy_file(data_dir, rel, tmp) for rel in _index_files(data_dir)]
                        return manifest, copy, files, copy.generation == index_generation, time.monotonic() - started
        if not got and not said:  # a wait of up to wait_s (minutes) is not silent
            said = True
            log.warning("snapshot: %s holds the write lock of %s (an import, a sync or a reindex); waiting up to"
                        " %gs for it (--wait)", lock.holder(), data_dir, wait_s)
        if not got and time.monotonic() - started >= wait_s:
            pid = lock.holder_pid()
            raise IndexNotReadyError(
                f"{lock.holder()} held the write lock of {data_dir} for the whole wait ({wait_s:g}s): an import, a"
                " sync or a reindex is writing the index files, which a snapshot copies only under that lock; no"
                " snapshot was written: try again when it has finished, or wait longer (--wait)",
                {"data_dir": str(data_dir), "lock": str(lock.path), "holder_pid": pid, "wait_s": wait_s},
            )
        time.sleep(0.05)  # a writer holds the lock, or an import is between its catalog commit and its refresh


def create_snapshot(data_dir: Path, dest: Path, *, wait_s: float = 60.0) -> SnapshotInfo:
    """Write a snapshot of ``data_dir`` to ``dest`` (a new folder, or an empty one). A file the system
    refuses to read or write (a full disk, a folder this user cannot write) is :class:`IndexNotReadyError`
    naming ``dest`` and the cause; the hidden folder is removed and ``dest`` never appears."""
    try:
        return _create(data_dir, dest, wait_s)
    except OSError as exc:
        raise IndexNotReadyError(
            f"the snapshot {dest} could not be written ({exc}); nothing was left behind: {refusal_advice(exc)},"
            " then run it again", {"path": str(dest), "reason": "unwritable", "errno": errno.errorcode.get(exc.errno or 0)},
        ) from exc


def _create(data_dir: Path, dest: Path, wait_s: float) -> SnapshotInfo:
    started, run_started = time.perf_counter(), time.time()
    data_dir, dest = Path(data_dir).absolute(), Path(dest).absolute()
    if dest.is_symlink() or (dest.exists() and (not dest.is_dir() or any(dest.iterdir()))):
        raise ValidationError(f"{dest} already exists; a snapshot is written into a new (or empty) folder",
                              {"path": str(dest)})
    if dest.is_dir() and os.path.ismount(dest):  # written beside, then renamed
        raise ValidationError(
            f"{dest} is a mount point (a volume of its own): a snapshot is written beside its folder and renamed to"
            f" it, which cannot cross file systems; give a new folder inside it (say {dest / 'snapshot'})",
            {"path": str(dest), "reason": "mount_point"})
    if data_dir == dest or data_dir in dest.parents:
        raise ValidationError("a snapshot cannot be written inside the data directory it copies", {"path": str(dest)})
    if not (data_dir / CATALOG).is_file():
        raise IndexNotReadyError(f"there is no catalog in {data_dir}", {"data_dir": str(data_dir)})
    dest.parent.mkdir(parents=True, exist_ok=True)
    removed = remove_stale(dest, "partial", run_started)
    tmp = work_folder(dest, "partial")
    try:
        manifest, copy, files, consistent, waited = _take(data_dir, tmp, wait_s)
        files.insert(0, _hash_file(tmp, CATALOG))
        encoder = dict(manifest["encoder"])
        notes = [] if consistent else [
            f"the index reflects catalog generation {manifest.get('store_generation')}, the copied catalog is at"
            f" {copy.generation} (it kept changing for {wait_s:.0f}s): a replica restored from it embeds the skills"
            " changed in between"
        ]
        info = SnapshotInfo(
            path=str(dest), store_generation=copy.generation,
            index_generation=int(manifest.get("store_generation", -1)), consistent=consistent, skills=copy.skills,
            documents=int(manifest.get("documents", 0)), encoder=encoder, cursors=copy.cursors, files=len(files),
            bytes=sum(f.size for f in files), seconds=round(time.perf_counter() - started, 3),
            created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), waited_s=round(waited, 3), notes=notes,
            removed_stale=removed,
        )
        body = {"format": FORMAT, **info.to_dict(), "index_write_id": manifest.get("write_id"),
                "files": [f.to_dict() for f in files]}
        for key in ("path", "seconds", "waited_s", "removed_stale"):
            body.pop(key)
        (tmp / SNAPSHOT_MANIFEST).write_text(json.dumps(body, indent=1), encoding="utf-8")
        with (tmp / SNAPSHOT_MANIFEST).open("rb") as f:
            os.fsync(f.fileno())
        for folder in {tmp, *(p.parent for p in tmp.rglob("*") if p.is_file())}:
            fsync_dir(folder)
        os.chmod(tmp, default_dir_mode())
        os.rename(tmp, dest)  # onto an absent or empty folder: atomic
        fsync_dir(dest.parent)
        return info
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
