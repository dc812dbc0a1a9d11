"""A hostile environment rather than hostile input: a full disk, files another user left in the data
directory, a snapshot's folder that cannot be made. Each is one line naming the path and the cause with a
documented exit code (never ``INTERNAL`` or a traceback), keeps the catalog whole, and the next run once the
condition is gone succeeds.

Real processes and real files. A full disk is a file size limit (``RLIMIT_FSIZE``, with ``SIGXFSZ``
ignored so a write past it fails with ``EFBIG`` as a full disk fails with ``ENOSPC``): no root, no mount.
Permissions are tested unprivileged: under root (CI here runs as root) the child runs as ``nobody`` through
``setpriv``, since root may write any file.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from fleetsupport import REPO, env

NOBODY = 65534


def _run(data_dir: Path, *args: str, prefix: list[str] | None = None, max_file_bytes: int | None = None,
         extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``skillsearch --data-dir DIR --encoder hashing -q ARGS`` as a real process, under a file size limit
    when ``max_file_bytes`` is given."""
    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
        assert max_file_bytes is not None
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))

    preexec: Callable[[], None] | None = limit if max_file_bytes is not None else None
    return subprocess.run(
        [*(prefix or []), sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data_dir), "--encoder", "hashing",
         "-q", *args],
        capture_output=True, text=True, timeout=300, cwd=REPO, env={**env(), **(extra_env or {})},
        preexec_fn=preexec,
    )


