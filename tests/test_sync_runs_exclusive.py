"""Two ``skillsearch sync`` processes on one data directory at once (an operator's ``sync`` beside a server's
poller is the same case) end with exactly the upstream's skills.

They shared the full run's record of listed ids (``sync_listed``): the first run to finish cleared it, the
second then deleted every skill it had listed before that, and stored the last cursor, so later incremental
runs never brought them back (a live check lost 651 of 664 skills this way). Runs now take turns
(``sync/run_lock.py``).

The upstream is the reference platform over real HTTP; in front of it (at its process boundary) a gate holds
the first run's second page until the second run (started then) has stored two pages, or a few seconds
pass, so that the two runs overlap whenever both are allowed to fetch at once. The sync processes are real and use
the ``hashing`` encoder: what is under test is the store's bookkeeping across processes, not the model.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
from syncsupport import TOKEN, serve

from skillsearch.upstream.app import create_upstream_app
from skillsearch.upstream.platform import ReferenceUpstream

SUB = "shared"
REPO = Path(__file__).resolve().parents[1]
SKILLS = 40
GATE_S = 5.0  # longest the gate holds a page: with runs taking turns, the second client never comes


class OverlapGate:
    """ASGI middleware: the first request for a later page (``since=``: the first run's second page) waits
    until a request comes for a page after that one, which only the second run can make while the first
    is held, having stored its first two pages; or until ``hold_s`` passes (or ``passed`` is set). Then both
    runs hold pages stored before either one ends, whichever ends first: that is the overlap under test. Only
    while ``armed``."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.armed = True
        self.hold_s = GATE_S
        self.held_since: str | None = None
        self.holding = threading.Event()
        self.passed = threading.Event()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        import anyio

        if scope["type"] == "http" and scope["path"].endswith(f"/subscriptions/{SUB}/skills"):
            since = parse_qs(scope.get("query_string", b"").decode()).get("since", [None])[0]
            if self.armed and since is not None and self.held_since is None:
                self.held_since = since
                self.holding.set()
                await anyio.to_thread.run_sync(self.passed.wait, self.hold_s)
            elif self.armed and since is not None and since != self.held_since:
                self.passed.set()
        await self.app(scope, receive, send)


@pytest.fixture
def gated_upstream(tmp_path: Path) -> Iterator[tuple[str, ReferenceUpstream, OverlapGate]]:
    bundle = tmp_path / "bundle.json"
    bundle.write_text(json.dumps([
        {"slug": f"skill-{i:03d}", "name": f"Skill {i:03d}", "description": f"Handles task number {i}.",
         "instructions": f"Do {i}."} for i in range(SKILLS)]), encoding="utf-8")
    up = ReferenceUpstream([TOKEN])
    assert up.load(SUB, bundle) == []
    gate = OverlapGate(create_upstream_app(up))
    with serve(gate) as url:
        yield url, up, gate


def _sync(data_dir: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data_dir), "--encoder", "hashing", "-q",
         "sync", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
    )


def _stored(data_dir: Path) -> set[str]:
    with closing(sqlite3.connect(data_dir / "catalog.sqlite3")) as conn:
        return {r[0] for r in conn.execute("SELECT skill_id FROM skills WHERE source = ?", (f"upstream:{SUB}",))}


def _data_dir(tmp_path: Path, url: str) -> Path:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "sync.toml").write_text(
        f'[upstream]\nurl = "{url}"\ntoken = "{TOKEN}"\npage_limit = 4\nretries = 1\nbackoff_base_s = 0.01\n\n'
        f'[[subscriptions]]\nid = "{SUB}"\n', encoding="utf-8")
    return data_dir


def test_two_syncs_at_once_keep_every_upstream_skill(tmp_path: Path,
                                                     gated_upstream: tuple[str, ReferenceUpstream, OverlapGate]) -> None:
    url, up, gate = gated_upstream
    data_dir = _data_dir(tmp_path, url)

    first = _sync(data_dir)
    assert gate.holding.wait(120), "the first sync never asked for its second page"
    second = _sync(data_dir)
    outs = [p.communicate(timeout=180) for p in (first, second)]

    assert [first.returncode, second.returncode] == [0, 0], [o[1][-2000:] for o in outs]
    live = set(up.feed(SUB).live())
    assert len(live) == SKILLS
    assert _stored(data_dir) == live, f"lost {len(live - _stored(data_dir))} of {SKILLS} skills"
    # and the cursor left behind is sound: a later run changes nothing
    with _sync(data_dir) as again:
        out, err = again.communicate(timeout=120)
    report = json.loads(out)["subscriptions"][0]
    assert again.returncode == 0, err[-2000:]
    assert (report["created"], report["deleted"]) == (0, 0)
    assert _stored(data_dir) == live


