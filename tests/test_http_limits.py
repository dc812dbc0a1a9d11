"""Issue 32, security item 4: every HTTP server bounds a connection before any request handling runs.

Real uvicorn servers on 127.0.0.1 (both of its HTTP parsers) and raw sockets, as an attacker would send:
an oversized head (whole, or never finished), a head trickled slower than the bound, a body sent in part
or never, idle connections, connections beyond the limit; and ``skillsearch upstream`` as a real process
taking its bounds from the ``SKILLSEARCH_HTTP_*`` settings. The bounds are small here so that the tests stay fast.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_support import ROOT

from skillsearch.http.server import ConnectionLimits, ServerThread

PARSERS = ["h11", "httptools"]
SMALL = ConnectionLimits(max_header_bytes=8 * 1024, head_timeout_s=0.5, keep_alive_s=5, max_connections=4,
                         body_timeout_s=0.5)


async def hello(scope: Any, receive: Any, send: Any) -> None:
    """Reads the whole request body (as FastAPI does before any authentication), then answers ``ok``."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def _connect(url: str) -> socket.socket:
    return socket.create_connection(_address(url), timeout=30)


def _read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a 30 s socket timeout fails the test)."""
    out = b""
    try:
        while chunk := sock.recv(65536):
            out += chunk
    except ConnectionResetError:
        pass
    return out


def _request(head_extra: bytes = b"", close: bool = True) -> bytes:
    return (b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + head_extra
            + (b"Connection: close\r\n" if close else b"") + b"\r\n")


@pytest.fixture(params=PARSERS)
def url(request: pytest.FixtureRequest) -> Iterator[str]:
    with ServerThread(hello, limits=SMALL, http=request.param) as base:
        yield base


def test_a_normal_request_and_a_kept_alive_second_one_are_answered(url: str) -> None:
    with _connect(url) as sock:
        sock.sendall(_request(close=False))
        first = b""
        while not first.endswith(b"ok"):
            first += sock.recv(65536)
        sock.sendall(_request())
        second = _read_until_closed(sock)
    assert first.startswith(b"HTTP/1.1 200") and first.endswith(b"ok")
    assert second.startswith(b"HTTP/1.1 200")


def test_a_head_over_the_bound_gets_431_with_a_json_body(url: str) -> None:
    with _connect(url) as sock:
        sock.sendall(_request(b"X-Big: " + b"a" * 20_000 + b"\r\n"))
        answer = _read_until_closed(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 431")
    error = json.loads(body)["error"]
    assert error["code"] == "VALIDATION_ERROR" and error["details"]["max_header_bytes"] == SMALL.max_header_bytes
    assert [p["field"] for p in error["details"]["problems"]] == ["header"]
    assert b"x-request-id: " in head.lower()


@pytest.mark.parametrize("finished", [True, False])
def test_a_64_kib_head_is_refused_finished_or_not(url: str, finished: bool) -> None:
    """Refused with 431, or closed before the answer is read (the server closes on unread bytes, which
    resets the connection); never served, and an unfinished one is not waited for."""
    big = b"X-Big: " + b"a" * (64 * 1024 + 1) + b"\r\n"
    with _connect(url) as sock:
        try:
            sock.sendall(_request(big) if finished else b"GET / HTTP/1.1\r\nHost: x\r\n" + big)
        except OSError:
            answer = b""
        else:
            answer = _read_until_closed(sock)
    assert answer == b"" or answer.startswith(b"HTTP/1.1 431")


def test_many_small_header_fields_count_together(url: str) -> None:
    fields = b"".join(b"X-%d: v\r\n" % i for i in range(2000))  # about 17 KiB in 7-byte lines
    with _connect(url) as sock:
        sock.sendall(_request(fields))
        assert _read_until_closed(sock).startswith(b"HTTP/1.1 431")


@pytest.mark.parametrize("field", [b"Authorization: Bearer a", b"Content-Type: application/json",
                                   b"Host: 127.0.0.1"])
def test_a_field_that_takes_one_value_sent_twice_gets_400_before_the_app(url: str, field: bytes) -> None:
    """Two ``Authorization`` lines (or ``Content-Type``, ``Host``): a proxy and this server could each read
    another one, so neither is served; other fields may repeat."""
    name = field.split(b":")[0]
    second = field if name == b"Host" else field + b"x"
    with _connect(url) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\n" + (b"" if name == b"Host" else b"Host: 127.0.0.1\r\n")
                     + field + b"\r\n" + second + b"\r\nConnection: close\r\n\r\n")
        answer = _read_until_closed(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), head
    error = json.loads(body)["error"]
    assert error["code"] == "VALIDATION_ERROR"
    if not error["message"].startswith("malformed HTTP request"):  # h11 refuses a doubled Host itself
        assert [p["field"] for p in error["details"]["problems"]] == ["header"]
        assert name.decode().lower() in error["message"]
    with _connect(url) as sock:
        sock.sendall(_request(b"Accept: text/plain\r\nAccept: application/json\r\n"))
        assert _read_until_closed(sock).startswith(b"HTTP/1.1 200")


@pytest.mark.parametrize("head", [b"GARBAGE\r\n\r\n", b"GET / HTTP/1.1\r\nHost: x\r\nBad Field\r\n\r\n",
                                  b"GET /\x00 HTTP/1.1\r\nHost: x\r\n\r\n"], ids=["no-request-line", "no-colon", "nul"])
def test_a_request_the_parser_cannot_read_gets_a_json_400(url: str, head: bytes) -> None:
    with _connect(url) as sock:
        sock.sendall(head)
        answer = _read_until_closed(sock)
    status, _, body = answer.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 400") and b"content-type: application/json" in status.lower()
    error = json.loads(body)["error"]
    assert error["code"] == "VALIDATION_ERROR" and error["message"].startswith("malformed HTTP request")
    assert [p["field"] for p in error["details"]["problems"]] == ["request"]


def test_a_head_trickled_slower_than_the_bound_is_closed_unanswered(url: str) -> None:
    """One byte every 50 ms of a 300-byte head would take 15 s; the bound is 0.5 s."""
    head = _request(b"X-Slow: " + b"s" * 250 + b"\r\n")
    sent, closed = 0, False
    with _connect(url) as sock:
        for byte in head:
            try:
                sock.sendall(bytes([byte]))
            except OSError:  # reset or broken pipe: the server closed it
                closed = True
                break
            sent += 1
            time.sleep(0.05)
        answer = b"" if closed else _read_until_closed(sock)
    assert sent < len(head)
    assert b"200" not in answer


def _post_head(length: int) -> bytes:
    return (b"POST /anything HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % length)


@pytest.mark.parametrize("part", [b"", b'{"q'], ids=["no-body", "part-of-the-body"])
def test_a_body_not_whole_within_the_bound_gets_408_and_the_connection_closed(url: str, part: bytes) -> None:
    """A head declaring 20 bytes, then nothing more (or 3 of them): no Authorization header, and the server
    answers and closes the connection once the body bound (0.5 s) passes; a connection held open would fail
    on the socket's 30 s timeout."""
    with _connect(url) as sock:
        sock.sendall(_post_head(20) + part)
        answer = _read_until_closed(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408")
    assert b"connection: close" in head.lower()
    error = json.loads(body)["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert [p["field"] for p in error["details"]["problems"]] == ["body"]


def test_a_whole_body_is_served_and_the_connection_kept(url: str) -> None:
    """The bound does not touch a body that arrives: the request is answered and the connection serves a
    second one."""
    with _connect(url) as sock:
        sock.sendall(_post_head(2) + b"{}")
        first = b""
        while not first.endswith(b"ok"):
            first += sock.recv(65536)
        sock.sendall(_request())
        second = _read_until_closed(sock)
    assert first.startswith(b"HTTP/1.1 200")
    assert second.startswith(b"HTTP/1.1 200")


def test_idle_connections_are_closed_and_none_beyond_the_limit_is_kept(url: str) -> None:
    socks = [_connect(url) for _ in range(SMALL.max_connections + 3)]
    try:
        # Every one of them closes without a byte sent: those beyond the limit at once, the others when the
        # head timeout passes (a hung connection would fail on the socket's 30 s timeout instead).
        assert [_read_until_closed(s) for s in socks] == [b""] * len(socks)
    finally:
        for s in socks:
            s.close()
    with _connect(url) as sock:  # and the server still answers
        sock.sendall(_request())
        assert _read_until_closed(sock).startswith(b"HTTP/1.1 200")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_cli_servers_take_their_bounds_from_the_settings(tmp_path: Path) -> None:
    """``skillsearch upstream`` (like ``serve`` and ``mcp --http``, through ``http/server.serve``)."""
    folder = tmp_path / "skills" / "demo"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: demo\ndescription: A demo skill.\n---\nHello.\n", encoding="utf-8")
    port = _free_port()
    env = dict(os.environ) | {"PYTHONPATH": str(ROOT), "SKILLSEARCH_HTTP_MAX_HEADER_BYTES": "4096",
                              "SKILLSEARCH_HTTP_HEAD_TIMEOUT_S": "0.5"}
    proc = subprocess.Popen([sys.executable, "-m", "skillsearch.cli", "upstream", "--from", f"s1={tmp_path / 'skills'}",
                             "--port", str(port)], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                idle = _connect(url)
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "upstream did not start"
                time.sleep(0.1)
        with idle:
            assert _read_until_closed(idle) == b""
        with _connect(url) as sock:
            sock.sendall(_request(b"X-Big: " + b"a" * 5000 + b"\r\n"))
            assert _read_until_closed(sock).startswith(b"HTTP/1.1 431")
        with _connect(url) as sock:
            sock.sendall(_request(b"X-Small: " + b"a" * 1000 + b"\r\n"))
            assert not _read_until_closed(sock).startswith(b"HTTP/1.1 431")
    finally:
        proc.terminate()
        proc.wait(30)
