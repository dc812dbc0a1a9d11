"""Crash safety: ``skillsearch sync`` is killed with SIGKILL at many moments (while it starts and repairs,
between pages, inside a page's transaction, while the index is written). After each kill the store is
consistent and, once reopened, the index matches it; the last, uninterrupted sync ends with exactly the
upstream's content.

The subprocess uses the package's ``hashing`` encoder: what is under test is the store/index/cursor
machinery across process death, and 20+ cold starts of the real model would cost minutes. The real model
covers the same paths in-process in ``test_sync.py``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest
from syncsupport import TOKEN, catalog_content, index_matches_store, upstream_content

from skillsearch.core.settings import Settings
from skillsearch.retrieval.encoder import Encoder
from skillsearch.service import Catalog
from skillsearch.upstream.platform import ReferenceUpstream

SUB = "crashy"
SOURCE = f"upstream:{SUB}"
KILLS = 20
MAX_RUNS = 40
REPO = Path(__file__).resolve().parents[1]


def _bundle(path: Path, n: int) -> Path:
    skills = [
        {"slug": f"skill-{i:03d}", "name": f"Skill {i:03d}", "description": f"Handles task number {i} well.",
         "tags": ["crash", f"group-{i % 5}"], "instructions": f"Step one for {i}. Step two.",
         "resources": [{"path": "references/note.md", "text": f"note {i}"}]}
        for i in range(n)
    ]
    path.write_text(json.dumps(skills), encoding="utf-8")
    return path


def _mutate(up: ReferenceUpstream, rng: random.Random, run: int) -> None:
    live = sorted(up.feed(SUB).live())
    for sid in rng.sample(live, 12):
        up.edit(SUB, sid, description=f"Changed in run {run}: {rng.random():.6f}.")
    up.archive(SUB, rng.choice(live))
    up.delete(SUB, rng.choice([s for s in live if up.feed(SUB).get(s)]))
    for j in range(2):
        item = json.loads(json.dumps(up.feed(SUB).get(min(up.feed(SUB).live()))))
        item["skill"] = {"skill_id": f"sk_new_{run}_{j}", "slug": f"new-{run}-{j}", "status": "active"}
        item["revision"]["name"] = f"New skill {run}-{j}"
        up.publish(SUB, item)
    if run % 9 == 8:
        up.expire_cursors(SUB)


def _store_is_consistent(db: Path) -> None:
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        orphans = {
            "skill without its current revision": "SELECT COUNT(*) FROM skills s WHERE NOT EXISTS"
            " (SELECT 1 FROM revisions r WHERE r.revision_id = s.current_revision_id)",
            "revision without its skill": "SELECT COUNT(*) FROM revisions r WHERE NOT EXISTS"
            " (SELECT 1 FROM skills s WHERE s.skill_id = r.skill_id)",
            "resource without its revision": "SELECT COUNT(*) FROM resources x WHERE NOT EXISTS"
            " (SELECT 1 FROM revisions r WHERE r.revision_id = x.revision_id)",
        }
        for what, sql in orphans.items():
            assert conn.execute(sql).fetchone()[0] == 0, what


def _spawn(data_dir: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data_dir), "--encoder", "hashing", "-q", "-v",
         "sync", "--json"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
    )


# Each kill waits for a moment the process announces on stderr, then a random few milliseconds more:
# while the index is opened (and repaired after the previous kill), as a run starts, or after page k.
MOMENTS = [("opening the index", 1, 0.08), ("starting a", 1, 0.03), (" stored (", 1, 0.03),
           (" stored (", 2, 0.03), (" stored (", 3, 0.03)]


def _kill_after_line(proc: subprocess.Popen[str], marker: str, count: int, delay: float) -> bool:
    """SIGKILL ``delay`` seconds after the ``count``-th stderr line holding ``marker``; ``False`` if the
    process finished first."""
    assert proc.stderr is not None
    seen = 0
    for line in proc.stderr:
        if marker in line:
            seen += 1
            if seen >= count:
                time.sleep(delay)
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                return proc.returncode == -signal.SIGKILL
    proc.wait()
    return False


@pytest.fixture
def upstream(tmp_path: Path) -> ReferenceUpstream:
    up = ReferenceUpstream([TOKEN])
    assert up.load(SUB, _bundle(tmp_path / "bundle.json", 60)) == []
    return up


def test_sigkill_at_many_moments_loses_nothing(tmp_path: Path, upstream: ReferenceUpstream, upstream_url: str,
                                               fake_encoder: Encoder) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "sync.toml").write_text(
        f'[upstream]\nurl = "{upstream_url}"\ntoken = "{TOKEN}"\npage_limit = 4\nretries = 1\n'
        f'backoff_base_s = 0.01\n\n[[subscriptions]]\nid = "{SUB}"\n',
        encoding="utf-8",
    )
    rng = random.Random(20261129)
    killed = run = 0
    while killed < KILLS and run < MAX_RUNS:
        marker, count, jitter = MOMENTS[run % len(MOMENTS)]
        with _spawn(data_dir) as proc:
            killed += _kill_after_line(proc, marker, count, rng.uniform(0.0, jitter))

        _store_is_consistent(data_dir / "catalog.sqlite3")
        catalog = Catalog(Settings(data_dir=data_dir, seed_sample=False, encoder="hashing"), encoder=fake_encoder)
        try:
            index_matches_store(catalog)  # opening repaired whatever the kill left behind
        finally:
            catalog.close()
        _mutate(upstream, rng, run)
        run += 1

    assert killed >= KILLS, f"only {killed} of {run} runs were killed before they finished"
    with _spawn(data_dir) as proc:
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    catalog = Catalog(Settings(data_dir=data_dir, seed_sample=False, encoder="hashing"), encoder=fake_encoder)
    try:
        assert catalog_content(catalog, SOURCE) == upstream_content(upstream, SUB)
        index_matches_store(catalog)
    finally:
        catalog.close()
