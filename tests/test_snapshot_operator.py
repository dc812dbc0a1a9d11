"""Snapshot mistakes an operator makes, or a host makes for them: a restore onto a disk that fills up or
cannot hold the snapshot, a restore into the snapshot's own folder, an index this version cannot serve,
a ``--wait`` that is not a number of seconds, a snapshot whose folder is a link. Each is one line saying
what to do, with its exit code, and leaves the target (and the snapshot) as they were. Real processes,
files, SQLite and Tantivy, on a hashing-encoder catalog (no model: fast)."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_snapshot import run, tree_digest

from skillsearch.core.settings import Settings
from skillsearch.retrieval.hashing_encoder import HashingEncoder
from skillsearch.service import Catalog

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("operator")
    settings = Settings(data_dir=root / "data", encoder="hashing")
    Catalog.open(settings, encoder=HashingEncoder()).close()
    Catalog.create_snapshot(settings, root / "snap")
    return root / "snap"


@pytest.fixture
def target(tmp_path: Path, snapshot: Path) -> Path:
    data = tmp_path / "replica"
    assert run("--encoder", "hashing", "snapshot", "restore", str(snapshot), "--data-dir", str(data))[0] == 0
    (data / "principals.toml").write_text("# the replica's own tokens\n", encoding="utf-8")
    return data


def copy_of(snapshot: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(snapshot, copy)
    return copy


def _edit(snap: Path, change: Any) -> None:
    manifest = json.loads((snap / "snapshot.json").read_text(encoding="utf-8"))
    change(manifest)
    (snap / "snapshot.json").write_text(json.dumps(manifest), encoding="utf-8")


def test_a_restore_past_a_file_size_limit_is_one_line_naming_the_file_and_leaves_nothing(
        snapshot: Path, target: Path) -> None:
    """A full disk met while copying (a file size limit fails the write as a full disk does: EFBIG for
    ENOSPC) was ``error: INTERNAL: OSError: [Errno 28] No space left on device``, naming no file."""
    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))

    before, siblings = tree_digest(target), sorted(target.parent.iterdir())
    for dest in (target, target.parent / "new-replica"):
        done = subprocess.run(
            [sys.executable, "-m", "skillsearch.cli", "-q", "--encoder", "hashing", "snapshot", "restore",
             str(snapshot), "--data-dir", str(dest)],
            capture_output=True, text=True, env=ENV, timeout=300, preexec_fn=limit)
        assert done.returncode == 1, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in done.stderr and "INTERNAL" not in done.stderr, done.stderr
        assert lines[0].startswith(f"error: INDEX_NOT_READY: the snapshot could not be restored into {dest} ("), lines
        assert "catalog.sqlite3: File too large" in lines[0] and f"{dest} is unchanged" in lines[0], lines
        # The cause is a file size limit, not the disk: "free space" would send the operator the wrong way.
        assert "a file size limit, `ulimit -f`): raise the limit" in lines[0] and "free space" not in lines[0], lines
        assert tree_digest(target) == before
        assert sorted(target.parent.iterdir()) == siblings  # no staging folder, no new replica


def test_a_snapshot_created_past_a_file_size_limit_names_the_copy_and_the_limit(tmp_path: Path) -> None:
    """The catalog's copy (400 KB) past a file size limit was ``the catalog DATA/catalog.sqlite3 cannot be
    copied (disk I/O error)``: it blamed the catalog being copied, which is whole, and said nothing of the
    limit on the copy."""
    data = tmp_path / "data"
    Catalog.open(Settings(data_dir=data, encoder="hashing"), encoder=HashingEncoder()).close()
    catalog = (data / "catalog.sqlite3").read_bytes()

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))

    dest = tmp_path / "snap"
    done = subprocess.run(
        [sys.executable, "-m", "skillsearch.cli", "-q", "--encoder", "hashing", "--data-dir", str(data), "snapshot",
         "create", str(dest)], capture_output=True, text=True, env=ENV, timeout=300, preexec_fn=limit)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith(f"error: INDEX_NOT_READY: the snapshot {dest} could not be written ("), lines
    assert "File too large" in lines[0] and "catalog.sqlite3" in lines[0] and "cannot be copied" not in lines[0], lines
    assert "a file size limit, `ulimit -f`): raise the limit" in lines[0] and "free space" not in lines[0], lines
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # no snapshot, no hidden folder left
    assert (data / "catalog.sqlite3").read_bytes() == catalog


def test_a_snapshot_larger_than_the_free_disk_is_refused_before_anything_is_copied(
        snapshot: Path, target: Path, tmp_path: Path) -> None:
    """``snapshot.json``'s sizes carry no signature: a huge recorded member was copied until the disk (a
    live server's too) filled, before its digest could refuse it."""
    snap = copy_of(snapshot, tmp_path)
    _edit(snap, lambda m: [f.update(size=1 << 50) for f in m["files"] if f["path"] == "catalog.sqlite3"])
    before, siblings = tree_digest(target), sorted(target.parent.iterdir())

    code, body = run("--encoder", "hashing", "snapshot", "restore", str(snap), "--data-dir", str(target))

    assert code == 1, body
    assert body["error"]["code"] == "INDEX_NOT_READY" and body["error"]["details"]["reason"] == "no_space", body
    assert body["error"]["details"]["bytes_needed"] > 1 << 50 > body["error"]["details"]["bytes_free"]
    assert "nothing was copied" in body["error"]["message"]
    assert tree_digest(target) == before and sorted(target.parent.iterdir()) == siblings


