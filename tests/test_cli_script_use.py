"""The command line as a shell script drives it: real processes, stdout a pipe whose reader may go away."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from clisupport import sample_copy

from skillsearch.cli import build_parser


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


def _value_options(parser: argparse.ArgumentParser, prog: str) -> Iterator[tuple[str, str, str]]:
    """(command, option, help) of every optional flag that takes a value, on every (sub-)command."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _value_options(sub, f"{prog} {name}")
        elif action.option_strings and action.nargs != 0 and not action.required and action.help != argparse.SUPPRESS:
            yield prog, max(action.option_strings, key=len), action.help or ""


def test_every_option_that_takes_a_value_says_its_default_in_its_help() -> None:
    """A script writer reads ``--help`` alone: an option whose help does not say what happens without it
    (search's --fusion, --min-confidence, get's --max-chars, bench's --out ...) had to be looked up in the code."""
    silent = [f"{prog} {option}: {text!r}" for prog, option, text in _value_options(build_parser(), "skillsearch")
              if "default" not in text.lower()]
    assert silent == []


NOBODY = 65534


@pytest.fixture
def folder_it_may_not_write() -> Iterator[tuple[Path, list[str]]]:
    """A data directory this user may read but not write: under root the child runs as ``nobody`` (root may
    write any file); otherwise the folder is made read-only."""
    unprivileged = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] if os.geteuid() == 0 else []
    base = Path(tempfile.mkdtemp(prefix="cliaudit-"))  # outside pytest's root-only folder
    data = base / "data"
    data.mkdir()
    base.chmod(0o755)
    data.chmod(0o755 if unprivileged else 0o555)
    try:
        yield data, unprivileged
    finally:
        data.chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("command", [("token", "add", "bot", "--grant", "user:me"),
                                     ("sources", "add", "mine", "--grant", "user:me", "--path", "/nowhere",
                                      "--allow-missing")], ids=["token-add", "sources-add"])
def test_a_config_write_the_permissions_refuse_is_one_line_naming_the_file(
        folder_it_may_not_write: tuple[Path, list[str]], command: tuple[str, ...]) -> None:
    """README: a write the disk or the permissions refuse is one line naming the file and the cause,
    INDEX_NOT_READY, exit code 1. ``token add``'s principals file and ``sources add``'s sync.toml were an
    ``INTERNAL: PermissionError`` instead, which a script cannot tell from a bug."""
    data, unprivileged = folder_it_may_not_write
    argv = [*unprivileged, sys.executable, "-m", "skillsearch.cli", "-q", "--data-dir", str(data), *command]
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "HOME": str(data.parent)}
    text = subprocess.run(argv, capture_output=True, text=True, env=environment, timeout=120, check=False)
    assert text.returncode == 1 and text.stdout == "", text
    assert text.stderr.startswith(f"error: INDEX_NOT_READY: {data}/") and len(text.stderr.splitlines()) == 1, text.stderr
    assert "Permission denied" in text.stderr
    done = subprocess.run([*argv, "--json"], capture_output=True, text=True, env=environment, timeout=120, check=False)
    assert done.returncode == 1 and done.stderr == "", done
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "INDEX_NOT_READY" and error["details"]["path"].startswith(f"{data}/"), error
    assert sorted(p.name for p in data.iterdir()) == []


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_a_stdout_that_cannot_hold_every_character_still_gets_the_skill(data_dir: Path, encoding: str) -> None:
    """The sample describes skills in Japanese and Chinese: with stdout in ASCII (``PYTHONIOENCODING=ascii``)
    or a legacy Latin-1 locale, ``get`` of one was ``INTERNAL: UnicodeEncodeError`` and exit 1. Text shows
    such characters as escapes; JSON is UTF-8, every character exact."""
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "HF_HUB_OFFLINE": "1",
                   "PYTHONIOENCODING": encoding}
    argv = [sys.executable, "-m", "skillsearch.cli", "-q", "--data-dir", str(data_dir), "get", "linux-disk-full"]
    text = subprocess.run(argv, capture_output=True, env=environment, timeout=120, check=False)
    assert text.returncode == 0 and text.stderr == b"", text.stderr
    assert "Linux \\u670d\\u52a1\\u5668" in text.stdout.decode(encoding)  # 服务器
    done = subprocess.run([*argv, "--json"], capture_output=True, env=environment, timeout=120, check=False)
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    assert json.loads(done.stdout.decode("utf-8"))["description"].startswith("Linux 服务器")


def test_serve_under_json_prints_one_object_saying_where_it_serves(tmp_path: Path) -> None:
    """``serve --port 0 --json``: the one JSON object --json promises, from which a script takes the port it
    got; it was the text banner, which a JSON reader cannot read."""
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "skillsearch.cli", "-q", "--encoder", "hashing", "--data-dir",
                             str(tmp_path / "d"), "serve", "--port", "0", "--no-sync", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=environment, text=True)
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        assert first["url"].startswith("http://127.0.0.1:") and first["mcp"] == first["url"] + "/mcp"
    finally:
        proc.terminate()
        rest, _ = proc.communicate(timeout=120)
    assert rest == ""  # nothing but that object on stdout
