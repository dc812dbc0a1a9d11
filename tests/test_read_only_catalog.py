"""The read-only commands (``list``, ``get``) on a catalog folder this user cannot write: a snapshot restored
read-only, another user's catalog it may read. SQLite cannot make the ``-shm`` it needs beside a WAL-mode file
there, so the store opens such a catalog read-only (``mode=ro`` beside a writer's ``-wal``, ``immutable=1``
without one) and writes nothing. ``search`` still needs a writable folder (Tantivy takes a lock file to open
its index): one line naming the cause.

Real processes and real files; under root (CI here runs as root) the reading child runs as ``nobody`` through
``setpriv``, since root may write any file; otherwise the folder and its files are made read-only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fleetsupport import REPO, env

NOBODY = 65534
ROOT = os.geteuid() == 0
UNPRIVILEGED = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] if ROOT else []

# A writer that keeps the catalog open with one more skill committed to its WAL (not yet checkpointed into the
# file), until its stdin closes: another user's server, as a reader sees it.
WRITER = """
import sys
from pathlib import Path
from skillsearch.catalog.importer import parse_path
from skillsearch.catalog.imports import store_import
from skillsearch.catalog.store import CatalogStore
store = CatalogStore.in_dir(Path(sys.argv[1]))
store_import(store, parse_path(Path(sys.argv[2]), "late", "team:x"), "late", "team:x")
print("committed", flush=True)
sys.stdin.read()
store.close()
"""


def _run(data: Path, *args: str, prefix: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*(prefix or []), sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data), "--encoder", "hashing",
         "-q", *args], capture_output=True, text=True, env={**env(), "HOME": str(data.parent)}, cwd=REPO, timeout=240)


def _bundle(path: Path, prefix: str, n: int) -> Path:
    path.write_text(json.dumps([
        {"slug": f"{prefix}-{i}", "name": f"{prefix}-{i}", "description": f"The {prefix} skill number {i}.",
         "kind": "knowledge", "instructions": f"Rotate the {prefix} credentials, step {i}."} for i in range(n)
    ]), encoding="utf-8")
    return path


def _listed(data: Path) -> list[str]:
    done = _run(data, "list", "--json", prefix=UNPRIVILEGED)
    assert done.returncode == 0, done.stderr
    return sorted(item["name"] for item in json.loads(done.stdout)["items"])


@pytest.fixture()
def read_only() -> Iterator[Path]:
    """A catalog of three skills (and its index) in a folder the reading child cannot write."""
    base = Path(tempfile.mkdtemp(prefix="readonly-"))  # outside pytest's root-only folder
    data = base / "data"
    try:
        done = _run(data, "import", str(_bundle(base / "b.json", "owned", 3)), "--source", "t", "--grant", "team:x")
        assert done.returncode == 0, done.stderr
        assert not (data / "catalog.sqlite3-wal").exists()  # closed: every commit is in the file
        base.chmod(0o755)
        if not ROOT:
            for path in [data, *data.rglob("*")]:
                path.chmod(0o555 if path.is_dir() else 0o444)
        yield data
    finally:
        for path in [data, *data.rglob("*")] if data.exists() else []:
            path.chmod(0o755 if path.is_dir() else 0o644)
        shutil.rmtree(base, ignore_errors=True)


def test_list_and_get_read_a_catalog_folder_this_user_cannot_write(read_only: Path) -> None:
    data = read_only
    before = {p.name: p.stat().st_mtime_ns for p in data.iterdir()}
    assert _listed(data) == ["owned-0", "owned-1", "owned-2"]
    listed = json.loads(_run(data, "list", "--json", prefix=UNPRIVILEGED).stdout)["items"]
    got = _run(data, "get", listed[0]["skill_id"], "--json", prefix=UNPRIVILEGED)
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["name"] == listed[0]["name"]
    # Nothing was written: no -wal or -shm made, no file touched.
    assert {p.name: p.stat().st_mtime_ns for p in data.iterdir()} == before
    # A search still needs the folder writable: one line naming the cause, no traceback.
    found = _run(data, "search", "credentials", prefix=UNPRIVILEGED)
    assert found.returncode != 0
    lines = [line for line in found.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: INDEX_NOT_READY:") and "writ" in lines[0], found.stderr


@pytest.mark.skipif(not ROOT, reason="needs a writer of another user than the reader (root, and nobody)")
def test_a_read_only_list_sees_a_commit_still_in_another_users_wal(read_only: Path) -> None:
    """The folder's owner keeps the catalog open with a commit in its WAL: the reader (``mode=ro`` through the
    owner's ``-shm``) sees it; an ``immutable`` read of the file alone would not."""
    data = read_only
    bundle = _bundle(data.parent / "late.json", "late", 1)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(data), str(bundle)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env(), cwd=REPO)
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "committed"
        assert (data / "catalog.sqlite3-wal").stat().st_size > 0
        assert _listed(data) == ["late-0", "owned-0", "owned-1", "owned-2"]
    finally:
        assert writer.stdin is not None and writer.stdout is not None
        writer.stdin.close()
        writer.wait(60)
        writer.stdout.close()
