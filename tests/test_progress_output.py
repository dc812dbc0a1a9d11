"""Progress of long work off a terminal (a CI job's log, a container's, an MCP host's log of its server's
stderr): lines a log keeps. A progress bar redraws itself with carriage returns: a log kept its frames as one
long line. A real process, its stderr a pipe."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from fleetsupport import REPO, env


def test_an_import_off_a_terminal_says_each_stage_in_lines_without_a_bar(tmp_path: Path) -> None:
    folder = tmp_path / "skills"
    for i in range(3):
        (folder / f"skill-{i}").mkdir(parents=True)
        (folder / f"skill-{i}" / "SKILL.md").write_text(
            f"---\nname: skill-{i}\ndescription: Skill number {i} for the progress test.\n---\nBody {i}.\n", "utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(tmp_path / "data"), "--encoder", "hashing",
         "import", str(folder), "--source", "mine", "--grant", "team:x"],
        capture_output=True, text=True, env=env(), cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr, done.stderr[:300]
    lines = done.stderr.splitlines()
    for stage in ("reading", "embedding"):
        assert f"{stage}: 3 skill(s)" in lines, lines
        assert any(re.fullmatch(rf"{stage}: done, 3 skill\(s\) in \d+\.\d s", line) for line in lines), lines
