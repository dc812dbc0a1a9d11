"""The MCP server over its real transports: ``skillsearch mcp`` as a stdio subprocess, and streamable HTTP
served by uvicorn on 127.0.0.1, each driven by the SDK's own client."""

from __future__ import annotations

import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import httpx
import httpx2
import pytest
import uvicorn
from fastapi import FastAPI
from mcp import Client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_support import STARTER, error, ok, stdio_params
from mcp_types import INVALID_REQUEST, METHOD_NOT_FOUND
from starlette.routing import Route
from test_sources import TIMEOUT, write_skill

import skillsearch
from skillsearch.cli import build_parser, main, mcp_principal_from_args, mcp_server_from_args
from skillsearch.core.domain import Principal
from skillsearch.core.errors import UnauthenticatedError
from skillsearch.mcp.server import TOOL_NAMES, build_mcp_server
from skillsearch.mcp.transport import mountable, streamable_http_app
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.writelock import WriteLock
from skillsearch.service import Catalog


@pytest.fixture(scope="module")
def data_dir(sample_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("mcp-stdio") / "data"
    shutil.copytree(sample_dir, target)
    (target / "principals.toml").write_text(
        '[principals.starter]\ngrants = ["sub:starter-pack"]\nscopes = ["memory:read"]\n\n'
        '[principals.ops]\ngrants = ["sub:ops-pro", "team:data-science"]\nscopes = []\n\n'
        f'[principals.root]\ntoken_sha256 = "{"0" * 64}"\n'
        'grants = ["*"]\nscopes = ["skills:read", "memory:read"]\n',
        encoding="utf-8",
    )
    return target


@pytest.mark.anyio
async def test_stdio_subprocess_speaks_only_protocol_on_stdout(data_dir: Path, tmp_path: Path) -> None:
    """Every stdout line must parse as JSON-RPC: the client hands anything else to message_handler."""
    stray: list[BaseException] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, BaseException):
            stray.append(message)

    stderr_path = tmp_path / "stderr.txt"
    with stderr_path.open("w") as stderr:
        async with Client(stdio_client(stdio_params(data_dir, "--principal", "starter"), errlog=stderr),
                          message_handler=on_message, read_timeout_seconds=120) as session:
            tools = (await session.list_tools()).tools
            found = ok(await session.call_tool("search_skills", {"query": "git bisect to find a regression"}))
            root = ok(await session.call_tool("recall_cloud_skill", {"slug": "git-bisect-regressions"}))
            hidden = error(await session.call_tool("recall_cloud_skill", {"slug": "postgres-failover"}))
            # JSON's 2.0 through a real pipe is JSON Schema's integer 2; "2" is not.
            two = ok(await session.call_tool("search_skills", {"query": "git bisect", "limit": 2.0}))
            text = error(await session.call_tool("search_skills", {"query": "git bisect", "limit": "2"}))
    assert len(two["hits"]) == 2 and text["details"]["problems"] == [
        {"field": "limit", "message": "Input should be a valid integer, got string"}]
    assert sorted(t.name for t in tools) == sorted(TOOL_NAMES)
    assert found["hits"][0]["slug"] == "git-bisect-regressions"
    assert root["kind"] == "root" and "bisect" in root["data"]["instructions"]
    assert hidden["code"] == "SKILL_NOT_FOUND"
    assert stray == []
    assert "Traceback" not in stderr_path.read_text()


@pytest.mark.anyio
async def test_stdio_advertises_list_changed_and_sends_it_after_another_process_imports(
    sample_dir: Path, tmp_path: Path
) -> None:
    """The handshake's resources.listChanged is true because the stdio server does send
    notifications/resources/list_changed: here after `skillsearch import` into its data directory, from
    another process."""
    data = tmp_path / "data"
    shutil.copytree(sample_dir, data)
    seen = anyio.Event()

    async def on_message(message: Any) -> None:
        if getattr(getattr(message, "root", message), "method", None) == "notifications/resources/list_changed":
            seen.set()

    with (tmp_path / "stderr.txt").open("w") as stderr:
        async with Client(stdio_client(stdio_params(data), errlog=stderr), mode="legacy",
                          message_handler=on_message, read_timeout_seconds=TIMEOUT) as client:
            caps = client.server_capabilities
            assert caps.resources is not None and caps.resources.list_changed is True
            assert caps.resources.subscribe is False  # no resources/subscribe: only the list is announced
            assert caps.tools is not None and caps.tools.list_changed is False
            assert client.server_info is not None and client.server_info.version == skillsearch.__version__
            ok(await client.call_tool("list_skills", {}))  # the notifier runs once the catalog is open
            write_skill(tmp_path / "new", "fresh-import-skill", "A skill imported while a host is connected.")
            imported = await anyio.run_process(
                [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data), "-q", "import",
                 str(tmp_path / "new"), "--source", "elsewhere", "--grant", "user:me"],
                env=stdio_params(data).env, check=False)
            assert imported.returncode == 0, imported.stderr
            with anyio.fail_after(TIMEOUT):
                await seen.wait()
            page = ok(await client.call_tool("list_skills", {"limit": 200}))
    assert "fresh-import-skill" in {i["name"] for i in page["items"]}


