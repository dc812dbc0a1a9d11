"""The search page against hostile catalog text and a failing server, in a real headless Chromium, and the
headers it is served with.

Catalog text is anyone's: a skill's instructions and files are kept byte for byte, and names, tags and
descriptions may be one unbroken 1,000-character word. The page must run none of it, show it without
hiding what it says (a bidi override reverses what a reader sees) and keep its layout. A request the page
cannot send whole, or one the server never answers, must say so.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from page_support import search, searches_done, wait_for_search_after
from playwright.sync_api import Browser, Page, Route

from skillsearch.core.domain import Principal
from skillsearch.core.settings import Settings
from skillsearch.http.app import create_app
from skillsearch.http.auth import DEMO_TOKEN, PrincipalRegistry
from skillsearch.http.server import ServerThread
from skillsearch.retrieval.encoder import Encoder
from skillsearch.service import Catalog

# Each payload would add its number to window.__ran if the page ever ran it.
RUN = "window.__ran=(window.__ran||[]).concat({})"
LONG_WORD = "Supercalifragilistic" * 50  # 1,000 characters with no place to break
RTL = "invoice\u202egnp.exe\u202c"  # shows as "invoiceexe.png" where the override acts
HOSTILE = [
    {"slug": "hostile-markup", "name": "<img src=x onerror=window.__ran=[1]> hostile", "kind": "knowledge",
     "description": f"<svg onload=\"{RUN.format(2)}\"> hostile {LONG_WORD[:900]}", "version": "1",
     "tags": [f"<img src=x onerror={RUN.format(3)}>", "T" * 300],
     "instructions": "\n".join([
         f"# Title <img src=x onerror=\"{RUN.format(4)}\">",
         f"[click](javascript:{RUN.format(5)}) <script>{RUN.format(6)}</script>",
         f"[ok](https://example.com/\"onmouseover=\"{RUN.format(7)})",
         f"Open {RTL} now; NUL:\x00; isolate \u2067x\u2069.",
         LONG_WORD,
         f"```\n<script>{RUN.format(8)}</script> if (user\u202e) {{ admin() }}\n```",
     ]),
     "resources": [{"path": "scripts/<img src=x onerror=1>.sh", "kind": "script", "media_type": "text/x-shellscript",
                    "text": f"echo ok # {RTL}\n<script>{RUN.format(9)}</script>\n"}]},
    {"slug": "hostile-long", "name": "L" * 64, "kind": "knowledge", "version": "1",
     "description": "hostile " + "verylongword" * 80, "tags": ["t" * 64], "instructions": "hostile"},
    {"slug": "hostile-flow", "name": "hostile flow", "kind": "flow_template", "version": "1",
     "description": "a hostile flow template", "tags": ["flow"], "instructions": "notes",
     "parameters": [{"name": "target_" + "x" * 57, "type": "string", "required": True, "enum": ["short", "Q" * 120]}],
     "steps": [{"tool": "deploy", "args": {"to": "{target_" + "x" * 57 + "}", "note": "N" * 300}}]},
]


@pytest.fixture(scope="module")
def hostile_server(tmp_path_factory: pytest.TempPathFactory, encoder: Encoder) -> Iterator[str]:
    root = tmp_path_factory.mktemp("hostile-page")
    bundle = root / "hostile.json"
    bundle.write_text(json.dumps(HOSTILE), encoding="utf-8")
    catalog = Catalog.open(Settings(data_dir=root / "data", seed_sample=False), encoder=encoder)
    try:
        report = catalog.import_path(bundle, "hostile", "sub:starter-pack")  # a grant the demo caller sees
        assert len(report.created) == len(HOSTILE), report
        with ServerThread(create_app(catalog, principals=PrincipalRegistry(None, demo=True))) as url:
            yield url
    finally:
        catalog.close()


def open_page(browser: Browser, url: str) -> Page:
    page = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
    page.goto(url + "/")
    page.wait_for_selector("body[data-ready=true]")
    return page


def page_fits(page: Page) -> bool:
    return bool(page.evaluate("document.documentElement.scrollWidth <= innerWidth"))


def open_detail(page: Page, name_part: str) -> None:
    page.locator("[data-testid=result-name]", has_text=name_part).first.click()
    page.wait_for_selector("[data-testid=detail-name]")


def test_long_unbroken_words_wrap_rather_than_widen_the_page(browser: Browser, hostile_server: str) -> None:
    page = open_page(browser, hostile_server)
    search(page, "hostile")
    assert page.locator("[data-testid=result]").count() == len(HOSTILE)
    assert page_fits(page)  # a 1,000-character word made the results 13,000 px wide
    for name in ("onerror", "LLLL", "hostile flow"):
        open_detail(page, name)
        assert page_fits(page), name
        if name == "hostile flow":  # a long allowed value made the resolve form's select wider than a phone
            page.set_viewport_size({"width": 390, "height": 800})
            assert page_fits(page), name
            page.set_viewport_size({"width": 1200, "height": 900})
        before = searches_done(page)
        page.go_back()
        wait_for_search_after(page, before)
    page.context.close()


def test_bidi_overrides_and_control_characters_show_as_escapes(browser: Browser, hostile_server: str) -> None:
    """A U+202E in instructions or a file reversed what the reader saw ("invoiceexe.png" for a .exe, code
    that reads otherwise than it runs); the CLI shows such characters as escapes, and so does the page."""
    page = open_page(browser, hostile_server)
    search(page, "hostile")
    open_detail(page, "onerror")
    shown = page.locator("[data-testid=instructions]").text_content() or ""
    assert "invoice\\u202egnp.exe\\u202c" in shown and "NUL:\\x00;" in shown and "\\u2067x\\u2069" in shown
    assert "(user\\u202e)" in page.locator("[data-testid=instructions] pre").text_content()
    assert not any(c in shown for c in "\u202e\u202c\u2067\u2069\x00")
    page.click("[data-testid=resource-open]")
    page.wait_for_selector("[data-testid=resource-text]:not([hidden])")
    text = page.locator("[data-testid=resource-text]").text_content() or ""
    assert "\\u202egnp.exe" in text and "\u202e" not in text and text.endswith("</script>\n")
    page.context.close()


def test_catalog_markup_never_runs(browser: Browser, hostile_server: str) -> None:
    page = open_page(browser, hostile_server)
    search(page, "hostile")
    assert "<img src=x onerror=" in page.locator("[data-testid=result-name]", has_text="onerror").inner_text()
    open_detail(page, "onerror")
    page.click("[data-testid=resource-open]")
    for link in page.locator("[data-testid=instructions] a").all():
        link.hover()
        assert (link.get_attribute("href") or "").startswith("https://")
    assert page.locator("#detail-view :is(script, img, svg, iframe)").count() == 0
    assert page.evaluate("window.__ran") is None
    page.context.close()


# -- the page's own answers ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sample_server(sample: Catalog) -> Iterator[str]:
    with ServerThread(create_app(sample, principals=PrincipalRegistry(None, demo=True))) as url:
        yield url


def test_a_query_over_the_limit_is_kept_whole_and_refused_plainly(browser: Browser, sample_server: str) -> None:
    """The box cut a pasted request at 2,000 characters without a word and searched the rest."""
    page = open_page(browser, sample_server)
    limit = Settings().max_query_chars
    page.focus("#q")
    page.keyboard.insert_text("profile slow python code " + "x" * limit)
    assert len(page.locator("#q").input_value()) == limit + len("profile slow python code ")
    before = searches_done(page)
    page.keyboard.press("Enter")
    wait_for_search_after(page, before)
    error = page.locator("#error")
    assert error.is_visible() and f"at most {limit} characters" in error.inner_text()
    assert page.locator("[data-testid=result]").count() == 0
    page.context.close()


def test_a_server_that_stopped_is_said_plainly(browser: Browser, sample: Catalog) -> None:
    """A search after the server stopped showed the browser's "ERROR: Failed to fetch"."""
    server = ServerThread(create_app(sample, principals=PrincipalRegistry(None, demo=True)))
    with server as url:
        page = open_page(browser, url)
        search(page, "profile slow python code")
        assert page.locator("[data-testid=result]").count() > 0
    search(page, "clean a messy dataset with pandas")
    shown = page.locator("#error").inner_text()
    assert shown.startswith("SERVER_UNREACHABLE: the server did not answer") and "Failed to fetch" not in shown
    assert page.locator("[data-testid=result]").count() == 0
    page.context.close()


