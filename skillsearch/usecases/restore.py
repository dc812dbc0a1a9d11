"""Restoring a snapshot into a data directory (``skillsearch snapshot restore PATH --data-dir D``).

Nothing in ``D`` changes until the snapshot is proven whole and right for this replica:

1. ``snapshot.json`` must be there (a create that did not finish leaves none) and well-formed: every path a
   plain relative path inside the catalog or the index (a snapshot never names ``principals.toml`` or
   anything outside its folder), every size and digest well-formed. Refused otherwise
   (``SNAPSHOT_INVALID``, ``details.reason``: ``incomplete`` or ``malformed``). ``D`` must not be the
   snapshot's own folder nor a mount point (``ValidationError``), and its disk must have room for the sizes
   (``IndexNotReadyError``, ``no_space``): nothing is copied before these hold.
2. Its model fingerprint must be the one of the encoder this replica would load (``--encoder``, else the
   one the snapshot's index records), computed from the model's files here without loading it
   (``retrieval/model_files.py``): ``SNAPSHOT_ENCODER_MISMATCH``.
3. Every file is copied into a new folder beside ``D`` (``.NAME.restore-PID-XXXXXXXX``; such folders that
   killed restores left, their process gone, are deleted first) while its sha256 is computed, reading at most its
   recorded size plus one byte, never through a link; a missing or short file is ``incomplete``, a digest
   that differs ``altered``. The copied index manifest and catalog must say what ``snapshot.json`` says, and
   the index must be in this version's format (``index_format``). A write the system refuses (a full disk, a
   file size limit, a read-only folder) is ``IndexNotReadyError`` (``unwritable``) naming the file and saying
   what to do about that cause (``core/refusals.py``).
4. The files of ``D`` that are the replica's own (``principals.toml``, ``sync.toml``, local sources' git
   caches: everything but the catalog and the index) are copied into the new folder, under ``D``'s write
   lock (refused while another process writes ``D``), and the two folders are swapped in one
   ``renameat2(RENAME_EXCHANGE)`` (where the kernel lacks it: two renames, undone if the second fails).
   The old contents are deleted only after the swap.

A refusal deletes the new folder and leaves ``D`` exactly as it was. A ``D`` that a live process serves
(``serve``, ``mcp``: the shared lock of ``retrieval/inuse.py``) or writes (the write lock; a sync run, which
holds ``sync.lock`` between its pages, is refused at the swap) is refused before
anything is copied, and again at the swap, which holds that lock alone (``DataDirInUseError``, naming the
pids): a running process would keep the files it had open. Stop it first, or restore into a new folder and
start the server there. The restored catalog holds the sync cursors, so the replica's first sync resumes from
them; its index is the snapshot's, so it serves without embedding anything.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillsearch.catalog.backup import catalog_generation
from skillsearch.core.errors import (
    DataDirInUseError,
    IndexNotReadyError,
    SnapshotEncoderError,
    SnapshotInvalidError,
    ValidationError,
)
from skillsearch.core.refusals import refusal_advice
from skillsearch.retrieval.encoders import encoder_choice, setting_fingerprint
from skillsearch.retrieval.inuse import IN_USE_FILE, exclusive
from skillsearch.retrieval.manifest import FORMAT_VERSION, MANIFEST
from skillsearch.retrieval.writelock import LOCK_FILE, WriteLock
from skillsearch.sync.run_lock import sync_runs_held_off
from skillsearch.usecases.disk import check_room
from skillsearch.usecases.snapshots import (
    CATALOG,
    FORMAT,
    INDEX_DIRS,
    SNAPSHOT_MANIFEST,
    FileEntry,
    copy_hashed,
    default_dir_mode,
    fsync_dir,
    remove_stale,
    work_folder,
)

__all__ = ["RestoreInfo", "read_snapshot", "restore_snapshot"]

MAX_MANIFEST_BYTES = 64 << 20
MAX_FILES = 1_000_000
_PART = re.compile(r"(?!\.\.?$)[A-Za-z0-9_.][A-Za-z0-9._-]{0,254}")  # no "." or ".."
_SHA256 = re.compile(r"[0-9a-f]{64}")
# What a restore replaces in D; the rest of D is the replica's own and is kept. SQLite's side files of the
# old catalog and the old lock go with the old contents.
_REPLACED = {CATALOG, MANIFEST, *INDEX_DIRS, f"{CATALOG}-wal", f"{CATALOG}-shm", f"{CATALOG}-journal", LOCK_FILE,
             IN_USE_FILE, "manifest.tmp"}


@dataclass(frozen=True)
class RestoreInfo:
    data_dir: str
    snapshot: str
    store_generation: int
    skills: int
    documents: int
    encoder: dict[str, Any]
    cursors: dict[str, str | None]
    files: int
    bytes: int
    kept: list[str]
    seconds: float
    removed_stale: list[str]  # hidden folders of killed restores into the same D, deleted first

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _invalid(message: str, reason: str, **details: Any) -> SnapshotInvalidError:
    return SnapshotInvalidError(message, {"reason": reason, **details})


def _entry(raw: Any) -> FileEntry:
    if not isinstance(raw, dict):
        raise _invalid("a file entry of snapshot.json is not an object", "malformed")
    path, size, digest = raw.get("path"), raw.get("size"), raw.get("sha256")
    parts = path.split("/") if isinstance(path, str) else []
    ok_path = bool(parts) and all(_PART.fullmatch(p) for p in parts) and (
        (len(parts) == 1 and parts[0] in (CATALOG, MANIFEST)) or (len(parts) > 1 and parts[0] in INDEX_DIRS))
    if not ok_path:
        raise _invalid(f"snapshot.json names a file outside the catalog and the index: {str(path)[:200]!r}",
                       "malformed")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0 or not (
            isinstance(digest, str) and _SHA256.fullmatch(digest)):
        raise _invalid(f"snapshot.json has no valid size and sha256 for {path}", "malformed", path=path)
    return FileEntry(str(path), size, str(digest))


def read_snapshot(src: Path) -> tuple[dict[str, Any], list[FileEntry]]:
    """``snapshot.json`` of the folder ``src``, checked for shape (not yet against the files)."""
    path = Path(src) / SNAPSHOT_MANIFEST
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)  # a FIFO: no wait
    except FileNotFoundError:
        reason = "no such folder" if not Path(src).is_dir() else f"no {SNAPSHOT_MANIFEST}: a create that did not finish?"
        raise _invalid(f"{src} is not a complete snapshot ({reason})", "incomplete", path=str(path)) from None
    except OSError as exc:
        raise _invalid(f"{path} cannot be read ({exc.strerror})", "incomplete", path=str(path)) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _invalid(f"{path} is not a regular file", "malformed")
        data = os.read(fd, MAX_MANIFEST_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_MANIFEST_BYTES:
        raise _invalid(f"{path} is over {MAX_MANIFEST_BYTES} bytes", "malformed")
    try:
        manifest = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _invalid(f"{path} is not valid JSON ({exc})", "malformed") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise _invalid(f"{path} is not a {FORMAT} manifest", "malformed")
    raw_files = manifest.get("files")
    if not isinstance(raw_files, list) or len(raw_files) > MAX_FILES:
        raise _invalid(f"{path} lists no files (or over {MAX_FILES})", "malformed")
    entries = [_entry(f) for f in raw_files]
    names = [e.path for e in entries]
    if len(set(names)) != len(names) or not {CATALOG, MANIFEST} <= set(names):
        raise _invalid(f"{path} must list the catalog and the index manifest once each", "malformed")
    if not all(isinstance(manifest.get(k), int) for k in ("store_generation", "skills", "documents")):
        raise _invalid(f"{path} has no valid store_generation, skills and documents", "malformed")
    if not isinstance(manifest.get("encoder"), dict) or not isinstance(manifest["encoder"].get("fingerprint"), str):
        raise _invalid(f"{path} records no model fingerprint", "malformed")
    return manifest, entries


def _check_encoder(manifest: dict[str, Any], setting: str) -> None:
    """``setting``: the replica's ``--encoder``; empty, the one the restored index records (as the replica
    will open it), whose model files here must still be the ones the snapshot's index was built with."""
    name = str(manifest["encoder"].get("name"))
    setting = setting or encoder_choice(name) or ""
    if not setting:
        raise SnapshotEncoderError(
            f"the snapshot's index was built with model {name!r}, which this version cannot load",
            {"reason": "foreign_encoder", "snapshot_encoder": name},
        )
    recorded, expected = manifest["encoder"]["fingerprint"], setting_fingerprint(setting)
    if recorded != expected:
        raise SnapshotEncoderError(
            f"the snapshot's index was built with model {manifest['encoder'].get('name')!r} (fingerprint {recorded}),"
            f" but this replica's encoder {setting!r} loads other model files (fingerprint {expected});"
            " restore a snapshot of a replica with the same model, or pass the matching --encoder",
            {"reason": "foreign_encoder", "snapshot_fingerprint": recorded, "expected_fingerprint": expected,
             "encoder": setting},
        )


