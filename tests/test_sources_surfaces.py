"""Local sources through the surfaces: `serve` over real HTTP, the CLI, and an MCP client over stdio that
is told when the skills it can see change."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client
from mcp_support import stdio_params
from test_sources import TIMEOUT, commit, eventually, init_repo, stop_process, write_skill

from skillsearch.cli import build_serve_app, main
from skillsearch.http.auth import PrincipalRegistry, add_principal
from skillsearch.http.server import ServerThread
from skillsearch.service import Catalog
from skillsearch.sync.sources import SourceConfig


def test_serve_keeps_a_watched_folder_in_step(empty_catalog: Catalog, tmp_path: Path) -> None:
    root = tmp_path / "skills"
    root.mkdir()
    path = tmp_path / "principals.toml"
    token = add_principal(path, "me", ["user:me"], ["skills:read", "memory:read"])
    other = add_principal(path, "other", ["team:other"], ["skills:read"])
    source = SourceConfig("mine", "user:me", path=root)
    app = build_serve_app(empty_catalog, PrincipalRegistry(path), sources=(source,))
    me, them = {"Authorization": f"Bearer {token}"}, {"Authorization": f"Bearer {other}"}
    with ServerThread(app) as url, httpx.Client(base_url=url, timeout=30) as http:

        def found(headers: dict[str, str] = me) -> list[str]:
            hits = http.get("/v1/search", params={"q": "rotate kafka consumer offsets"}, headers=headers).json()
            return [h["slug"] for h in hits["hits"]]

        write_skill(root, "kafka-offsets", "Reset and rotate Kafka consumer group offsets safely.")
        eventually(lambda: "kafka-offsets" in found())
        assert found(them) == []  # another grant sees nothing of it
        skill_id = next(s["skill_id"] for s in http.get("/v1/skills", headers=me).json()["items"]
                        if s["name"] == "kafka-offsets")
        status = http.get("/v1/sync/status", headers=me).json()
        (mine,) = status["sources"]
        assert mine["name"] == "mine" and mine["kind"] == "folder" and mine["skills_active"] == 1
        assert mine["runner"]["watch"]["watching"] is True and status["catalog_changed_at"]
        assert http.get("/readyz").json()["changed_at"] == status["catalog_changed_at"]
        assert http.get("/v1/sync/status").status_code == 401
        # Another grant's caller reads nothing of this source: not its name, folder, errors or skill count.
        assert http.get("/v1/sync/status", headers=them).json()["sources"] == []

        shutil.rmtree(root / "kafka-offsets")
        eventually(lambda: "kafka-offsets" not in found())
        assert http.get("/v1/skills", headers=me).json()["items"] == []
        assert http.get(f"/v1/skills/{skill_id}", headers=me).status_code == 404


def run_cli(*args: str) -> tuple[int, Any]:
    out = io.StringIO()
    code = main([*args, "--json"], out=out)
    return code, json.loads(out.getvalue())


def test_the_sources_commands(tmp_path: Path, repo_with_skill: Path) -> None:
    data = tmp_path / "data"
    code, added = run_cli("--data-dir", str(data), "-q", "sources", "add", "team", "--git", f"file://{repo_with_skill}",
                          "--ref", "main", "--subdir", "skills", "--grant", "team:eng")
    assert code == 0 and added["added"]["git"] == f"file://{repo_with_skill}"
    code, synced = run_cli("--data-dir", str(data), "-q", "sources", "sync")
    assert code == 0 and len(synced["sources"][0]["added"]) == 1
    code, again = run_cli("--data-dir", str(data), "-q", "sync")  # every kind of source
    assert code == 0 and again["sources"][0]["skipped"] is True and again["subscriptions"] == []
    code, listed = run_cli("--data-dir", str(data), "-q", "sources", "list")
    assert code == 0 and listed["sources"][0]["skills_active"] == 1 and listed["sources"][0]["commit"]
    code, status = run_cli("--data-dir", str(data), "-q", "sync", "--status")
    assert code == 0 and status["sources"][0]["name"] == "team" and status["upstream_url"] is None
    code, err = run_cli("--data-dir", str(data), "-q", "sources", "add", "team", "--path", str(tmp_path),
                        "--grant", "team:eng")
    assert code == 1 and err["error"]["code"] == "VALIDATION_ERROR"
    # An import under a mirrored source's name would replace its skills until its next sync put them back.
    bundle = tmp_path / "one.json"
    bundle.write_text(json.dumps([{"slug": "stray", "name": "Stray", "description": "Not from the repository."}]))
    for source in ("team", "upstream:starter-pack"):
        code, err = run_cli("--data-dir", str(data), "-q", "import", str(bundle), "--source", source, "--grant",
                            "team:eng", "--json")
        assert code == 1 and err["error"]["code"] == "VALIDATION_ERROR", err
        assert err["error"]["details"]["problems"][0]["field"] == "source"
    code, listed = run_cli("--data-dir", str(data), "-q", "sources", "list")
    assert listed["sources"][0]["skills_active"] == 1
    # A path given as --git: the new source is at fault (not the file, which is left as it was), and the
    # URL to give instead is said.
    before = (data / "sync.toml").read_text(encoding="utf-8")
    code, err = run_cli("--data-dir", str(data), "-q", "sources", "add", "local", "--git", str(repo_with_skill),
                        "--grant", "team:eng")
    assert code == 1 and err["error"]["message"] == (
        f"not added to {data / 'sync.toml'}: source 'local': git must be an https:// or file:// URL"
        f" (a repository on this machine: file://{repo_with_skill.resolve()})")
    assert (data / "sync.toml").read_text(encoding="utf-8") == before
    code, removed = run_cli("--data-dir", str(data), "-q", "sources", "remove", "team")
    assert code == 0 and len(removed["archived"]) == 1
    code, listed = run_cli("--data-dir", str(data), "-q", "sources", "list")
    assert listed["sources"] == []
    # sync.toml is there and configures nothing now: that is said, not blamed on a missing [upstream] table.
    for argv in (("sync", "--status"), ("sync",)):
        out = io.StringIO()
        assert main(["--data-dir", str(data), "-q", *argv], out=out) == 0, argv
        assert out.getvalue().startswith(f"nothing configured in {data / 'sync.toml'}: no [upstream] subscriptions"
                                         " and no [[sources]]"), out.getvalue()
    code, status = run_cli("--data-dir", str(data), "-q", "sync", "--status")
    assert code == 0 and status["subscriptions"] == [] and status["sources"] == []
    code, synced = run_cli("--data-dir", str(data), "-q", "sync")
    assert code == 0 and synced == {"subscriptions": [], "sources": []}


@pytest.fixture
def repo_with_skill(tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "repo")
    write_skill(repo / "skills", "pr-review", "Review a pull request for correctness and tests.")
    commit(repo, "one skill")
    return repo


def _stdio_data(tmp_path: Path) -> tuple[Path, Path]:
    data, root = tmp_path / "data", tmp_path / "skills"
    write_skill(root, "first-skill", "A skill that is there before the server starts.")
    data.mkdir()
    (data / "sync.toml").write_text(f'[[sources]]\nname = "mine"\ngrant = "user:me"\npath = "{root}"\n',
                                    encoding="utf-8")
    return data, root


async def settled(client: Client, names: list[str]) -> None:
    """Wait until the server's first run of its sources shows (the catalog starts empty), then a little
    longer than the notifier's poll, so the notification that run causes is behind us."""
    with anyio.fail_after(TIMEOUT):
        while True:
            listed = await client.call_tool("list_skills", {})
            if sorted(s["name"] for s in listed.structured_content["items"]) == names:  # type: ignore[index]
                break
            await anyio.sleep(0.1)
    await anyio.sleep(1.5)


