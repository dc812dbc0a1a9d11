"""The command line as a shell script drives it: real processes, stdout a pipe whose reader may go away."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from clisupport import sample_copy


@pytest.fixture
def data_dir(sample_dir: Path, tmp_path: Path) -> Path:
    return sample_copy(sample_dir, tmp_path)


def _into_a_closed_pipe(*argv: str) -> subprocess.CompletedProcess[bytes]:
    """Run the CLI with stdout a pipe whose reader has already gone (``| head -1`` once it has its line)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", "skillsearch.cli", "-q", *argv], stdout=write_end,
                              stderr=subprocess.PIPE, timeout=120, check=False)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("json_flag", [(), ("--json",)], ids=["text", "json"])
@pytest.mark.parametrize("command", [("list", "--limit", "200"), ("search", "deploy", "--mode", "lexical"),
                                     ("get", "deploy-service-canary")], ids=["list", "search", "get"])
def test_a_reader_that_goes_away_ends_the_command_quietly(data_dir: Path, command: tuple[str, ...],
                                                          json_flag: tuple[str, ...]) -> None:
    proc = _into_a_closed_pipe("--data-dir", str(data_dir), *command, *json_flag)
    stderr = proc.stderr.decode()
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr and "INTERNAL" not in stderr, stderr
    assert "Exception ignored" not in stderr, stderr
    assert proc.returncode == 141, (proc.returncode, stderr)  # 128 + SIGPIPE, as a shell reports `yes | head`