def _open_inside(src: Path, rel: str) -> int:
    """Open ``src/rel`` for reading without following a link at any level below ``src``."""
    fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        parts = rel.split("/")
        for part in parts[:-1]:
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=fd)  # a FIFO
    finally:
        os.close(fd)


def _stage_file(src: Path, entry: FileEntry, stage: Path) -> None:
    try:
        fd = _open_inside(src, entry.path)
    except FileNotFoundError:
        raise _invalid(f"the snapshot is incomplete: {entry.path} is missing", "incomplete", path=entry.path) from None
    except OSError as exc:  # a link (ELOOP; ENOTDIR for a linked folder), a folder where a file should be
        link = next((p for p in _prefixes(entry.path) if (src / p).is_symlink()), None)
        why = f"{link} is a symbolic link: a snapshot holds only plain files and folders" if link else exc.strerror
        raise _invalid(f"{entry.path} in the snapshot cannot be read as a plain file ({why})", "altered",
                       path=entry.path) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _invalid(f"{entry.path} in the snapshot is not a regular file", "altered", path=entry.path)
        copied, digest = copy_hashed(fd, stage / entry.path, entry.size)
    finally:
        os.close(fd)
    if copied < entry.size:
        raise _invalid(f"the snapshot is incomplete: {entry.path} has {copied} of its {entry.size} bytes (truncated)",
                       "incomplete", path=entry.path, expected_size=entry.size, size=copied)
    if copied > entry.size or digest != entry.sha256:
        raise _invalid(f"the snapshot was altered: {entry.path} does not match its recorded sha256", "altered",
                       path=entry.path)


