"""SIGTERM (docker, Kubernetes, systemd) during an embedding: the process stops at the next batch instead of
embedding everything first, keeps what it embedded, exits 143 saying what is left, and the next open embeds
the rest. Real ``skillsearch import``, ``mcp`` (stdio) and ``serve --workers 2`` processes with the real
MiniLM model."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest
from test_sources import write_skill

from skillsearch.catalog.store import CatalogStore
from skillsearch.core.domain import Principal
from skillsearch.core.settings import Settings
from skillsearch.retrieval import indexer, lexical_schema, write_diff
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.service import Catalog
from skillsearch.sync.config import default_config_path
from skillsearch.sync.sources import SourceConfig, add_source

REPO = Path(__file__).resolve().parents[1]
SKILLS = 400
TAIL = "Quokka telemetry for zanzibar lighthouses"
WAIT_S = 180.0  # generous: the machine is shared; no test asserts a duration
ENV = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}


def _bundle(path: Path) -> Path:
    skills = [
        {"slug": f"skill-{i:03d}", "name": f"Skill {i:03d}",
         "description": f"Handles chore number {i} of the warehouse inventory, step by step.",
         "tags": ["chores"], "instructions": f"Count the boxes of aisle {i}. Write the total down. " * 8}
        for i in range(SKILLS - 1)
    ]
    skills.append({"slug": "lighthouse-quokka", "name": TAIL, "description": f"{TAIL}: reads the beacons.",
                   "tags": ["beacons"], "instructions": "Read each lighthouse beacon and log the quokka count."})
    path.write_text(json.dumps(skills), encoding="utf-8")
    return path


def test_sigterm_mid_import_stops_between_batches_and_the_next_open_embeds_the_rest(
        tmp_path: Path, encoder: Encoder) -> None:
    data_dir = tmp_path / "data"
    proc = _import(tmp_path, data_dir)
    seen = _read_until(proc, "embedding")  # the progress bar: the store has committed, the model embeds
    proc.send_signal(signal.SIGTERM)
    rest = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 128 + signal.SIGTERM, seen + rest
    said = re.search(r"terminated: stopped embedding: (\d+) of (\d+) skills embedded and saved; the other (\d+)", rest)
    assert said is not None, rest
    # --json: its one object on stdout says so (stdout was empty before), the same words as stderr's
    assert proc.stdout is not None
    with proc.stdout:
        error = json.loads(proc.stdout.read())["error"]
    assert error["code"] == "INTERRUPTED" and error["details"] == {"signal": "SIGTERM"}
    assert error["message"] == "stopped by SIGTERM: " + rest.split("terminated: ", 1)[1].splitlines()[0]
    embedded, total, left = map(int, said.groups())
    assert total == SKILLS and left == SKILLS - embedded and left > 0

    # The store holds every skill (its transaction committed); the index what was embedded, behind the store.
    assert _stopped_index(data_dir) == embedded
    _next_open_embeds_the_rest(data_dir, encoder, left)


def _import(tmp_path: Path, data_dir: Path) -> subprocess.Popen[str]:
    """``skillsearch --json import`` of the SKILLS-skill bundle, stdout and stderr piped."""
    return subprocess.Popen(
        [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data_dir), "--encoder", "minilm", "import",
         str(_bundle(tmp_path / "bundle.json")), "--source", "chores", "--grant", "team:ops", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO,
    )


def test_ctrl_c_mid_import_under_json_prints_its_one_object(tmp_path: Path) -> None:
    """A Ctrl-C (SIGINT) mid-import under ``--json``: exit 130, ``interrupted`` on stderr and, on stdout, the one
    object the contract promises, an ``INTERRUPTED`` error naming the signal (stdout was empty before)."""
    proc = _import(tmp_path, tmp_path / "data")
    seen = _read_until(proc, "embedding")
    proc.send_signal(signal.SIGINT)
    out, rest = proc.communicate(timeout=120)
    assert proc.returncode == 130, seen + rest
    assert "interrupted" in rest and "Traceback" not in rest
    error = json.loads(out)["error"]
    assert error["code"] == "INTERRUPTED" and error["details"] == {"signal": "SIGINT"}, out


def _read_until(proc: subprocess.Popen[str], text: str) -> str:
    """stderr of ``proc`` up to ``text`` (the process ending first fails the test)."""
    assert proc.stderr is not None
    seen = ""
    while text not in seen:
        char = proc.stderr.read(1)
        assert char, f"the process ended before it said {text!r}: {seen!r}"
        seen += char
    return seen


def _stopped_index(data_dir: Path) -> int:
    """The documents of an index whose write stopped (generation -1, behind every store): fewer than SKILLS."""
    manifest = json.loads((data_dir / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["store_generation"] == -1 and manifest["documents"] < SKILLS, manifest
    return int(manifest["documents"])


def _next_open_embeds_the_rest(data_dir: Path, encoder: Encoder, left: int) -> None:
    catalog = Catalog.open(Settings(data_dir=data_dir, encoder="minilm", seed_sample=False), encoder=encoder)
    try:
        assert catalog.skill_count() == SKILLS
        assert catalog.embedded_documents() == left  # only the rest, not the skills embedded before the stop
        assert catalog.indexed_documents() == SKILLS
        catalog.readiness()  # both sides hold every skill, at the store's generation
        hits = catalog.search(Principal.operator(), SearchRequest(query="quokka lighthouse beacons", mode="semantic")).hits
        assert hits and hits[0].skill.slug == "lighthouse-quokka"
    finally:
        catalog.close()


def _skill_folders(root: Path) -> Path:
    """SKILLS skill folders (``SKILL.md`` each) for a folder source; the last one, the tail, is findable."""
    for i in range(SKILLS - 1):
        write_skill(root, f"skill-{i:03d}", f"Handles chore number {i} of the warehouse inventory, step by step.",
                    f"Count the boxes of aisle {i}. Write the total down. " * 8)
    write_skill(root, "lighthouse-quokka", f"{TAIL}: reads the beacons.",
                "Read each lighthouse beacon and log the quokka count.")
    return root


def _stored(data_dir: Path) -> int:
    """Skills in the data directory's store, read-only (another process is writing it)."""
    path = data_dir / CatalogStore.FILENAME
    if not path.exists():
        return 0
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30.0)) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM skills").fetchone()[0])
    except sqlite3.OperationalError:  # the schema is not there yet
        return 0


