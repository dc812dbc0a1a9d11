"""The search page's browser tests' shared parts: Debian's Chromium driven by Playwright, and waiting for
the page's next finished search (``body[data-searches]``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@contextmanager
def chromium() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: `make test` installs Debian's chromium (apt-get install chromium)")
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


def searches_done(page: Page) -> int:
    return int(page.evaluate("document.body.dataset.searches || '0'"))


def wait_for_search_after(page: Page, before: int) -> None:
    page.wait_for_function("n => Number(document.body.dataset.searches || 0) > n", arg=before)


def search(page: Page, query: str) -> None:
    before = searches_done(page)
    page.fill("#q", query)
    page.click("#search-form button[type=submit]")
    wait_for_search_after(page, before)