def _bundle(path: Path, prefix: str, n: int, body_chars: int) -> Path:
    body = ("Rotate the credentials, check the rollout and write down what changed. " * (body_chars // 72 + 1))
    path.write_text(json.dumps([
        {"slug": f"{prefix}-{i}", "name": f"{prefix}-{i}", "description": f"The {prefix} skill number {i} for tests.",
         "kind": "knowledge", "instructions": f"{prefix}word{i} {body[:body_chars]}"}
        for i in range(n)
    ]), encoding="utf-8")
    return path


def _listed(data_dir: Path) -> set[str]:
    done = _run(data_dir, "list", "--limit", "200", "--json")
    assert done.returncode == 0, done.stderr
    return {item["name"] for item in json.loads(done.stdout)["items"]}


def _usage_error(done: subprocess.CompletedProcess[str]) -> str:
    """A usage error's own line (argparse prints the usage block above it): exit code 2."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "INTERNAL" not in done.stderr, done.stderr
    return done.stderr.strip().splitlines()[-1]


def _one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr and "INTERNAL" not in done.stderr, done.stderr
    return lines[0]


def test_a_disk_full_during_import_is_one_line_keeps_the_catalog_and_the_next_run_recovers(tmp_path: Path) -> None:
    data = tmp_path / "data"
    seed = _run(data, "import", str(_bundle(tmp_path / "seed.json", "seed", 3, 200)), "--source", "t",
                "--grant", "team:x")
    assert seed.returncode == 0, seed.stderr
    big = _bundle(tmp_path / "big.json", "big", 60, 8000)  # about 500 KB of instructions: past the limit

    full = _run(data, "import", str(big), "--source", "t", "--grant", "team:x", max_file_bytes=256 << 10)

    assert full.returncode == 1
    line = _one_error_line(full)
    assert line.startswith(f"error: INDEX_NOT_READY: the catalog {data / 'catalog.sqlite3'} could not be written ("), line
    assert "nothing of this change was kept" in line
    assert _listed(data) == {f"seed-{i}" for i in range(3)}  # the failed import left nothing half-written

    again = _run(data, "import", str(big), "--source", "t", "--grant", "team:x")
    assert again.returncode == 0, again.stderr
    with sqlite3.connect(data / "catalog.sqlite3") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert _listed(data) == {f"seed-{i}" for i in range(3)} | {f"big-{i}" for i in range(60)}
    found = _run(data, "search", "bigword59", "--mode", "lexical", "--json")
    assert found.returncode == 0, found.stderr
    assert [hit["slug"] for hit in json.loads(found.stdout)["hits"]][:1] == ["big-59"]


def test_a_snapshot_whose_folder_cannot_be_made_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert _run(data, "import", str(_bundle(tmp_path / "b.json", "snap", 3, 200)), "--source", "t",
                "--grant", "team:x").returncode == 0
    (tmp_path / "a-file").write_text("not a folder", encoding="utf-8")
    dest = tmp_path / "a-file" / "snap"

    done = _run(data, "snapshot", "create", str(dest))

    assert done.returncode == 1
    line = _one_error_line(done)
    assert line.startswith(f"error: INDEX_NOT_READY: the snapshot {dest} could not be written ("), line
    # The cause, and its way out: "free space on its disk (or make its folder writable)" helped with neither.
    assert "that path exists already (a file where a folder is needed?)" in line and "free space" not in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "b.json", "data"]


@pytest.fixture()
def left_by_another_user() -> Iterator[tuple[Path, list[str]]]:
    """A data directory whose folder this user may write but whose files another user wrote (a first run
    as root, then a service account): under root, the child runs as ``nobody``; otherwise the files are
    made read-only, which an unprivileged owner cannot write either."""
    unprivileged = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] if os.geteuid() == 0 else []
    base = Path(tempfile.mkdtemp(prefix="envaudit-"))  # outside pytest's root-only folder
    data = base / "data"
    try:
        bundle = _bundle(base / "b.json", "owned", 3, 200)
        assert _run(data, "import", str(bundle), "--source", "t", "--grant", "team:x").returncode == 0
        for name in ("catalog.sqlite3-wal", "catalog.sqlite3-shm"):
            (data / name).unlink(missing_ok=True)
        if unprivileged:
            os.chown(base, NOBODY, NOBODY)
            os.chown(data, NOBODY, NOBODY)  # the folder is theirs; its files are root's (0644)
        else:
            for path in data.iterdir():
                if path.is_file():
                    path.chmod(0o444)
        yield data, unprivileged
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("command", [["serve", "--port", "0"], ["mcp", "--http", "--port", "0"]])
def test_a_server_on_files_it_cannot_write_stops_with_one_line_and_exit_code_3(
        left_by_another_user: tuple[Path, list[str]], command: list[str]) -> None:
    data, unprivileged = left_by_another_user
    done = _run(data, *command, prefix=unprivileged, extra_env={"HOME": str(data.parent)})
    assert done.returncode == 3, done.stderr
    assert _one_error_line(done) == (f"error: data directory {data}: {data / 'catalog.sqlite3'} is not readable and"
                                     " writable by this user")


def test_a_write_on_a_lock_file_it_cannot_open_is_one_line_naming_it(
        left_by_another_user: tuple[Path, list[str]]) -> None:
    """A search reads such a catalog as it is (``test_read_only_catalog.py``); a write needs the in-use lock
    (which every writing command takes before it opens anything) and the write lock."""
    data, unprivileged = left_by_another_user
    found = _run(data, "search", "owned", "--mode", "lexical", prefix=unprivileged,
                 extra_env={"HOME": str(data.parent)})
    assert found.returncode == 0 and "owned-0" in found.stdout, found.stderr
    if not unprivileged:  # the catalog itself is read-only here: its open is refused first, naming it
        (data / "catalog.sqlite3").chmod(0o644)
    done = _run(data, "reindex", prefix=unprivileged, extra_env={"HOME": str(data.parent)})
    assert done.returncode == 1, done.stderr
    line = _one_error_line(done)
    assert line.startswith(f"error: INDEX_NOT_READY: the in-use lock {data / 'in-use.lock'} cannot be opened ("), line


_SAVE_PAST_THE_LIMIT = """
import json, sys
from pathlib import Path
import numpy as np
from skillsearch.core.errors import IndexNotReadyError
from skillsearch.retrieval import vector_saves
from skillsearch.retrieval.vector_rows import VectorRow
from skillsearch.retrieval.vectors import VectorSnapshot

folder = Path(sys.argv[1])
rows = [VectorRow(f"sk_{i}", "team:a", "knowledge", (), f"d{i}", f"e{i}") for i in range(200)]
matrix = np.random.default_rng(1).random((200, 384), dtype=np.float32)
try:
    vector_saves.save(VectorSnapshot.build(384, matrix, rows), folder)
    print(json.dumps({"saved": True}))
except IndexNotReadyError as exc:
    print(json.dumps({"code": exc.code, "message": exc.message}))
"""


def _four_saved_vectors(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    """A vectors folder saved whole with four rows, and its files' bytes."""
    from skillsearch.retrieval import vector_saves
    from skillsearch.retrieval.vector_rows import VectorRow
    from skillsearch.retrieval.vectors import VectorSnapshot

    folder = tmp_path / "vectors"
    kept = [VectorRow(f"sk_{i}", "team:a", "knowledge", (), f"d{i}", f"e{i}") for i in range(4)]
    vector_saves.save(VectorSnapshot.build(384, np.ones((4, 384), dtype=np.float32), kept), folder)
    return folder, {p.name: p.read_bytes() for p in folder.iterdir()}


def _says_raise_the_limit(answer: dict[str, object]) -> None:
    """The refusal's advice is the file size limit's, by its error number (``EFBIG``): "free space on its disk"
    sent the operator of a nearly empty disk the wrong way (``core/refusals.py``)."""
    message = str(answer["message"])
    assert "File too large" in message and "a file size limit, `ulimit -f`): raise the limit" in message, answer
    assert "free space" not in message, answer


def _past_a_file_size_limit(script: str, folder: Path, max_bytes: int) -> dict[str, object]:
    """What ``script`` (run on ``folder`` in a real process under ``RLIMIT_FSIZE`` = ``max_bytes``) printed."""
    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))

    done = subprocess.run([sys.executable, "-c", script, str(folder)], capture_output=True, text=True, timeout=120,
                          cwd=REPO, env=env(), preexec_fn=limit)
    assert done.returncode == 0, done.stderr
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


