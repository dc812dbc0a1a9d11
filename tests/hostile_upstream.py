"""A misbehaving subscription platform on 127.0.0.1 (a fake at the one process boundary we do not own).

Each subscription id picks a behaviour; everything it does happens on a real socket, so the client's
bounds (deadline, bytes, content type, redirects) are exercised the way a hostile server would hit them.
``events`` records what the server saw (bytes it managed to send, connections the client cut).
"""

from __future__ import annotations

import base64
import json
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse


def item(n: int, prefix: str = "h") -> dict[str, Any]:
    return {"op": "upsert", "skill": {"skill_id": f"{prefix}-{n}", "slug": f"{prefix}-skill-{n}"},
            "revision": {"name": f"{prefix} skill {n}", "description": f"Hostile test skill number {n}."}}


# The body and the resource of ``cc-1`` hold control characters too: content, kept byte for byte.
CONTROL_BODY = "# Colours\r\n\r\nPrint \x1b[31mred\x1b[0m, a NUL \x00 and \u202e here.\r\n"
CONTROL_BYTES = b"\x1b[2J\x00\x9b\xe2\x80\xae\r\n"


def control_char_items() -> list[dict[str, Any]]:
    """Items whose one-line fields (name, tag, step tool) or description hold a terminal's control
    characters or a bidi override, each with the skill id it should be rejected under; ``cc-1`` (with
    control characters only in its body and resource) and ``cc-9`` (a description with a tab and line
    breaks) are valid."""
    def flow(n: int, tool: str, pdesc: str) -> dict[str, Any]:
        it = item(n, "cc")
        it["revision"].update(kind="flow_template", steps=[{"tool": tool, "args": {"q": "{q}"}}],
                              parameters=[{"name": "q", "description": pdesc}])
        return it

    good = item(1, "cc")
    good["revision"].update(instructions=CONTROL_BODY, skill_md=(
        "---\nname: cc-skill-1\ndescription: Hostile test skill number 1.\n---\n" + CONTROL_BODY))
    good["resources"] = [{"path": "raw.bin", "encoding": "base64",
                          "content": base64.b64encode(CONTROL_BYTES).decode()}]
    bad = [item(n, "cc") for n in range(2, 7)]
    bad[0]["revision"]["name"] = "a\x1b[2Jb"
    bad[1]["revision"]["name"] = "nul\x00name"
    bad[2]["revision"]["name"] = "evil\u202etxt.exe"
    bad[3]["revision"]["tags"] = ["ok", "c1\x9b31m"]
    bad[4]["revision"]["description"] = "Looks fine\u2066 until rendered."
    multiline = item(9, "cc")
    multiline["revision"]["description"] = "First line,\n\tthen an indented second line.\n"
    return [good, *bad, flow(7, "shell\x1b]0;owned\x07", "the query"), flow(8, "search", "the \x1b[8m query"),
            multiline]


