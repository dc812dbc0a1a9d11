"""A hostile upstream: redirect loops, wrong content types, truncated and dripped bodies, gzip bombs,
100,000-deep JSON, oversized pages and cursors that never move.

The upstream is a real HTTP server on 127.0.0.1 (``hostile_upstream.py``: a fake only at the process
boundary we do not own); the client, runner, store and index are the real ones. Each test states the
promise it checks. The common promise: one subscription's failure is reported for it alone, the others
still sync, and nothing of the bad answer is stored.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hostile_support import peak_rss_mb_of
from hostile_upstream import CONTROL_BODY, CONTROL_BYTES, hostile_upstream, prepare_bomb, prepare_stacked_bomb
from syncsupport import config_for

from skillsearch.core.settings import Settings
from skillsearch.retrieval.encoder import Encoder
from skillsearch.service import Catalog


@pytest.fixture
def catalog(tmp_path: Path, fake_encoder: Encoder) -> Iterator[Catalog]:
    c = Catalog.open(Settings(data_dir=tmp_path / "data", seed_sample=False, encoder="hashing"), encoder=fake_encoder)
    yield c
    c.close()


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[str, Any]]:
    with hostile_upstream() as served:
        yield served


def _run(catalog: Catalog, url: str, *subs: str, **upstream: Any) -> dict[str, dict[str, Any]]:
    values: dict[str, Any] = {"retries": 1, "timeout_s": 5.0, "deadline_s": 5.0}
    values.update(upstream)
    reports = catalog.subscriptions.sync_once(config_for(url, *subs, **values))
    return {r.subscription_id: r.to_dict() for r in reports}


@pytest.mark.parametrize(("sub", "expected"), [
    ("redirect-loop", "HTTP 302"),
    ("html", "wrong content type 'text/html'"),
    ("truncated", "connection failed"),
    ("deep-json", "JSON nested too deeply"),
    ("too-many", "sent 2000 items for subscription 'too-many' where at most 100 were asked for"),
    ("escape-cursor", "malformed page (next_cursor: String should match pattern"),
])
def test_misbehaving_upstream_fails_only_its_subscription(
    catalog: Catalog, upstream: tuple[str, Any], sub: str, expected: str
) -> None:
    """A redirect loop (never followed), a wrong content type, a truncated body, a 100,000-deep JSON body
    (once a RecursionError that stopped `skillsearch sync`), a page of 20x the items asked for and a cursor
    holding a terminal's escape sequences (once stored and printed raw by `sync --status`) each give
    that subscription a typed UPSTREAM_UNAVAILABLE error naming the cause; the next subscription still
    syncs; nothing of the bad answer is stored; the catalog's write lock is free again."""
    url, _ = upstream
    reports = _run(catalog, url, sub, "good")
    assert reports[sub]["error"]["code"] == "UPSTREAM_UNAVAILABLE"
    assert expected in reports[sub]["error"]["message"], reports[sub]["error"]["message"]
    assert reports["good"]["error"] is None and reports["good"]["created"] == 2
    assert sorted(catalog.store.skill_ids_of_source("upstream:good")) == ["good-1", "good-2"]
    assert catalog.store.skill_ids_of_source(f"upstream:{sub}") == []
    with catalog.writing():  # would block forever if a failed run had kept it
        pass


def test_deep_item_is_rejected_alone(catalog: Catalog, upstream: tuple[str, Any]) -> None:
    """A 500-deep metadata value in one item rejects that item only; the valid item of the same page is
    stored."""
    url, _ = upstream
    report = _run(catalog, url, "deep-item")["deep-item"]
    assert report["error"] is None and report["created"] == 1
    assert [r["skill_id"] for r in report["rejected"]] == ["h-2"]
    assert report["rejected"][0]["reason"].endswith("nests deeper than 32 levels")


def test_an_oversized_synced_resource_rejects_its_item(catalog: Catalog, upstream: tuple[str, Any]) -> None:
    """A synced item whose resource decodes to 6 MiB (over the 5 MiB resource limit, as for folders and
    bundles; once a 150 MB one was stored) is rejected alone, checked before decoding; the other item of
    the page is stored."""
    url, _ = upstream
    report = _run(catalog, url, "big-resource")["big-resource"]
    assert report["error"] is None and report["created"] == 1
    assert [r["skill_id"] for r in report["rejected"]] == ["h-2"]
    assert "over the limit of 5242880" in report["rejected"][0]["reason"]


