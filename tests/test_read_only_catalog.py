"""The reading commands (``list``, ``get``, ``search``) on a catalog folder this user cannot write: a snapshot
restored read-only, another user's catalog it may read. SQLite cannot make the ``-shm`` it needs beside a
WAL-mode file there, so the store opens such a catalog read-only (``mode=ro`` beside a writer's ``-wal``,
``immutable=1`` without one) and writes nothing; a search opens the index as it is (Tantivy through a private
folder of links, where it can take its lock file) and writes nothing either, and an index that would need a
repair (behind its catalog) is one line saying who can bring it up.

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
from typing import Any

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


def _run(data: Path, *args: str, prefix: list[str] | None = None,
         extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*(prefix or []), sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data), "--encoder", "hashing",
         "-q", *args], capture_output=True, text=True, env={**env(), "HOME": str(data.parent), **(extra or {})},
        cwd=REPO, timeout=240)


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
    # The status reads too: where the catalog's sources stand, read as it is.
    status = _run(data, "sources", "list", "--json", prefix=UNPRIVILEGED)
    assert status.returncode == 0 and json.loads(status.stdout) == {"sources": []}, status.stderr
    # Nothing was written: no -wal or -shm made, no file touched.
    assert {p.name: p.stat().st_mtime_ns for p in data.iterdir()} == before


def _files(data: Path) -> dict[str, int]:
    return {str(p.relative_to(data)): p.stat().st_mtime_ns for p in data.rglob("*")}


def _search(data: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """A search by the reading user, with a temporary folder of its own (where the lexical side's links go)."""
    tmp = data.parent / "reader-tmp"
    tmp.mkdir(exist_ok=True)
    if ROOT:
        os.chown(tmp, NOBODY, NOBODY)
    return _run(data, "search", *args, prefix=UNPRIVILEGED, extra={"TMPDIR": str(tmp), **extra})


@pytest.mark.parametrize("mode", ["hybrid", "lexical"])
def test_a_search_reads_a_catalog_folder_this_user_cannot_write(read_only: Path, mode: str) -> None:
    data = read_only
    before = _files(data)
    found = _search(data, "rotate the owned credentials", "--mode", mode, "--json", "--limit", "3")
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)["hits"]
    assert len(hits) == 3 and {h["name"] for h in hits} == {"owned-0", "owned-1", "owned-2"}
    # Nothing written in the folder, and the links Tantivy opened the index through are gone.
    assert _files(data) == before
    assert list((data.parent / "reader-tmp").iterdir()) == []


