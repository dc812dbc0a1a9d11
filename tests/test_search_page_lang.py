"""Catalog text in Japanese, Chinese or Korean on the search page, in a real headless Chromium.

The page is English (``<html lang=en>``), and every piece of text was taken as English: Japanese kanji were
drawn with the Chinese shapes of a font's default (Han characters differ between the languages), and a screen
reader read a Japanese description with its English voice. Each piece of catalog text now says the language
its characters show (any kana: ``ja``; Hangul: ``ko``; Han without kana: ``zh``), where it takes its own
direction (``dir=auto``); English text keeps the page's language.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from page_support import demo_server_with, search
from playwright.sync_api import Browser, Locator

from skillsearch.retrieval.encoder import Encoder

SKILLS = [
    {"slug": "japanese-logs", "name": "ログ解析", "kind": "knowledge", "version": "1",
     "description": "サーバーのログ (nginx) を解析して、エラーの原因を見つけます。", "tags": ["ログ", "logs"],
     "instructions": "# 手順\n\nまずログを集めます。\n\n- エラーを数える\n"},
    {"slug": "chinese-logs", "name": "日志分析", "kind": "knowledge", "version": "1",
     "description": "分析服务器日志 (nginx)，找出错误的原因。", "tags": ["日志"], "instructions": "x"},
    {"slug": "korean-logs", "name": "로그 분석", "kind": "knowledge", "version": "1",
     "description": "서버 로그(nginx)를 분석하여 오류의 원인을 찾습니다.", "tags": ["로그"], "instructions": "x"},
    {"slug": "english-logs", "name": "log analysis", "kind": "knowledge", "version": "1",
     "description": "Read nginx logs to find the cause of the errors.", "tags": ["logs"], "instructions": "x"},
]
LANG = {"japanese-logs": "ja", "chinese-logs": "zh", "korean-logs": "ko", "english-logs": "en"}


@pytest.fixture(scope="module")
def cjk_server(tmp_path_factory: pytest.TempPathFactory, encoder: Encoder) -> Iterator[str]:
    with demo_server_with(tmp_path_factory.mktemp("cjk-page"), encoder, SKILLS) as url:
        yield url


def language(node: Locator) -> str:
    """The language the browser takes the element's text to be in: its own ``lang``, else its nearest
    ancestor's (the page's ``en``)."""
    return str(node.evaluate("e => e.closest('[lang]').lang"))


def test_japanese_chinese_and_korean_catalog_text_is_marked_with_its_language(browser: Browser,
                                                                               cjk_server: str) -> None:
    page = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(cjk_server + "/")
    page.wait_for_selector("body[data-ready=true]")
    search(page, "nginx ログ 日志 로그 logs")
    assert set(page.locator("[data-testid=result-name]").all_inner_texts()) == {s["name"] for s in SKILLS}
    for skill in SKILLS:
        hit = page.locator("[data-testid=result]", has_text=str(skill["name"]))
        want = LANG[str(skill["slug"])]
        assert language(hit.locator("[data-testid=result-name]")) == want, skill["slug"]
        assert language(hit.locator(".desc")) == want, skill["slug"]
        assert hit.locator(".desc").get_attribute("dir") == "auto"  # its direction is still its own
    tags = page.locator("[data-testid=result]", has_text="ログ解析").locator("[data-testid=tags] li")
    assert [language(t) for t in tags.all()] == ["ja", "en"]
    assert language(page.locator("[data-testid=why]").first) == "en"  # the page's own words stay English

    page.locator("[data-testid=result-name]", has_text="ログ解析").click()
    page.wait_for_selector("[data-testid=detail-name]")
    assert language(page.locator("[data-testid=detail-name]")) == "ja"
    assert language(page.locator("#detail-view .desc")) == "ja"
    for block in ("h3", "p", "li"):
        assert language(page.locator(f"[data-testid=instructions] {block}").first) == "ja", block
    assert language(page.locator("#detail-view .meta")) == "en"
    page.context.close()
    assert not errors, errors