def test_vectors_the_disk_refuses_are_a_typed_error_and_the_saved_ones_stay(tmp_path: Path) -> None:
    """numpy reports a short write as ``OSError: N requested and M written``: the save names its folder
    and the cause instead, removes its temporary files and leaves the vectors in use as they were."""
    from skillsearch.retrieval import vector_saves

    folder, before = _four_saved_vectors(tmp_path)
    answer = _past_a_file_size_limit(_SAVE_PAST_THE_LIMIT, folder, 64 << 10)  # the new matrix is 300 KB
    assert answer["code"] == "INDEX_NOT_READY", answer
    assert answer["message"].startswith(f"the vectors in {folder} could not be written ("), answer
    _says_raise_the_limit(answer)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # no temporary file left, nothing replaced
    assert [row.skill_id for row in vector_saves.load(folder).rows] == [f"sk_{i}" for i in range(4)]


_APPEND_PAST_THE_LIMIT = """
import json, sys
from pathlib import Path
import numpy as np
from skillsearch.core.errors import IndexNotReadyError
from skillsearch.retrieval import vector_saves
from skillsearch.retrieval.vector_rows import VectorRow
from skillsearch.retrieval.vectors import VectorSnapshot

folder = Path(sys.argv[1])
rows = [VectorRow(f"sk_{i}", "team:a", "knowledge", (), f"d{i}", f"e{i}") for i in range(40)]
matrix = np.random.default_rng(1).random((40, 384), dtype=np.float32)
try:
    vector_saves.save_changes(VectorSnapshot.build(384, matrix, rows), folder, list(zip(rows[4:], matrix[4:])), [])
    print(json.dumps({"saved": True}))
except IndexNotReadyError as exc:
    print(json.dumps({"code": exc.code, "message": exc.message}))
"""


def test_a_change_log_append_the_disk_refuses_is_typed_and_leaves_no_torn_line(tmp_path: Path) -> None:
    """A small write appends its batch to the vectors' change log; an append past a full disk raised a bare
    OSError (INTERNAL) and left part of its line, after which the next batch's line made the log unreadable
    (every open: "run skillsearch reindex"). It is INDEX_NOT_READY naming the folder, the log as it was."""
    from skillsearch.retrieval import vector_saves
    from skillsearch.retrieval.vector_rows import VectorRow
    from skillsearch.retrieval.vectors import VectorSnapshot

    folder, before = _four_saved_vectors(tmp_path)
    kept = [VectorRow(f"sk_{i}", "team:a", "knowledge", (), f"d{i}", f"e{i}") for i in range(4)]
    answer = _past_a_file_size_limit(_APPEND_PAST_THE_LIMIT, folder, 16 << 10)  # the batch's line is about 70 KB
    assert answer["code"] == "INDEX_NOT_READY", answer
    assert answer["message"].startswith(f"the vectors in {folder} could not be written ("), answer
    _says_raise_the_limit(answer)
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.stat().st_size} == before  # no part of the line
    # the disk has room again: the next batch is appended and the log reads whole
    one = VectorRow("sk_new", "team:a", "knowledge", (), "dn", "en")
    grown = VectorSnapshot.build(384, np.ones((5, 384), dtype=np.float32), [*kept, one])
    vector_saves.save_changes(grown, folder, [(one, np.ones(384, dtype=np.float32))], [])
    assert [row.skill_id for row in vector_saves.load(folder).rows] == [*(f"sk_{i}" for i in range(4)), "sk_new"]