def test_a_cursor_that_does_not_move_fails_the_run(catalog: Catalog, upstream: tuple[str, Any]) -> None:
    """``has_more: true`` with the same cursor again (once 14,876 pages in 40 s), or a cycle of cursors,
    fails that subscription's run at the first repeat; the repeating page is not stored."""
    url, up = upstream
    reports = _run(catalog, url, "same-cursor", "cycle", "good")
    assert "did not move the cursor" in reports["same-cursor"]["error"]["message"]
    assert reports["same-cursor"]["pages"] == 0 and len(catalog.store.skill_ids_of_source("upstream:same-cursor")) == 1
    assert "did not move the cursor" in reports["cycle"]["error"]["message"]
    assert reports["good"]["created"] == 2
    assert len(up.events["same-cursor.requests"]) == 2


def test_pages_per_run_are_capped(catalog: Catalog, upstream: tuple[str, Any]) -> None:
    """An upstream that hands out a fresh cursor per page forever stops at ``max_pages_per_run``: the run
    reports it, the pages read are stored with their cursor, and the next run resumes from it."""
    url, up = upstream
    report = _run(catalog, url, "fresh-cursor", max_pages_per_run=3, page_limit=10)["fresh-cursor"]
    assert "stopped after 3 pages" in report["error"]["message"]
    assert len(catalog.store.skill_ids_of_source("upstream:fresh-cursor")) == 30
    state = catalog.store.sync.state("upstream:fresh-cursor")
    assert state is not None and state.cursor == f"c{up.pages['fresh-cursor']}"


def test_a_dripped_body_stops_at_the_total_deadline(catalog: Catalog, upstream: tuple[str, Any]) -> None:
    """A body sent one byte every 0.5 s (each read well inside timeout_s) is cut at the request's total
    deadline, not read for ever: the server sees the connection cut after a handful of bytes of the
    100,000 it meant to send, and the next subscription syncs."""
    url, up = upstream
    reports = _run(catalog, url, "drip", "good", retries=0, timeout_s=30.0, deadline_s=1.5)
    assert "no complete answer within the deadline of 1.5s" in reports["drip"]["error"]["message"]
    assert reports["good"]["created"] == 2
    for _ in range(100):
        if up.events.get("drip.cut"):
            break
        threading.Event().wait(0.05)
    assert up.events["drip.cut"] and up.events["drip.cut"][0] < 100
    assert "drip.finished" not in up.events


def test_poller_stop_interrupts_a_request_in_flight(catalog: Catalog, upstream: tuple[str, Any]) -> None:
    """``Poller.stop()`` interrupts a request in flight (deadline 10 minutes, timeout_s 10 minutes), instead
    of waiting for the dripping body: the poller thread ends and the server sees the connection cut."""
    url, up = upstream
    poller = catalog.subscriptions.make_poller(config_for(url, "drip-forever", retries=0, timeout_s=600.0, deadline_s=600.0))
    poller.start()
    for _ in range(200):
        if up.events.get("drip-forever.requests"):
            break
        threading.Event().wait(0.05)
    threading.Event().wait(0.6)
    poller.stop(timeout=30)
    assert not any(t.name == "skillsearch-poller" and t.is_alive() for t in threading.enumerate())
    for _ in range(100):
        if up.events.get("drip-forever.cut"):
            break
        threading.Event().wait(0.05)
    assert up.events.get("drip-forever.cut"), "the request was not interrupted"
    assert "drip-forever.finished" not in up.events
    with catalog.writing():
        pass


@pytest.mark.skipif(sys.platform != "linux", reason="RUSAGE_CHILDREN peak RSS is in KiB on Linux")
def test_gzip_bomb_is_bounded_after_decoding(tmp_path: Path) -> None:
    """A ~1 MB gzip body that decodes to 1 GiB (once 2.2 GB RSS) is refused once the decoded bytes pass
    ``max_response_bytes`` (64 MiB by default): a real `skillsearch sync` process stays under 512 MB peak
    RSS, reports the limit, and still syncs the next subscription."""
    with hostile_upstream() as (url, up):
        prepare_bomb(up, 1024)
        assert len(up.bomb) < 2 * 1024 * 1024
        cfg = tmp_path / "sync.toml"
        cfg.write_text(f'[upstream]\nurl = "{url}"\ntoken = "t"\nretries = 0\n\n'
                       '[[subscriptions]]\nid = "gzip-bomb"\n\n[[subscriptions]]\nid = "good"\n', encoding="utf-8")
        data = tmp_path / "data"
        args = [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data), "--encoder", "hashing", "-q",
                "sync", "--config", str(cfg), "--json"]
        rss, _code, stdout = peak_rss_mb_of(args)
        print(f"peak RSS of a sync against a 1 GiB gzip bomb: {rss:.0f} MB")
        assert rss < 512, rss
    payload = json.loads(stdout)
    by_id = {r["subscription_id"]: r for r in payload["subscriptions"]}
    message = by_id["gzip-bomb"]["error"]["message"]
    assert "too large" in message and "67108864" in message
    assert by_id["good"]["error"] is None


