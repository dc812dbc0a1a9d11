"""The search page past its first ten hits, filtered by tag, and behind a proxy that fails, in a real headless
Chromium against a real server.

The page asked /v1/search for 10 hits and offered no way to see the 11th nor to restrict by tag, though the API
takes ``limit`` and ``tag``; an error answer whose body was not the API's JSON (a proxy's 502 page) was shown as
"HTTP_502: request failed".
"""

from __future__ import annotations

import shutil
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from page_support import search, searches_done, wait_for_search_after
from playwright.sync_api import Browser, Page, expect
from test_search_page_a11y import CONTRAST

from skillsearch.core.domain import Principal
from skillsearch.core.settings import Settings
from skillsearch.http.app import create_app
from skillsearch.http.auth import PrincipalRegistry
from skillsearch.http.schemas import MAX_TAG_CHARS, Limits
from skillsearch.http.server import ServerThread
from skillsearch.retrieval.encoder import Encoder
from skillsearch.service import Catalog

DEMO = Principal("demo", frozenset({"sub:starter-pack", "team:data-science"}))


def sent_searches(page: Page) -> list[dict[str, list[str]]]:
    """The query of every /v1/search the page sends from now on."""
    sent: list[dict[str, list[str]]] = []
    page.on("request", lambda r: sent.append(parse_qs(urlsplit(r.url).query, keep_blank_values=True))
            if urlsplit(r.url).path == "/v1/search" else None)
    return sent


def names(page: Page) -> list[str]:
    return page.locator("[data-testid=result-name]").all_inner_texts()


def press_more(page: Page) -> None:
    before = searches_done(page)
    page.locator("[data-testid=more]").focus()
    page.keyboard.press("Enter")  # by keyboard: the button is a real one, reached by Tab
    wait_for_search_after(page, before)


def test_show_more_adds_results_after_those_shown_until_there_are_no_more(page: Page, sample: Catalog) -> None:
    visible = len(sample.list_skills(DEMO, limit=200).items)
    assert 20 < visible < 100  # the sample: three pages and a part, within the API's largest limit
    sent = sent_searches(page)
    search(page, "clean a messy dataset with pandas")
    first = names(page)
    assert len(first) == 10
    more = page.get_by_role("button", name="Show more results", exact=True)
    assert more.is_visible() and page.locator("[data-testid=no-more]").is_hidden()

    press_more(page)
    assert names(page)[:10] == first and len(names(page)) == 20  # the ten shown stay where they were
    assert "limit=20" in page.evaluate("location.hash")
    assert page.evaluate("document.activeElement.getAttribute('href')") == \
        page.locator("[data-testid=result-name]").nth(10).get_attribute("href")  # reading goes on at the 11th
    assert page.locator("#status").inner_text().startswith("20 results")
    assert page.locator(".rank").nth(10).inner_text() == "11."
    while more.is_visible():
        shown = names(page)
        press_more(page)
        assert names(page)[: len(shown)] == shown
    assert len(names(page)) == visible and len(set(names(page))) == visible
    note = page.locator("[data-testid=no-more]")
    assert note.is_visible() and note.inner_text() == f"No more results: all {visible} are shown."
    assert [int(q["limit"][0]) for q in sent] == list(range(10, len(sent) * 10 + 1, 10))

    # The link keeps it: opened again, it shows as many.
    page.reload()
    page.wait_for_selector("body[data-searches]")
    assert len(names(page)) == visible and note.is_visible()
    assert page.evaluate(CONTRAST) == []


def test_a_show_more_that_finds_nothing_new_says_so_where_focus_is(page: Page, sample: Catalog) -> None:
    visible = len(sample.list_skills(DEMO, limit=200).items)
    before = searches_done(page)
    page.evaluate("n => { location.hash = '#/?q=pandas&mode=hybrid&limit=' + n; }", visible)  # exactly all of them
    wait_for_search_after(page, before)
    assert len(names(page)) == visible
    press_more(page)  # the answer may have been full: it was
    note = page.locator("[data-testid=no-more]")
    assert note.is_visible() and page.evaluate("document.activeElement.dataset.testid") == "no-more"
    assert page.locator("[data-testid=more]").is_hidden()