def test_an_answer_that_arrives_after_the_next_search_began_is_not_shown(browser: Browser, sample_server: str) -> None:
    """A slow hybrid search (the model still loading) answered after the lexical one that replaced it, and
    its results or its INDEX_NOT_READY took the page, under a box and an address that said lexical."""
    page = open_page(browser, sample_server)
    held: list[Route] = []
    page.route("**/v1/search?*mode=hybrid*", lambda route: held.append(route))  # the hybrid answer waits until it is let go
    page.fill("#q", "pandas")
    page.click("#search-form button[type=submit]")
    page.wait_for_function("() => document.querySelector('#status').innerText === 'searching…'")
    page.check("input[name=mode][value=lexical]")
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('lexical')")
    assert len(held) == 1
    before = searches_done(page)
    held[0].continue_()  # the real server's hybrid answer, now, after the lexical one
    wait_for_search_after(page, before)
    assert "lexical" in page.locator("#status").inner_text() and "hybrid" not in page.locator("#status").inner_text()
    assert "semantic: off" in page.locator("[data-testid=why]").first.inner_text()
    assert page.locator("#error").is_hidden()
    page.context.close()


def test_back_from_a_skill_link_opened_alone_stays_on_the_page(browser: Browser, sample_server: str,
                                                                sample: Catalog) -> None:
    """"← back to results" was history.back(): on a skill's link opened in a new tab it left the page."""
    skill_id = sample.get_skill(Principal.operator(), "git-bisect-regressions").skill_id
    page = browser.new_context().new_page()
    page.goto(f"{sample_server}/#/skill/{skill_id}")
    page.wait_for_selector("[data-testid=detail-name]")
    page.click("a.back")
    page.wait_for_selector("[data-testid=intro]:not([hidden])")  # the first screen, with its examples
    assert page.url == f"{sample_server}/#/"
    search(page, "find the commit that broke the build")  # within the page, it goes back to those results
    page.locator("[data-testid=result-name]", has_text="git-bisect-regressions").click()
    page.wait_for_selector("[data-testid=detail-name]")
    before = searches_done(page)
    page.click("a.back")
    wait_for_search_after(page, before)
    assert page.locator("#q").input_value() == "find the commit that broke the build"
    assert page.locator("[data-testid=result]").count() > 0
    page.context.close()