def test_stacked_content_encoding_is_refused_before_it_is_inflated(tmp_path: Path, catalog: Catalog) -> None:
    """A ~30 KB body sent as ``Content-Encoding: gzip, gzip`` that decodes to 512 MiB: httpx's decoders
    inflated each received chunk whole, so the client once built the 512 MiB (8 GiB from a 13 KB body: a
    MemoryError, or the OOM killer for `serve`) before its size check saw a byte. Now a stacked coding is
    refused by name and retried like any malformed answer; the next subscription still syncs."""
    with hostile_upstream() as (url, up):
        prepare_stacked_bomb(up, 512)
        assert len(up.stacked_bomb) < 64 * 1024
        reports = _run(catalog, url, "gzip-stack", "good")
    message = reports["gzip-stack"]["error"]["message"]
    assert "Content-Encoding 'gzip, gzip'" in message, message
    assert reports["good"]["error"] is None and reports["good"]["created"] == 2
    assert catalog.store.skill_ids_of_source("upstream:gzip-stack") == []


def test_a_plain_gzip_page_still_decodes(catalog: Catalog, upstream: tuple[str, Any]) -> None:
    """The client decodes ``Content-Encoding: gzip`` itself now, a bounded step at a time: a gzip page is
    read as before."""
    url, _ = upstream
    reports = _run(catalog, url, "gzip-page")
    assert reports["gzip-page"]["error"] is None and reports["gzip-page"]["created"] == 2
    assert sorted(catalog.store.skill_ids_of_source("upstream:gzip-page")) == ["gz-1", "gz-2"]


@pytest.mark.parametrize("sub", ["deflate-zlib", "deflate-raw", "deflate-raw-split"])
def test_a_deflate_page_decodes_zlib_wrapped_or_raw(catalog: Catalog, upstream: tuple[str, Any], sub: str) -> None:
    """``Content-Encoding: deflate`` is zlib-wrapped (RFC 9110) or, from some servers, raw deflate; httpx
    takes both and so do we, also when the body's first read holds a single byte (too few to tell)."""
    url, _ = upstream
    reports = _run(catalog, url, sub)
    assert reports[sub]["error"] is None and reports[sub]["created"] == 2, reports[sub]
    assert sorted(catalog.store.skill_ids_of_source(f"upstream:{sub}")) == [f"{sub[:4]}-1", f"{sub[:4]}-2"]


def test_a_gzip_stream_cut_short_is_refused(catalog: Catalog, upstream: tuple[str, Any]) -> None:
    """A gzip body whose stream ends before its trailer (CRC and size) did not arrive whole, even where
    what it decoded to parses: the page is refused, nothing is stored."""
    url, _ = upstream
    reports = _run(catalog, url, "gzip-no-trailer")
    message = reports["gzip-no-trailer"]["error"]["message"]
    assert "undecodable answer" in message and "compressed stream is cut short" in message, message
    assert catalog.store.skill_ids_of_source("upstream:gzip-no-trailer") == []


def test_nan_in_an_item_rejects_that_item_and_the_catalog_still_opens(
    tmp_path: Path, fake_encoder: Encoder, upstream: tuple[str, Any]
) -> None:
    """An item whose metadata holds NaN and Infinity (Python's json reads and writes them; they are not
    JSON) was stored: the revision body was no longer JSON, SQLite's json_type() failed on it, and every
    later open of the data directory (`list`, `get`, `serve`) failed with INTERNAL "malformed JSON". Now that
    item is rejected with its reason, the valid one beside it is stored, and the catalog opens again."""
    url, _ = upstream
    settings = Settings(data_dir=tmp_path / "data", seed_sample=False, encoder="hashing")
    first = Catalog.open(settings, encoder=fake_encoder)
    try:
        reports = _run(first, url, "nan-item")
    finally:
        first.close()
    report = reports["nan-item"]
    assert report["error"] is None and report["created"] == 1
    assert [r["skill_id"] for r in report["rejected"]] == ["h-2"]
    assert "not a finite number" in report["rejected"][0]["reason"]
    again = Catalog.open(settings, encoder=fake_encoder)  # ran json_type() over every current body
    try:
        conn = again.store.connection()
        assert conn.execute("SELECT COUNT(*) FROM revisions WHERE NOT json_valid(body)").fetchone()[0] == 0
        assert again.store.skill_ids_of_source("upstream:nan-item") == ["h-1"]
    finally:
        again.close()