def _prefixes(rel: str) -> list[str]:
    return ["/".join(rel.split("/")[:i]) for i in range(1, rel.count("/") + 2)]


def _check_staged(manifest: dict[str, Any], stage: Path) -> None:
    """The copied index manifest and catalog agree with ``snapshot.json`` (whose own bytes no digest covers)."""
    try:
        index = json.loads((stage / MANIFEST).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError):
        index = None
    if isinstance(index, dict) and index.get("format_version") != FORMAT_VERSION:
        raise _invalid(f"the snapshot's index is format {index.get('format_version')}, which this version does not"
                       f" serve (format {FORMAT_VERSION}): restore a snapshot taken by a version that writes"
                       f" format {FORMAT_VERSION}, or run `skillsearch reindex` on its source first", "index_format")
    encoder = index.get("encoder") if isinstance(index, dict) else None
    if not isinstance(encoder, dict) or encoder.get("fingerprint") != manifest["encoder"]["fingerprint"]:
        raise _invalid("snapshot.json's model fingerprint differs from its index manifest's", "altered")
    try:
        generation = catalog_generation(stage / CATALOG)
    except IndexNotReadyError as exc:
        raise _invalid(f"the snapshot's catalog cannot be read ({exc.message})", "altered") from None
    if generation != manifest.get("store_generation"):
        raise _invalid("snapshot.json's store generation differs from its catalog's", "altered")


def _keep_own_files(data_dir: Path, stage: Path) -> list[str]:
    kept = []
    for entry in sorted(data_dir.iterdir()):
        if entry.name in _REPLACED:
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, stage / entry.name, symlinks=True)
        else:
            shutil.copy2(entry, stage / entry.name, follow_symlinks=False)
        kept.append(entry.name)
    return kept


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False where that is unavailable."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _swap(stage: Path, data_dir: Path) -> None:
    """``data_dir`` becomes ``stage``'s contents and ``stage`` the old ones."""
    if _exchange(stage, data_dir):
        return
    old = data_dir.with_name(f".{data_dir.name}.old-{os.urandom(4).hex()}")
    os.rename(data_dir, old)
    try:
        os.rename(stage, data_dir)
    except BaseException:
        os.rename(old, data_dir)
        raise
    os.rename(old, stage)


def _in_use(data_dir: Path, pids: list[int]) -> DataDirInUseError:
    who = (f"process {pids[0]}" if len(pids) == 1 else "processes " + ", ".join(map(str, pids))) if pids \
        else "another process"
    return DataDirInUseError(
        f"{data_dir} is in use by {who} (a server or a writer); stop it before restoring into that folder"
        " (or restore into a new folder and start the server there)",
        {"reason": "in_use", "data_dir": str(data_dir), "pids": pids})


def _refuse_if_in_use(data_dir: Path) -> None:
    """Fail fast, before copying anything, when a live process serves or writes ``data_dir``."""
    if data_dir.is_dir():
        with exclusive(data_dir, create=False) as users:
            if users is not None:
                raise _in_use(data_dir, users)


