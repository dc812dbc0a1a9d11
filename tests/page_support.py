"""The search page's browser tests' shared parts: Debian's Chromium driven by Playwright (one browser per
test module, the ``browser`` fixture), the sample catalog served for the page (``server``), a fresh page on
it that fails its test on any script error (``page``), and waiting for the page's next finished search
(``body[data-searches]``). ``tests/conftest.py`` loads the fixtures (``pytest_plugins``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from skillsearch.core.settings import Settings
from skillsearch.http.app import create_app
from skillsearch.http.auth import PrincipalRegistry
from skillsearch.http.server import ServerThread
from skillsearch.retrieval.encoder import Encoder
from skillsearch.service import Catalog

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


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Per module, not per session: Playwright's sync API keeps an event loop running in this thread while
    it lives, and the asyncio tests that the same worker runs later cannot start their own."""
    with chromium() as b:
        yield b


@pytest.fixture(scope="module")
def server(sample: Catalog) -> Iterator[str]:
    """The sample catalog served as the demo token's caller sees it."""
    with ServerThread(create_app(sample, principals=PrincipalRegistry(None, demo=True))) as url:
        yield url


@pytest.fixture
def page(browser: Browser, server: str) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    p = context.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda exc: errors.append(str(exc)))
    p.goto(server + "/")
    p.wait_for_selector("body[data-ready=true]")
    yield p
    context.close()
    assert not errors, errors


def searches_done(page: Page) -> int:
    return int(page.evaluate("document.body.dataset.searches || '0'"))


def wait_for_search_after(page: Page, before: int) -> None:
    page.wait_for_function("n => Number(document.body.dataset.searches || 0) > n", arg=before)


def search(page: Page, query: str) -> None:
    before = searches_done(page)
    page.fill("#q", query)
    page.click("#search-form button[type=submit]")
    wait_for_search_after(page, before)


@contextmanager
def demo_server_with(root: Path, encoder: Encoder, skills: list[dict[str, Any]]) -> Iterator[str]:
    """A real server (the demo caller's registry) on a catalog of ``skills`` alone, imported as one bundle into a
    grant the demo caller sees; its URL."""
    bundle = root / "skills.json"
    bundle.write_text(json.dumps(skills, ensure_ascii=False), encoding="utf-8")
    catalog = Catalog.open(Settings(data_dir=root / "data", seed_sample=False), encoder=encoder)
    try:
        report = catalog.import_path(bundle, root.name, "sub:starter-pack")
        assert len(report.created) == len(skills), report
        with ServerThread(create_app(catalog, principals=PrincipalRegistry(None, demo=True))) as url:
            yield url
    finally:
        catalog.close()