def test_an_error_code_is_kept_only_when_it_is_a_code(catalog: Catalog, upstream: tuple[str, Any]) -> None:
    """The upstream's error code is printed (`error: ...`) and stored as the last error: one holding a
    terminal's escape sequences (clear screen, set the window title) was passed through raw. Now only
    ``[A-Za-z0-9_.-]`` codes are named; the status is still reported."""
    url, _ = upstream
    message = _run(catalog, url, "escape-code")["escape-code"]["error"]["message"]
    assert "HTTP 400: x" in message and "\x1b" not in message, message
    state = catalog.store.sync.state("upstream:escape-code")
    assert state is not None and state.last_error is not None and "\x1b" not in state.last_error


def test_an_odd_retry_after_is_a_retry_not_a_crash(catalog: Catalog, upstream: tuple[str, Any]) -> None:
    """``Retry-After: \u00b2`` passed ``str.isdigit`` and then ``float()`` raised: the retryable 429 became
    an internal failure of the run (a traceback in the log, nothing recorded in the sync state). Now the
    value is unreadable, the backoff applies, and the retry syncs."""
    url, _ = upstream
    report = _run(catalog, url, "odd-retry-after", backoff_max_s=0.05)["odd-retry-after"]
    assert report["error"] is None and report["created"] == 1


def test_control_characters_in_one_line_fields_reject_their_item(catalog: Catalog, upstream: tuple[str, Any]) -> None:
    """A name holding ESC (``a\\x1b[2Jb`` clears the screen when `list` prints it), a NUL, a right-to-left
    override, a C1 control in a tag, a bidi isolate in a description, escapes in a step's tool and in a
    parameter's description were all stored. Now each such item is rejected with a reason that names the
    field; the items beside them are stored, a description keeps its tab and line breaks, and a body and a
    resource holding control characters stay byte for byte what was sent."""
    url, _ = upstream
    report = _run(catalog, url, "control-chars")["control-chars"]
    assert report["error"] is None
    reasons = {r["skill_id"]: r["reason"] for r in report["rejected"]}
    expected = {"cc-2": "name holds", "cc-3": "name holds", "cc-4": "name holds", "cc-5": "tags[1] holds",
                "cc-6": "description holds", "cc-7": "steps[0].tool holds", "cc-8": "parameters[0].description holds"}
    assert sorted(reasons) == sorted(expected), reasons
    for skill_id, field in expected.items():
        assert field in reasons[skill_id] and "control or bidirectional-override character" in reasons[skill_id]
    assert "U+001B" in reasons["cc-2"] and "U+0000" in reasons["cc-3"] and "U+202E" in reasons["cc-4"]
    assert sorted(catalog.store.skill_ids_of_source("upstream:control-chars")) == ["cc-1", "cc-9"]
    stored = catalog.store.skill("cc-1")
    assert stored is not None
    body = catalog.store.revision(stored.current_revision_id)
    assert body is not None and body.instructions == CONTROL_BODY and body.skill_md.endswith(CONTROL_BODY)
    assert [r.content for r in catalog.store.resources(body.revision_id, with_content=True)] == [CONTROL_BYTES]
    multiline = catalog.store.skill("cc-9")
    assert multiline is not None and multiline.description == "First line,\n\tthen an indented second line."


def test_a_sync_stopped_mid_write_says_so_and_runs_no_other_subscription(
        tmp_path: Path, fake_encoder: Encoder, upstream: tuple[str, Any], caplog: pytest.LogCaptureFixture) -> None:
    """SIGTERM while a one-shot sync embeds what it pulled: the write stops (``WriteStopped``, the CLI's
    ``terminated: ...`` and 143), instead of counting as an unexpected failure (its traceback logged,
    ``sync failed unexpectedly (WriteStopped: ...)`` reported) and going on to the next subscription."""
    from skillsearch.core.errors import WriteStopped

    url, up = upstream
    stopping = threading.Event()
    catalog = Catalog.open(Settings(data_dir=tmp_path / "data", seed_sample=False, encoder="hashing"),
                           encoder=fake_encoder, stopping=stopping)
    up.on_request = stopping.set  # the signal comes while the page is on its way: its skills are stored
    good_before = len(up.events.get("good.requests", []))
    try:
        with pytest.raises(WriteStopped, match="0 of 3 skills embedded"):
            _run(catalog, url, "stop-on-page", "good")
        assert len(catalog.store.skill_ids_of_source("upstream:stop-on-page")) == 3  # stored, not embedded
        assert len(up.events.get("good.requests", [])) == good_before  # no later subscription started
        assert "Traceback" not in caplog.text and "unexpectedly" not in caplog.text, caplog.text
    finally:
        up.on_request = lambda: None
        catalog.close()