@pytest.mark.anyio
async def test_stdio_2026_era_discover_says_list_changed_too(data_dir: Path, tmp_path: Path) -> None:
    with (tmp_path / "stderr.txt").open("w") as stderr:
        async with Client(stdio_client(stdio_params(data_dir), errlog=stderr), read_timeout_seconds=TIMEOUT) as client:
            caps = client.server_capabilities
    assert caps.resources is not None and caps.resources.list_changed is True


@pytest.mark.parametrize(
    ("args", "name", "grants", "scopes"),
    [
        (["--principal", "ops"], "ops", {"sub:ops-pro", "team:data-science"}, set()),
        (["--grant", "sub:a", "--grant", "team:b"], "cli", {"sub:a", "team:b"}, {"memory:read"}),
        (["--grant", "sub:a", "--scope", "other"], "cli", {"sub:a"}, {"other"}),
        (["--grant", "sub:a", "--scope", ""], "cli", {"sub:a"}, set()),
        ([], "operator", None, {"memory:read"}),
        (["--principal", "root"], "root", None, {"skills:read", "memory:read"}),
    ],
)
def test_mcp_principal_options(
    data_dir: Path, args: list[str], name: str, grants: set[str] | None, scopes: set[str]
) -> None:
    parsed = build_parser().parse_args(["mcp", "--data-dir", str(data_dir), *args])
    principal = mcp_principal_from_args(parsed)
    assert principal.name == name and principal.scopes == scopes
    assert principal.grants == (None if grants is None else frozenset(grants))


@pytest.mark.anyio
async def test_mcp_command_builds_the_server_it_is_told_to(data_dir: Path, encoder: Encoder) -> None:
    args = build_parser().parse_args(["-q", "mcp", "--data-dir", str(data_dir), "--grant", "team:data-science",
                                      "--host-tool", "scheduler.pause", "--host-tool", "scheduler.resume"])
    async with Client(mcp_server_from_args(args, encoder)) as session:
        page = ok(await session.call_tool("list_skills", {"limit": 200}))
        (flow,) = [i for i in page["items"] if i["name"] == "Backfill daily table partitions"]
        values = {"table": "a.b", "job": "j", "start_date": "2024-01-01", "end_date": "2024-01-02"}
        problem = error(await session.call_tool("resolve_skill", {"skill_id": flow["skill_id"], "parameters": values}))
    assert len(page["items"]) == 12
    assert problem["code"] == "SKILL_INVALID" and "warehouse.run_job_range" in problem["details"]["unknown_tools"]


