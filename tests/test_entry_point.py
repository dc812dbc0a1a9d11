"""The ``skillsearch`` command's entry point (``skillsearch/__main__.py``): the console script and ``python -m
skillsearch`` load the command line behind a guard, so a Ctrl-C while the modules load is the same clean stop as
one later (exit 130, ``interrupted``, the ``INTERRUPTED`` object under ``--json``), never a traceback of imports.

The real console script and interpreter run; to hold them inside the loading without a race, a ``sitecustomize``
on their ``PYTHONPATH`` puts a finder in front of the import system that, when ``skillsearch.cli.main`` is
about to load, says so on stderr and sleeps (a sleep a SIGINT interrupts, as it would any import)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = Path(sys.executable).parent / "skillsearch"

HOLD = '''
import sys, time

class _Hold:
    def find_spec(self, name, path=None, target=None):
        if name == "skillsearch.cli.main":
            sys.meta_path.remove(self)
            print("loading", file=sys.stderr, flush=True)
            time.sleep(120)
        return None

sys.meta_path.insert(0, _Hold())
'''


def _held(tmp_path: Path, command: list[str]) -> subprocess.Popen[str]:
    (tmp_path / "sitecustomize.py").write_text(HOLD)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(tmp_path), str(REPO))), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert line == "loading\n", line + proc.stderr.read()
    return proc


@pytest.mark.parametrize("entry", ["console script", "python -m skillsearch"])
@pytest.mark.parametrize("as_json", [False, True])
def test_ctrl_c_while_the_command_loads_is_a_clean_stop(tmp_path: Path, entry: str, as_json: bool) -> None:
    base = [str(SCRIPT)] if entry == "console script" else [sys.executable, "-m", "skillsearch"]
    proc = _held(tmp_path, [*base, "--data-dir", str(tmp_path / "data"), "list", *(["--json"] if as_json else [])])
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err == "interrupted\n", err  # no traceback of the imports it was in
    if as_json:
        error = json.loads(out)["error"]
        assert error["code"] == "INTERRUPTED" and error["details"] == {"signal": "SIGINT"}, out
    else:
        assert out == ""
    assert not (tmp_path / "data").exists()  # stopped before the command began: nothing created


def test_import_skillsearch_loads_nothing_else_of_it(tmp_path: Path) -> None:
    """What the guard relies on: the package's ``__init__`` loads its public names on first use only."""
    probe = ("import sys, skillsearch; before = sorted(m for m in sys.modules if m.startswith('skillsearch'));"
             " skillsearch.Catalog; print(before, 'skillsearch.service' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.stdout.strip() == "['skillsearch'] True", done.stdout + done.stderr