def test_a_snapshot_restored_into_its_own_folder_is_refused_and_stays_a_snapshot(
        snapshot: Path, tmp_path: Path) -> None:
    """``snapshot restore /backups/x --data-dir /backups/x`` turned the backup into a live data directory,
    whose first write made it fail its own digests."""
    snap = copy_of(snapshot, tmp_path)
    before = tree_digest(snap)

    code, body = run("--encoder", "hashing", "snapshot", "restore", str(snap), "--data-dir", str(snap))

    assert code == 1 and body["error"]["code"] == "VALIDATION_ERROR", body
    assert "is the snapshot itself" in body["error"]["message"]
    assert tree_digest(snap) == before
    assert run("--encoder", "hashing", "snapshot", "restore", str(snap), "--data-dir", str(tmp_path / "d"))[0] == 0


def _index_format_1(folder: Path) -> str:
    """Mark the index manifest in ``folder`` as written in format 1; its new sha256."""
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    manifest["format_version"] = 1
    path.write_text(json.dumps(manifest), encoding="utf-8")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_an_index_this_version_cannot_serve_is_neither_snapshotted_nor_restored(
        snapshot: Path, target: Path, tmp_path: Path) -> None:
    """A snapshot of an index in another format was written and restored, and the new replica then refused
    every search (``index format 1 is not 2; run `skillsearch reindex```): a whole re-embedding, which is
    what a snapshot is for avoiding."""
    data = tmp_path / "old"
    assert run("--encoder", "hashing", "snapshot", "restore", str(snapshot), "--data-dir", str(data))[0] == 0
    _index_format_1(data)
    code, body = run("--encoder", "hashing", "--data-dir", str(data), "snapshot", "create", str(tmp_path / "s"))
    assert code == 1 and body["error"]["code"] == "INDEX_NOT_READY", body
    assert "format 1" in body["error"]["message"] and "skillsearch reindex" in body["error"]["message"]
    assert not (tmp_path / "s").exists()

    snap = copy_of(snapshot, tmp_path)
    digest = _index_format_1(snap)
    _edit(snap, lambda m: [f.update(size=(snap / "manifest.json").stat().st_size, sha256=digest)
                           for f in m["files"] if f["path"] == "manifest.json"])
    before = tree_digest(target)
    code, body = run("--encoder", "hashing", "snapshot", "restore", str(snap), "--data-dir", str(target))
    assert code == 4 and body["error"]["code"] == "SNAPSHOT_INVALID", body
    assert body["error"]["details"]["reason"] == "index_format", body
    assert tree_digest(target) == before


@pytest.mark.parametrize("wait", ["-1", "nan"])
def test_a_wait_that_is_not_a_number_of_seconds_is_a_usage_error(wait: str, snapshot: Path, tmp_path: Path) -> None:
    """``--wait nan`` never ended a wait for a writer's lock (every comparison with NaN is false)."""
    data = tmp_path / "data"
    assert run("--encoder", "hashing", "snapshot", "restore", str(snapshot), "--data-dir", str(data))[0] == 0
    code, body = run("--encoder", "hashing", "--data-dir", str(data), "snapshot", "create", str(tmp_path / "s"),
                     f"--wait={wait}")
    assert code == 2 and body["error"]["code"] == "VALIDATION_ERROR", body
    assert not (tmp_path / "s").exists()


def test_a_folder_of_the_snapshot_that_is_a_link_is_named_as_one(snapshot: Path, target: Path, tmp_path: Path) -> None:
    snap = copy_of(snapshot, tmp_path)
    (snap / "vectors").rename(tmp_path / "elsewhere")
    (snap / "vectors").symlink_to(tmp_path / "elsewhere")
    code, body = run("--encoder", "hashing", "snapshot", "restore", str(snap), "--data-dir", str(target))
    assert code == 4 and body["error"]["details"]["reason"] == "altered", body
    assert "vectors is a symbolic link" in body["error"]["message"], body


