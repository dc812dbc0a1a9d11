"""Snapshots (``skillsearch snapshot create|restore``) and model fingerprints, with real processes, files,
SQLite, Tantivy and the real MiniLM; the refusals run on a hashing-encoder catalog (fast) and check that the
target directory is byte for byte what it was."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from syncsupport import config_for, serve, upstream_content, upstream_with_starter

from skillsearch.catalog.store import CatalogStore
from skillsearch.cli.main import main
from skillsearch.core.domain import Principal
from skillsearch.core.errors import IndexMismatchError
from skillsearch.core.settings import Settings
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.encoders import setting_fingerprint
from skillsearch.retrieval.hashing_encoder import HashingEncoder
from skillsearch.retrieval.indexer import SearchIndex
from skillsearch.retrieval.minilm import MiniLMEncoder
from skillsearch.retrieval.model_files import minilm_dir
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.service import Catalog
from skillsearch.upstream.app import create_upstream_app
from skillsearch.upstream.platform import ReferenceUpstream

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "skillsearch.cli", "-q", *args], capture_output=True, text=True,
                          env=ENV, timeout=timeout)


def run(*args: str) -> tuple[int, dict[str, Any]]:
    """The CLI in this process (``main``), with ``--json``: exit code and the one JSON object."""
    out = io.StringIO()
    code = main([*args, "--json"], out=out)
    return code, json.loads(out.getvalue())


def tree_digest(root: Path) -> str:
    """Every path under ``root`` with its type, mode and bytes: equal digests mean an unchanged folder."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        h.update(f"{path.relative_to(root)}\0{st.st_mode}\0".encode())
        if path.is_file() and not path.is_symlink():
            h.update(path.read_bytes())
    return h.hexdigest()


TOPICS = ["kafka consumer lag", "terraform drift", "pdf invoice parsing", "postgres vacuum tuning",
          "flaky test triage", "dns propagation", "gpu memory leaks", "csv schema inference", "oauth token refresh",
          "docker layer caching", "cron job auditing", "s3 lifecycle rules"]


def some_skills(dest: Path, n: int) -> Path:
    """``n`` Agent Skills folders, each a small real SKILL.md."""
    dest.mkdir()
    for topic in TOPICS[:n]:
        slug = topic.replace(" ", "-")
        (dest / slug).mkdir()
        (dest / slug / "SKILL.md").write_text(
            f"---\nname: {slug}\ndescription: How to handle {topic} step by step.\n---\n\n# {topic}\n\n"
            f"Check the {topic} first, then write down what you found.\n", encoding="utf-8")
    return dest


# -- snapshot while serving and importing, restore, search ---------------------------------------------------