def restore_snapshot(src: Path, data_dir: Path, encoder: str) -> RestoreInfo:
    """Verify the snapshot at ``src`` against this replica's ``encoder`` setting and swap it into
    ``data_dir``; any refusal leaves ``data_dir`` as it was. A file the system refuses to write (a full
    disk, a read-only file system) is :class:`IndexNotReadyError` naming it and the cause."""
    try:
        return _restore(src, data_dir, encoder)
    except OSError as exc:
        where = f"{os.fsdecode(exc.filename)}: " if exc.filename else ""
        raise IndexNotReadyError(
            f"the snapshot could not be restored into {data_dir} ({where}{exc.strerror or exc}); {data_dir} is unchanged"
            f" and nothing was left behind: {refusal_advice(exc)}, then run it again",
            {"data_dir": str(data_dir), "reason": "unwritable", "errno": errno.errorcode.get(exc.errno or 0),
             **({"path": os.fsdecode(exc.filename)} if exc.filename else {})},
        ) from exc


def _restore(src: Path, data_dir: Path, encoder: str) -> RestoreInfo:
    started, run_started = time.perf_counter(), time.time()
    src, data_dir = Path(src).absolute(), Path(data_dir).absolute()
    manifest, entries = read_snapshot(src)
    if data_dir.exists() and data_dir.is_dir() and os.path.samefile(src, data_dir):
        raise ValidationError(
            f"{data_dir} is the snapshot itself: restored into its own folder it would become a data directory"
            " and stop being a snapshot; restore it into another folder", {"data_dir": str(data_dir)})
    _check_encoder(manifest, encoder)
    if data_dir.is_symlink() or (data_dir.exists() and not data_dir.is_dir()):
        raise IndexNotReadyError(f"{data_dir} is not a folder", {"data_dir": str(data_dir)})
    if data_dir.is_dir() and os.path.ismount(data_dir):
        # The new folder is made beside D and swapped with it by a rename, which cannot move a mount point.
        raise ValidationError(
            f"{data_dir} is a mount point (its own file system, a volume): a restore swaps it with a new folder"
            f" beside it, which cannot cross file systems; restore into a folder inside it (say {data_dir / 'data'})"
            " and give that folder as the server's --data-dir", {"data_dir": str(data_dir), "reason": "mount_point"})
    _refuse_if_in_use(data_dir)
    check_room(data_dir, sum(e.size for e in entries))
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    removed = remove_stale(data_dir, "restore", run_started)
    stage = work_folder(data_dir, "restore")
    try:
        for entry in entries:
            _stage_file(src, entry, stage)
        _check_staged(manifest, stage)
        kept: list[str] = []
        for folder in {stage, *(p.parent for p in stage.rglob("*") if p.is_file())}:
            fsync_dir(folder)
        os.chmod(stage, stat.S_IMODE(data_dir.stat().st_mode) if data_dir.exists() else default_dir_mode())
        if not data_dir.exists():
            os.rename(stage, data_dir)
        else:
            # Held through the swap: no server starts on the old files meanwhile (one waits, then opens the new).
            created = not (data_dir / IN_USE_FILE).exists()
            with exclusive(data_dir) as users, WriteLock(data_dir).try_hold() as got, \
                    sync_runs_held_off(data_dir) as syncing:
                if users is not None:
                    raise _in_use(data_dir, users)
                if syncing is not None:  # a `skillsearch sync` between two pages holds no other lock
                    if created:
                        (data_dir / IN_USE_FILE).unlink(missing_ok=True)
                    raise _in_use(data_dir, syncing)
                if not got:
                    if created:  # a refusal leaves D as it was (a server opening it meanwhile retries)
                        (data_dir / IN_USE_FILE).unlink(missing_ok=True)
                    pid = WriteLock(data_dir).holder_pid()
                    raise _in_use(data_dir, [pid] if pid is not None else [])
                kept = _keep_own_files(data_dir, stage)
                _swap(stage, data_dir)
        fsync_dir(data_dir.parent)
    finally:
        shutil.rmtree(stage, ignore_errors=True)  # after a swap: D's old contents
    return RestoreInfo(
        data_dir=str(data_dir), snapshot=str(src), store_generation=int(manifest.get("store_generation", -1)),
        skills=int(manifest.get("skills", 0)), documents=int(manifest.get("documents", 0)),
        encoder=dict(manifest["encoder"]), cursors=dict(manifest.get("cursors") or {}), files=len(entries),
        bytes=sum(e.size for e in entries), kept=kept, seconds=round(time.perf_counter() - started, 3),
        removed_stale=removed,
    )
