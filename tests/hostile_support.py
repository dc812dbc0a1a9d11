"""Helpers of the hostile-input suite (tests/test_hostile_*.py): the CLI as a real process, peak RSS."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SECRET = "TOP-SECRET-7f3a9c"


def cli(data_dir: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 300) -> tuple[int, Any, str]:
    """Run ``skillsearch --data-dir DIR --encoder hashing -q ARGS`` in a real process: (exit code, the JSON it
    printed or ``None``, stderr). The hashing encoder keeps these processes quick; what they test is the
    parsing and the storing, not the model."""
    proc = subprocess.run(
        [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data_dir), "--encoder", "hashing", "-q", *args],
        capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})},
    )
    try:
        payload = json.loads(proc.stdout) if proc.stdout.strip() else None
    except json.JSONDecodeError:
        payload = None
    return proc.returncode, payload, proc.stderr


def stored_bytes(data_dir: Path) -> bytes:
    """Every byte the catalog wrote (the SQLite file and its WAL): a leaked secret would be in here."""
    return b"".join(p.read_bytes() for p in data_dir.glob("catalog.sqlite3*") if p.is_file())


def write_skill(folder: Path, name: str, body: str = "Do the thing.", front: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    front = front if front is not None else f"name: {name}\ndescription: The {name} skill for tests."
    (folder / "SKILL.md").write_text(f"---\n{front}\n---\n{body}\n", encoding="utf-8")
    return folder


def peak_rss_mb_of(args: list[str], env: dict[str, str] | None = None, timeout: float = 300) -> tuple[float, int, str]:
    """(peak RSS in MB, exit code, stdout) of one child process, measured by the kernel (``RUSAGE_CHILDREN``)
    in a fresh Python that runs only that child, so no earlier child of the test process counts."""
    probe = (
        "import resource, subprocess, sys\n"
        "p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)\n"
        "sys.stderr.write(p.stdout.decode())\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, p.returncode)\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, check=True)
    out = proc.stdout.split()
    return float(out[0]), int(out[1]), proc.stderr