# -- headers --------------------------------------------------------------------------------------------------


def test_the_page_runs_only_its_own_script_files_and_is_revalidated(sample_server: str) -> None:
    with httpx.Client(base_url=sample_server) as client:
        for path in ("/", "/static/app.css", "/static/app.js", "/static/api.js", "/static/dom.js", "/static/flow.js",
                     "/static/focus.js"):
            resp = client.get(path)
            assert resp.status_code == 200, path
            policy = resp.headers.get("content-security-policy", "")
            assert "script-src 'self';" in policy and "unsafe-inline" not in policy, (path, policy)
            assert "frame-ancestors 'none'" in policy and "object-src 'none'" in policy, path
            assert resp.headers.get("x-content-type-options") == "nosniff", path
            assert resp.headers.get("cache-control") == "no-cache", path  # never an older app.js after an upgrade
        again = client.get("/static/app.js", headers={"If-None-Match": client.get("/static/app.js").headers["etag"]})
        assert again.status_code == 304 and again.headers.get("cache-control") == "no-cache"


def test_markup_that_reached_the_page_cannot_run(browser: Browser, sample_server: str) -> None:
    """Defence in depth: even an element with an inline handler put into the page by some future bug does
    not run, and the page itself needs nothing its policy refuses."""
    page = open_page(browser, sample_server)
    page.evaluate("""() => { window.__violations = [];
        document.addEventListener('securitypolicyviolation', (e) => window.__violations.push(e.violatedDirective)); }""")
    search(page, "profile slow python code")
    page.locator("[data-testid=result-name]").first.click()
    page.wait_for_selector("[data-testid=detail-name]")
    assert page.evaluate("window.__violations") == []  # the page's own work stays inside the policy
    page.evaluate("""() => { document.querySelector('#detail-view').insertAdjacentHTML('beforeend',
        '<img id=probe src="data:," onerror="window.__ran=1" onload="window.__ran=1">');
        // Listeners added after the inline handler run after it, in the same dispatch.
        const settled = () => { window.__settled = true; };
        document.querySelector('#probe').addEventListener('error', settled);
        document.querySelector('#probe').addEventListener('load', settled); }""")
    page.wait_for_function("() => window.__settled === true")
    assert page.evaluate("window.__ran") is None
    page.wait_for_function("() => window.__violations.length > 0")  # refused by the policy, not by chance
    page.context.close()


def test_a_search_that_takes_long_says_what_it_waits_for(browser: Browser, sample_server: str) -> None:
    """The first search after a start waits for the model and the index (27 s on a fresh data directory here):
    past a few seconds the status says so, rather than "searching…" alone; the answer then replaces it."""
    page = open_page(browser, sample_server)
    held: list[Route] = []
    page.route("**/v1/search?*", lambda route: held.append(route))
    page.fill("#q", "pandas")
    page.click("#search-form button[type=submit]")
    page.wait_for_function("() => document.querySelector('#status').innerText.startsWith('still searching')")
    assert "model and index" in page.locator("#status").inner_text()
    before = searches_done(page)
    held[0].continue_()
    wait_for_search_after(page, before)
    assert "result" in page.locator("#status").inner_text() and "still" not in page.locator("#status").inner_text()
    page.context.close()


def test_a_client_that_asks_for_json_at_the_root_gets_where_the_surfaces_are(sample_server: str) -> None:
    """An agent's HTTP tool asking ``/`` for JSON got the page's HTML; it gets the service's links now, each
    of which answers, while a browser (which lists text/html) still gets the page."""
    with httpx.Client(base_url=sample_server) as client:
        resp = client.get("/", headers={"Accept": "application/json"})
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("application/json"), resp.text[:200]
        links = resp.json()
        assert links["service"] == "skillsearch" and links["mcp"] is None  # this app mounts no MCP endpoint
        for key in ("openapi", "docs", "health", "ready", "metrics"):
            assert client.get(links[key]).status_code == 200, key
        assert client.get(links["list"]).status_code == 401  # the token the "auth" line names
        assert client.get(links["search"] + "tests", headers={"Authorization": f"Bearer {DEMO_TOKEN}"}).status_code == 200
        browser_accept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
        page = client.get("/", headers={"Accept": browser_accept})
        assert page.headers["content-type"].startswith("text/html") and page.headers["vary"] == "Accept"
        assert client.get("/").headers["content-type"].startswith("text/html")  # no Accept: the page, as before
        refused_html = client.get("/", headers={"Accept": "application/json, text/html;q=0"})  # q=0: "not HTML"
        assert refused_html.headers["content-type"].startswith("application/json")