def _eventually(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def _stdio_mcp(data_dir: Path) -> subprocess.Popen[str]:
    """``skillsearch mcp`` over stdio, its handshake answered: the server is up. stdin stays open (a host
    that is being stopped by docker or systemd does not close it first)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "skillsearch.cli", "-q", "--encoder", "minilm", "mcp", "--data-dir", str(data_dir)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}}) + "\n")
    proc.stdin.flush()
    answer = json.loads(proc.stdout.readline())
    assert answer["id"] == 1 and "result" in answer, answer
    return proc


def _terminate(proc: subprocess.Popen[str]) -> tuple[int, str]:
    """SIGTERM with stdin still open: the exit code and stderr."""
    assert proc.stderr is not None and proc.stdin is not None and proc.stdout is not None
    proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError("the process did not stop on SIGTERM") from None
    finally:
        proc.stdin.close()
        proc.stdout.close()
    with proc.stderr:
        return code, proc.stderr.read()


def test_sigterm_ends_an_idle_stdio_mcp_server_whose_client_keeps_stdin_open(tmp_path: Path) -> None:
    """The SDK reads stdin in a thread that only the client closing the pipe wakes: the server stops anyway."""
    data_dir = tmp_path / "data"
    proc = _stdio_mcp(data_dir)
    _eventually(lambda: (data_dir / "manifest.json").exists(), "the index never opened")  # idle: nothing left to do
    code, err = _terminate(proc)
    assert code == 128 + signal.SIGTERM, err
    assert "terminated" in err.splitlines() and "Traceback" not in err, err


def test_sigterm_stops_a_stdio_mcp_servers_source_between_batches_and_the_next_open_embeds_the_rest(
        tmp_path: Path, encoder: Encoder) -> None:
    """A folder source of sync.toml mirrored by the stdio server in the background: SIGTERM while its skills
    are embedded stops the write at its next batch, saves what was embedded, and the process exits 143."""
    data_dir, skills = tmp_path / "data", _skill_folders(tmp_path / "skills")
    data_dir.mkdir()
    add_source(default_config_path(data_dir), SourceConfig("local", "user:me", path=skills))
    proc = _stdio_mcp(data_dir)
    # The source's run has committed every skill: its embedding follows.
    _eventually(lambda: _stored(data_dir) == SKILLS, "the source was never mirrored")
    code, err = _terminate(proc)
    assert code == 128 + signal.SIGTERM, err
    assert "terminated" in err.splitlines() and "Traceback" not in err, err
    embedded = _stopped_index(data_dir)
    _next_open_embeds_the_rest(data_dir, encoder, SKILLS - embedded)


def test_closing_a_catalog_stops_its_background_open_and_waits_for_it(tmp_path: Path, encoder: Encoder) -> None:
    """A server's catalog opens (and repairs) its index in a background thread; closing the catalog (a
    server's shutdown) tells that thread to stop and waits for it: it keeps the batches it finished, as a
    SIGTERM'd write does, and writes nothing after the store is closed."""
    from skillsearch.catalog.importer import parse_path
    from skillsearch.catalog.imports import store_import

    data_dir = tmp_path / "data"
    settings = Settings(data_dir=data_dir, encoder="minilm", seed_sample=False)
    catalog = Catalog.open(settings, encoder=encoder, index=False)
    # The backlog a killed import leaves: every skill in the store, none in the index.
    store_import(catalog.store, parse_path(_bundle(tmp_path / "bundle.json"), "chores", "team:ops"), "chores",
                 "team:ops")
    catalog.prepare_in_background()  # the model is loaded (session fixture): the open embeds at once
    assert catalog.index_opening()
    catalog.close()

    assert not [t for t in threading.enumerate() if t.name == "skillsearch-index-open"]
    manifest = data_dir / "manifest.json"
    documents = _stopped_index(data_dir) if manifest.exists() else 0
    _next_open_embeds_the_rest(data_dir, encoder, SKILLS - documents)



def _waits_in(thread: threading.Thread, function: str) -> bool:
    """Whether ``thread`` is blocked inside ``function`` (of skillsearch's code) right now."""
    frame = sys._current_frames().get(thread.ident or 0)
    return frame is not None and any(
        f.name == function and "skillsearch" in f.filename for f in traceback.extract_stack(frame))


def test_closing_a_catalog_while_its_model_loads_ends_the_background_open(tmp_path: Path) -> None:
    """A server stopped in its first seconds (a rollout) closes its catalog while the background open waits
    for the embedding model to repair a backlog: the open ends then, instead of holding the close for its
    whole wait and writing the index once the model has loaded, after the store is closed."""
    from skillsearch.catalog.importer import parse_path
    from skillsearch.catalog.imports import store_import
    from skillsearch.retrieval.minilm import MiniLMEncoder

    data_dir = tmp_path / "data"
    # An encoder of its own (not the process's shared one: make_encoder) whose model starts loading in ten
    # minutes (never, in this test): the open waits for it.
    settings = Settings(data_dir=data_dir, encoder="minilm", seed_sample=False, model_wait_s=0.05,
                        model_load_delay_s=600.0)
    catalog = Catalog.open(settings, encoder=MiniLMEncoder(), index=False)
    store_import(catalog.store, parse_path(_bundle(tmp_path / "bundle.json"), "chores", "team:ops"), "chores",
                 "team:ops")
    catalog.prepare_in_background()
    opener = catalog._holder._opening.thread
    assert opener is not None
    deadline = time.monotonic() + WAIT_S
    while opener.is_alive() and not _waits_in(opener, "wait") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _waits_in(opener, "wait")  # the repair's unbounded wait for the model
    catalog.close()

    assert not opener.is_alive()
    assert not (data_dir / "manifest.json").exists()  # nothing written: the next open builds the index


def test_a_stopped_write_sets_its_skills_aside_in_one_pass(tmp_path: Path, fake_encoder: Encoder,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A write stopped after its first chunk sets aside the skills it did not embed in one pass: it built
    the set of those skills once per skill it kept (quadratic: at 100k skills a SIGTERM'd import spent
    hours there, long past the SIGKILL that follows, and lost the batches it had embedded)."""
    from skillsearch.core.errors import WriteStopped

    stopping = threading.Event()
    catalog = Catalog(Settings(data_dir=tmp_path / "data", encoder="hashing", seed_sample=False), fake_encoder,
                      stopping)
    sets_built = 0
    builtin_set = set

    def counting_set(*args: object) -> set[object]:
        nonlocal sets_built
        sets_built += 1
        return builtin_set(*args)  # type: ignore[arg-type]

    def progress(total: int, what: str) -> Callable[[int], None]:
        return lambda n: stopping.set()  # SIGTERM once the first chunk is embedded

    monkeypatch.setattr(write_diff, "set", counting_set, raising=False)
    try:
        with pytest.raises(WriteStopped, match=f"{indexer.EMBED_CHUNK} of {SKILLS} skills embedded"):
            catalog.import_path(_bundle(tmp_path / "bundle.json"), "chores", "team:ops", progress)
    finally:
        monkeypatch.undo()
        catalog.close()

    assert _stopped_index(tmp_path / "data") == indexer.EMBED_CHUNK
    assert sets_built < 10, sets_built  # a few, whatever the number of skills left (272 here)


def test_sigterm_stops_a_one_shot_sync_waiting_on_its_upstream(tmp_path: Path) -> None:
    """``skillsearch sync`` takes SIGTERM to stop its writes between batches; while it waits on an upstream
    that drips its answer (deadline 10 minutes) the signal stops the request too, as stopping a server's
    poller does: the process exits 143 at once instead of after the deadline (SIGTERM killed it at once
    before it was taken, and SIGKILL follows it in 10-30 s)."""
    from hostile_upstream import hostile_upstream

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    with hostile_upstream() as (url, up):
        (data_dir / "sync.toml").write_text(
            f'[upstream]\nurl = "{url}"\ntoken = "t"\nretries = 0\ntimeout_s = 600.0\ndeadline_s = 600.0\n\n'
            '[[subscriptions]]\nid = "drip-forever"\n', encoding="utf-8")
        proc = subprocess.Popen(
            [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data_dir), "--encoder", "hashing", "sync"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO,
        )
        try:
            deadline = time.monotonic() + WAIT_S
            while not up.events.get("drip-forever.requests") and time.monotonic() < deadline:
                time.sleep(0.05)
            assert up.events.get("drip-forever.requests"), "the sync never asked its upstream"
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=WAIT_S)  # 600 s without the stop: fails here
        finally:
            proc.kill()
    assert proc.returncode == 143, err
    assert "sync was stopped during a request" in err, err
    # The README's `terminated: ...` saying what the next run does (a bare `terminated` said nothing).
    assert "terminated: stopped syncing: every page stored before the signal is kept, and the next `skillsearch" \
        " sync` resumes each subscription from its stored cursor" in err.splitlines(), err
    assert "Traceback" not in err, err
    # A stop is not a failure of the upstream: recorded as the subscription's last error it made the sync
    # `failing` (and, past --degraded-after, a replica `degraded`) though nothing had failed.
    status = subprocess.run(_cli(data_dir, "sync", "--status", "--json"), capture_output=True, text=True, env=ENV,
                            cwd=REPO, timeout=WAIT_S)
    (sub,) = json.loads(status.stdout)["subscriptions"]
    assert sub["last_error"] is None and sub["failing"] is False, sub


LARGE = 8_000  # a lexical rebuild of this many skills takes half a second or more: many APPLY_CHUNKs after the first


def _cli(data_dir: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data_dir), "--encoder", "hashing", *args]


def _large_catalog(tmp_path: Path) -> Path:
    bundle = tmp_path / "large.json"
    bundle.write_text(json.dumps([
        {"slug": f"chore-{i:05d}", "name": f"Chore {i:05d}", "description": f"Handles chore number {i} of the depot.",
         "tags": ["chores"], "instructions": f"Count the crates of bay {i}. Write the total down. " * 4}
        for i in range(LARGE - 1)
    ] + [{"slug": "lighthouse-quokka", "name": TAIL, "description": f"{TAIL}: reads the beacons.", "tags": [],
          "instructions": "Read each lighthouse beacon and log the quokka count."}]), encoding="utf-8")
    data_dir = tmp_path / "data"
    done = subprocess.run(_cli(data_dir, "import", str(bundle), "--source", "chores", "--grant", "team:ops"),
                          capture_output=True, text=True, env=ENV, cwd=REPO, timeout=WAIT_S)
    assert done.returncode == 0, done.stderr
    return data_dir


@pytest.mark.parametrize("how", ["open after an upgrade", "reindex"])
def test_sigterm_stops_a_lexical_rebuild_and_the_next_open_rebuilds_it(tmp_path: Path, how: str) -> None:
    """The lexical side rebuilt whole (an open after an upgrade changed its recipe, or ``reindex``) stops at
    SIGTERM between chunks of documents instead of finishing first: exit 143, nothing of it committed, the
    manifest behind every store and marked incomplete (never served as current), and the next run rebuilds it."""
    data_dir = _large_catalog(tmp_path)
    one = tmp_path / "one.json"
    one.write_text(json.dumps([{"slug": "one-more", "name": "One more", "description": "A late skill.",
                                "tags": [], "instructions": "Read it."}]), encoding="utf-8")
    if how == "reindex":
        command = _cli(data_dir, "reindex")
    else:  # what an upgrade that changed the lexical recipe leaves: a manifest with another one
        path = data_dir / "manifest.json"
        manifest = json.loads(path.read_text(encoding="utf-8"))
        manifest["lexical"]["fields"] -= 1
        path.write_text(json.dumps(manifest), encoding="utf-8")
        command = _cli(data_dir, "import", str(one), "--source", "late", "--grant", "team:ops")
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO)
    seen = _read_until(proc, "lexical index")  # its progress bar: the rebuild has begun
    proc.send_signal(signal.SIGTERM)
    _, rest = proc.communicate(timeout=WAIT_S)
    assert proc.returncode == 128 + signal.SIGTERM, seen + rest
    assert "terminated: stopped writing the lexical index" in rest and "Traceback" not in rest, seen + rest
    manifest = json.loads((data_dir / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["store_generation"] == -1 and manifest["lexical"] == indexer.LEXICAL_INCOMPLETE, manifest

    again = subprocess.run(command, capture_output=True, text=True, env=ENV, cwd=REPO, timeout=WAIT_S)
    assert again.returncode == 0, again.stderr
    catalog = Catalog.open(Settings(data_dir=data_dir, encoder="hashing", seed_sample=False))
    try:
        expected = LARGE + (how != "reindex")
        assert catalog.indexed_documents() == expected
        catalog.readiness()  # both sides hold every skill, at the store's generation
        hits = catalog.search(Principal.operator(), SearchRequest(query="quokka lighthouse", mode="lexical")).hits
        assert hits and hits[0].skill.slug == "lighthouse-quokka"
    finally:
        catalog.close()
    manifest = json.loads((data_dir / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["lexical"]["fields"] == lexical_schema.LEXICAL_FIELDS_VERSION, manifest


def test_a_write_stopped_while_embedding_keeps_both_sides_alike_without_a_lexical_rebuild(
        tmp_path: Path, fake_encoder: Encoder) -> None:
    """A write into an existing index stopped in its embedding still writes the skills it embedded into the
    lexical side (a small part of their embedding's time): both sides hold the same skills and the manifest's
    lexical recipe stays current, so the next open embeds the rest and rebuilds nothing (marking the side
    incomplete would have the next open rebuild every skill's lexical document: seconds per 100k)."""
    from skillsearch.core.errors import WriteStopped

    stopping = threading.Event()
    data_dir = tmp_path / "data"
    catalog = Catalog(Settings(data_dir=data_dir, encoder="hashing", seed_sample=False), fake_encoder, stopping)
    first = tmp_path / "first.json"
    first.write_text(json.dumps([{"slug": "seed", "name": "Seed", "description": "The first skill of the index.",
                                  "instructions": "Plant it."}]), encoding="utf-8")

    def progress(total: int, what: str) -> Callable[[int], None]:
        return lambda n: stopping.set() if what == "embedding" else None  # SIGTERM once a chunk is embedded

    try:
        catalog.import_path(first, "seeds", "team:ops")
        with pytest.raises(WriteStopped, match=f"{indexer.EMBED_CHUNK} of {SKILLS} skills embedded"):
            catalog.import_path(_bundle(tmp_path / "bundle.json"), "chores", "team:ops", progress)
        index = catalog.index()
        assert index.lexical.num_docs() == len(index.snapshot().vectors) == 1 + indexer.EMBED_CHUNK
    finally:
        catalog.close()
    manifest = json.loads((data_dir / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["store_generation"] == -1 and manifest["lexical"] != indexer.LEXICAL_INCOMPLETE, manifest


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stopped_server_says_so_in_its_json_log(tmp_path: Path, sig: signal.Signals) -> None:
    """``serve``'s stderr is its JSON log (one object per line, what a log shipper parses): its last line at a
    SIGTERM (exit 143) or a Ctrl-C (130) was the plain word ``terminated`` / ``interrupted``, the one line of
    the stream that did not parse. A real ``serve`` process, stopped after it answered. It freezes its heap
    before it exits (so the interpreter's last collection does not walk it) and closes every thread's SQLite
    connection first, as that collection did: the catalog's WAL is checkpointed and gone, as before."""
    import httpx
    from fleetsupport import ServeProcess

    data_dir = tmp_path / "data"
    data_dir.mkdir()  # an operator's folder: no "did not exist" note before the log starts
    server = ServeProcess(data_dir)
    try:
        assert httpx.get(server.url + "/healthz", timeout=30).status_code == 200
        assert httpx.get(server.url + "/v1/skills", timeout=30).status_code in (200, 401)  # a request thread's connection
        assert (data_dir / "catalog.sqlite3-wal").exists()  # seeded with the sample: written, open
        server.proc.send_signal(sig)
        code = server.proc.wait(timeout=60)
    finally:
        server.stop()
    assert code == (128 + signal.SIGTERM if sig == signal.SIGTERM else 130)
    lines = (tmp_path / "data.stderr").read_text(encoding="utf-8").splitlines()
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            raise AssertionError(f"a line of serve's JSON log is not JSON: {line!r}") from None
    said = "terminated" if sig == signal.SIGTERM else "interrupted"
    assert records[-1]["msg"] == said and records[-1]["logger"] == "skillsearch", records[-3:]
    assert not (data_dir / "catalog.sqlite3-wal").exists()  # every connection closed: checkpointed into the file


@pytest.mark.parametrize("command", [["serve"], ["mcp", "--http"]])
def test_sigterm_before_a_server_listens_ends_it(tmp_path: Path, command: list[str]) -> None:
    """A supervisor's SIGTERM that arrived while the server was still starting (here: waiting for a
    `snapshot restore` to finish swapping its data directory) was taken by our handler, so uvicorn, which
    takes the signal over once it runs, never saw one: the server went on to listen and serve until a
    second SIGTERM. It now shuts down as it starts, exit 143, and never says it is serving."""
    import fcntl

    data = tmp_path / "data"
    data.mkdir()
    lock = os.open(data / "in-use.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(lock, fcntl.LOCK_EX)  # as a restore holds it around its swap
    proc = subprocess.Popen(
        [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data), "--encoder", "hashing", *command,
         "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=REPO)
    try:
        deadline = time.monotonic() + WAIT_S
        while f" {proc.pid} " not in "".join(
                line for line in Path("/proc/locks").read_text().splitlines(True) if "->" in line):
            assert proc.poll() is None and time.monotonic() < deadline, "the server never waited for the restore"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
    finally:
        os.close(lock)  # the "restore" is done: the server goes on starting, on its own
    try:
        out, err = proc.communicate(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"the server went on after SIGTERM: {out}{err}") from None
    assert proc.returncode == 128 + signal.SIGTERM, (out, err)
    assert "serving on" not in out + err, (out, err)


def test_a_stopped_servers_gauges_never_open_the_index_in_their_own_thread(tmp_path: Path) -> None:
    """A server whose writes stopped (SIGTERM) while its background open was repairing the index has no index;
    the metrics' gauges (read once when the app is built, in the main thread) then opened and repaired it
    there, and raised the stop out of the app's construction. They say 0 / -1, as while it opens."""
    stop = threading.Event()
    catalog = Catalog.open(Settings(data_dir=tmp_path / "data", encoder="hashing"), index=False, stopping=stop)
    try:
        assert catalog.seeded > 0  # a new directory: the sample in the store, no index yet
        stop.set()
        catalog.prepare_in_background()
        deadline = time.monotonic() + WAIT_S
        while catalog.index_opening():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert catalog.indexed_documents() == 0 and catalog.index_generation() == -1
    finally:
        catalog.close()
