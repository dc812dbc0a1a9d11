"""The CLI run in process, as the command-line tests drive it: ``main()`` with a data directory, quiet."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

from skillsearch.cli import main


def sample_copy(sample_dir: Path, tmp_path: Path) -> Path:
    """A private copy of the session's indexed sample catalog."""
    target = tmp_path / "data"
    shutil.copytree(sample_dir, target)
    return target


def run(data_dir: Path, *argv: str) -> tuple[int, Any]:
    """Exit code and stdout (parsed when ``--json`` is among ``argv``)."""
    out = io.StringIO()
    code = main(["--data-dir", str(data_dir), "-q", *argv], out=out)
    text = out.getvalue()
    return code, json.loads(text) if "--json" in argv else text
