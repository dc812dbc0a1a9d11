"""Faults at the upstream boundary (a process we do not own, so a misbehaving fake of it is fair): 500s,
a hanging server, a connection dropped mid-body, garbage, malformed items, Retry-After. After each, the
store and the index agree and nothing valid was lost."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
from syncsupport import (
    catalog_content,
    config_for,
    index_matches_store,
    upstream_content,
    upstream_with_starter,
)

from skillsearch.core.errors import UpstreamUnavailableError
from skillsearch.core.hashing import stable_id
from skillsearch.service import Catalog
from skillsearch.sync.client import HttpSubscriptionClient
from skillsearch.sync.config import UpstreamConfig
from skillsearch.upstream.platform import ReferenceUpstream, UpstreamError

SUB = "starter-pack"
SOURCE = f"upstream:{SUB}"


class FlakyUpstream:
    """The reference upstream behind a stdlib HTTP server that misbehaves as scripted, one request at a time."""

    def __init__(self, upstream: ReferenceUpstream) -> None:
        self.upstream = upstream
        self.script: deque[str] = deque()
        self.seen: list[str] = []
        self.hang_s = 2.0
        flaky = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                behaviour = flaky.script.popleft() if flaky.script else "ok"
                flaky.seen.append(behaviour)
                url = urlparse(self.path)
                sub = url.path.split("/")[3]
                query = parse_qs(url.query)
                try:
                    page = flaky.upstream.changes(sub, query.get("since", [None])[0], int(query["limit"][0]))
                    status, body = 200, page
                except UpstreamError as exc:
                    status, body = exc.status, {"error": {"code": exc.code, "message": exc.message}}
                if behaviour == "500":
                    self._send(500, b'{"error": {"code": "INTERNAL", "message": "boom"}}')
                elif behaviour == "429":
                    self._send(429, b'{"error": {"code": "SLOW_DOWN"}}', {"Retry-After": "0"})
                elif behaviour == "hang":
                    time.sleep(flaky.hang_s)
                    self.close_connection = True
                elif behaviour == "garbage":
                    self._send(200, b'{"items": [1, 2')
                elif behaviour == "drop":
                    data = json.dumps(body).encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                elif behaviour == "refuse-400":  # a platform's own validation error, naming its parameter
                    self._send(400, json.dumps({"error": {
                        "code": "VALIDATION_ERROR", "message": "limit is over this plan's page size",
                        "details": {"problems": [{"field": "query.limit", "message": "at most 50 \x1b[2J"}]},
                    }}).encode())
                elif behaviour == "503-maintenance":
                    self._send(503, b'{"error": {"code": "MAINTENANCE", "message": "back at 15:00 UTC"}}')
                elif behaviour == "reject-first":  # the page's first item gets a name no catalog takes
                    body["items"][0]["revision"]["name"] = "bad\x1bname"
                    self._send(status, json.dumps(body).encode())
                elif behaviour == "bad-ops":  # no op, an op the contract does not have, an array for an item
                    body["items"] = [{"skill": {"skill_id": "sk_no_op", "slug": "no-op"}},
                                     {"op": "replace", "skill_id": "sk_replace"}, ["sk_listed"], *body["items"]]
                    self._send(status, json.dumps(body).encode())
                elif behaviour == "malformed":
                    body["items"] = MALFORMED + body["items"]
                    self._send(status, json.dumps(body).encode())
                else:
                    self._send(status, json.dumps(body).encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


def _upsert(slug: str, **revision: Any) -> dict[str, Any]:
    rev = {"name": slug.replace("-", " "), "description": f"The {slug} skill.", "kind": "knowledge",
           "instructions": "Do it."}
    rev.update(revision)
    return {"op": "upsert", "skill": {"skill_id": f"sk_{slug}", "slug": slug}, "revision": rev, "resources": []}


MALFORMED: list[Any] = [
    {"op": "upsert", "skill": {"skill_id": "sk_nameless", "slug": "nameless"},
     "revision": {"description": "No name.", "kind": "knowledge"}},
    _upsert("bad-slug") | {"skill": {"skill_id": "sk_bad_slug", "slug": "Not A Slug!"}},
    _upsert("bad-hash") | {"resources": [{"path": "a.txt", "content": "hello", "sha256": "0" * 64}]},
    _upsert("bad-flow", kind="flow_template", steps=[{"tool": "x.run", "args": {"q": "{query}"}}]),
    {"op": "explode", "skill_id": "sk_whatever"},
    42,
]


@pytest.fixture
def upstream() -> ReferenceUpstream:
    return upstream_with_starter(SUB)


@pytest.fixture
def flaky(upstream: ReferenceUpstream) -> Iterator[FlakyUpstream]:
    f = FlakyUpstream(upstream)
    thread = threading.Thread(target=f.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f
    f.server.shutdown()
    f.server.server_close()


@pytest.fixture
def catalog(empty_catalog: Catalog) -> Catalog:
    return empty_catalog


def assert_consistent_and_complete(catalog: Catalog, upstream: ReferenceUpstream) -> None:
    assert catalog_content(catalog, SOURCE) == upstream_content(upstream, SUB)
    index_matches_store(catalog)


def test_500s_then_recovery(catalog: Catalog, upstream: ReferenceUpstream, flaky: FlakyUpstream) -> None:
    flaky.script.extend(["500", "500", "ok", "429"])
    [report] = catalog.subscriptions.sync_once(config_for(flaky.url, SUB, page_limit=5, retries=3))
    assert report.error is None and report.pages == 4
    assert flaky.seen[:5] == ["500", "500", "ok", "429", "ok"]
    assert_consistent_and_complete(catalog, upstream)


def test_500s_past_the_retries_keep_the_cursor_and_record_the_error(
    catalog: Catalog, upstream: ReferenceUpstream, flaky: FlakyUpstream
) -> None:
    config = config_for(flaky.url, SUB, retries=2)
    catalog.subscriptions.sync_once(config)
    cursor = catalog.store.sync.state(SOURCE).cursor  # type: ignore[union-attr]
    upstream.delete(SUB, stable_id("sk", f"sub:{SUB}", "regex-debugging"))
    flaky.script.extend(["500"] * 3)

    [report] = catalog.subscriptions.sync_once(config)

    assert report.error is not None and report.error["code"] == "UPSTREAM_UNAVAILABLE"
    state = catalog.store.sync.state(SOURCE)
    assert state is not None and state.cursor == cursor and "after 3 attempts: HTTP 500" in (state.last_error or "")
    index_matches_store(catalog)
    [report] = catalog.subscriptions.sync_once(config)
    assert report.error is None and len(report.outcome.deleted) == 1
    assert_consistent_and_complete(catalog, upstream)


def test_hanging_upstream_hits_the_timeout(catalog: Catalog, upstream: ReferenceUpstream,
                                           flaky: FlakyUpstream) -> None:
    flaky.script.extend(["hang", "hang"])
    [failed] = catalog.subscriptions.sync_once(config_for(flaky.url, SUB, timeout_s=0.3, retries=1))
    assert failed.error is not None and "timed out after 0.3s" in failed.error["message"]
    assert catalog.store.count() == 0
    index_matches_store(catalog)
    flaky.script.extend(["hang"])
    [report] = catalog.subscriptions.sync_once(config_for(flaky.url, SUB, timeout_s=0.3, retries=1))
    assert report.error is None
    assert_consistent_and_complete(catalog, upstream)


def test_connection_dropped_in_the_middle_of_a_page(catalog: Catalog, upstream: ReferenceUpstream,
                                                    flaky: FlakyUpstream) -> None:
    config = config_for(flaky.url, SUB, page_limit=5, retries=0)
    flaky.script.extend(["ok", "drop"])
    [failed] = catalog.subscriptions.sync_once(config)
    assert failed.error is not None and "RemoteProtocolError" in failed.error["message"]
    assert catalog.store.count() == 5, "the first page is stored whole, the dropped one not at all"
    assert catalog.store.sync.full_sync_in_progress(SOURCE), "the full sync resumes after the stored page"
    index_matches_store(catalog)
    flaky.script.extend(["ok", "drop"])
    [failed] = catalog.subscriptions.sync_once(config)
    assert failed.error is not None and catalog.store.count() == 10
    [report] = catalog.subscriptions.sync_once(config_for(flaky.url, SUB, page_limit=5, retries=2))
    assert report.error is None
    assert_consistent_and_complete(catalog, upstream)


def test_garbage_body_is_retried(catalog: Catalog, upstream: ReferenceUpstream, flaky: FlakyUpstream) -> None:
    flaky.script.extend(["garbage"])
    [report] = catalog.subscriptions.sync_once(config_for(flaky.url, SUB))
    assert report.error is None and flaky.seen[:2] == ["garbage", "ok"]
    assert_consistent_and_complete(catalog, upstream)


def test_malformed_items_are_rejected_and_the_valid_ones_stored(
    catalog: Catalog, upstream: ReferenceUpstream, flaky: FlakyUpstream
) -> None:
    flaky.script.extend(["malformed"])
    [report] = catalog.subscriptions.sync_once(config_for(flaky.url, SUB))

    reasons = {r.skill_id: r.reason for r in report.outcome.rejected}
    assert len(report.outcome.rejected) == len(MALFORMED)
    assert reasons["sk_nameless"].startswith("revision.name: "), "named where it sits on the wire, no union tag"
    assert "slug" in reasons["sk_bad_slug"]
    assert "sha256 does not match" in reasons["sk_bad-hash"]
    assert "no matching parameter: query" in reasons["sk_bad-flow"]
    assert "explode" in reasons["sk_whatever"] and reasons[None]
    assert len(report.outcome.created) == 18
    state = catalog.store.sync.state(SOURCE)
    assert state is not None and state.cursor == report.cursor and state.counts["rejected"] == len(MALFORMED)
    assert "rejected 6 item(s)" in (state.last_error or "")
    assert_consistent_and_complete(catalog, upstream)


def test_items_rejected_on_every_page_of_a_pull_are_all_in_its_status(
    catalog: Catalog, upstream: ReferenceUpstream, flaky: FlakyUpstream
) -> None:
    """Each page wrote its own note of the items it refused over the last: a pull that refused one item on
    page 1 and one on page 2 showed "rejected 1 item(s)" naming the second only, and a pull whose last page
    refused none showed page 1's note as an earlier error, as if a later pull had succeeded since. Now the
    note counts and names every item of the pull, stamped with its success."""
    flaky.script.extend(["reject-first", "reject-first", "ok"])
    [report] = catalog.subscriptions.sync_once(config_for(flaky.url, SUB, page_limit=5))
    assert report.pages == 4 and len(report.outcome.rejected) == 2
    first, second = (r.skill_id for r in report.outcome.rejected)
    state = catalog.store.sync.state(SOURCE)
    assert state is not None and state.last_error is not None
    assert "rejected 2 item(s)" in state.last_error, state.last_error
    assert f"{first}: name holds" in state.last_error and f"{second}: name holds" in state.last_error
    assert state.last_error.split(" ", 1)[0] == state.last_success, "refused in this pull, not an earlier one"


def test_a_refusal_says_what_the_platform_said_and_which_page(
    catalog: Catalog, upstream: ReferenceUpstream, flaky: FlakyUpstream
) -> None:
    """A 4xx was recorded as "upstream refused ...: HTTP 400 VALIDATION_ERROR", dropping the message and the
    ``details.problems`` the contract asks the platform for, and a 503 as "HTTP 503": the platform's operator
    could not tell from ``sync --status`` which parameter it refused. Now its message and up to three
    problems (escaped, bounded) are kept, with the request's cursor."""
    config = config_for(flaky.url, SUB, retries=1, backoff_base_s=0.01)
    catalog.subscriptions.sync_once(config)
    cursor = catalog.store.sync.state(SOURCE).cursor  # type: ignore[union-attr]
    flaky.script.extend(["refuse-400"])
    [report] = catalog.subscriptions.sync_once(config)
    assert report.error is not None
    state = catalog.store.sync.state(SOURCE)
    assert state is not None and state.last_error is not None
    for text in (report.error["message"], state.last_error):
        assert "HTTP 400 VALIDATION_ERROR: limit is over this plan's page size" in text, text
        assert "(query.limit: at most 50 \\x1b[2J)" in text and "\x1b" not in text
        assert f"since={cursor}" in text
    flaky.script.extend(["503-maintenance", "503-maintenance"])
    [report] = catalog.subscriptions.sync_once(config)
    assert report.error is not None and "HTTP 503 MAINTENANCE: back at 15:00 UTC" in report.error["message"]