@pytest.mark.anyio
async def test_an_mcp_stdio_session_is_told_when_a_watched_folder_changes(tmp_path: Path) -> None:
    data, root = _stdio_data(tmp_path)
    with (tmp_path / "stderr.txt").open("w") as stderr:
        async with Client(stdio_client(stdio_params(data, "--grant", "user:me"), errlog=stderr),
                          read_timeout_seconds=TIMEOUT) as client:
            await settled(client, ["first-skill"])
            async with client.listen(resources_list_changed=True) as events:
                write_skill(root, "second-skill", "A skill added while a host is connected.")
                with anyio.fail_after(TIMEOUT):
                    event = await events.__anext__()
            assert type(event).__name__ == "ResourcesListChanged"
            after = await client.call_tool("list_skills", {})
            assert sorted(s["name"] for s in after.structured_content["items"]) == [  # type: ignore[index]
                "first-skill", "second-skill"]


@pytest.mark.anyio
async def test_a_source_added_while_an_mcp_stdio_server_runs_is_kept_in_step(tmp_path: Path) -> None:
    """`sources add` from another terminal while an MCP host kept `skillsearch mcp` running: its skills were
    read only after the host restarted the server. The server follows sync.toml: the session sees them."""
    data, _ = _stdio_data(tmp_path)
    more = tmp_path / "more"
    write_skill(more, "third-skill", "A skill in a folder added as a source while the host is connected.")
    with (tmp_path / "stderr.txt").open("w") as stderr:
        async with Client(stdio_client(stdio_params(data, "--grant", "user:me"), errlog=stderr),
                          read_timeout_seconds=TIMEOUT) as client:
            await settled(client, ["first-skill"])
            code, _ = run_cli("--data-dir", str(data), "-q", "sources", "add", "more", "--path", str(more),
                              "--grant", "user:me")
            assert code == 0
            await settled(client, ["first-skill", "third-skill"])
            write_skill(more, "fourth-skill", "A skill written into the added folder: it is watched.")
            await settled(client, ["first-skill", "fourth-skill", "third-skill"])


