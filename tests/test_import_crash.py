"""An ``import`` killed (SIGKILL) after its store commit, before the data directory's first index was written:
running the same import again is a write, so it builds the index, as an uninterrupted import would have."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _skills(root: Path, n: int) -> Path:
    for i in range(n):
        folder = root / f"task-{i:02d}"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: task-{i:02d}\ndescription: Handles chore number {i} of the release checklist.\n---\n"
            f"Step {i}.\n", encoding="utf-8")
    return root


def _import(data_dir: Path, folder: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data_dir), "--encoder", "minilm", "import",
         str(folder), "--source", "mine", "--grant", "team:x"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
    )


def _kill_when_embedding_starts(proc: subprocess.Popen[str]) -> None:
    """SIGKILL once the progress bar of the first index's embedding shows (the store has committed; the model
    loads after it, so the index is not written yet): stopped at once, then killed."""
    assert proc.stderr is not None
    seen = ""
    while "embedding" not in seen:
        char = proc.stderr.read(1)
        assert char, f"the import ended before it embedded: {seen!r}"
        seen = (seen + char)[-64:]
    proc.send_signal(signal.SIGSTOP)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stderr.close()


def test_import_again_after_a_kill_before_the_first_index_builds_it(tmp_path: Path) -> None:
    folder, data_dir = _skills(tmp_path / "skills", 12), tmp_path / "data"
    data_dir.mkdir()
    _kill_when_embedding_starts(_import(data_dir, folder))
    with closing(sqlite3.connect(data_dir / "catalog.sqlite3")) as db:
        assert db.execute("SELECT COUNT(*) FROM skills").fetchone()[0] == 12
        generation = int(db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0])
    assert not (data_dir / "manifest.json").exists()  # killed after the store commit, before the index

    again = _import(data_dir, folder)
    _, err = again.communicate()
    assert again.returncode == 0, err

    manifest = json.loads((data_dir / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["store_generation"] == generation
    assert manifest["documents"] == 12