def test_mcp_command_refuses_an_unknown_principal(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mcp", "--data-dir", str(data_dir), "--principal", "nobody"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and "VALIDATION_ERROR" in captured.err and "no [principals.nobody] table" in captured.err


@pytest.mark.parametrize("http", [[], ["--http", "--port", "0"]])
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--principal", "ops", "--grant", "sub:x"], "use either --principal or --grant"),
        (["--scope", "memory:read"], "--scope needs --grant"),
    ],
)
def test_mcp_command_refuses_clashing_principal_options_as_a_usage_error_before_creating_anything(
    tmp_path: Path, http: list[str], args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Options that contradict each other are a usage error (exit code 2, as the README says of every usage
    error), refused before the data directory is created: over stdio it used to be created (with its
    in-use.lock) and reported as created, then refused with exit code 1."""
    target = tmp_path / "new"
    assert main(["mcp", "--data-dir", str(target), *http, *args]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and f"skillsearch mcp: error: {message}" in captured.err
    assert "did not exist" not in captured.err
    assert not target.exists()
    assert main(["mcp", "--data-dir", str(target), *http, *args, "--json"]) == 2
    body = json.loads(capsys.readouterr().out)
    assert body["error"]["code"] == "VALIDATION_ERROR" and message in body["error"]["message"]
    assert not target.exists()


def test_named_principal_without_a_principals_file_fails_clearly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["mcp", "--data-dir", str(tmp_path), "--principal", "ops"]) == 1
    assert f"no principals file at {tmp_path / 'principals.toml'}" in capsys.readouterr().err



def test_stdio_answers_a_line_it_cannot_read_under_the_requests_id(data_dir: Path) -> None:
    """A request the SDK's reader refuses (a lone surrogate escape, as from a client that cut an emoji in
    half; JSON nested too deeply; no JSON at all) is answered with a JSON-RPC error, under its own id where it
    can be found: the SDK only logged it, and the client waited forever. A blank line or a notification gets
    no answer; the session goes on."""
    params = stdio_params(data_dir)
    proc = subprocess.Popen([params.command, *params.args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=params.env, cwd=params.cwd)
    lines: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()  # type: ignore[union-attr]

    def ask(line: bytes) -> dict[str, Any]:
        proc.stdin.write(line + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        return json.loads(lines.get(timeout=TIMEOUT))  # type: ignore[no-any-return]

    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        assert "result" in ask(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}).encode())
        proc.stdin.write(b'\n{"jsonrpc": "2.0", "method": "notifications/initialized"}\n{"jsonrpc": "2.0", "method": 5}\n')  # type: ignore[union-attr]
        call = b'{"jsonrpc": "2.0", "id": %s, "method": "tools/call", "params": {"name": "get_skill", "arguments": %s}}'
        answers = [ask(call % (b'"cut"', b'{"skill_id": "x\\ud83d"}')),
                   ask(call % (b"2", b'{"skill_id": ' + b"[" * 5000 + b"]" * 5000 + b"}")),
                   ask(b"{not json"),
                   ask(b'{"jsonrpc": "2.0", "id": 4, "method": 5}'),
                   ask(b'{"jsonrpc": "2.0", "id": 5, "method": "ping"}')]
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(timeout=TIMEOUT)
        proc.stdout.close()  # type: ignore[union-attr]
    assert [(a["id"], a.get("error", {}).get("code")) for a in answers] == [
        ("cut", -32700), (2, -32700), (None, -32700), (4, -32600), (5, None)]
    assert answers[4]["result"] == {}
    assert "ud83d" not in json.dumps(answers[0])


def test_stdio_says_a_request_before_initialize_is_one_before_initialize(data_dir: Path) -> None:
    """A host that asks before its ``initialize`` was told its params were invalid (the SDK's ``-32602
    "Invalid request parameters"``, no data), which they were not; now the same code says to initialize
    first. A method the server lacks is still ``-32601`` and ``ping`` still answered, before the handshake
    as after; once initialized, the same request is served."""
    params = stdio_params(data_dir)
    proc = subprocess.Popen([params.command, *params.args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=params.env, cwd=params.cwd)
    lines: queue.Queue[bytes] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()  # type: ignore[union-attr]

    def ask(message: dict[str, Any]) -> dict[str, Any]:
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        return json.loads(lines.get(timeout=TIMEOUT))  # type: ignore[no-any-return]

    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    try:
        early = ask({"id": 1, "method": "tools/list"})
        unknown = ask({"id": 2, "method": "no/such"})
        pinged = ask({"id": 3, "method": "ping"})
        assert "result" in ask({"id": 4, "method": "initialize", "params": hello})
        later = ask({"id": 5, "method": "tools/list"})
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(timeout=TIMEOUT)
        proc.stdout.close()  # type: ignore[union-attr]
    assert early["id"] == 1 and early["error"]["code"] == -32602
    assert "not initialized; send initialize first" in early["error"]["message"]
    assert unknown["error"]["code"] == METHOD_NOT_FOUND and pinged["result"] == {}
    assert sorted(t["name"] for t in later["result"]["tools"]) == sorted(TOOL_NAMES)


@pytest.mark.anyio
async def test_stdio_says_it_created_and_seeded_a_new_data_dir_when_it_does(tmp_path: Path) -> None:
    """A host's mistyped ``--data-dir`` is a new catalog seeded with the sample: the note saying so is in the
    host's server log once the session is up (it came only as the session ended, without the seeding)."""
    new = tmp_path / "typo"
    stderr_path = tmp_path / "stderr.txt"
    with stderr_path.open("w") as stderr:
        async with Client(stdio_client(stdio_params(new), errlog=stderr), read_timeout_seconds=TIMEOUT) as session:
            await session.list_tools()
            said = stderr_path.read_text()
    assert f"note: {new} did not exist: created it and seeded it with the bundled sample catalog (45 skills)" in said
    assert stderr_path.read_text().count("did not exist") == 1