def _gzip_bomb(decoded_mib: int) -> bytes:
    """A gzip body that decodes to ``decoded_mib`` MiB (of a JSON-looking prefix and zeros)."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [comp.compress(b'{"items": ["')]
    block = b"0" * (1024 * 1024)
    parts += [comp.compress(block) for _ in range(decoded_mib)]
    parts.append(comp.flush())
    return b"".join(parts)


class HostileUpstream:
    def __init__(self) -> None:
        self.events: dict[str, list[Any]] = {}
        self.pages: dict[str, int] = {}
        self.bomb = b""
        self.stacked_bomb = b""
        self.on_request: Callable[[], None] = lambda: None  # "stop-on-page" calls it before it answers
        self._lock = threading.Lock()

    def note(self, key: str, value: Any) -> None:
        with self._lock:
            self.events.setdefault(key, []).append(value)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        up = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: bytes, ctype: str = "application/json",
                      headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def _page(self, items: list[Any], cursor: str, more: bool) -> None:
                self._send(200, json.dumps({"items": items, "next_cursor": cursor, "has_more": more}).encode())

            def do_GET(self) -> None:
                url = urlparse(self.path)
                sub = url.path.split("/")[3]
                query = parse_qs(url.query)
                limit = int(query.get("limit", ["100"])[0])
                since = query.get("since", [None])[0]
                up.note(f"{sub}.requests", since)
                with up._lock:
                    up.pages[sub] = up.pages.get(sub, 0) + 1
                    page_no = up.pages[sub]
                if sub == "good":
                    self._page([item(1, "good"), item(2, "good")], "done", False)
                elif sub == "redirect-loop":
                    self.send_response(302)
                    self.send_header("Location", self.path)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif sub == "html":
                    self._send(200, b"<html>maintenance</html>", "text/html")
                elif sub == "truncated":
                    body = json.dumps({"items": [item(1)], "next_cursor": "c", "has_more": False}).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body) + 1000))
                    self.end_headers()
                    self.wfile.write(body[:20])
                    self.wfile.flush()
                    self.close_connection = True
                elif sub in ("drip", "drip-forever"):
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "100000")
                    self.end_headers()
                    self.wfile.flush()
                    sent = 0
                    try:
                        for _ in range(100000):
                            self.wfile.write(b" ")
                            self.wfile.flush()
                            sent += 1
                            time.sleep(0.5)
                    except OSError:
                        up.note(f"{sub}.cut", sent)
                        return
                    up.note(f"{sub}.finished", sent)
                elif sub == "gzip-bomb":
                    self._send(200, up.bomb, headers={"Content-Encoding": "gzip"})
                elif sub == "gzip-stack":
                    self._send(200, up.stacked_bomb, headers={"Content-Encoding": "gzip, gzip"})
                elif sub == "gzip-page":
                    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
                    body = json.dumps({"items": [item(1, "gz"), item(2, "gz")], "next_cursor": "done",
                                       "has_more": False}).encode()
                    self._send(200, comp.compress(body) + comp.flush(), headers={"Content-Encoding": "gzip"})
                elif sub in ("gzip-no-trailer", "deflate-zlib", "deflate-raw", "deflate-raw-split"):
                    body = json.dumps({"items": [item(1, sub[:4]), item(2, sub[:4])], "next_cursor": "done",
                                       "has_more": False}).encode()
                    wbits = {"gzip-no-trailer": 31, "deflate-zlib": 15}.get(sub, -15)  # -15: raw deflate
                    comp = zlib.compressobj(9, zlib.DEFLATED, wbits)
                    sent = comp.compress(body) + comp.flush()
                    if sub == "gzip-no-trailer":  # a whole HTTP body whose gzip stream lacks its CRC and size
                        sent = sent[:-8]
                    coding = "gzip" if sub[0] == "g" else "deflate"
                    if sub != "deflate-raw-split":
                        self._send(200, sent, headers={"Content-Encoding": coding})
                    else:  # the first byte alone, as a streaming compressor that flushes early may send it
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Encoding", coding)
                        self.send_header("Content-Length", str(len(sent)))
                        self.end_headers()
                        self.wfile.write(sent[:1])
                        self.wfile.flush()
                        time.sleep(0.3)
                        self.wfile.write(sent[1:])
                elif sub == "stop-on-page":
                    up.on_request()
                    self._page([item(n, "sp") for n in range(1, 4)], "done", False)
                elif sub == "nan-item":
                    bad = item(2)
                    bad["revision"]["metadata"] = {"ratio": float("nan"), "limit": float("inf")}
                    self._page([item(1), bad], "done", False)  # json.dumps writes the bare words NaN, Infinity
                elif sub == "control-chars":
                    self._page(control_char_items(), "done", False)
                elif sub == "escape-code":
                    self._send(400, b'{"error": {"code": "\\u001b]0;owned\\u0007\\u001b[2J", "message": "x"}}')
                elif sub == "escape-cursor":
                    self._page([item(1)], "c\x1b[2J\x1b]0;owned\x07", False)
                elif sub == "odd-retry-after":
                    if page_no == 1:  # "\u00b2" (superscript two) is a digit to str.isdigit, not to float()
                        self._send(429, b"slow down", "text/plain", {"Retry-After": "\u00b2"})
                    else:
                        self._page([item(1, "ra")], "done", False)
                elif sub == "deep-json":
                    depth = 100_000
                    self._send(200, ('{"items": [{"op": "upsert", "revision": {"metadata": {"m": ' + "[" * depth
                                     + "]" * depth + '}}}], "next_cursor": "c", "has_more": false}').encode())
                elif sub == "deep-item":
                    deep = json.loads("[" * 500 + "]" * 500)
                    bad = item(2)
                    bad["revision"]["metadata"] = {"m": deep}
                    self._page([item(1), bad], "done", False)
                elif sub == "big-resource":
                    big = item(2)
                    big["resources"] = [{"path": "blob.bin", "encoding": "base64",
                                         "content": "A" * (8 * 1024 * 1024)}]
                    self._page([item(1), big], "done", False)
                elif sub == "too-many":
                    self._page([item(i) for i in range(limit * 20)], "c1", False)
                elif sub == "same-cursor":
                    self._page([item(page_no)], since or "c0", True)
                elif sub == "cycle":
                    self._page([item(page_no)], "c1" if since != "c1" else "c2", True) if since != "c2" else \
                        self._page([], "c1", True)
                elif sub == "fresh-cursor":
                    self._page([item(page_no * 1000 + i) for i in range(limit)], f"c{page_no}", True)
                else:
                    self._send(404, b'{"error": {"code": "NOT_FOUND", "message": "no such subscription"}}')

        return Handler


@contextmanager
def hostile_upstream() -> Iterator[tuple[str, HostileUpstream]]:
    up = HostileUpstream()
    server = ThreadingHTTPServer(("127.0.0.1", 0), up.handler())
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", up
    finally:
        server.shutdown()
        server.server_close()


def prepare_bomb(up: HostileUpstream, decoded_mib: int = 1024) -> None:
    up.bomb = _gzip_bomb(decoded_mib)


def _stacked_gzip_bomb(decoded_mib: int) -> bytes:
    """A body sent as ``Content-Encoding: gzip, gzip``: gzip of a gzip that decodes to ``decoded_mib`` MiB.
    Built a block at a time, so the test never holds the decoded bytes."""
    inner, outer = zlib.compressobj(9, zlib.DEFLATED, 31), zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [outer.compress(inner.compress(b'{"items": ["'))]
    block = b"0" * (1024 * 1024)
    parts += [outer.compress(inner.compress(block)) for _ in range(decoded_mib)]
    parts += [outer.compress(inner.flush()), outer.flush()]
    return b"".join(parts)


def prepare_stacked_bomb(up: HostileUpstream, decoded_mib: int = 512) -> None:
    up.stacked_bomb = _stacked_gzip_bomb(decoded_mib)