def test_an_item_without_a_known_op_is_rejected_in_the_contracts_words(
    catalog: Catalog, upstream: ReferenceUpstream, flaky: FlakyUpstream
) -> None:
    """An item with no ``op`` was rejected as "Unable to extract tag using discriminator 'op'" (pydantic's
    words for the union) and an array as "Input should be a valid dictionary or object to extract fields
    from". Now each says what the contract wants."""
    flaky.script.extend(["bad-ops"])
    [report] = catalog.subscriptions.sync_once(config_for(flaky.url, SUB))
    reasons = [(r.skill_id, r.reason) for r in report.outcome.rejected]
    assert reasons == [
        ("sk_no_op", "op: Field required ('upsert' or 'delete')"),
        ("sk_replace", "op: must be 'upsert' or 'delete', not 'replace'"),
        (None, "an item must be a JSON object, not an array"),
    ]
    assert len(report.outcome.created) == 18


def _mock_client(responses: list[httpx.Response], **config: Any) -> tuple[HttpSubscriptionClient, list[float]]:
    queue = deque(responses)
    waits: list[float] = []
    values: dict[str, Any] = {"retries": 3, "backoff_base_s": 0.5, "backoff_max_s": 10.0}
    values.update(config)
    client = HttpSubscriptionClient(
        UpstreamConfig(url="http://upstream.invalid", token="t", **values),
        transport=httpx.MockTransport(lambda request: queue.popleft()),
        sleep=waits.append,
    )
    return client, waits


