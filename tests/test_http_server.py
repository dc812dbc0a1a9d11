"""The HTTP app over real HTTP on 127.0.0.1: uvicorn in a thread, and ``skillsearch serve`` as a process.

The extension hooks other surfaces use (routers, bearer-protected mounts, lifespans), the last-resort JSON
500, concurrency, streamed body limits, header values as RFC 9110 defines them (whichever parser uvicorn
uses), and the banner ``make serve`` prints.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from fastapi import APIRouter, FastAPI
from mcp_support import STARTER

from skillsearch.cli import build_serve_app
from skillsearch.http.app import Limits, create_app
from skillsearch.http.auth import DEMO_TOKEN, PrincipalRegistry, add_principal
from skillsearch.http.server import ConnectionLimits, ServerThread
from skillsearch.mcp.server import build_mcp_server
from skillsearch.mcp.transport import streamable_http_app
from skillsearch.service import Catalog

DEMO = {"Authorization": f"Bearer {DEMO_TOKEN}"}


def assert_error(resp: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error"} and body["error"]["code"] == code
    return dict(body["error"])


# -- extension hooks: routers, protected mounts, lifespans; the last-resort 500 ----------------------------------


def test_hooks_over_real_http(sample: Catalog) -> None:
    events: list[str] = []
    seen: list[Any] = []

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        events.append("start")
        yield
        events.append("stop")

    extra = APIRouter(prefix="/v1/sync")

    @extra.get("/ping")
    def ping() -> dict[str, str]:
        return {"pong": "yes"}

    async def sub_app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["state"]["principal"])
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"mounted " + scope["method"].encode()})

    async def broken(scope: Any, receive: Any, send: Any) -> None:
        raise RuntimeError("secret internals")

    app = create_app(sample, principals=PrincipalRegistry(None, demo=True), routers=[extra],
                     mounts=[("/mcp", sub_app), ("/boom", broken)], lifespans=[lifespan])
    with ServerThread(app) as url:
        assert url.startswith("http://127.0.0.1:")
        assert events == ["start"]
        with httpx.Client(base_url=url, timeout=30) as c:
            assert c.get("/v1/sync/ping").json() == {"pong": "yes"}
            assert_error(c.post("/mcp"), 401, "UNAUTHENTICATED")
            assert seen == []
            ok = c.post("/mcp", headers=DEMO)  # exactly /mcp: no redirect to /mcp/
            assert ok.status_code == 200 and ok.text == "mounted POST" and seen[0].name == "demo"
            assert_error(c.get("/mcp/x", headers=DEMO), 404, "NOT_FOUND")
            boom = c.get("/boom", headers=DEMO)
            err = assert_error(boom, 500, "INTERNAL")
            assert "secret" not in boom.text and err["details"]["request_id"] == boom.headers["x-request-id"]
    assert events == ["start", "stop"]


def test_a_target_whose_percent_encoded_bytes_are_not_utf8_is_a_400_naming_the_field(sample: Catalog) -> None:
    """A URL cut inside a character (``ログ`` is ``%E3%83%AD%E3%82%B0``) or written in Latin-1 was decoded with
    replacement characters and answered: hits for ``ロ\ufffd``, a ``SKILL_NOT_FOUND`` naming ``\ufffd``."""
    app = create_app(sample, principals=PrincipalRegistry(None, demo=True))
    with ServerThread(app) as url, httpx.Client(base_url=url, timeout=60, headers=DEMO) as c:
        whole = c.get("/v1/search?q=%E3%83%AD%E3%82%B0&limit=2")
        assert whole.status_code == 200 and whole.json()["query"] == "ログ"
        cut = assert_error(c.get("/v1/search?q=%E3%83%AD%E3%82&limit=2"), 400, "VALIDATION_ERROR")
        assert [p["field"] for p in cut["details"]["problems"]] == ["query.q"]
        latin1 = assert_error(c.get("/v1/skills?tag=caf%E9"), 400, "VALIDATION_ERROR")
        assert [p["field"] for p in latin1["details"]["problems"]] == ["query.tag"]
        path = assert_error(c.get("/v1/skills/%E3%83"), 400, "VALIDATION_ERROR")
        assert [p["field"] for p in path["details"]["problems"]] == ["path"]
        assert "\ufffd" not in cut["message"] + latin1["message"] + path["message"]


def test_a_target_with_many_fields_not_utf8_gets_a_bounded_answer_and_valid_targets_pass(sample: Catalog) -> None:
    """Each parameter at fault was a problem in the 400's body and a name in its message: a 30 KB query of
    ``%E9=`` pairs (within the head limit) drew a body of over a megabyte, every request. The problems are
    said once each, the first few of them. The targets that are UTF-8 (``+``, ``%25``, empty and repeated
    parameters) are not refused."""
    app = create_app(sample, principals=PrincipalRegistry(None, demo=True))
    with ServerThread(app) as url, httpx.Client(base_url=url, timeout=60, headers=DEMO) as c:
        names = "&".join("%E9=" for _ in range(3000))
        values = "&".join(f"p{i}=%E9" for i in range(3000))
        for query in (names, values):
            resp = c.get("/v1/search?q=x&" + query)
            assert resp.status_code == 400 and len(resp.content) < 8192, (resp.status_code, len(resp.content))
            problems = resp.json()["error"]["details"]["problems"]
            assert 0 < len(problems) <= 10 and len({json.dumps(p) for p in problems}) == len(problems), problems
        for target in ("/v1/search?q=a+b&limit=2", "/v1/search?q=100%25&limit=2", "/v1/skills?tag=python&tag=cli",
                       "/v1/search?q=%2B&&limit=2", "/v1/search?q=%zz", "/v1/search?q=%E3%83%AD&=&limit=2"):
            assert c.get(target).status_code == 200, target
        empty = c.get("/v1/skills?tag=")  # an empty tag is refused, but as a tag, not as text that is not UTF-8
        assert empty.status_code == 400 and "UTF-8" not in empty.text, empty.text


def test_real_http_concurrency_and_streamed_limits(sample: Catalog) -> None:
    app = create_app(sample, principals=PrincipalRegistry(None, demo=True), limits=Limits(max_body_bytes=2048))
    queries = ["profile python", "clean pandas data", "sql window functions", "feature drift", "git bisect",
               "dockerfile multi stage", "pytest fixtures", "merge conflicts"]

    async def burst(url: str) -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=url, headers=DEMO, timeout=60) as c:
            return await asyncio.gather(*[c.get("/v1/search", params={"q": q}) for q in queries * 2])

    with ServerThread(app) as url:
        responses = asyncio.run(burst(url))
        assert [r.status_code for r in responses] == [200] * len(responses)
        assert all(r.json()["hits"] for r in responses)
        with httpx.Client(base_url=url, headers=DEMO, timeout=30) as c:

            def body() -> Iterator[bytes]:
                yield b'{"parameters": {"a": "'
                yield b"z" * 4096
                yield b'"}}'

            resp = c.post("/v1/skills/sk_x/resolve", content=body(), headers={"Content-Type": "application/json"})
            assert_error(resp, 413, "VALIDATION_ERROR")
            assert c.get("/healthz").status_code == 200


@pytest.mark.parametrize("parser", ["h11", "httptools"])
def test_a_body_sent_in_part_without_a_token_is_answered_408_closed_and_counted(sample: Catalog, parser: str) -> None:
    """The app reads a body before it authenticates (FastAPI): a client without a token that declares a
    body and sends a part of it gets the JSON 408 (with its request id) once the body bound passes, the
    connection closes, and ``/metrics`` counts it under its route."""
    app = create_app(sample, principals=PrincipalRegistry(None, demo=True))
    with ServerThread(app, http=parser, limits=ConnectionLimits(body_timeout_s=0.5)) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(b"POST /v1/recall HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 20\r\nX-Request-ID: slow-body-1\r\n\r\n{")
            answer = b""
            while chunk := sock.recv(65536):  # a connection kept open fails on the 30 s socket timeout
                answer += chunk
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 408")
        assert b"x-request-id: slow-body-1" in head.lower()
        error = json.loads(body)["error"]
        assert error["code"] == "VALIDATION_ERROR" and error["details"]["problems"][0]["field"] == "body"
        metrics = httpx.get(url + "/metrics", timeout=30).text
    assert 'route="/v1/recall",status="408"} 1.0' in metrics


# -- header values: RFC 9110 section 5.5 strips the whitespace around them ---------------------------------------

MCP_VERSION = "2026-07-28"


def _raw_post(url: str, path: str, body: bytes, header_lines: list[str]) -> tuple[int, bytes]:
    """One HTTP/1.1 POST written by hand: HTTP clients refuse to send a header value with trailing spaces."""
    host, port = url.removeprefix("http://").split(":")
    head = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", "Content-Type: application/json",
            "Accept: application/json, text/event-stream", f"Content-Length: {len(body)}", "Connection: close",
            *header_lines]
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


@pytest.mark.parametrize("parser", ["h11", "httptools"])
def test_mcp_header_values_are_compared_without_surrounding_whitespace(sample: Catalog, parser: str) -> None:
    """``Mcp-Method:  tools/list \\t`` names tools/list (the conformance suite's http-header-validation sends
    ``Mcp-Name`` padded so): accepted with either HTTP parser, while a different method is still refused."""
    app = streamable_http_app(build_mcp_server(sample, STARTER))
    meta = {"io.modelcontextprotocol/protocolVersion": MCP_VERSION, "io.modelcontextprotocol/clientCapabilities": {}}
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"_meta": meta}}).encode()
    with ServerThread(app, http=parser) as url:
        status, answer = _raw_post(url, "/mcp", body, [f"MCP-Protocol-Version: {MCP_VERSION}",
                                                         "Mcp-Method:   tools/list \t "])
        assert status == 200, answer
        assert {t["name"] for t in json.loads(answer)["result"]["tools"]} >= {"search_skills", "get_skill"}
        status, answer = _raw_post(url, "/mcp", body, [f"MCP-Protocol-Version: {MCP_VERSION}",
                                                         "Mcp-Method:  prompts/list  "])
        assert status == 400 and json.loads(answer)["error"]["code"] == -32020


# -- `skillsearch serve` as a process ---------------------------------------------------------------------------


def test_serve_prints_url_demo_token_and_a_curl_that_works(sample_dir: Path, tmp_path: Path) -> None:

    data = tmp_path / "data"
    shutil.copytree(sample_dir, data)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data), "-q", "serve", "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        assert proc.stdout is not None
        banner = [proc.stdout.readline() for _ in range(6)]
        text = "".join(banner)
        url = re.search(r"serving on (http://127\.0\.0\.1:\d+)", text)
        assert url, text + (proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
        assert f"demo token:   {DEMO_TOKEN}" in text and "/mcp" in text
        curl = re.search(r"curl -H 'Authorization: Bearer ([^']+)' '([^']+)'", text)
        assert curl and curl.group(1) == DEMO_TOKEN and curl.group(2).startswith(url.group(1))
        # The banner comes before the model is loaded; the first search waits for the background load.
        resp = httpx.get(curl.group(2), headers={"Authorization": f"Bearer {curl.group(1)}"}, timeout=300)
        assert resp.status_code == 200 and resp.json()["hits"][0]["slug"] == "python-profiling"
        assert httpx.get(url.group(1) + "/readyz", timeout=30).json()["status"] == "ready"
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        stderr = proc.stderr.read() if proc.stderr else ""
        if proc.stdout:
            proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
    logs = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    assert any(r.get("route") == "/v1/search" and r.get("principal") == "demo" for r in logs)
    assert DEMO_TOKEN not in stderr
    assert proc.returncode in (0, 130)  # Ctrl-C: a clean shutdown, reported as "interrupted"



@pytest.mark.anyio
async def test_serve_app_answers_mcp_at_slash_mcp_with_the_same_tokens(sample: Catalog, tmp_path: Path) -> None:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    path = tmp_path / "principals.toml"
    ops_token = add_principal(path, "ops", ["sub:ops-pro"], ["skills:read", "memory:read"])
    recall_only = add_principal(path, "recall-only", ["sub:ops-pro"], ["memory:read"])
    app = build_serve_app(sample, PrincipalRegistry(path, demo=True))

    async def call(url: str, token: str, tool: str, args: dict[str, Any]) -> Any:
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        async with http, Client(streamable_http_client(url + "/mcp", http_client=http)) as session:
            return await session.call_tool(tool, args)

    with ServerThread(app) as url:
        demo = await call(url, DEMO_TOKEN, "search_skills", {"query": "postgres failover replica promotion"})
        ops = await call(url, ops_token, "search_skills", {"query": "postgres failover replica promotion"})
        denied = await call(url, recall_only, "list_skills", {})
        recalled = await call(url, recall_only, "recall_cloud_skill", {"slug": "postgres-failover"})
        async with httpx.AsyncClient(base_url=url) as c:
            assert_error(await c.post("/mcp", json={}), 401, "UNAUTHENTICATED")
            rest = await c.get("/v1/search", params={"q": "postgres failover replica promotion"},
                               headers={"Authorization": f"Bearer {ops_token}"})
    ops_grants = {"sub:ops-pro"}
    assert not demo.is_error and not ops.is_error
    assert all(sample.store.skill(h["skill_id"]).grant != "sub:ops-pro" for h in demo.structured_content["hits"])
    assert ops.structured_content["hits"][0]["slug"] == "postgres-failover"
    assert {sample.store.skill(h["skill_id"]).grant for h in ops.structured_content["hits"]} <= ops_grants
    assert [h["skill_id"] for h in ops.structured_content["hits"]] == [h["skill_id"] for h in rest.json()["hits"]]
    assert denied.is_error and denied.structured_content["error"]["code"] == "ACCESS_DENIED"
    assert not recalled.is_error and recalled.structured_content["kind"] == "root"


DIES_MID_RESPONSE = """
import os, signal
from skillsearch.http.server import serve

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    body = b"x" * 7000
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]})
    os.kill(os.getpid(), signal.SIGKILL)  # between the head and the body, as a replica killed mid-response
    await send({"type": "http.response.body", "body": body})