_REINDEX_PAST_THE_LIMIT = """
import json, resource, signal, sys
from pathlib import Path
import tantivy
from skillsearch.core.errors import IndexNotReadyError
from skillsearch.core.settings import Settings
from skillsearch.retrieval.hashing_encoder import HashingEncoder
from skillsearch.service import Catalog

data = Path(sys.argv[1])
catalog = Catalog.open(Settings(data_dir=data), encoder=HashingEncoder())
catalog.index()
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (170 << 10, 170 << 10))  # the lexical files fit, the matrix (200 KB) not
answer = {}
try:
    catalog.reindex()
except IndexNotReadyError as exc:
    answer = {"code": exc.code, "message": exc.message}
try:  # what the next writer, of this process or another, does first
    tantivy.Index.open(str(data / "lexical")).writer(heap_size=50_000_000, num_threads=1)
    answer["writer"] = "free"
except ValueError as exc:
    answer["writer"] = str(exc)
print(json.dumps(answer))
"""


def test_a_write_whose_vectors_the_disk_refuses_leaves_no_lexical_writer_behind(tmp_path: Path) -> None:
    """A write commits the lexical side, then saves the vectors; when the disk refused that save, the Tantivy
    writer stayed open past the write lock, and the next lexical write (another process's, or this server's
    own through another index) failed on its lock (LockBusy: "run skillsearch reindex")."""
    data = tmp_path / "data"
    seed = _run(data, "import", str(_bundle(tmp_path / "seed.json", "seed", 200, 10)), "--source", "t",
                "--grant", "team:x")
    assert seed.returncode == 0, seed.stderr
    done = subprocess.run([sys.executable, "-c", _REINDEX_PAST_THE_LIMIT, str(data)], capture_output=True, text=True,
                          timeout=120, cwd=REPO, env=env())
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer.get("code") == "INDEX_NOT_READY", answer
    assert answer["message"].startswith(f"the vectors in {data / 'vectors'} could not be written ("), answer
    _says_raise_the_limit(answer)
    assert answer["writer"] == "free", answer
    again = _run(data, "reindex")
    assert again.returncode == 0, again.stderr
    assert len(_listed(data)) == 200


def test_a_model_library_that_fails_to_import_is_named_with_its_cause(tmp_path: Path) -> None:
    """Installed but not importable (what ``ulimit -v`` does to torch: ``libtorch_cpu.so: failed to map
    segment from shared object``; here a package of that name that fails so, first on the path) is said
    with its cause, not as "not installed; run make venv"."""
    shadow = tmp_path / "shadow" / "sentence_transformers"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        'raise ImportError("libtorch_cpu.so: failed to map segment from shared object")\n', encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(tmp_path / "data"), "--encoder", "minilm", "-q",
         "search", "review a pull request"],
        capture_output=True, text=True, timeout=300, cwd=REPO,
        env={**env(), "PYTHONPATH": f"{tmp_path / 'shadow'}{os.pathsep}{REPO}",
             "XDG_CACHE_HOME": str(tmp_path / "cache")},  # no traced forward: the model library is imported
    )
    assert done.returncode == 1
    assert "error: INDEX_NOT_READY: sentence-transformers cannot be imported (ImportError: libtorch_cpu.so: failed to" \
           " map segment from shared object)" in done.stderr.splitlines(), done.stderr
    assert "Traceback" not in done.stderr