PAGE = {"items": [], "next_cursor": "e.1", "has_more": False}


def test_retry_after_wins_over_backoff_and_backoff_grows_with_jitter() -> None:
    client, waits = _mock_client([
        httpx.Response(429, headers={"Retry-After": "7"}),
        httpx.Response(503),
        httpx.Response(503),
        httpx.Response(200, json=PAGE),
    ])
    page = client.fetch_page(SUB, None, 10)
    assert page.next_cursor == "e.1" and client.requests == 4
    assert waits[0] == 7.0
    assert 0.0 <= waits[1] <= 1.0 and 0.0 <= waits[2] <= 2.0


def test_refusals_are_not_retried() -> None:
    client, waits = _mock_client([httpx.Response(401, json={"error": {"code": "UNAUTHENTICATED"}})])
    with pytest.raises(UpstreamUnavailableError) as caught:
        client.fetch_page(SUB, None, 10)
    assert caught.value.details["status"] == 401 and client.requests == 1 and waits == []


def test_a_slug_clash_inside_a_page_rejects_only_that_item(catalog: Catalog, upstream: ReferenceUpstream,
                                                            flaky: FlakyUpstream) -> None:
    config = config_for(flaky.url, SUB)
    catalog.subscriptions.sync_once(config)
    taken = upstream.feed(SUB).get(stable_id("sk", f"sub:{SUB}", "regex-debugging"))
    assert taken is not None
    upstream.publish(SUB, _upsert("usurper") | {"skill": {"skill_id": "sk_usurper", "slug": taken["skill"]["slug"]}})
    upstream.publish(SUB, _upsert("newcomer"))

    [report] = catalog.subscriptions.sync_once(config)

    assert [r.skill_id for r in report.outcome.rejected] == ["sk_usurper"]
    assert "already used" in report.outcome.rejected[0].reason
    assert report.outcome.created == ["sk_newcomer"] and catalog.store.skill("sk_usurper") is None
    index_matches_store(catalog)