@pytest.mark.anyio
async def test_a_handshake_era_stdio_session_gets_the_notification_too(tmp_path: Path) -> None:
    data, root = _stdio_data(tmp_path)
    seen = anyio.Event()
    methods: list[str] = []

    async def on_message(message: Any) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if isinstance(method, str):
            methods.append(method)
            if method == "notifications/resources/list_changed":
                seen.set()  # the event of the moment: replaced before the change under test

    with (tmp_path / "stderr.txt").open("w") as stderr:
        async with Client(stdio_client(stdio_params(data, "--grant", "user:me"), errlog=stderr), mode="legacy",
                          message_handler=on_message, read_timeout_seconds=TIMEOUT) as client:
            await settled(client, ["first-skill"])
            methods.clear()
            seen = anyio.Event()
            shutil.rmtree(root / "first-skill")
            with anyio.fail_after(TIMEOUT):
                await seen.wait()
            after = await client.call_tool("list_skills", {})
            assert after.structured_content["items"] == []  # type: ignore[index]
    assert "notifications/resources/list_changed" in methods


def test_serve_sync_config_holding_only_sources_serves_them(tmp_path: Path) -> None:
    """`serve --sync-config FILE` reads FILE as it reads `<data-dir>/sync.toml`: a file holding only the
    `[[sources]]` that `sources add` writes is served with its sources kept in step. It was refused with
    `missing [upstream] table` (exit 1), though the same file as `<data-dir>/sync.toml` served."""
    config_home, data, skills = tmp_path / "config", tmp_path / "data", tmp_path / "skills"
    write_skill(skills, "from-the-side-file", "A skill of a source configured in a sync file outside the data dir.")
    code, _ = run_cli("--data-dir", str(config_home), "-q", "sources", "add", "side", "--path", str(skills),
                      "--grant", "user:me")
    assert code == 0
    data.mkdir()
    token = add_principal(data / "principals.toml", "me", ["user:me"], ["skills:read"])
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data), "--encoder", "hashing", "-q", "serve",
         "--port", "0", "--sync-config", str(config_home / "sync.toml")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        first = proc.stdout.readline()
        url = re.search(r"serving on (http://127\.0\.0\.1:\d+)", first)
        assert url, first + (proc.stderr.read() if proc.wait(timeout=30) is not None else "")
        me = {"Authorization": f"Bearer {token}"}

        def listed() -> list[str]:
            return [item["name"] for item in httpx.get(url.group(1) + "/v1/skills", headers=me, timeout=30).json()["items"]]

        eventually(lambda: listed() == ["from-the-side-file"])
    finally:
        stop_process(proc)