def test_a_capped_search_says_the_api_shows_no_more(
    browser: Browser, sample_dir: Path, tmp_path: Path, encoder: Encoder
) -> None:
    """At the API's largest limit (SKILLSEARCH_MAX_LIMIT, here 20) the page says so rather than offering a "Show
    more" the API would refuse."""
    shutil.copytree(sample_dir, tmp_path / "data")
    capped = Catalog.open(Settings(data_dir=tmp_path / "data", max_limit=20), encoder=encoder)
    context = browser.new_context()
    try:
        with ServerThread(create_app(capped, principals=PrincipalRegistry(None, demo=True))) as url:
            p = context.new_page()
            p.goto(url + "/#/?q=pandas&mode=hybrid&limit=20")
            p.wait_for_selector("body[data-searches]")
            assert len(names(p)) == 20 and p.locator("[data-testid=more]").is_hidden()
            assert "A search shows at most 20 results" in p.locator("[data-testid=no-more]").inner_text()
    finally:
        context.close()
        capped.close()


def test_a_tag_filters_the_results_and_is_removed_by_keyboard(page: Page) -> None:
    sent = sent_searches(page)
    search(page, "clean a messy dataset with pandas")
    link = page.locator("[data-testid=result]").first.locator("[data-testid=tag-link]").first
    tag = link.inner_text()
    assert link.get_attribute("tabindex") == "-1"  # Tab goes from result to result; the tag box is the keyboard's way
    before = searches_done(page)
    link.click()
    wait_for_search_after(page, before)
    assert sent[-1]["tag"] == [tag] and "tag=" in page.evaluate("location.hash")
    cards = page.locator("[data-testid=result] [data-testid=tags]").all_inner_texts()
    assert cards and all(tag in c.split("\n") for c in cards)
    status = page.locator("#status").inner_text()
    assert status.startswith(f"{len(cards)} result") and f"tagged {tag}" in status
    chip = page.get_by_role("button", name=f"remove the tag filter {tag}", exact=True)
    assert chip.is_visible()

    # A second tag, typed: both are required, as the API takes them.
    other = next(t for c in cards for t in c.split("\n") if t != tag)
    page.fill("#tag", other)
    before = searches_done(page)
    page.keyboard.press("Enter")
    wait_for_search_after(page, before)
    assert sent[-1]["tag"] == [tag, other] and page.input_value("#tag") == ""
    expect(page.locator("#tag")).to_have_accessible_name("only skills with this tag")

    chip.focus()
    before = searches_done(page)
    page.keyboard.press("Enter")
    wait_for_search_after(page, before)
    assert sent[-1]["tag"] == [other] and chip.count() == 0
    assert page.evaluate("document.activeElement.id") == "tag"  # not the body: the button it pressed is gone
    assert page.evaluate(CONTRAST) == []


@pytest.mark.parametrize(("tags", "limit", "says"), [
    (["x" * (MAX_TAG_CHARS + 1)], None, f"is longer than a tag can be ({MAX_TAG_CHARS} characters)"),
    ([""], None, "this link names an empty tag"),
    ([f"t{i}" for i in range(Limits().max_tags + 1)], None, f"a search takes at most {Limits().max_tags}"),
    ([], "abc", 'this link\'s limit "abc" is not a whole number from 1 to 100'),
    ([], "0", "is not a whole number from 1 to 100"),
    ([], "101", "is not a whole number from 1 to 100"),
])
def test_a_links_tag_or_limit_the_api_would_refuse_is_said_as_the_links_fault(
    page: Page, tags: list[str], limit: str | None, says: str
) -> None:
    search(page, "pandas")
    page.fill("#tag", "python")
    page.keyboard.press("Enter")
    page.locator("[data-testid=tag-remove]").wait_for()
    sent = sent_searches(page)
    query = "q=deploy&mode=hybrid" + "".join(f"&tag={t}" for t in tags) + (f"&limit={limit}" if limit else "")
    page.evaluate("f => { location.hash = f; }", "#/?" + query)
    page.locator("#error", has_text="INVALID_LINK").wait_for()
    assert says in page.locator("#error").inner_text()
    assert sent == [] and page.locator("[data-testid=result]").count() == 0
    assert page.locator("[data-testid=tag-remove]").count() == 0 and page.input_value("#q") == "deploy"