def test_an_unexpected_exception_is_recorded_as_the_runs_error(
    catalog: Catalog, caplog: pytest.LogCaptureFixture
) -> None:
    """An exception no layer expects (a MemoryError inside the HTTP stack, as a stacked gzip bomb once
    raised) escaped the run with nothing written to the sync state: `sync --status` and /v1/sync/status
    showed no error for a failed run. Now its type and the start of its message are the subscription's
    last error (one line, bounded, no traceback), the run is reported failed, and the log has the
    traceback."""
    def explode(request: httpx.Request) -> httpx.Response:
        raise MemoryError("inflating \x1b[2J" + "x" * 5000 + "\nline two")

    config = config_for("http://127.0.0.1:9", SUB)
    client = HttpSubscriptionClient(config.upstream, transport=httpx.MockTransport(explode))
    with caplog.at_level("ERROR", logger="skillsearch.sync"):
        [report] = catalog.subscriptions.sync_once(config, client=client)
    assert report.error is not None and "MemoryError" in report.error["message"]
    [status] = catalog.subscriptions.sync_status(config).subscriptions
    assert status.failing and status.last_error is not None
    error = status.last_error.split(" ", 1)[1]
    assert error.startswith("sync failed unexpectedly (MemoryError: inflating \\x1b[2Jxxx"), error
    assert len(error) < 400 and "\n" not in error and "\x1b" not in error and "Traceback" not in error
    [logged] = [r for r in caplog.records if r.exc_info is not None]
    assert logged.exc_info is not None and logged.exc_info[0] is MemoryError