@pytest.mark.anyio
async def test_a_search_waiting_on_another_process_write_names_the_writer(
    sample_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second editor window's server starts while an import (here: this test process) holds the index's
    write lock, and its index needs a repair under that lock: the search's bounded wait ends in
    INDEX_NOT_READY naming the writing process, not only "still being opened"; once the writer is done,
    search answers."""
    data = tmp_path / "data"
    shutil.copytree(sample_dir, data)
    manifest_path = data / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    manifest["lexical"] = {**manifest["lexical"], "fields": manifest["lexical"]["fields"] - 1}
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    monkeypatch.setenv("SKILLSEARCH_MODEL_WAIT_S", "2")
    with ExitStack() as writing, (tmp_path / "stderr.txt").open("w") as stderr:
        writing.enter_context(WriteLock(data).hold())  # from before the server starts: its open must wait
        async with Client(stdio_client(stdio_params(data), errlog=stderr), read_timeout_seconds=TIMEOUT) as session:
            waited = error(await session.call_tool("search_skills", {"query": "rotate tls certificates"}))
            writing.close()  # the writer is done
            for _ in range(60):
                later = await session.call_tool("search_skills", {"query": "rotate tls certificates"})
                if not later.is_error:
                    break
                await anyio.sleep(1)
    assert waited["code"] == "INDEX_NOT_READY"
    assert f"process {os.getpid()} is writing to the index in {data}" in waited["message"]
    assert waited["details"]["writer_pid"] == os.getpid()
    assert ok(later)["hits"][0]["slug"] == "tls-certificate-renewal"


def _unusable(tmp_path: Path, kind: str) -> Path:
    (tmp_path / "file").write_text("x", encoding="utf-8")
    return {"a file": tmp_path / "file", "under a file": tmp_path / "file" / "data",
            "under a missing folder": tmp_path / "missing" / "data",
            "impossible to create": Path("/proc/skillsearch-no-such-dir")}[kind]


@pytest.mark.parametrize("kind", ["a file", "under a file", "under a missing folder", "impossible to create"])
@pytest.mark.parametrize("transport", [[], ["--http", "--port", "0"]])
def test_mcp_with_an_unusable_data_dir_is_one_line_and_exit_code_3(
    tmp_path: Path, kind: str, transport: list[str]
) -> None:
    """README "The command line": a server whose data directory is unusable says so in one line and exits
    3, before anything is opened (not argparse's usage banner, nor an ExceptionGroup over stdio)."""
    if kind == "impossible to create" and not Path("/proc/self").is_dir():
        pytest.skip("needs Linux's /proc, where no folder can be made")
    data = _unusable(tmp_path, kind)
    params = stdio_params(data)
    done = subprocess.run([params.command, *params.args, *transport], input="", capture_output=True, text=True,
                          env=params.env, cwd=params.cwd, timeout=TIMEOUT, check=False)
    assert done.returncode == 3, done.stderr
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: data directory {data} ") and "Traceback" not in line
    assert not (tmp_path / "missing").exists()


# -- streamable HTTP ------------------------------------------------------------------------------

TOKENS = {"tok-starter": STARTER, "tok-operator": Principal.operator()}


def bearer_principal(headers: Mapping[str, str] | None) -> Principal:
    """A real principal provider of the kind the HTTP app plugs in: bearer token -> principal."""
    scheme, _, token = (headers or {}).get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or token not in TOKENS:
        raise UnauthenticatedError("a valid bearer token is required")
    return TOKENS[token]


def _inside_fastapi(sample: Catalog) -> FastAPI:
    """The way the HTTP app serves MCP: a route at exactly /mcp, the session manager in its lifespan."""
    asgi, mcp_lifespan = mountable(build_mcp_server(sample, bearer_principal))

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with mcp_lifespan():
            yield

    app = FastAPI(lifespan=lifespan)
    app.router.routes.append(Route("/mcp", endpoint=asgi))
    return app


@pytest.fixture(scope="module", params=["standalone", "inside-fastapi"])
def http_url(sample: Catalog, request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "standalone":
        app: Any = streamable_http_app(build_mcp_server(sample, bearer_principal))
    else:
        app = _inside_fastapi(sample)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        threading.Event().wait(0.02)
    yield f"http://127.0.0.1:{port}/mcp"
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


@asynccontextmanager
async def _with_token(url: str, token: str) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with http, Client(streamable_http_client(url, http_client=http)) as session:
        yield session


@pytest.mark.anyio
async def test_streamable_http_serves_the_tools_under_the_tokens_principal(http_url: str, sample: Catalog) -> None:
    async with _with_token(http_url, "tok-starter") as session:
        tools = (await session.list_tools()).tools
        found = ok(await session.call_tool("search_skills", {"query": "postgres failover replica promotion"}))
        page = ok(await session.call_tool("list_skills", {"limit": 200}))
        three = ok(await session.call_tool("list_skills", {"limit": 3.0}))  # JSON Schema's integer 3
    assert len(three["items"]) == 3 and three["items"] == page["items"][:3]
    assert sorted(t.name for t in tools) == sorted(TOOL_NAMES)
    starter_ids = {s.skill_id for s in sample.store.list_page(["sub:starter-pack"], limit=500)}
    assert {i["skill_id"] for i in page["items"]} == starter_ids
    assert {h["skill_id"] for h in found["hits"]} <= starter_ids

    async with _with_token(http_url, "tok-operator") as session:
        found = ok(await session.call_tool("search_skills", {"query": "postgres failover replica promotion"}))
        recalled = ok(await session.call_tool("recall_cloud_skill", {"slug": "postgres-failover"}))
    assert found["hits"][0]["slug"] == "postgres-failover" and recalled["kind"] == "root"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_streamable_http_advertises_no_change_notifications(http_url: str, mode: Literal["auto", "legacy"]) -> None:
    """Stateless HTTP never publishes a change, so neither era's capabilities promise one, and
    subscriptions/listen is not served."""
    http = httpx2.AsyncClient(headers={"Authorization": "Bearer tok-starter"}, timeout=60)
    async with http, Client(streamable_http_client(http_url, http_client=http), mode=mode) as session:
        caps = session.server_capabilities
        assert caps.resources is not None
        assert (caps.resources.list_changed, caps.resources.subscribe) == (False, False)
        assert caps.tools is not None and caps.tools.list_changed is False
        assert caps.prompts is not None and caps.prompts.list_changed is False
        assert session.server_info is not None and session.server_info.version == skillsearch.__version__
        if mode == "auto":
            with pytest.raises(MCPError) as unserved:
                async with session.listen(resources_list_changed=True):
                    pass
            assert unserved.value.error.code == METHOD_NOT_FOUND


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
def test_streamable_http_answers_only_post(http_url: str, method: str) -> None:
    """Stateless: a GET would open an SSE stream on which nothing can ever come; it is 405 at once."""
    answer = httpx.request(method, http_url, headers={"Authorization": "Bearer tok-starter",
                                                      "Accept": "text/event-stream, application/json"}, timeout=30)
    assert answer.status_code == 405 and answer.headers["allow"] == "POST"
    assert answer.headers["content-type"] == "application/json"
    body = answer.json()
    assert body["jsonrpc"] == "2.0" and body["error"]["code"] == INVALID_REQUEST
    assert "POST" in body["error"]["message"]


@pytest.mark.anyio
async def test_streamable_http_without_a_token_is_unauthenticated(http_url: str) -> None:
    async with Client(http_url) as session:
        assert error(await session.call_tool("get_skill", {"skill_id": "x"}))["code"] == "UNAUTHENTICATED"
        assert error(await session.call_tool("recall_cloud_skill", {"query": "x"}))["code"] == "UNAUTHENTICATED"


@pytest.mark.parametrize(("headers", "status", "words"), [
    ({"Content-Type": "text/plain"}, 400, "Invalid Content-Type header"),
    ({"Content-Type": "application/json", "Host": "attacker.example"}, 421, "Invalid Host header"),
    ({"Content-Type": "application/json", "Origin": "http://attacker.example"}, 403, "Invalid Origin header"),
])
def test_streamable_http_refusals_of_the_transport_are_json_rpc_errors(
    http_url: str, headers: dict[str, str], status: int, words: str
) -> None:
    """The SDK's transport security answers these in plain text; a client parsing every answer of the endpoint
    as JSON-RPC gets the same status and words as a JSON-RPC error."""
    answer = httpx.post(http_url, content=b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}', timeout=30, headers={
        "Authorization": "Bearer tok-starter", "Accept": "application/json, text/event-stream", **headers})
    assert answer.status_code == status
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": words}}
