"""A server's index opens behind its answers, in every worker, and no request thread ever opens it.

Real ``skillsearch serve`` processes (the hashing encoder: what is under test is the processes, the locks
and the protocol's answers, not the model) on real data directories whose index files are made stale or
damaged. The index's write lock (``<data-dir>/write.lock``), held by this test process as another writer
(a ``reindex``, an import) would hold it, keeps a repair pending for as long as the test looks, so what a
balancer sees meanwhile is certain: ``/healthz`` 200, the store's reads, ``/readyz`` 503 with the reason,
searches ``INDEX_NOT_READY``; then, once the lock is let go, ``/readyz`` 200 and the repaired index served.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from fleetsupport import REPO, ServeProcess, env, wait_for

from skillsearch.catalog.importer import parse_path
from skillsearch.catalog.store import CatalogStore
from skillsearch.http.auth import DEMO_TOKEN
from skillsearch.retrieval.writelock import WriteLock

AUTH = {"Authorization": f"Bearer {DEMO_TOKEN}"}
LLAMAS = "feed-the-llamas"


def _cli(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data), "--encoder", "hashing",
                           "-q", *args], capture_output=True, text=True, env=env(), cwd=REPO, timeout=240)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled sample, seeded and indexed by a first search (the hashing encoder)."""
    data = tmp_path_factory.mktemp("open-in-background") / "data"
    proc = _cli(data, "search", "python profiling")
    assert proc.returncode == 0, proc.stderr
    assert (data / "manifest.json").exists()
    return data


@pytest.fixture(autouse=True)
def _short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """A search waits 0.5 s for an index still opening, a writer 30 s for another's write lock (the servers
    inherit this environment)."""
    monkeypatch.setenv("SKILLSEARCH_MODEL_WAIT_S", "0.5")
    monkeypatch.setenv("SKILLSEARCH_WRITE_LOCK_TIMEOUT_S", "30")


def _copy(built: Path, target: Path) -> Path:
    shutil.copytree(built, target)
    return target


def _make_stale(data: Path) -> str:
    """The index as an upgrade finds it after an import was killed half way: its lexical side built by an
    earlier recipe, and a skill in the store (committed by this process, another than the server's) that
    the index lacks. Opening it rebuilds the lexical side and embeds that skill. The skill's id."""
    manifest_path = data / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    manifest["lexical"] = {**manifest["lexical"], "fields": manifest["lexical"]["fields"] - 1}
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    bundle = data.parent / "llamas.json"
    bundle.write_text(json.dumps([{"slug": LLAMAS, "name": "Feed the llamas",
                                   "description": "Feed the llamas every morning with hay and fresh water."}]))
    (content,) = parse_path(bundle, "sample-starter", "sub:starter-pack").skills
    store = CatalogStore.in_dir(data)
    try:
        store.upsert(content)
    finally:
        store.close()
    return content.skill_id


@contextmanager
def _write_lock(data: Path) -> Iterator[WriteLock]:
    """The data directory's index write lock, held by this process (as another writer would hold it)."""
    lock = WriteLock(data)
    with lock.hold():
        yield lock


def _lexical_slugs(http: httpx.Client, query: str) -> list[str]:
    resp = http.get("/v1/search", params={"q": query, "mode": "lexical", "limit": 5})
    return [h["slug"] for h in resp.json()["hits"]] if resp.status_code == 200 else []


def _ready_everywhere(url: str, connections: int = 8) -> bool:
    """``/readyz`` 200 on ``connections`` new connections in a row (the kernel spreads them over the workers)."""
    return all(httpx.get(url + "/readyz", timeout=30).status_code == 200 for _ in range(connections))