def test_snapshot_while_serving_and_importing_restores_a_replica_that_embeds_nothing(
    sample_dir: Path, tmp_path: Path, encoder: Encoder
) -> None:
    data = tmp_path / "data"
    shutil.copytree(sample_dir, data)
    server = subprocess.Popen([sys.executable, "-m", "skillsearch.cli", "-q", "--data-dir", str(data), "serve",
                               "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=ENV)
    try:
        assert server.stdout is not None
        url = next(line.split("serving on ")[1].split()[0] for line in server.stdout if "serving on " in line)
        importer = subprocess.Popen(
            [sys.executable, "-m", "skillsearch.cli", "-q", "--data-dir", str(data), "import",
             str(some_skills(tmp_path / "new", 12)), "--source", "community", "--grant", "sub:community"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
        snapshots: list[dict[str, Any]] = []
        settings = Settings(data_dir=data)
        while importer.poll() is None or not snapshots:  # snapshots taken while the import runs
            snapshots.append(Catalog.create_snapshot(settings, tmp_path / f"snap{len(snapshots)}").to_dict())
            assert httpx.get(url + "/healthz", timeout=30).status_code == 200  # it kept serving
        _, errors = importer.communicate(timeout=300)
        assert importer.returncode == 0, errors
        final = cli("--data-dir", str(data), "snapshot", "create", str(tmp_path / "final"), "--json")
        assert final.returncode == 0, final.stderr
        snapshots.append(json.loads(final.stdout))
    finally:
        server.terminate()
        server.wait(timeout=60)
        if server.stdout:
            server.stdout.close()
    for snap in snapshots:  # each one a catalog and the index of that very generation
        assert snap["consistent"] and snap["store_generation"] == snap["index_generation"], snap
        assert snap["skills"] in (45, 57) and snap["documents"] == snap["skills"]
    assert snapshots[-1]["skills"] == 57

    replica = tmp_path / "replica"
    restored = cli("snapshot", "restore", str(tmp_path / "final"), "--data-dir", str(replica), "--json")
    assert restored.returncode == 0, restored.stderr
    assert json.loads(restored.stdout)["store_generation"] == snapshots[-1]["store_generation"]
    catalog = Catalog.open(Settings(data_dir=replica), encoder=encoder)
    try:
        ready = catalog.readiness()
        assert (ready.documents, ready.generation) == (57, snapshots[-1]["store_generation"])
        for query, slug in (("profile slow python code", "python-profiling"), ("kafka consumer lag", "kafka-consumer-lag")):
            hits = catalog.search(Principal.operator(), SearchRequest(query=query, limit=3)).hits
            assert hits and hits[0].skill.slug == slug
        assert catalog.embedded_documents() == 0  # the snapshot's vectors, not one document embedded again
    finally:
        catalog.close()


# -- refusals leave the target exactly as it was -------------------------------------------------------------


@pytest.fixture(scope="module")
def hashing_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A snapshot of the sample catalog indexed with the hashing encoder (no model: fast)."""
    root = tmp_path_factory.mktemp("hashing")
    settings = Settings(data_dir=root / "data", encoder="hashing")
    Catalog.open(settings, encoder=HashingEncoder()).close()
    Catalog.create_snapshot(settings, root / "snap")
    return root / "snap"


@pytest.fixture
def target(tmp_path: Path, hashing_snapshot: Path) -> Path:
    """A replica's data directory in use: its own catalog (restored from the snapshot), tokens and sync config."""
    data = tmp_path / "replica"
    assert run("--encoder", "hashing", "snapshot", "restore", str(hashing_snapshot), "--data-dir", str(data))[0] == 0
    (data / "principals.toml").write_text("# the replica's own tokens\n", encoding="utf-8")
    Catalog.open(Settings(data_dir=data, encoder="hashing"), encoder=HashingEncoder()).close()
    return data


def damaged(snapshot: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "damaged"
    shutil.copytree(snapshot, copy)
    return copy


def _truncate(snap: Path) -> None:
    path = snap / "vectors" / "vectors.npy"
    path.write_bytes(path.read_bytes()[:-100])


def _flip_byte(snap: Path) -> None:
    path = snap / "catalog.sqlite3"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _drop_lexical_file(snap: Path) -> None:
    next(p for p in sorted((snap / "lexical").iterdir()) if p.suffix == ".idx").unlink()


def _drop_manifest(snap: Path) -> None:
    (snap / "snapshot.json").unlink()  # what a create that died before its last step would leave


def _edit_manifest(snap: Path, change: Any) -> None:
    manifest = json.loads((snap / "snapshot.json").read_text(encoding="utf-8"))
    change(manifest)
    (snap / "snapshot.json").write_text(json.dumps(manifest), encoding="utf-8")


REFUSALS = {
    "truncated": (_truncate, "SNAPSHOT_INVALID", "incomplete"),
    "missing file": (_drop_lexical_file, "SNAPSHOT_INVALID", "incomplete"),
    "no snapshot.json": (_drop_manifest, "SNAPSHOT_INVALID", "incomplete"),
    "one byte changed": (_flip_byte, "SNAPSHOT_INVALID", "altered"),
    "claims another model": (
        lambda s: _edit_manifest(s, lambda m: m["encoder"].update(fingerprint="sha256:" + "0" * 64)),
        "SNAPSHOT_ENCODER_MISMATCH", "foreign_encoder"),
    "names a file outside the index": (
        lambda s: _edit_manifest(s, lambda m: m["files"].append(
            {"path": "principals.toml", "size": 0, "sha256": hashlib.sha256(b"").hexdigest()})),
        "SNAPSHOT_INVALID", "malformed"),
    "climbs out of its folder": (
        lambda s: _edit_manifest(s, lambda m: m["files"].__setitem__(1, {**m["files"][1], "path": "lexical/../../x"})),
        "SNAPSHOT_INVALID", "malformed"),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_a_partial_altered_or_foreign_snapshot_is_refused_and_the_target_is_unchanged(
    case: str, hashing_snapshot: Path, target: Path, tmp_path: Path
) -> None:
    damage, code, reason = REFUSALS[case]
    snap = damaged(hashing_snapshot, tmp_path)
    damage(snap)
    before, siblings = tree_digest(target), sorted(target.parent.iterdir())
    exit_code, body = run("--encoder", "hashing", "snapshot", "restore", str(snap), "--data-dir", str(target))
    assert exit_code == 4
    assert body["error"]["code"] == code and body["error"]["details"]["reason"] == reason, body
    assert tree_digest(target) == before
    assert sorted(target.parent.iterdir()) == siblings  # no staging folder left beside it


def test_restore_into_a_new_folder_says_once_that_it_created_it(
    hashing_snapshot: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new, existing = tmp_path / "new-replica", tmp_path / "existing"
    existing.mkdir()
    code, _ = run("--encoder", "hashing", "--data-dir", str(existing), "snapshot", "restore", str(hashing_snapshot),
                  "--data-dir", str(new))
    err = capsys.readouterr().err
    assert code == 0 and err.splitlines() == [f"note: {new} did not exist: created it"], err
    # The global --data-dir was new and the target exists: nothing was created, nothing is said.
    code, _ = run("--encoder", "hashing", "--data-dir", str(tmp_path / "never"), "snapshot", "restore",
                  str(hashing_snapshot), "--data-dir", str(new))
    assert code == 0 and "did not exist" not in capsys.readouterr().err
    assert not (tmp_path / "never").exists()


def test_a_restore_target_that_cannot_be_a_data_directory_is_a_usage_error(
    hashing_snapshot: Path, tmp_path: Path
) -> None:
    """The README's exit code 2 for a --data-dir that is a file, a symbolic link to nothing or a new folder
    whose parent does not exist holds for the restore's --data-dir D too: it was exit 1 `INDEX_NOT_READY: ...
    is not a folder` for the first two, and a mistyped parent was created, folders and all."""
    a_file, dangling, orphan = tmp_path / "a-file", tmp_path / "dangling", tmp_path / "no-such" / "replica"
    a_file.write_text("not a data directory\n")
    dangling.symlink_to(tmp_path / "nowhere")
    for target in (a_file, dangling, orphan):
        code, body = run("--encoder", "hashing", "snapshot", "restore", str(hashing_snapshot), "--data-dir", str(target))
        assert code == 2, body
        assert body["error"]["code"] == "VALIDATION_ERROR" and f"--data-dir {target}" in body["error"]["message"], body
    assert a_file.read_text() == "not a data directory\n" and not (tmp_path / "nowhere").exists()
    assert not (tmp_path / "no-such").exists()


def test_another_encoders_snapshot_is_refused_with_one_line(hashing_snapshot: Path, target: Path) -> None:
    """The hashing encoder's snapshot restored by a replica configured for MiniLM."""
    before = tree_digest(target)
    done = cli("--encoder", "minilm", "snapshot", "restore", str(hashing_snapshot), "--data-dir", str(target))
    assert done.returncode == 4 and done.stdout == ""
    assert done.stderr.startswith("error: SNAPSHOT_ENCODER_MISMATCH: ") and done.stderr.count("\n") == 1
    assert "hashing-bow-256" in done.stderr and "is unchanged" in done.stderr
    assert tree_digest(target) == before


def test_without_encoder_the_snapshots_own_model_must_be_one_this_version_loads(
    hashing_snapshot: Path, target: Path, tmp_path: Path
) -> None:
    snap = damaged(hashing_snapshot, tmp_path)
    _edit_manifest(snap, lambda m: m["encoder"].update(name="acme/other-model"))
    before = tree_digest(target)
    code, body = run("snapshot", "restore", str(snap), "--data-dir", str(target))
    assert code == 4 and body["error"]["code"] == "SNAPSHOT_ENCODER_MISMATCH"
    assert body["error"]["details"]["snapshot_encoder"] == "acme/other-model"
    assert tree_digest(target) == before


def test_restore_swaps_the_catalog_and_keeps_the_replicas_own_files(hashing_snapshot: Path, target: Path) -> None:
    (target / "sync.toml").write_text("# the replica's sync settings\n", encoding="utf-8")
    catalog = Catalog(Settings(data_dir=target, encoder="hashing"), encoder=HashingEncoder())
    catalog.import_path(some_skills(target.parent / "extra", 3), "community", "sub:community")
    assert catalog.skill_count() == 48
    catalog.close()
    code, body = run("--encoder", "hashing", "snapshot", "restore", str(hashing_snapshot), "--data-dir", str(target))
    assert code == 0 and body["kept"] == ["principals.toml", "sync.toml"]
    assert (target / "principals.toml").read_text(encoding="utf-8") == "# the replica's own tokens\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["extra", "replica"]
    restored = Catalog.open(Settings(data_dir=target, encoder="hashing"), encoder=HashingEncoder())
    try:
        assert restored.skill_count() == 45 and restored.embedded_documents() == 0
    finally:
        restored.close()


def test_create_refuses_an_existing_folder_and_leaves_no_partial_snapshot(tmp_path: Path, target: Path) -> None:
    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "keep").write_text("x", encoding="utf-8")
    code, body = run("--data-dir", str(target), "snapshot", "create", str(existing))
    assert code == 1 and body["error"]["code"] == "VALIDATION_ERROR"
    assert [p.name for p in existing.iterdir()] == ["keep"]
    code, body = run("--data-dir", str(tmp_path / "nothing"), "snapshot", "create", str(tmp_path / "s"))
    assert code == 1 and body["error"]["code"] == "INDEX_NOT_READY"
    assert not (tmp_path / "s").exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".s.")]


# -- a replica catches up from the restored cursors -----------------------------------------------------------


@pytest.fixture(scope="module")
def upstream() -> ReferenceUpstream:
    return upstream_with_starter("starter-pack")


def test_a_restored_replica_syncs_on_from_the_snapshots_cursor(upstream: ReferenceUpstream, tmp_path: Path) -> None:
    with serve(create_upstream_app(upstream)) as url:
        config = config_for(url, "starter-pack")
        first = Catalog.open(Settings(data_dir=tmp_path / "a", encoder="hashing", seed_sample=False),
                             encoder=HashingEncoder())
        assert first.subscriptions.sync_once(config)[0].error is None
        state = first.store.sync.state("upstream:starter-pack")
        first.close()
        snap = Catalog.create_snapshot(Settings(data_dir=tmp_path / "a"), tmp_path / "snap")
        assert state is not None and state.cursor and snap.cursors == {"upstream:starter-pack": state.cursor}
        skill_id = next(iter(upstream.feed("starter-pack").live()))
        upstream.edit("starter-pack", skill_id, description="Edited upstream after the snapshot was taken.")
        settings = Settings(data_dir=tmp_path / "b", encoder="hashing", seed_sample=False)
        Catalog.restore_snapshot(settings, tmp_path / "snap")
        replica = Catalog.open(settings, encoder=HashingEncoder())
        try:
            report = replica.subscriptions.sync_once(config)[0]
            assert report.error is None and not report.full
            assert report.to_dict()["updated"] == 1 and report.to_dict()["created"] == 0 and report.embedded == 1
            assert replica.store.skill(skill_id).description.startswith("Edited upstream")  # type: ignore[union-attr]
            assert len(upstream_content(upstream, "starter-pack")) == replica.skill_count()
        finally:
            replica.close()


# -- model fingerprints ---------------------------------------------------------------------------------------


def test_fingerprints_come_from_the_model_files_without_torch(encoder: Encoder) -> None:
    assert encoder.fingerprint() == setting_fingerprint("minilm")
    assert HashingEncoder().fingerprint() == setting_fingerprint("hashing") != setting_fingerprint("minilm")
    code = ("import sys; from skillsearch.retrieval.encoders import setting_fingerprint as f;"
            " print(f('minilm')); print(f('minilm+e5')); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=120)
    minilm, routed, torch_loaded = out.stdout.split()
    assert minilm == encoder.fingerprint() and routed.startswith("sha256:") and routed != minilm
    assert torch_loaded == "False"


@pytest.fixture(scope="module")
def retuned_minilm(tmp_path_factory: pytest.TempPathFactory) -> MiniLMEncoder:
    """MiniLM loaded from another folder under the same name: the same weights (linked), another config."""
    folder = tmp_path_factory.mktemp("models") / "all-MiniLM-L6-v2"
    shutil.copytree(minilm_dir(), folder, copy_function=os.symlink)
    config = json.loads((minilm_dir() / "config.json").read_text(encoding="utf-8"))
    (folder / "config.json").unlink()
    (folder / "config.json").write_text(json.dumps({**config, "layer_norm_eps": 1.1e-12}), encoding="utf-8")
    return MiniLMEncoder(folder)


def test_an_index_opened_with_other_model_files_under_the_same_name_is_refused(
    fresh_sample: Catalog, retuned_minilm: MiniLMEncoder
) -> None:
    built = json.loads((fresh_sample.data_dir / "manifest.json").read_text(encoding="utf-8"))["encoder"]
    assert built["fingerprint"] == fresh_sample.encoder.fingerprint()
    assert retuned_minilm.name == built["name"] and retuned_minilm.fingerprint() != built["fingerprint"]
    index = SearchIndex(fresh_sample.data_dir, retuned_minilm)
    with pytest.raises(IndexMismatchError, match="other model files under the name") as caught:
        index.open(fresh_sample.store)
    assert caught.value.details["index_fingerprint"] == built["fingerprint"]
    assert "reindex" in caught.value.message


def test_an_index_from_before_fingerprints_gets_its_models_on_open(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "d", encoder="hashing")
    Catalog.open(settings, encoder=HashingEncoder()).close()
    path = tmp_path / "d" / "manifest.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    del manifest["encoder"]["fingerprint"]
    path.write_text(json.dumps(manifest), encoding="utf-8")
    catalog = Catalog.open(settings, encoder=HashingEncoder())
    catalog.close()
    assert json.loads(path.read_text(encoding="utf-8"))["encoder"]["fingerprint"] == "builtin:hashing-bow-256"
    assert catalog.embedded_documents() == 0


def test_restore_never_loads_a_model(hashing_snapshot: Path, tmp_path: Path) -> None:
    """A replica checks a snapshot against its model's files before (and without) loading the model: refused
    for MiniLM, restored without --encoder (the snapshot's own, hashing), and torch never imported."""
    target = str(tmp_path / "r")
    code = ("import sys; from skillsearch.cli.main import main;"
            f" refused = main(['-q', '--encoder', 'minilm', 'snapshot', 'restore', {str(hashing_snapshot)!r},"
            f" '--data-dir', {target!r}]);"
            f" done = main(['-q', 'snapshot', 'restore', {str(hashing_snapshot)!r},"
            f" '--data-dir', {target!r}, '--json']);"
            " print(refused, done, 'torch' in sys.modules, 'sentence_transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, timeout=120)
    assert out.stdout.splitlines()[-1] == "4 0 False False", out.stdout + out.stderr
    assert (tmp_path / "r" / "catalog.sqlite3").is_file()


def test_a_catalog_ahead_of_its_index_is_waited_for_then_snapshotted_as_behind(tmp_path: Path) -> None:
    """An import killed between its catalog commit and its index refresh leaves the catalog ahead: create
    waits for the index up to ``--wait``, then keeps the pair and says so; the restored replica embeds the
    skills changed in between, and only those."""
    from skillsearch.catalog.importer import parse_path
    from skillsearch.catalog.imports import store_import

    settings = Settings(data_dir=tmp_path / "d", encoder="hashing")
    Catalog.open(settings, encoder=HashingEncoder()).close()
    store = CatalogStore.in_dir(tmp_path / "d")
    store_import(store, parse_path(some_skills(tmp_path / "new", 2), "community", "sub:community"), "community",
                 "sub:community")
    store.close()
    code, body = run("--data-dir", str(tmp_path / "d"), "snapshot", "create", str(tmp_path / "s"), "--wait", "0.3")
    assert code == 0 and not body["consistent"] and body["notes"]
    assert body["store_generation"] > body["index_generation"] and body["skills"] == 47 and body["documents"] == 45
    Catalog.restore_snapshot(Settings(data_dir=tmp_path / "r", encoder="hashing"), tmp_path / "s")
    replica = Catalog.open(Settings(data_dir=tmp_path / "r", encoder="hashing"), encoder=HashingEncoder())
    try:
        assert replica.embedded_documents() == 2 and replica.readiness().documents == 47
    finally:
        replica.close()


# -- a writer holding the lock, a server using the target, stale hidden folders ------------------------------


def hashing_data(path: Path) -> Path:
    """A data directory of the sample catalog indexed with the hashing encoder."""
    Catalog.open(Settings(data_dir=path, encoder="hashing"), encoder=HashingEncoder()).close()
    return path


def hold_write_lock(data: Path) -> subprocess.Popen[str]:
    """Another process holding ``data``'s write lock, as an import does for its whole run, until its stdin
    closes."""
    code = ("import sys; from pathlib import Path; from skillsearch.retrieval.writelock import WriteLock\n"
            "with WriteLock(Path(sys.argv[1])).hold():\n    print('held', flush=True); sys.stdin.read()\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(data)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, env=ENV)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def release(holder: subprocess.Popen[str]) -> None:
    assert holder.stdin is not None and holder.stdout is not None
    holder.stdin.close()
    holder.wait(timeout=60)
    holder.stdout.close()


def test_create_waits_for_a_writer_only_within_wait_then_fails_naming_it(tmp_path: Path) -> None:
    """The write lock is waited for within ``--wait`` too (not the lock's own 300 s): a writer that holds it
    all that time fails the snapshot with the writer's pid, and nothing is written."""
    data = hashing_data(tmp_path / "d")
    holder = hold_write_lock(data)
    try:
        # the lock's own timeout is far above the subprocess's: only --wait can end this in time
        out = subprocess.run([sys.executable, "-m", "skillsearch.cli", "-q", "--data-dir", str(data), "snapshot",
                              "create", str(tmp_path / "s"), "--wait", "1", "--json"], capture_output=True, text=True,
                             env={**ENV, "SKILLSEARCH_WRITE_LOCK_TIMEOUT_S": "3600"}, timeout=120)
    finally:
        release(holder)
    assert out.returncode == 1, out.stdout + out.stderr
    error = json.loads(out.stdout)["error"]
    assert error["code"] == "INDEX_NOT_READY" and f"process {holder.pid} " in error["message"], error
    assert error["details"]["holder_pid"] == holder.pid
    assert not (tmp_path / "s").exists() and [p.name for p in tmp_path.iterdir()] == ["d"]  # no partial folder
    code, body = run("--data-dir", str(data), "snapshot", "create", str(tmp_path / "s"), "--wait", "1")
    assert code == 0 and body["consistent"]  # the writer gone, the same command takes it


def test_restore_into_a_served_directory_is_refused_naming_the_server(hashing_snapshot: Path, target: Path) -> None:
    """A running ``serve`` keeps the files it opened: a restore into its directory is refused (exit 4, the
    target unchanged) with the server's pid; once it stops, the same restore goes through."""
    before = {name: (target / name).stat().st_ino for name in ("catalog.sqlite3", "manifest.json")}
    server = subprocess.Popen([sys.executable, "-m", "skillsearch.cli", "-q", "--encoder", "hashing", "--data-dir",
                               str(target), "serve", "--host", "127.0.0.1", "--port", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=ENV)
    try:
        assert server.stdout is not None
        url = next(line.split("serving on ")[1].split()[0] for line in server.stdout if "serving on " in line)
        refused = cli("--encoder", "hashing", "snapshot", "restore", str(hashing_snapshot), "--data-dir", str(target),
                      "--json", timeout=120)
        assert httpx.get(url + "/readyz", timeout=30).status_code == 200  # still serving its own files
    finally:
        server.terminate()
        server.wait(timeout=60)
        if server.stdout:
            server.stdout.close()
    assert refused.returncode == 4, refused.stdout + refused.stderr
    error = json.loads(refused.stdout)["error"]
    assert error["code"] == "INDEX_NOT_READY" and error["details"]["reason"] == "in_use", error
    assert error["details"]["pids"] == [server.pid] and f"process {server.pid}" in error["message"]
    assert {name: (target / name).stat().st_ino for name in before} == before  # nothing swapped
    assert not [p.name for p in target.parent.iterdir() if ".restore-" in p.name]
    done = cli("--encoder", "hashing", "snapshot", "restore", str(hashing_snapshot), "--data-dir", str(target),
               timeout=120)
    assert done.returncode == 0, done.stderr  # the server gone, nothing holds the directory
    assert (target / "catalog.sqlite3").stat().st_ino != before["catalog.sqlite3"]


def test_restore_while_another_process_writes_the_directory_is_refused_naming_it(
    hashing_snapshot: Path, target: Path
) -> None:
    holder = hold_write_lock(target)
    try:
        code, body = run("--encoder", "hashing", "snapshot", "restore", str(hashing_snapshot), "--data-dir",
                         str(target))
    finally:
        release(holder)
    assert code == 4 and body["error"]["details"]["pids"] == [holder.pid], body


def test_the_next_create_or_restore_deletes_the_hidden_folders_killed_runs_left(
    hashing_snapshot: Path, tmp_path: Path
) -> None:
    """A killed run leaves its snapshot-sized hidden folder; the next run into the same place deletes the ones
    whose process is gone (and an older version's, without a pid, from before it started) and says so;
    a live process's folder and another target's are kept."""
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True, timeout=60)
    dead, live = int(gone.stdout), os.getpid()  # that process has exited; this one (the test) lives on

    def leave(name: str) -> Path:
        folder = tmp_path / name
        (folder / "vectors").mkdir(parents=True)
        (folder / "vectors" / "vectors.npy").write_bytes(b"\0" * 4096)
        return folder

    stale = [leave(f".r.restore-{dead}-ab_cd123"), leave(".r.restore-zqpieh36"), leave(f".s.partial-{dead}-d1y7hwut")]
    os.utime(stale[1], (1, 1))  # an older version's name: no pid, from long before this run
    kept = [leave(f".r.restore-{live}-krts2a9s"), leave(f".rr.restore-{dead}-krts2a9s"), leave(f".s.partial-{live}-x")]
    restored = cli("--encoder", "hashing", "snapshot", "restore", str(hashing_snapshot), "--data-dir",
                   str(tmp_path / "r"), "--json", timeout=120)
    assert restored.returncode == 0, restored.stderr
    assert sorted(json.loads(restored.stdout)["removed_stale"]) == sorted(map(str, stale[:2]))
    for folder in stale[:2]:
        assert f"note: removed {folder}, the hidden folder of a snapshot restore that was killed" in restored.stderr
    created = cli("--data-dir", str(tmp_path / "r"), "snapshot", "create", str(tmp_path / "s"), "--json", timeout=120)
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout)["removed_stale"] == [str(stale[2])] and str(stale[2]) in created.stderr
    assert "removed_stale" not in json.loads((tmp_path / "s" / "snapshot.json").read_text(encoding="utf-8"))
    assert not any(folder.exists() for folder in stale) and all(folder.is_dir() for folder in kept)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == sorted(p.name for p in kept)


def test_sigterm_ends_a_command_that_writes_no_index_at_once(tmp_path: Path) -> None:
    """Only the commands whose work is an index write take SIGTERM to stop between batches (exit 143); any other
    (here a snapshot waiting for a writer's lock) ends at once, as the signal's default does, not after its wait."""
    data = hashing_data(tmp_path / "d")
    holder = hold_write_lock(data)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "skillsearch.cli", "-v", "--data-dir", str(data), "snapshot",
                                 "create", str(tmp_path / "snap"), "--wait", "600"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
        assert proc.stderr is not None
        # The command is under way: it says it waits for the writer's lock (a wait is never silent), then the signal.
        seen: list[str] = []
        guard = threading.Timer(120, proc.kill)  # a snapshot that waits without a word fails here, not hangs
        guard.start()
        while not seen or "holds the write lock of" not in seen[-1]:
            line = proc.stderr.readline()
            assert line, f"the snapshot ended before it waited: {seen}"
            seen.append(line)
        assert f"process {holder.pid} holds the write lock of" in seen[-1] and "waiting up to 600s" in seen[-1], seen
        guard.cancel()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == -signal.SIGTERM  # killed by the signal, not 600 s later
        proc.stderr.close()
        assert not (tmp_path / "snap").exists()
    finally:
        release(holder)