def test_serve_sync_config_that_does_not_exist_names_its_own_option(tmp_path: Path) -> None:
    """The hint named `--config`, which `serve` does not take."""
    missing = tmp_path / "no-such.toml"
    code, payload = run_cli("--data-dir", str(tmp_path / "data"), "-q", "serve", "--port", "0",
                            "--sync-config", str(missing))
    assert code == 1 and payload["error"]["code"] == "VALIDATION_ERROR"
    assert payload["error"]["message"].startswith(f"no sync configuration at {missing}: ")
    assert "or pass --sync-config (README" in payload["error"]["message"]


def test_sources_sync_of_an_unknown_name_is_refused_before_the_catalog_is_made(tmp_path: Path) -> None:
    """A mistyped name (or --data-dir) made the data directory, a catalog and an empty index, then said
    `no source named nosuch`; now nothing is created, and the message names the file and what it holds."""
    data = tmp_path / "data"
    code, payload = run_cli("--data-dir", str(data), "-q", "sources", "sync", "nosuch")
    assert code == 1 and payload["error"]["code"] == "VALIDATION_ERROR"
    assert payload["error"]["message"] == f"no source named 'nosuch' in {data / 'sync.toml'} (it configures none)"
    assert payload["error"]["details"]["unknown"] == ["nosuch"]
    assert not data.exists()
    code, _ = run_cli("--data-dir", str(data), "-q", "sources", "add", "local", "--path", str(tmp_path), "--grant",
                      "user:me")
    assert code == 0
    code, payload = run_cli("--data-dir", str(data), "-q", "sources", "sync", "nosuch", "other", "local")
    assert code == 1 and payload["error"]["message"] == (
        f"no source named 'nosuch', 'other' in {data / 'sync.toml'} (it configures: local)")
    assert not (data / "catalog.sqlite3").exists()


@pytest.mark.parametrize("argv", [
    ("sources", "add", "team", "--git", "ftp://example.com/skills.git", "--grant", "team:eng"),
    ("sources", "add", "mine", "--path", "no-such-folder", "--grant", "user:me"),
    ("sources", "remove", "nosuch"),
    ("sources", "remove", "nosuch", "--keep-skills"),
])
def test_a_sources_command_that_fails_leaves_no_data_directory_behind(tmp_path: Path, argv: tuple[str, ...]) -> None:
    """A refused `sources add` or `remove` on a mistyped --data-dir must not leave a new, empty folder there."""
    data = tmp_path / "data"
    code, payload = run_cli("--data-dir", str(data), "-q", *argv)
    assert code == 1 and payload["error"]["code"] == "VALIDATION_ERROR"
    assert not data.exists()