def test_workers_listen_at_once_and_one_of_them_repairs_the_index(built: Path, tmp_path: Path) -> None:
    """``serve --workers 2`` on an index that needs a repair: the workers serve before the repair (its banner
    is printed while another writer holds the index's write lock, so no repair can have run): ``/healthz``
    200, the store's reads, ``/readyz`` 503 ``INDEX_NOT_READY``, a search ``INDEX_NOT_READY`` within its bound.
    Once the lock is free, one worker repairs the index, the other opens what it wrote, and both are ready
    and find the skill the repair indexed. It used to repair in the parent before any worker listened, so
    its banner (and every connection) waited for the lock."""
    data = _copy(built, tmp_path / "data")
    new_id = _make_stale(data)
    stale_manifest = (data / "manifest.json").read_text(encoding="utf-8")
    server: ServeProcess | None = None
    try:
        with _write_lock(data):
            server = ServeProcess(data, "--workers", "2", "--no-sync", timeout=90)
            url = server.url
            with httpx.Client(base_url=url, timeout=60, headers=AUTH) as http:
                answers = [(http.get("/healthz").status_code, http.get("/readyz")) for _ in range(6)]
                listed = http.get("/v1/skills", params={"limit": 200})
                got = http.get(f"/v1/skills/{new_id}")
                search = http.get("/v1/search", params={"q": "llamas hay", "mode": "lexical"})
            pending = (data / "manifest.json").read_text(encoding="utf-8") == stale_manifest
        assert all(health == 200 for health, _ in answers)
        assert all(r.status_code == 503 and r.json()["error"]["code"] == "INDEX_NOT_READY" for _, r in answers)
        assert listed.status_code == 200 and new_id in {i["skill_id"] for i in listed.json()["items"]}
        assert got.status_code == 200 and got.json()["slug"] == LLAMAS
        assert search.status_code == 503 and search.json()["error"]["code"] == "INDEX_NOT_READY"
        assert pending  # all of the above answered before any repair

        assert wait_for(lambda: _ready_everywhere(url), 120), server.stderr()
        with httpx.Client(base_url=url, timeout=60, headers=AUTH) as http:
            for _ in range(6):  # every worker serves the repaired index
                assert _lexical_slugs(http, "llamas hay")[:1] == [LLAMAS]
        repaired = json.loads((data / "manifest.json").read_text(encoding="utf-8"))
        assert repaired["lexical"] == json.loads((built / "manifest.json").read_text(encoding="utf-8"))["lexical"]
        server.log.flush()
        log = (tmp_path / "data.stderr").read_text(errors="replace")  # ServeProcess's whole log
        # One process repaired (the lexical side rebuilt, the new skill embedded); the other opened its work.
        assert log.count("rebuilding the lexical") == 1 and log.count(", 1 embedded") == 1, log
        assert "Traceback" not in log
    finally:
        if server is not None:
            server.stop()


def test_a_failed_open_is_tried_again_in_the_background_and_probes_answer_at_once(
    built: Path, tmp_path: Path
) -> None:
    """``serve`` on an index whose manifest is damaged: the background open fails, and ``/readyz`` and a
    search answer 503 ``INDEX_NOT_READY`` with the reason, at once, also while another writer holds the
    index's write lock (a probe that opened the index in its own thread, as one did after a failed
    background open, waited on that lock for up to 300 s). The open is tried again in the background: once
    ``skillsearch reindex`` (another process) has rebuilt the index, the server is ready and serves it."""
    data = _copy(built, tmp_path / "data")
    (data / "manifest.json").write_text("{not json", encoding="utf-8")
    server = ServeProcess(data, "--no-sync", timeout=90)
    try:
        with httpx.Client(base_url=server.url, timeout=30, headers=AUTH) as http:
            def failed() -> httpx.Response | None:
                resp = http.get("/readyz")
                return resp if "could not be opened" in resp.json()["error"]["message"] else None

            first = wait_for(failed, 60)
            assert first is not None, server.stderr()
            with _write_lock(data):  # a writer at work: a probe that opened the index would wait for it
                health = http.get("/healthz")
                ready = http.get("/readyz")
                search = http.get("/v1/search", params={"q": "python profiling"})
                listed = http.get("/v1/skills", params={"limit": 5})
        assert health.status_code == 200
        for resp in (ready, search):
            assert resp.status_code == 503, resp.text
            error = resp.json()["error"]
            assert error["code"] == "INDEX_NOT_READY"
            assert "manifest" in error["message"] and "trying again in the background" in error["message"]
            assert "unreadable" in error["details"]["reason"] and error["details"]["retrying"] is True
        assert listed.status_code == 200 and listed.json()["items"]

        reindex = _cli(data, "reindex")
        assert reindex.returncode == 0, reindex.stderr
        assert wait_for(lambda: httpx.get(server.url + "/readyz", timeout=30).status_code == 200, 120), \
            server.stderr()
        with httpx.Client(base_url=server.url, timeout=30, headers=AUTH) as http:
            assert _lexical_slugs(http, "python profiling")[:1] == ["python-profiling"]
            hybrid = http.get("/v1/search", params={"q": "python profiling"})
        assert hybrid.status_code == 200 and hybrid.json()["hits"]
        assert "Traceback" not in server.stderr()
    finally:
        server.stop()