def _synced_with_snapshot(tmp_path: Path, url: str, gate: OverlapGate) -> tuple[Path, list[str], dict[str, str]]:
    """A data directory synced once (the gate open), its snapshot at ``tmp_path/snap``; the CLI's command
    line and environment for more commands."""
    data_dir = _data_dir(tmp_path, url)
    gate.armed = False
    with _sync(data_dir) as first:
        assert first.wait(timeout=120) == 0
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    cli = [sys.executable, "-m", "skillsearch.cli", "--encoder", "hashing", "-q"]
    made = subprocess.run([*cli, "--data-dir", str(data_dir), "snapshot", "create", str(tmp_path / "snap"), "--json"],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    assert made.returncode == 0, made.stderr[-2000:]
    return data_dir, cli, env


def test_restore_refuses_a_data_directory_whose_sync_is_running(
        tmp_path: Path, gated_upstream: tuple[str, ReferenceUpstream, OverlapGate]) -> None:
    """Between two pages a ``skillsearch sync`` holds neither the write lock nor the in-use lock, so a restore
    swapped the folder under it: the rest of its run went into the deleted catalog, and its index writes into
    the restored folder. The restore now refuses (exit 4, ``in_use``, naming the sync) and leaves the folder
    as it was; the sync ends normally."""
    url, up, gate = gated_upstream
    data_dir, cli, env = _synced_with_snapshot(tmp_path, url, gate)
    up.expire_cursors(SUB)  # the next run is a full one: several pages
    gate.armed, gate.hold_s = True, 120.0  # held until the restore has answered

    running = _sync(data_dir)
    try:
        assert gate.holding.wait(120), "the sync never asked for its second page"
        restore = subprocess.run([*cli, "snapshot", "restore", str(tmp_path / "snap"), "--data-dir", str(data_dir),
                                  "--json"], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    finally:
        gate.passed.set()
        _out, err = running.communicate(timeout=180)
    assert restore.returncode == 4, restore.stdout[-200:] + restore.stderr[-2000:]
    error = json.loads(restore.stdout)["error"]
    assert error["details"]["reason"] == "in_use" and error["details"]["pids"] == [running.pid]
    assert running.returncode == 0, err[-2000:]
    assert _stored(data_dir) == set(up.feed(SUB).live())


def _has_open(pid: int, path: Path) -> bool:
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == str(path) for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


def test_restore_refuses_a_data_directory_that_a_waiting_sync_has_opened(
        tmp_path: Path, gated_upstream: tuple[str, ReferenceUpstream, OverlapGate]) -> None:
    """A ``skillsearch sync`` opens its catalog, then waits for ``sync.lock`` while another run holds it. A
    restore that came then found no process in the folder (the waiting sync held no lock), took
    ``sync.lock`` through its swap, and the sync, let go, ran into the old, deleted catalog. Every command
    that writes a data directory now marks it in use before it opens anything: the restore refuses
    (exit 4, ``in_use``) naming the waiting sync, which then runs normally."""
    import fcntl

    url, up, gate = gated_upstream
    data_dir, cli, env = _synced_with_snapshot(tmp_path, url, gate)

    other_run = os.open(data_dir / "sync.lock", os.O_RDWR | os.O_CLOEXEC)  # another run of this folder, in hand
    fcntl.flock(other_run, fcntl.LOCK_EX)
    waiting = _sync(data_dir)
    try:
        catalog_file = (data_dir / "catalog.sqlite3").resolve()
        for _ in range(1200):
            if _has_open(waiting.pid, catalog_file) or waiting.poll() is not None:
                break
            threading.Event().wait(0.1)
        assert _has_open(waiting.pid, catalog_file), "the sync never opened its catalog"
        restore = subprocess.run([*cli, "snapshot", "restore", str(tmp_path / "snap"), "--data-dir", str(data_dir),
                                  "--json"], capture_output=True, text=True, env=env, cwd=REPO, timeout=120)
    finally:
        fcntl.flock(other_run, fcntl.LOCK_UN)
        os.close(other_run)
        _out, err = waiting.communicate(timeout=180)
    assert restore.returncode == 4, restore.stdout[-200:] + restore.stderr[-2000:]
    error = json.loads(restore.stdout)["error"]
    assert error["details"]["reason"] == "in_use" and error["details"]["pids"] == [waiting.pid], error
    assert waiting.returncode == 0, err[-2000:]
    assert _stored(data_dir) == set(up.feed(SUB).live())
