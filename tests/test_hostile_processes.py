"""Several processes on one data directory: ``skillsearch serve`` answering while CLI imports and
``reindex`` runs write beside it, and a writer killed with ``kill -9``.

Real processes, real HTTP on 127.0.0.1, real files (the hashing encoder keeps 25 processes quick; what
is tested is the locking and the following of snapshots, not the model). Each test states its promise.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from hostile_support import cli
from syncsupport import index_matches_store

from skillsearch.core.domain import Principal
from skillsearch.core.settings import Settings
from skillsearch.http.auth import add_principal
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.service import Catalog


def _bundle(folder: Path, n: int, skills: int = 3) -> Path:
    path = folder / f"bundle-{n}.json"
    path.write_text(json.dumps([
        {"slug": f"batch{n}-skill{i}", "name": f"batch{n} skill{i}",
         "description": f"Skill {i} of batch {n}: rotate the zyx{n}q credentials of service {i}.",
         "instructions": f"Steps for zyx{n}q number {i}."}
        for i in range(skills)
    ]), encoding="utf-8")
    return path


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, str, Path]]:
    """``skillsearch serve`` (hashing encoder) on a fresh data directory seeded with the sample catalog."""
    data = tmp_path / "data"
    code, _, err = cli(data, "list", "--json")  # seeds and indexes the sample catalog
    assert code == 0, err
    token = add_principal(data / "principals.toml", "ops", ["*"], ["skills:read", "memory:read"])
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115 (the server writes a line per request: never a pipe)
    proc = subprocess.Popen(
        [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data), "--encoder", "hashing", "-q", "serve",
         "--port", "0"], stdout=subprocess.PIPE, stderr=log, text=True, env=dict(os.environ))
    try:
        assert proc.stdout is not None
        url = None
        for _ in range(12):
            m = re.search(r"serving on (http://127\.0\.0\.1:\d+)", proc.stdout.readline())
            if m:
                url = m.group(1)
                break
        assert url, (tmp_path / "server.log").read_text()
        yield url, token, data
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()
        log.close()


class Searcher(threading.Thread):
    """Searches the server without pause and keeps every answer's status and error code."""

    def __init__(self, url: str, token: str) -> None:
        super().__init__(daemon=True)
        self.url, self.headers = url, {"Authorization": f"Bearer {token}"}
        self.answers: list[tuple[int, str | None]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=60) as http:
            while not self.stop.is_set():
                resp = http.get(f"{self.url}/v1/search", params={"q": "rotate credentials of a service"},
                                headers=self.headers)
                code = resp.json().get("error", {}).get("code") if resp.status_code != 200 else None
                self.answers.append((resp.status_code, code))


def _hits(url: str, token: str, q: str) -> set[str]:
    resp = httpx.get(f"{url}/v1/search", params={"q": q, "limit": 100, "mode": "lexical"},
                     headers={"Authorization": f"Bearer {token}"}, timeout=60)
    assert resp.status_code == 200, resp.text
    return {h["skill_id"] for h in resp.json()["hits"]}


def test_serve_keeps_answering_while_20_imports_and_5_reindexes_write(
    server: tuple[str, str, Path], tmp_path: Path, fake_encoder: Encoder
) -> None:
    """With `serve` running, 20 CLI imports (4 at a time) and 5 `reindex` runs from other processes all
    exit 0 (no LockBusy, no import failing after its rows committed), every search the server answers
    meanwhile is a 200 (never INDEX_NOT_READY), the server then finds the last import's skills, and the
    index on disk equals the store and answers as a fresh reindex of a copy does."""
    url, token, data = server
    searcher = Searcher(url, token)
    searcher.start()
    jobs: list[tuple[str, ...]] = [("import", str(_bundle(tmp_path, n)), "--source", f"src{n}", "--grant", "team:t")
                                   for n in range(20)]
    for k in range(5):
        jobs.insert(4 * k + 2, ("reindex",))
    try:
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda job: cli(data, *job, "--json"), jobs))
    finally:
        searcher.stop.set()
        searcher.join(60)
    failures = [(job, code, err[-500:]) for job, (code, _, err) in zip(jobs, results, strict=True) if code != 0]
    assert failures == []
    assert searcher.answers and set(searcher.answers) == {(200, None)}, set(searcher.answers)
    for n in (0, 19):
        found: set[str] = set()
        for _ in range(100):  # the server follows the writers' snapshot on its next request
            found = _hits(url, token, f"zyx{n}q")
            if len(found) == 3:
                break
            time.sleep(0.1)
        assert len(found) == 3
    copy = tmp_path / "copy"
    shutil.copytree(data, copy, ignore=shutil.ignore_patterns("write.lock"))
    live = Catalog.open(Settings(data_dir=data, encoder="hashing"), encoder=fake_encoder)
    fresh = Catalog(Settings(data_dir=copy, encoder="hashing"), encoder=fake_encoder)
    try:
        index_matches_store(live)
        fresh.reindex()
        assert sorted(r.doc_hash for r in live.index().snapshot().vectors.rows) == sorted(
            r.doc_hash for r in fresh.index().snapshot().vectors.rows)
        for q in ("zyx7q", "rotate credentials", "git bisect regression", "postgres failover"):
            want = {h.skill.skill_id for h in fresh.search(Principal.operator(), SearchRequest(q, limit=100,
                                                                                               mode="lexical")).hits}
            assert _hits(url, token, q) == want, q
    finally:
        live.close()
        fresh.close()


def test_a_writer_killed_mid_import_leaves_the_directory_usable(
    server: tuple[str, str, Path], tmp_path: Path, fake_encoder: Encoder
) -> None:
    """A CLI import killed with kill -9 while it holds the write lock leaves the server answering, the lock
    released (by the kernel), the next import succeeding and the index equal to the store."""
    url, token, data = server
    big = tmp_path / "big.json"
    big.write_text(json.dumps([{"slug": f"bulk-{i}", "name": f"bulk {i}", "description": f"Bulk skill {i} qqbulk.",
                                "instructions": "word " * 2000} for i in range(3000)]), encoding="utf-8")
    searcher = Searcher(url, token)
    searcher.start()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data), "--encoder",
                                 "hashing", "-q", "import", str(big), "--source", "bulk", "--grant", "team:t"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        lock = data / "write.lock"
        for _ in range(600):
            if (lock.exists() and lock.read_text().strip() == str(proc.pid)) or proc.poll() is not None:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        code, payload, err = cli(data, "import", str(_bundle(tmp_path, 99)), "--source", "after", "--grant",
                                 "team:t", "--json")
        assert code == 0 and payload["created"] == 3, err
    finally:
        searcher.stop.set()
        searcher.join(60)
    assert searcher.answers and set(searcher.answers) == {(200, None)}, set(searcher.answers)
    live = Catalog.open(Settings(data_dir=data, encoder="hashing"), encoder=fake_encoder)
    try:
        index_matches_store(live)
    finally:
        live.close()
    assert len(_hits(url, token, "zyx99q")) == 3