def test_a_data_dir_that_is_a_dangling_link_is_a_usage_error_naming_its_target(tmp_path: Path) -> None:
    link = tmp_path / "index"
    link.symlink_to(tmp_path / "volume" / "index")  # a volume not mounted yet
    for args in (["list"], ["search", "review", "--mode", "lexical"], ["import", str(tmp_path), "--source", "t",
                                                                        "--grant", "team:x"]):
        assert _usage_error(_run(link, *args)) == (f"skillsearch: error: --data-dir {link}: a symbolic link to"
                                         f" {tmp_path / 'volume' / 'index'}, which does not exist; create that folder"
                                         " first, or check the path")
    assert not (tmp_path / "volume").exists()


def test_a_data_dir_that_cannot_be_created_is_a_usage_error_naming_the_folder() -> None:
    unprivileged = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] if os.geteuid() == 0 else []
    base = Path(tempfile.mkdtemp(prefix="envaudit-"))  # outside pytest's root-only folder
    try:
        base.chmod(0o755)
        locked = base / "locked"
        locked.mkdir(mode=0o555)
        done = _run(locked / "data", "list", prefix=unprivileged, extra_env={"HOME": str(base)})
        assert _usage_error(done) == (f"skillsearch: error: --data-dir {locked / 'data'}: does not exist and cannot"
                                         f" be created: this user may not write the folder {locked}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_catalog_deleted_under_a_server_is_503_never_500_nor_recreated_empty(tmp_path: Path) -> None:
    """Each request thread opens its own connection: one opened after the file was deleted used to create
    an empty catalog in its place ("no such table: meta", a 500; the next start would seed the sample into
    it). It is INDEX_NOT_READY (503) naming the file now, and the server answers again once it is back."""
    from concurrent.futures import ThreadPoolExecutor

    import httpx
    from fleetsupport import ServeProcess

    from skillsearch.http.auth import add_principal

    data = tmp_path / "data"
    assert _run(data, "import", str(_bundle(tmp_path / "b.json", "gone", 3, 200)), "--source", "t",
                "--grant", "team:x").returncode == 0
    token = add_principal(data / "principals.toml", "ops", ["*"], ["skills:read"])
    saved = tmp_path / "saved.sqlite3"
    shutil.copy(data / "catalog.sqlite3", saved)
    server = ServeProcess(data, "--no-sync")
    try:
        def get(i: int) -> httpx.Response:
            return httpx.get(f"{server.url}/v1/skills", params={"limit": 1 + i % 3},
                             headers={"Authorization": f"Bearer {token}"}, timeout=60)

        assert get(0).status_code == 200
        for name in ("catalog.sqlite3", "catalog.sqlite3-wal", "catalog.sqlite3-shm"):
            (data / name).unlink(missing_ok=True)
        with ThreadPoolExecutor(16) as pool:  # enough at once that the server opens new threads' connections
            answers = list(pool.map(get, range(48)))
        assert {r.status_code for r in answers} <= {200, 503}, [r.text for r in answers if r.status_code != 200][:1]
        for refused in (r for r in answers if r.status_code == 503):
            assert refused.json()["error"]["code"] == "INDEX_NOT_READY"
            assert refused.json()["error"]["message"].startswith(f"the catalog {data / 'catalog.sqlite3'} is gone")
        assert not (data / "catalog.sqlite3").exists()  # never created empty in its place

        shutil.copy(saved, data / "catalog.sqlite3")
        with ThreadPoolExecutor(16) as pool:
            assert {r.status_code for r in pool.map(get, range(48))} == {200}
    finally:
        server.stop()


def test_a_model_folder_this_user_may_not_read_is_one_line_naming_it() -> None:
    """``SKILLSEARCH_MODELS_DIR`` holding the model in a folder this user may not read was
    ``INTERNAL: PermissionError`` on its ``config.json``."""
    unprivileged = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"] if os.geteuid() == 0 else []
    base = Path(tempfile.mkdtemp(prefix="envaudit-"))  # outside pytest's root-only folder
    model = base / "models" / "all-MiniLM-L6-v2"
    try:
        base.chmod(0o755)
        model.mkdir(parents=True)
        (model / "config.json").write_text("{}", encoding="utf-8")
        model.chmod(0o700 if unprivileged else 0)  # root's own folder, or no access at all
        (base / "data").mkdir()
        if unprivileged:
            os.chown(base / "data", NOBODY, NOBODY)
        done = subprocess.run(
            [*unprivileged, sys.executable, "-m", "skillsearch.cli", "--data-dir", str(base / "data"), "--encoder",
             "minilm", "-q", "search", "review a pull request"],
            capture_output=True, text=True, timeout=300, cwd=REPO,
            env={**env(), "SKILLSEARCH_MODELS_DIR": str(base / "models"), "HOME": str(base)},
        )
        assert done.returncode == 1, done.stderr
        assert _one_error_line(done) == (
            f"error: INDEX_NOT_READY: the model folder {model} cannot be read (Permission denied): make it readable by"
            " this user, or unset SKILLSEARCH_MODELS_DIR to use the packaged model")
    finally:
        model.chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


def test_a_thread_that_cannot_open_the_catalog_for_lack_of_file_descriptors_gets_a_typed_error(
        tmp_path: Path) -> None:
    """A server's new request thread under a file-descriptor limit (``ulimit -n``, a busy server): SQLite opens
    the file at the connection's first statement, and that failed as a bare ``sqlite3.OperationalError`` (a
    500) outside the store's handling. It is ``INDEX_NOT_READY`` naming the catalog, and the next thread once
    descriptors are free reads as before. A real process, its limit set to the descriptors it holds."""
    script = f"""
import json, os, resource, sqlite3, threading
from pathlib import Path
from skillsearch.catalog.store import CatalogStore
from skillsearch.core.errors import IndexNotReadyError
store = CatalogStore(Path({str(tmp_path / 'catalog.sqlite3')!r}))
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
got = []
def read():
    try:
        got.append(store.count())
    except IndexNotReadyError as exc:
        got.append(exc.code + ': ' + exc.message)
    except sqlite3.Error as exc:
        got.append('bare ' + type(exc).__name__)
resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir('/proc/self/fd')), hard))
t = threading.Thread(target=read); t.start(); t.join()
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
t = threading.Thread(target=read); t.start(); t.join()
print(json.dumps(got))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=REPO,
                         env=env())
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got[0].startswith("INDEX_NOT_READY: the catalog ") and "cannot be opened" in got[0], got
    assert got[1] == 0, got


def test_a_server_out_of_file_descriptors_logs_one_line_not_a_traceback_per_failed_accept(tmp_path: Path) -> None:
    """``serve`` under a low open-files limit with more clients than descriptors: asyncio's accept loop logged
    a traceback for every failed ``accept()``, its whole backlog each step (430,000 lines in 20 s under
    ``ulimit -n 64``, enough to fill a disk). Now one error line says what failed and what to do, and the
    server answers again once the clients leave. A real process under a real ``RLIMIT_NOFILE``."""
    import re
    import socket
    import time

    import httpx

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (160, 160))

    proc = subprocess.Popen(
        [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(tmp_path / "data"), "--encoder", "hashing", "-q",
         "serve", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=env(), preexec_fn=limit,
    )
    clients: list[socket.socket] = []
    try:
        assert proc.stdout is not None
        banner = "".join(proc.stdout.readline() for _ in range(2))
        url = re.search(r"serving on (http://127\.0\.0\.1:(\d+))", banner)
        assert url, banner
        for _ in range(400):  # more than the server has descriptors: its accepts fail
            clients.append(socket.create_connection(("127.0.0.1", int(url.group(2))), timeout=10))
        time.sleep(3)  # a while at the limit (what is asserted is the log's content, not a duration)
        for client in clients:
            client.close()
        clients.clear()
        deadline = time.monotonic() + 60
        while True:  # the server answers again once the descriptors are free
            try:
                if httpx.get(url.group(1) + "/healthz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the server never answered again"
            time.sleep(0.2)
    finally:
        for client in clients:
            client.close()
        proc.send_signal(signal.SIGINT)
        try:
            _, stderr = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, stderr = proc.communicate()
    assert "socket.accept() out of system resource" not in stderr and "Traceback" not in stderr, stderr[-3000:]
    said = [line for line in stderr.splitlines() if "cannot accept connections" in line]
    assert len(said) == 1 and "Too many open files" in said[0] and "ulimit -n" in said[0], said


_MANIFEST_PAST_THE_LIMIT = """
import json, sys
from pathlib import Path
from skillsearch.core.errors import IndexNotReadyError
from skillsearch.retrieval.manifest import write_manifest

try:
    write_manifest(Path(sys.argv[1]) / "manifest.json", {"calibration": "x" * (64 << 10)})
    print(json.dumps({"saved": True}))
except IndexNotReadyError as exc:
    print(json.dumps({"code": exc.code, "message": exc.message}))
"""


def test_an_index_manifest_the_disk_refuses_is_one_typed_line_and_the_one_in_place_stays(tmp_path: Path) -> None:
    """The manifest is written last by every index write (a first build, a recalibration on open): on a full
    disk it was ``error: INTERNAL: OSError: [Errno 28] No space left on device`` (a search's first build of
    a new data directory on a nearly full disk), naming no file, with its ``manifest.tmp`` left behind."""
    from skillsearch.retrieval.manifest import read_manifest, write_manifest

    write_manifest(tmp_path / "manifest.json", {"store_generation": 3})
    before = (tmp_path / "manifest.json").read_bytes()
    answer = _past_a_file_size_limit(_MANIFEST_PAST_THE_LIMIT, tmp_path, 16 << 10)
    assert answer.get("code") == "INDEX_NOT_READY", answer
    assert str(answer["message"]).startswith(f"the index manifest {tmp_path / 'manifest.json'} could not be written ("), \
        answer
    _says_raise_the_limit(answer)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]  # no manifest.tmp
    assert (tmp_path / "manifest.json").read_bytes() == before
    assert (read_manifest(tmp_path / "manifest.json") or {}).get("store_generation") == 3


@pytest.mark.parametrize("command", [
    ["token", "add", "ops", "--grant", "team:x", "--scope", "skills:read"],
    ["sources", "add", "mine", "--path", "SKILLS", "--grant", "team:x"],
], ids=["token add", "sources add"])
def test_a_config_file_the_disk_refuses_is_one_line_naming_it_and_leaves_no_temporary_file(
        command: list[str], tmp_path: Path) -> None:
    """README: ``token add``'s ``principals.toml`` and ``sources add``'s ``sync.toml`` refused by the disk
    are one line naming the file. A buffered write names no file, so a full disk was ``error: INTERNAL:
    OSError: [Errno 28] No space left on device``, and the half-written temporary file stayed."""
    data, skills = tmp_path / "data", tmp_path / "skills"
    (skills / "one").mkdir(parents=True)
    (skills / "one" / "SKILL.md").write_text("---\nname: one\ndescription: The one skill.\n---\nBody.\n", "utf-8")
    assert _run(data, "import", str(skills), "--source", "t", "--grant", "team:x").returncode == 0
    before = sorted(p.name for p in data.iterdir())
    args = [str(skills) if a == "SKILLS" else a for a in command]

    done = _run(data, *args, max_file_bytes=64)  # each file holds more than 64 bytes

    assert done.returncode == 1, done.stderr
    line = _one_error_line(done)
    name = "principals.toml" if command[0] == "token" else "sync.toml"
    assert line == f"error: INDEX_NOT_READY: {data / name}: File too large (it is over the file size limit)", line
    assert sorted(p.name for p in data.iterdir()) == before
    assert _run(data, *args).returncode == 0  # once there is room


_LOCK_ON_A_FULL_DISK = """
import json, os, resource, signal, sys, time
from pathlib import Path
from skillsearch.retrieval.writelock import WriteLock

data = Path(sys.argv[1])
lock = WriteLock(data)
os.utime(lock.path, (1, 1))  # long ago: claiming the lock sets its time, as a pid write would
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (0, hard))  # no byte may be written: a full disk (EFBIG for ENOSPC)
try:
    with lock.try_hold() as got:
        answer = {"got": got, "holder": lock.holder(), "recent": lock.path.stat().st_mtime > time.time() - 600}
except OSError as exc:
    answer = {"error": repr(exc)}
print(json.dumps(answer))
"""


def test_the_write_lock_is_taken_on_a_full_disk_so_a_snapshot_can_move_the_data_off_it(tmp_path: Path) -> None:
    """The lock is the ``flock``; the pid written into it is for messages. On a full disk that write raised,
    so ``snapshot create`` of a data directory on a full disk (to another disk: the way off it) failed with
    ``the snapshot DEST could not be written (No space left on device)``, blaming the snapshot's disk."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "write.lock").write_text("", encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", _LOCK_ON_A_FULL_DISK, str(data)], capture_output=True, text=True,
                          timeout=120, cwd=REPO, env=env())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"got": True, "holder": "another process", "recent": True}, done.stdout