def test_a_search_of_an_index_behind_its_read_only_catalog_says_who_can_bring_it_up(read_only: Path) -> None:
    """The owner changed the catalog and no index write followed (a writer killed in between): a reader who
    cannot write the folder may not repair it, and searches nothing rather than an index that misses it."""
    data = read_only
    writer = [sys.executable, "-c", "import sys; from pathlib import Path;"
              " from skillsearch.catalog.store import CatalogStore;"
              " s = CatalogStore.in_dir(Path(sys.argv[1])); s.archive(s.skills_by_slug('owned-1')[0].skill_id);"
              " s.close()", str(data)]
    if not ROOT:
        data.chmod(0o755)
        (data / "catalog.sqlite3").chmod(0o644)
    subprocess.run(writer, check=True, env=env(), cwd=REPO, timeout=60)
    if not ROOT:
        (data / "catalog.sqlite3").chmod(0o444)
        data.chmod(0o555)
    found = _search(data, "credentials")
    assert found.returncode == 1
    lines = [line for line in found.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: INDEX_NOT_READY:"), found.stderr
    assert "is behind its catalog" in lines[0] and "as a user who may write the folder" in lines[0]


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



# The folder's owner keeps its catalog open (a server, as a reader sees it: SQLite's -wal stays there, so the
# reader opens mode=ro and sees new commits) and imports a skill when told.
OWNER = """
import sys
from pathlib import Path
from skillsearch.core.settings import Settings
from skillsearch.retrieval.hashing_encoder import HashingEncoder
from skillsearch.service import Catalog
catalog = Catalog.open(Settings(data_dir=Path(sys.argv[1]), seed_sample=False), encoder=HashingEncoder())
print("open", flush=True)
sys.stdin.readline()
assert catalog.import_path(Path(sys.argv[2]), "late", "team:x").created
print("imported", flush=True)
sys.stdin.read()
catalog.close()
"""

# A reader that keeps the catalog open (a library caller, a long-lived process of the reading user): it searches,
# waits, and searches again.
READER = """
import sys
from pathlib import Path
from skillsearch.core.domain import Principal
from skillsearch.core.settings import Settings
from skillsearch.retrieval.hashing_encoder import HashingEncoder
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.service import Catalog
catalog = Catalog.open(Settings(data_dir=Path(sys.argv[1]), seed_sample=False), encoder=HashingEncoder(),
                       reads_only=True)
assert catalog.store.read_only
for _ in range(2):
    result = catalog.search(Principal.operator(), SearchRequest("rotate the credentials", mode="lexical", limit=10))
    print(",".join(sorted(h.skill.name for h in result.hits)), flush=True)
    sys.stdin.readline()
catalog.close()
"""


def _child(script: str, *args: str, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([*kw.pop("prefix", []), sys.executable, "-c", script, *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=REPO, **kw)


@pytest.mark.skipif(not ROOT, reason="needs a writer of another user than the reader (root, and nobody)")
def test_a_reader_that_stays_open_searches_the_owners_next_write(read_only: Path) -> None:
    """The owner's server writes while another user's process keeps the catalog open read-only: the reader's
    next search opens the owner's new write as it is (the index is never repaired by the reader)."""
    data = read_only
    tmp = data.parent / "reader-tmp"
    tmp.mkdir()
    os.chown(tmp, NOBODY, NOBODY)
    owner = _child(OWNER, str(data), str(_bundle(data.parent / "late.json", "late", 1)), env=env())
    reader = None
    try:
        assert owner.stdin is not None and owner.stdout is not None
        assert owner.stdout.readline().strip() == "open"
        reader = _child(READER, str(data), prefix=UNPRIVILEGED, env={**env(), "TMPDIR": str(tmp)})
        assert reader.stdin is not None and reader.stdout is not None
        assert reader.stdout.readline().strip() == "owned-0,owned-1,owned-2"
        owner.stdin.write("\n")
        owner.stdin.flush()
        assert owner.stdout.readline().strip() == "imported"
        reader.stdin.write("\n")
        reader.stdin.flush()
        assert reader.stdout.readline().strip() == "late-0,owned-0,owned-1,owned-2"
        reader.stdin.close()
        assert reader.wait(60) == 0
    finally:
        for child in (reader, owner):
            if child is not None:
                if child.stdin is not None and not child.stdin.closed:
                    child.stdin.close()
                if child.wait(60) is None:
                    child.kill()
                assert child.stdout is not None
                child.stdout.close()
    assert list(tmp.iterdir()) == []  # the links of both opens are gone


# The folder's owner writing its index: holds the write lock until its stdin closes.
HOLDER = """
import sys
from pathlib import Path
from skillsearch.retrieval.writelock import WriteLock
with WriteLock(Path(sys.argv[1])).hold():
    print("held", flush=True)
    sys.stdin.read()
"""


def test_a_read_only_search_waits_for_a_writer_at_work_and_says_so_past_its_bound(read_only: Path) -> None:
    """The reader takes a shared lock on ``write.lock`` (opened read-only) so no writer changes the files it
    reads; while the owner's writer holds it past the search's bound, the search says who is writing."""
    data = read_only
    holder = _child(HOLDER, str(data), env=env())
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        done = _search(data, "credentials", SKILLSEARCH_MODEL_WAIT_S="1")
        assert done.returncode == 1
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith(f"error: INDEX_NOT_READY: process {holder.pid} has been"
                                                       f" writing to the index in {data} for over 1s"), done.stderr
    finally:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.close()
        holder.wait(60)
        holder.stdout.close()
    found = _search(data, "credentials", "--json")
    assert found.returncode == 0 and len(json.loads(found.stdout)["hits"]) == 3, found.stderr