def test_a_restore_into_a_mount_point_is_refused_before_anything_is_copied_naming_the_way(
        snapshot: Path, tmp_path: Path) -> None:
    """A data directory that is a volume of its own (a Kubernetes volume, a disk mounted at /srv/skillsearch)
    cannot be swapped by a rename: the restore copied everything beside it, on the other disk, then failed
    on the swap (EBUSY), leaving lock files in it. It is refused first, naming a folder inside it to use.
    The volume is a tmpfs mounted in a mount namespace of the test's own (``unshare``: no privilege)."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode:
        pytest.skip("no unprivileged mount namespace here")
    volume = tmp_path / "volume"
    volume.mkdir()
    script = ('mount -t tmpfs tmpfs "$1" && "$2" -m skillsearch.cli -q --encoder hashing snapshot restore "$3"'
              ' --data-dir "$1" --json; echo "rc=$?"; ls -A "$1"; "$2" -m skillsearch.cli -q --encoder hashing'
              ' snapshot restore "$3" --data-dir "$1/data" > /dev/null && echo inside-ok')
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", str(volume), sys.executable, str(snapshot)],
                          capture_output=True, text=True, env=ENV, timeout=300)
    lines = done.stdout.strip().splitlines()
    body = json.loads(lines[0])
    assert body["error"]["code"] == "VALIDATION_ERROR" and body["error"]["details"]["reason"] == "mount_point", body
    assert f"say {volume / 'data'}" in body["error"]["message"]
    assert lines[1:] == ["rc=1", "inside-ok"], done  # the volume was left empty; a folder inside it restores
    assert sorted(p.name for p in tmp_path.iterdir()) == ["volume"]  # nothing staged beside it either


def test_a_snapshot_into_an_empty_mount_point_is_refused_before_anything_is_copied(
        snapshot: Path, tmp_path: Path) -> None:
    """``snapshot create`` takes "a new (or empty) folder": an empty volume (a backup disk's mount point) was
    taken, the snapshot written beside it on the other disk, and the final rename failed (EBUSY) with
    "free space on its disk"."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode:
        pytest.skip("no unprivileged mount namespace here")
    data, volume = tmp_path / "data", tmp_path / "volume"
    assert run("--encoder", "hashing", "snapshot", "restore", str(snapshot), "--data-dir", str(data))[0] == 0
    volume.mkdir()
    script = ('mount -t tmpfs tmpfs "$1" && "$2" -m skillsearch.cli -q --encoder hashing --data-dir "$3" snapshot'
              ' create "$1" --json; echo "rc=$?"; ls -A "$1"; "$2" -m skillsearch.cli -q --encoder hashing'
              ' --data-dir "$3" snapshot create "$1/snapshot" > /dev/null && echo inside-ok')
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", str(volume), sys.executable, str(data)],
                          capture_output=True, text=True, env=ENV, timeout=300)
    lines = done.stdout.strip().splitlines()
    body = json.loads(lines[0])
    assert body["error"]["code"] == "VALIDATION_ERROR" and body["error"]["details"]["reason"] == "mount_point", body
    assert lines[1:] == ["rc=1", "inside-ok"], done  # the volume was left empty; a folder inside it takes one
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "volume"]  # nothing left beside it


@pytest.mark.parametrize("member", ["snapshot.json", "a lexical file"])
def test_a_fifo_in_a_snapshot_is_refused_instead_of_waiting_for_a_writer_forever(
        member: str, snapshot: Path, target: Path, tmp_path: Path) -> None:
    """Opening a FIFO for reading waits for a writer: a restore of a snapshot holding one (in place of
    ``snapshot.json`` or of an index file) never ended, and a killed one left its staging folder."""
    snap = copy_of(snapshot, tmp_path)
    path = snap / "snapshot.json" if member == "snapshot.json" else sorted((snap / "lexical").iterdir())[0]
    path.unlink()
    os.mkfifo(path)
    before, siblings = tree_digest(target), sorted(target.parent.iterdir())
    done = subprocess.run(
        [sys.executable, "-m", "skillsearch.cli", "-q", "--encoder", "hashing", "snapshot", "restore", str(snap),
         "--data-dir", str(target), "--json"], capture_output=True, text=True, env=ENV, timeout=120)
    assert done.returncode == 4, done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "SNAPSHOT_INVALID" and "is not a regular file" in error["message"], error
    assert tree_digest(target) == before and sorted(target.parent.iterdir()) == siblings