def test_a_tag_as_long_as_the_api_takes_is_asked_for(page: Page) -> None:
    """64 characters as the API counts them: an emoji is one, though it is two of JavaScript's string units."""
    sent = sent_searches(page)
    before = searches_done(page)
    longest = "\U0001F600" * MAX_TAG_CHARS
    page.evaluate("t => { location.hash = '#/?q=pandas&mode=hybrid&tag=' + encodeURIComponent(t); }", longest)
    wait_for_search_after(page, before)
    assert sent and sent[-1]["tag"] == [longest]
    assert page.locator("#error").is_hidden()


def test_the_tag_box_counts_characters_as_the_api_does(page: Page) -> None:
    """The box's ``maxlength="64"`` counted UTF-16 units: 64 emoji, a tag the API takes, were cut to 32 as
    they were typed, and a longer tag was cut without a word. The box takes 64 characters and says why it
    holds back a 65th."""
    search(page, "pandas")
    sent = sent_searches(page)
    longest = "\U0001F600" * MAX_TAG_CHARS
    page.fill("#tag", longest + "\U0001F600")
    page.keyboard.press("Enter")
    box = page.locator("#tag")
    assert box.evaluate("e => e.validity.customError") is True
    assert f"at most {MAX_TAG_CHARS} characters; this one has {MAX_TAG_CHARS + 1}" in str(
        box.evaluate("e => e.validationMessage"))
    page.fill("#tag", longest)
    assert box.evaluate("e => e.validity.valid") is True
    before = searches_done(page)
    page.keyboard.press("Enter")
    wait_for_search_after(page, before)
    assert [q["tag"] for q in sent] == [[longest]]  # the 65 characters were never sent


def test_a_tag_typed_again_in_another_form_is_not_a_second_filter(page: Page) -> None:
    """The API compares tags NFKC and case-folded (``core/domain.tag_key``); the box's repeat check only
    lowercased, so "PYTHON" in full-width letters (U+FF30 ..., as a Japanese input method types it) beside the filter "python"
    was sent as a second tag and shown as a second chip."""
    search(page, "pandas")
    page.fill("#tag", "python")
    before = searches_done(page)
    page.keyboard.press("Enter")
    wait_for_search_after(page, before)
    sent = sent_searches(page)
    page.fill("#tag", "\uff30\uff39\uff34\uff28\uff2f\uff2e")
    before = searches_done(page)
    page.keyboard.press("Enter")
    wait_for_search_after(page, before)
    assert sent[-1]["tag"] == ["python"]
    assert page.locator("[data-testid=tag-remove]").count() == 1


# -- a proxy in front of the server -------------------------------------------------------------------------

PROXY_PAGE = b"<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1><hr>nginx</body></html>"


@pytest.fixture
def failing_proxy(sample: Catalog) -> Iterator[str]:
    """A real reverse proxy on 127.0.0.1 that serves the page from the real server and answers every /v1 call
    with its own HTML 502 page, as nginx does while the API behind it is down."""
    with ServerThread(create_app(sample, principals=PrincipalRegistry(None, demo=True))) as upstream:
        class Proxy(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.startswith("/v1/"):
                    self.send_response(502)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(PROXY_PAGE)))
                    self.end_headers()
                    self.wfile.write(PROXY_PAGE)
                    return
                try:
                    answer = urllib.request.urlopen(upstream + self.path, timeout=30)
                except urllib.error.HTTPError as err:
                    answer = err
                body = answer.read()
                self.send_response(answer.status)
                for name, value in answer.headers.items():
                    if name.lower() not in {"connection", "transfer-encoding", "content-length", "date", "server"}:
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        proxy = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
        thread = threading.Thread(target=proxy.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{proxy.server_address[1]}"
        finally:
            proxy.shutdown()
            proxy.server_close()
            thread.join()


def test_an_error_page_that_is_not_the_apis_is_said_in_a_sentence(browser: Browser, failing_proxy: str) -> None:
    context = browser.new_context()
    try:
        p = context.new_page()
        p.goto(failing_proxy + "/")
        p.wait_for_selector("body[data-ready=true]")
        search(p, "profile slow python code")
        shown = p.locator("#error").inner_text()
        assert shown.startswith("HTTP_502: the server, or a proxy in front of it, answered 502 Bad Gateway without "
                                "saying why."), shown
        assert "request failed" not in shown and "<" not in shown
        assert p.locator("#error").get_attribute("role") == "alert"
    finally:
        context.close()
