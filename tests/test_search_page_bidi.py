"""Right-to-left text on the search page, in a real headless Chromium: an Arabic or Hebrew request typed into the
box, and a skill whose name, description, tags and instructions are Arabic or Hebrew.

The page is English (``<html lang=en>``, left to right), and every piece of text took that direction: an Arabic
description ending in "؟" or "." showed that mark at its right end, its parentheses turned the wrong way, and
a request typed in Arabic sat at the left of the box. Each piece of catalog text, and the box, now takes the
direction of its own first strong letter (``dir=auto``), as the English beside it keeps its own.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from page_support import demo_server_with, search
from playwright.sync_api import Browser, Page

from skillsearch.retrieval.encoder import Encoder

ARABIC = "إنشاء تقرير عن أداء الخادم البطيء (CPU، الذاكرة)؟ استخدمه عند تحليل الأداء."
SKILLS = [
    {"slug": "arabic-report", "name": "تقرير الأداء", "kind": "knowledge", "version": "1", "description": ARABIC,
     "tags": ["أداء", "report"], "instructions": "# خطوات\n\nقِس الأداء أولاً (CPU).\n\n- ثم حسّن الكود!\n"},
    {"slug": "hebrew-logs", "name": "ניתוח לוגים", "kind": "knowledge", "version": "1",
     "description": "ניתוח קבצי לוג (nginx, syslog) ומציאת שגיאות 500.", "tags": ["logs"], "instructions": "x"},
    {"slug": "english-logs", "name": "log analysis", "kind": "knowledge", "version": "1",
     "description": "Read nginx and syslog files (ניתוח) to find the errors.", "tags": ["logs"], "instructions": "x"},
]


@pytest.fixture(scope="module")
def rtl_server(tmp_path_factory: pytest.TempPathFactory, encoder: Encoder) -> Iterator[str]:
    with demo_server_with(tmp_path_factory.mktemp("rtl-page"), encoder, SKILLS) as url:
        yield url


def direction(page: Page, selector: str) -> str:
    return str(page.locator(selector).first.evaluate("e => getComputedStyle(e).direction"))


def open_rtl_page(browser: Browser, url: str) -> Page:
    page = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
    page.goto(url + "/")
    page.wait_for_selector("body[data-ready=true]")
    return page


def test_right_to_left_catalog_text_reads_right_to_left(browser: Browser, rtl_server: str) -> None:
    page = open_rtl_page(browser, rtl_server)
    search(page, "ניתוח לוגים nginx syslog")
    names = page.locator("[data-testid=result-name]")
    assert set(names.all_inner_texts()) == {s["name"] for s in SKILLS}
    for skill in SKILLS:
        hit = page.locator("[data-testid=result]", has_text=skill["name"])
        want = "ltr" if skill["slug"] == "english-logs" else "rtl"
        assert hit.locator("[data-testid=result-name]").evaluate("e => getComputedStyle(e).direction") == want
        assert hit.locator(".desc").evaluate("e => getComputedStyle(e).direction") == want
    # Shown as its reader expects it: the request's "؟" right of "(CPU، الذاكرة)", the final "." at the left end.
    arabic = page.locator("[data-testid=result]", has_text="تقرير").locator(".desc")
    boxes = arabic.evaluate("""e => { const t = e.firstChild, s = t.data, r = document.createRange();
        const at = (i) => { r.setStart(t, i); r.setEnd(t, i + 1); return r.getBoundingClientRect().left; };
        return { dot: at(s.length - 1), first: at(0), open: at(s.indexOf('(')) }; }""")
    assert boxes["dot"] < boxes["open"] < boxes["first"], boxes
    tags = page.locator("[data-testid=result]", has_text="تقرير").locator("[data-testid=tags] li")
    assert [t.evaluate("e => getComputedStyle(e).direction") for t in tags.all()] == ["rtl", "ltr"]
    page.locator("[data-testid=result-name]", has_text="تقرير").click()
    page.wait_for_selector("[data-testid=detail-name]")
    assert direction(page, "[data-testid=detail-name]") == "rtl"
    assert direction(page, "#detail-view .desc") == "rtl"
    for block in ("h3", "p", "ul", "li"):
        assert direction(page, f"[data-testid=instructions] {block}") == "rtl", block
    assert direction(page, "#detail-view .meta") == "ltr"  # the page's own words stay left to right
    page.context.close()


def test_a_request_typed_right_to_left_reads_right_to_left(browser: Browser, rtl_server: str) -> None:
    page = open_rtl_page(browser, rtl_server)
    page.fill("#q", "تحليل الأداء؟")
    assert direction(page, "#q") == "rtl"
    page.fill("#q", "profile slow code")
    assert direction(page, "#q") == "ltr"
    page.context.close()
