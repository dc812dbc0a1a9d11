"""The reading commands (``search``, ``list``, ``get``, ``resolve``) write a data directory they may write: the
first one on an empty catalog seeds it with the bundled sample, a ``search`` builds or repairs its index. They
opened it without the in-use lock, so a ``snapshot restore`` swapped the folder under one: the seeding went
into the deleted catalog, and the search's index build into the restored folder, an index of another catalog
than the one beside it. They now mark the directory in use before they open it (``cli/common.open_catalog``),
as the writing commands do; on a catalog they may not write they still read it as it is
(``test_read_only_catalog.py``), marking nothing.

Real processes, real SQLite and Tantivy, the hashing encoder (what is under test is the processes and the
locks, not the model). The reader is held in the window by SQLite's own write lock, taken by this test on the
empty catalog: the reader has opened the file and waits to seed it while the restore comes.
"""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
import threading
from contextlib import closing
from pathlib import Path

import pytest
from fleetsupport import REPO, env

from skillsearch.catalog.store import CatalogStore
from skillsearch.cli.main import main
from skillsearch.core.settings import Settings
from skillsearch.retrieval.hashing_encoder import HashingEncoder
from skillsearch.service import Catalog


def _bundle(path: Path, n: int) -> Path:
    path.write_text(json.dumps([
        {"slug": f"restored-{i}", "name": f"Restored {i}", "description": f"The restored skill number {i}.",
         "kind": "knowledge", "instructions": f"Step {i}."} for i in range(n)]), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def other_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A snapshot of another catalog than the sample (three skills of its own), indexed with the hashing encoder."""
    root = tmp_path_factory.mktemp("other")
    settings = Settings(data_dir=root / "data", encoder="hashing")
    catalog = Catalog.open(settings, encoder=HashingEncoder(), seed=False)
    try:
        catalog.import_path(_bundle(root / "b.json", 3), "own", "team:x")
    finally:
        catalog.close()
    Catalog.create_snapshot(settings, root / "snap")
    return root / "snap"


@pytest.fixture(scope="module")
def sample_skills(tmp_path_factory: pytest.TempPathFactory) -> int:
    """How many skills the bundled sample seeds an empty catalog with."""
    catalog = Catalog.open(Settings(data_dir=tmp_path_factory.mktemp("sample") / "data", encoder="hashing"),
                           encoder=HashingEncoder(), index=False)
    try:
        assert catalog.seeded > 0
        return catalog.seeded
    finally:
        catalog.close()


def _cli(data: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data), "--encoder", "hashing", "-q", *args]


def _has_open(pid: int, path: Path) -> bool:
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == str(path) for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


@pytest.mark.parametrize("command", [["search", "rotate credentials", "--mode", "lexical"], ["list"]])
def test_restore_refuses_a_data_directory_that_a_read_is_seeding(
        tmp_path: Path, other_snapshot: Path, sample_skills: int, command: list[str]) -> None:
    """A read opens an empty catalog and waits (for SQLite's write lock, held here) to seed it; a restore
    then refuses the folder (exit 4, ``in_use``, naming the reader), and the reader seeds it whole: the
    sample in the catalog, and (``search``) the index of that very catalog beside it."""
    data = tmp_path / "data"
    CatalogStore.in_dir(data).close()  # an empty catalog: the first read seeds it
    catalog_file = (data / "catalog.sqlite3").resolve()
    with closing(sqlite3.connect(catalog_file, isolation_level=None)) as writer:
        writer.execute("BEGIN IMMEDIATE")  # another writer of the catalog at work: the reader's seeding waits
        reader = subprocess.Popen(_cli(data, *command, "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=env(), cwd=REPO)
        try:
            for _ in range(1200):
                if _has_open(reader.pid, catalog_file) or reader.poll() is not None:
                    break
                threading.Event().wait(0.05)
            assert _has_open(reader.pid, catalog_file), "the reader never opened its catalog"
            restore = subprocess.run(_cli(data, "snapshot", "restore", str(other_snapshot), "--json"),
                                     capture_output=True, text=True, env=env(), cwd=REPO, timeout=120)
        finally:
            writer.execute("ROLLBACK")
        _out, err = reader.communicate(timeout=180)
    assert restore.returncode == 4, restore.stdout[-300:] + restore.stderr[-2000:]
    error = json.loads(restore.stdout)["error"]
    assert error["details"]["reason"] == "in_use" and error["details"]["pids"] == [reader.pid], error
    assert reader.returncode == 0, err[-2000:]
    with closing(CatalogStore.in_dir(data)) as store:
        assert store.count() == sample_skills and not store.skills_by_slug("restored-0")
        if command[0] == "search":
            manifest = json.loads((data / "manifest.json").read_text(encoding="utf-8"))
            assert manifest["store_generation"] == store.generation()


def _open_files(path: Path) -> int:
    return sum(1 for fd in os.listdir("/proc/self/fd") if os.path.realpath(f"/proc/self/fd/{fd}") == str(path))


def test_a_command_run_in_this_process_lets_go_of_the_directory_when_it_returns(
        tmp_path: Path, other_snapshot: Path) -> None:
    """``main(argv)`` in a process that goes on (a test, a tool): the in-use marks its command took are let go
    when it returns. Held for the process's life they kept a file open per data directory, and the same
    process's restore of that directory was refused, in use by "another process" (its own lock)."""
    data = tmp_path / "data"
    for argv in (["import", str(_bundle(tmp_path / "b.json", 2)), "--source", "mine", "--grant", "team:y"],
                 ["search", "restored", "--mode", "lexical"], ["list"]):
        out = io.StringIO()
        assert main(["--data-dir", str(data), "--encoder", "hashing", "-q", *argv, "--json"], out=out) == 0, out.getvalue()
        assert _open_files((data / "in-use.lock").resolve()) == 0, argv
    out = io.StringIO()
    code = main(["--encoder", "hashing", "snapshot", "restore", str(other_snapshot), "--data-dir", str(data), "--json"],
                out=out)
    assert code == 0, out.getvalue()
    with closing(CatalogStore.in_dir(data)) as store:
        assert store.skills_by_slug("restored-0") and store.count() == 3