serve(app, port=0, on_started=lambda url: print(url, flush=True))
"""


def test_a_server_killed_mid_response_has_sent_no_head_without_its_body() -> None:
    """A response's head and body leave in one write (``http.one_write.OneWrite``): a replica killed between
    uvicorn's two writes has sent nothing, which HAProxy retries on another replica (``deploy/haproxy.cfg``),
    instead of a head the proxy has already passed on and cannot take back (the fleet test lost a request
    that way: "peer closed connection without sending complete message body")."""
    proc = subprocess.Popen([sys.executable, "-c", DIES_MID_RESPONSE], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        host, port = url.removeprefix("http://").rsplit(":", 1)
        got = b""
        with socket.create_connection((host, int(port)), timeout=30) as conn:
            conn.sendall(b"GET / HTTP/1.1\r\nHost: replica\r\n\r\n")
            try:
                while chunk := conn.recv(65536):
                    got += chunk
            except ConnectionResetError:
                pass
        assert proc.wait(30) == -signal.SIGKILL
        assert got == b""
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_serve_says_a_principals_file_it_was_given_does_not_exist(sample_dir: Path, tmp_path: Path) -> None:
    """A mistyped ``--principals`` served on with the demo token alone and said nothing: the banner names it."""
    data = tmp_path / "data"
    shutil.copytree(sample_dir, data)
    typo = tmp_path / "principls.toml"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "HF_HUB_OFFLINE": "1",
           "SKILLSEARCH_ENCODER": "hashing"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data), "-q", "serve", "--port", "0",
         "--principals", str(typo)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        assert proc.stdout is not None
        assert "serving on" in proc.stdout.readline()  # the banner is written whole: the rest is in the pipe
        proc.terminate()
        proc.wait(60)
        lines = proc.stdout.read().splitlines(keepends=True)
        said = [x for x in lines if x.strip().startswith("principals:")]
        assert said == [f"  principals:   {typo} (does not exist yet: no token of yours works until `token add`"
                        " writes it)\n"], lines
        assert any("demo token:" in x for x in lines)
    finally:
        proc.terminate()
        proc.wait(60)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.parametrize("era", [b"", b"MCP-Protocol-Version: 2026-07-28\r\n"], ids=["handshake", "2026-07-28"])
def test_an_mcp_client_gone_before_its_body_is_whole_is_a_499_not_a_500(sample: Catalog, era: bytes) -> None:
    """A host killed while it sent a request to ``/mcp`` (a soak of ``skillsearch serve`` abandoned 42 MCP
    clients mid-session, one was caught mid-body): the transport's read of the body raised ``ClientDisconnect``
    (2026-07-28 requests: logged as an unhandled error with its traceback) or answered 500 (handshake-era
    requests), either counted as a 500 in ``/metrics``, which a 5xx alert pages on."""
    app = build_serve_app(sample, PrincipalRegistry(None, demo=True))
    with ServerThread(app) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: " + f"{host}:{port}".encode() + b"\r\nAuthorization: Bearer "
                         + DEMO_TOKEN.encode() + b"\r\nContent-Type: application/json\r\n"
                         b"Accept: application/json, text/event-stream\r\nContent-Length: 4000\r\n" + era + b"\r\n"
                         b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {')
        with httpx.Client(base_url=url, timeout=30) as c:
            counted: list[str] = []
            for _ in range(600):  # until the server has finished with the request (not a timing assertion)
                counted = [line for line in c.get("/metrics").text.splitlines()
                           if line.startswith("skillsearch_http_requests_total") and 'route="/mcp"' in line]
                if counted:
                    break
                time.sleep(0.05)
    assert counted == ['skillsearch_http_requests_total{method="POST",route="/mcp",status="499"} 1.0']
