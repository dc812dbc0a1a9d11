"""SIGTERM during ``skillsearch sources sync`` while it reads a source: the git run in progress is ended
(SIGTERM to its process group, then SIGKILL after a bound) and a large folder's read stops between skills;
the process exits 143 with nothing of the source applied, and the next sync completes. Real processes, a real
git upstream (``file://``) whose pack generation blocks, through git's own ``uploadpack.packObjectsHook``."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing, suppress
from pathlib import Path

import pytest
from test_sources import commit, init_repo, write_skill

from skillsearch.catalog.store import CatalogStore

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
WAIT_S = 180.0  # generous: the machine is shared; no test asserts a duration
TAIL = "Quokka telemetry for zanzibar lighthouses"


def _cli(data_dir: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data_dir), "--encoder", "hashing", *args]


def _run(data_dir: Path, *args: str, env: dict[str, str] = ENV) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_cli(data_dir, *args), capture_output=True, text=True, env=env, cwd=REPO, timeout=WAIT_S)


def _slugs(data_dir: Path, source: str) -> set[str]:
    with closing(sqlite3.connect(data_dir / CatalogStore.FILENAME)) as conn:
        return {row[0] for row in conn.execute("SELECT slug FROM skills WHERE source = ?", (source,))}


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        assert proc.poll() is None, f"the sync ended first: {proc.communicate()}"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_sigterm_ends_a_git_fetch_and_the_next_sync_completes(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "upstream")
    write_skill(repo, "lighthouse-quokka", f"{TAIL}: reads the beacons.")
    commit(repo, "first skill")
    data_dir = tmp_path / "data"
    added = _run(data_dir, "sources", "add", "beacons", "--git", f"file://{repo}", "--grant", "team:ops")
    assert added.returncode == 0, added.stderr
    # The upstream's pack generation, run by its upload-pack (git's hook, from the protected config that a
    # server's operator would set): it says it was asked, then never answers.
    asked = tmp_path / "asked"
    hook = tmp_path / "slow-pack-objects"
    hook.write_text(f"#!/bin/sh\necho $$ > {asked}.tmp && mv {asked}.tmp {asked}\nexec sleep 600\n", encoding="utf-8")
    hook.chmod(0o755)
    slow = tmp_path / "slow.gitconfig"
    slow.write_text(f"[uploadpack]\n\tpackObjectsHook = {hook}\n", encoding="utf-8")

    proc = subprocess.Popen(_cli(data_dir, "sources", "sync"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env={**ENV, "GIT_CONFIG_GLOBAL": str(slow)}, cwd=REPO)
    try:
        _wait_for(asked, proc)  # git fetch is waiting on its upstream
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=WAIT_S)  # without the stop: git's 120 s limit, then exit 1
    finally:
        proc.kill()
        if asked.exists():
            with suppress(ProcessLookupError, ValueError):
                os.kill(int(asked.read_text()), signal.SIGKILL)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "terminated: stopped git fetch" in err and "Traceback" not in err, err
    cache = data_dir / "sources" / "beacons.git"
    assert not list(cache.rglob("*.lock")), list(cache.rglob("*.lock"))  # git ended on SIGTERM, its locks removed
    assert _slugs(data_dir, "beacons") == set()  # nothing of the source applied

    empty = tmp_path / "empty.gitconfig"
    empty.write_text("", encoding="utf-8")
    again = _run(data_dir, "sources", "sync", env={**ENV, "GIT_CONFIG_GLOBAL": str(empty)})
    assert again.returncode == 0, again.stderr
    assert _slugs(data_dir, "beacons") == {"lighthouse-quokka"}


FOLDERS = 3000  # read at about a thousand a second here: many skills are left after the first


@pytest.mark.parametrize("command", ["sources sync", "import"])
def test_sigterm_stops_reading_a_large_folder_and_the_next_run_completes(tmp_path: Path, command: str) -> None:
    """A folder source's read (``sources sync``) and ``import``'s read of a folder stop between skills at
    SIGTERM: exit 143, nothing stored, and the next run reads it whole (``import`` read the whole folder first,
    then stopped in the embedding)."""
    source = tmp_path / "skills"
    for i in range(FOLDERS):
        write_skill(source, f"chore-{i:05d}", f"Handles chore number {i} of the depot.", "Count the crates. " * 8)
    data_dir = tmp_path / "data"
    if command == "import":
        argv: tuple[str, ...] = ("import", str(source), "--source", "chores", "--grant", "team:ops")
    else:
        argv = ("sources", "sync")
        added = _run(data_dir, "sources", "add", "chores", "--path", str(source), "--grant", "team:ops")
        assert added.returncode == 0, added.stderr

    proc = subprocess.Popen(_cli(data_dir, *argv), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=ENV, cwd=REPO)
    try:
        assert proc.stderr is not None
        seen = ""
        while "reading" not in seen:  # its progress bar: the read of the skills has begun
            char = proc.stderr.read(1)
            assert char, f"{command} ended before it read: {seen!r}"
            seen += char
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=WAIT_S)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, seen + err
    assert "terminated: stopped reading" in err and "Traceback" not in err, seen + err
    assert not (data_dir / CatalogStore.FILENAME).exists() or _slugs(data_dir, "chores") == set()  # nothing stored

    again = _run(data_dir, *argv)
    assert again.returncode == 0, again.stderr
    assert len(_slugs(data_dir, "chores")) == FOLDERS
