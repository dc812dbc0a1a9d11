"""A data directory on a disk that is really full: a small tmpfs mounted in a mount namespace of the test's own
(``unshare -rm``: no privilege), filled to the last page.

Reads (``list``, ``get``, ``search``) need no write, so they answer: the catalog is opened read-only as one
this user cannot write is, and a commit still in its ``-wal`` is read, or the read fails with one typed line,
never silently left out. A write is one typed line and keeps nothing; once space is freed the next one works.
The bundled sample is seeded whole or not at all: a first run on a disk that fills part-way leaves the catalog
empty, and the next run, with room, seeds all of it (a partly seeded catalog was never seeded again).

Real processes, real files, a real full disk (ENOSPC), the hashing encoder.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fleetsupport import REPO, env
from test_read_only_catalog import _bundle

pytestmark = pytest.mark.skipif(
    shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode != 0,
    reason="no unprivileged mount namespace here")

# Runs inside the namespace, the tmpfs mounted at argv[1]: the steps of argv[2], one JSON result each.
DRIVER = r"""
import json, shutil, sqlite3, subprocess, sys
from pathlib import Path

vol, plan = Path(sys.argv[1]), json.loads(sys.argv[2])
data, results = vol / "data", []
for step, *args in plan:
    if step == "copy":  # a data directory, its -wal and -shm as they are, less the files named
        shutil.rmtree(data, ignore_errors=True)
        shutil.copytree(args[0], data)
        for name in args[1:]:
            (data / name).unlink()
        results.append(sorted(p.name for p in data.iterdir()))
    elif step == "fill":  # to the last page
        with open(vol / "fill", "wb", buffering=0) as f:
            try:
                while True:
                    f.write(bytes(4096))
            except OSError as exc:
                results.append(exc.strerror)
    elif step == "free":
        (vol / "fill").unlink()
        results.append("freed")
    elif step == "grow":
        results.append(subprocess.run(["mount", "-o", "remount,size=16m", str(vol)]).returncode)
    elif step == "count":  # the skills the catalog holds (its WAL's commits included)
        conn = sqlite3.connect(f"file:{data / 'catalog.sqlite3'}?mode=ro", uri=True)
        results.append(conn.execute("SELECT count(*) FROM skills").fetchone()[0])
        conn.close()
    else:  # the CLI
        done = subprocess.run([sys.executable, "-m", "skillsearch.cli", "-q", "--encoder", "hashing", "--data-dir",
                               str(data), step, *args], capture_output=True, text=True, timeout=240)
        results.append({"rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr})
print(json.dumps(results))
"""


def _on_a_small_disk(tmp_path: Path, size: str, plan: list[list[str]]) -> list[Any]:
    volume = tmp_path / "volume"
    volume.mkdir()
    done = subprocess.run(["unshare", "-rm", "sh", "-c", f'mount -t tmpfs -o size={size} tmpfs "$1" && exec "$2" -c "$3"'
                           ' "$1" "$4"', "sh", str(volume), sys.executable, DRIVER, json.dumps(plan)],
                          capture_output=True, text=True, env={**env(), "TMPDIR": str(tmp_path)}, cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr
    results: list[Any] = json.loads(done.stdout)
    return results


def _cli(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "skillsearch.cli", "-q", "--encoder", "hashing", "--data-dir", str(data),
                           *args], capture_output=True, text=True, env=env(), cwd=REPO, timeout=240)


def _names(result: dict[str, Any]) -> list[str]:
    assert result["rc"] == 0, result
    return sorted(item["name"] for item in json.loads(result["stdout"])["items"])


def _one_error_line(result: dict[str, Any], code: str) -> str:
    lines = [line for line in result["stderr"].splitlines() if line.strip()]
    assert result["rc"] == 1 and len(lines) == 1 and lines[0].startswith(f"error: {code}: "), result
    return lines[0]


# A writer killed right after its commit: the commit is in the -wal (not yet checkpointed), with its -shm.
KILLED_WRITER = """
import os, sys
from pathlib import Path
from skillsearch.catalog.importer import parse_path
from skillsearch.catalog.imports import store_import
from skillsearch.catalog.store import CatalogStore
store = CatalogStore.in_dir(Path(sys.argv[1]))
store_import(store, parse_path(Path(sys.argv[2]), "late", "team:x"), "late", "team:x")
os._exit(0)
"""


def test_list_get_and_search_answer_on_a_full_disk_and_a_write_is_one_typed_line(tmp_path: Path) -> None:
    """SQLite's WAL mode makes its ``-wal`` and ``-shm`` at the first open: on a full disk every read failed
    with "catalog cannot be opened (disk I/O error)"."""
    data = tmp_path / "data"
    done = _cli(data, "import", str(_bundle(tmp_path / "b.json", "owned", 3)), "--source", "t", "--grant", "team:x")
    assert done.returncode == 0, done.stderr
    assert not (data / "catalog.sqlite3-wal").exists()  # closed: every commit is in the file
    listed = json.loads(_cli(data, "list", "--json").stdout)["items"]
    more = str(_bundle(tmp_path / "more.json", "more", 1))
    copied, filled, full_list, full_get, full_search, full_import, after_write, freed, free_import, free_list = \
        _on_a_small_disk(tmp_path, "16m", [
            ["copy", str(data)], ["fill"], ["list", "--json"], ["get", listed[0]["skill_id"], "--json"],
            ["search", "rotate the owned credentials", "--json", "--limit", "3"],
            ["import", more, "--source", "m", "--grant", "team:x"], ["list", "--json"],
            ["free"], ["import", more, "--source", "m", "--grant", "team:x"], ["list", "--json"],
        ])
    assert "catalog.sqlite3-wal" not in copied and filled == "No space left on device"
    assert _names(full_list) == ["owned-0", "owned-1", "owned-2"]
    assert full_get["rc"] == 0 and json.loads(full_get["stdout"])["name"] == listed[0]["name"], full_get
    assert full_search["rc"] == 0, full_search
    assert {h["name"] for h in json.loads(full_search["stdout"])["hits"]} == {"owned-0", "owned-1", "owned-2"}
    # A write is one typed line, as before, and keeps nothing of its change.
    assert "free space, then run it again" in _one_error_line(full_import, "INDEX_NOT_READY")
    assert _names(after_write) == ["owned-0", "owned-1", "owned-2"]
    # Space freed: the files the refused opens left behind are no obstacle to the next write.
    assert freed == "freed" and free_import["rc"] == 0, free_import
    assert _names(free_list) == ["more-0", "owned-0", "owned-1", "owned-2"]


def test_a_read_on_a_full_disk_never_leaves_out_a_commit_still_in_the_wal(tmp_path: Path) -> None:
    """A commit in the ``-wal`` is read through the writer's ``-shm``; without one (SQLite cannot make it on a
    full disk) the read is one typed line: reading the file alone would list the catalog without that commit."""
    data = tmp_path / "data"
    done = _cli(data, "import", str(_bundle(tmp_path / "b.json", "owned", 2)), "--source", "t", "--grant", "team:x")
    assert done.returncode == 0, done.stderr
    subprocess.run([sys.executable, "-c", KILLED_WRITER, str(data), str(_bundle(tmp_path / "late.json", "late", 1))],
                   check=True, env=env(), cwd=REPO, timeout=120)
    assert (data / "catalog.sqlite3-wal").stat().st_size > 0 and (data / "catalog.sqlite3-shm").exists()
    results = _on_a_small_disk(tmp_path, "16m", [
        ["copy", str(data)], ["fill"], ["list", "--json"],
        ["free"], ["copy", str(data), "catalog.sqlite3-shm"], ["fill"], ["list", "--json"], ["free"], ["count"],
    ])
    assert _names(results[2]) == ["late-0", "owned-0", "owned-1"]
    without_shm, counted = results[6], results[8]
    assert "catalog.sqlite3-shm" not in results[4]
    if without_shm["rc"] == 0:
        assert _names(without_shm) == ["late-0", "owned-0", "owned-1"]
    else:
        body = json.loads(without_shm["stdout"])["error"]
        assert body["code"] == "INDEX_NOT_READY" and "full" in body["message"], without_shm
    assert counted == 3  # space freed: the WAL's commit is still there


def test_the_sample_is_seeded_whole_or_not_at_all_on_a_disk_that_fills_part_way(tmp_path: Path) -> None:
    """The sample was seeded one source per transaction: a disk that filled part-way kept 15, 18 or 28 of its
    45 skills, and a catalog that is not empty is never seeded again."""
    sample = _cli(tmp_path / "roomy", "list", "--json")
    total = len(json.loads(sample.stdout)["items"])
    assert sample.returncode == 0 and total == 45, sample.stderr
    first, counted, grown, second, counted_after = _on_a_small_disk(tmp_path, "512k", [
        ["list", "--json"], ["count"], ["grow"], ["list", "--json"], ["count"],
    ])
    # The disk filled during the seeding: one typed line, and nothing of the sample kept.
    assert first["rc"] == 1, first
    body = json.loads(first["stdout"])["error"]
    assert body["code"] == "INDEX_NOT_READY" and "disk is full" in body["message"], first
    assert counted == 0
    # With room, the next run seeds all of it.
    assert grown == 0 and second["rc"] == 0, second
    assert len(json.loads(second["stdout"])["items"]) == total == counted_after