@pytest.mark.parametrize(("value", "said"), [
    ("0", "argument --interval: 0 is out of range: give a number of seconds between 1 and 86400"),
    ("86401", "argument --interval: 86401 is out of range: give a number of seconds between 1 and 86400"),
    ("nan", "argument --interval: nan is out of range"),
])
def test_sources_add_interval_out_of_range_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            value: str, said: str) -> None:
    """`--interval 0` was exit code 1 (`VALIDATION_ERROR: ... interval_s must be ...`, the file's key): a value
    out of range is a usage error, exit code 2, naming the option, as `serve --workers 0` is."""
    data = tmp_path / "data"
    argv = ("--data-dir", str(data), "-q", "sources", "add", "mine", "--path", str(tmp_path), "--grant", "user:me",
            "--interval", value)
    assert main(list(argv), out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert said in err and "usage: skillsearch sources add" in err
    code, payload = run_cli(*argv)
    assert code == 2 and payload["error"]["code"] == "VALIDATION_ERROR" and said in payload["error"]["message"]
    assert not data.exists()


@pytest.mark.parametrize("name", ["my skills", ".hidden", "", "a" * 65, "skills/team"])
def test_sources_add_of_an_invalid_name_names_what_was_typed(tmp_path: Path, name: str) -> None:
    """It said `sources[0].name must be ...`: the file's path of a table the user never wrote."""
    data = tmp_path / "data"
    code, payload = run_cli("--data-dir", str(data), "-q", "sources", "add", name, "--path", str(tmp_path),
                            "--grant", "user:me")
    message = payload["error"]["message"]
    assert code == 2 and payload["error"]["code"] == "VALIDATION_ERROR"
    assert f"argument name: invalid source name {name!r}: it must be 1-64 characters" in message, message
    assert "sources[0]" not in message
    assert not data.exists()


def test_an_invalid_source_name_in_the_file_is_named_with_its_value(tmp_path: Path) -> None:
    config = tmp_path / "sync.toml"
    config.write_text('[[sources]]\nname = "my skills"\ngrant = "user:me"\npath = "."\n', encoding="utf-8")
    code, payload = run_cli("--data-dir", str(tmp_path / "data"), "sources", "list", "--config", str(config))
    assert code == 1 and payload["error"]["message"] == (
        f"{config}: sources[0].name 'my skills' must be 1-64 characters of A-Z, a-z, 0-9, '.', '_', '-',"
        " the first a letter or digit")


def test_status_reads_and_an_empty_sources_sync_create_nothing(tmp_path: Path) -> None:
    """`sources list`, `sync --status` and a `sources sync` with nothing to run are reads: on a mistyped or
    new --data-dir they say what is (and is not) there, and leave no folder, catalog or index behind."""
    data = tmp_path / "data"
    for argv in (("sources", "list"), ("sources", "sync")):
        code, payload = run_cli("--data-dir", str(data), "-q", *argv)
        assert code == 0 and payload["sources"] == [], (argv, payload)
        assert not data.exists(), argv
    config = tmp_path / "sync.toml"
    config.write_text('[upstream]\nurl = "http://127.0.0.1:9"\ntoken_env = "UNSET_TOKEN_VAR"\n\n'
                      '[[subscriptions]]\nid = "starter"\n', encoding="utf-8")
    code, status = run_cli("--data-dir", str(data), "-q", "sync", "--status", "--config", str(config))
    (sub,) = status["subscriptions"]
    assert code == 0 and sub["cursor"] is None and sub["skills_active"] == 0 and sub["last_success"] is None
    assert status["catalog_changed_at"] is None and not data.exists()

    # A source added and not yet run: listed as never run, and still no catalog in the folder.
    code, _ = run_cli("--data-dir", str(data), "-q", "sources", "add", "mine", "--path", str(tmp_path / "later"),
                      "--allow-missing", "--grant", "user:me")
    assert code == 0
    code, listed = run_cli("--data-dir", str(data), "-q", "sources", "list")
    (mine,) = listed["sources"]
    assert code == 0 and mine["name"] == "mine" and mine["skills_active"] == 0 and mine["last_success"] is None
    code, status = run_cli("--data-dir", str(data), "-q", "sync", "--status")
    assert code == 0 and [s["name"] for s in status["sources"]] == ["mine"]
    out = io.StringIO()
    assert main(["--data-dir", str(data), "-q", "sources", "list"], out=out) == 0
    assert "mine (folder, user:me)" in out.getvalue() and "active=0 archived=0 last_success=-" in out.getvalue()
    assert sorted(p.name for p in data.iterdir()) == ["sync.toml"]
