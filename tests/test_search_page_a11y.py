"""The search page as a keyboard-only user and a screen-reader user meet it, in a real headless Chromium.

Focus goes to a skill's heading when its view opens and back to its link on the results; one h1 per view; only
the outcome of a search is announced, never the results themselves; every control says what it does; a weak
confidence says so in words; text and control borders keep WCAG AA contrast; the focus ring shows everywhere.
"""

from __future__ import annotations

from page_support import search, searches_done, wait_for_search_after
from playwright.sync_api import Browser, Page, expect


def focused(page: Page) -> str:
    """The focused element, as its tag, test id and link target."""
    return str(page.evaluate("""() => { const a = document.activeElement;
        return [a.tagName, a.dataset.testid || '', a.getAttribute('href') || ''].join(' '); }"""))


def open_flow_template(page: Page) -> None:
    page.select_option("#kind", "flow_template")
    search(page, "cut a tagged release")
    page.locator("[data-testid=result-name]").first.click()
    page.locator("[data-testid=parameters]").wait_for()


def test_focus_lands_on_the_opened_skill_and_returns_to_its_link(page: Page) -> None:
    """Opening a result hid the link that had focus and left focus on the body: a screen reader said nothing of
    the new view, and back on the results the next Tab went to the footer."""
    search(page, "profile slow python code")
    link = page.locator("[data-testid=result-name]").nth(1)
    href = link.get_attribute("href")
    link.focus()
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-testid=detail-name]")
    page.wait_for_function("() => document.activeElement.dataset.testid === 'detail-name'")
    assert focused(page) == "H1 detail-name "
    page.keyboard.press("Shift+Tab")  # the back link, just above the heading
    assert focused(page).startswith("A ") and page.evaluate("document.activeElement.className") == "back"
    before = searches_done(page)
    page.keyboard.press("Enter")
    wait_for_search_after(page, before)
    assert focused(page) == f"A result-name {href}"
    page.keyboard.press("Tab")  # and the order goes on from there: the next result
    assert focused(page) == f"A result-name {page.locator('[data-testid=result-name]').nth(2).get_attribute('href')}"


def test_an_example_request_chosen_by_keyboard_keeps_focus_on_the_page(page: Page) -> None:
    example = page.locator("[data-testid=example]").first
    example.focus()
    before = searches_done(page)
    page.keyboard.press("Enter")
    wait_for_search_after(page, before)
    assert page.evaluate("document.activeElement.id") == "q"  # not the body: the example's line is gone
    assert page.locator("#q").input_value() == example.inner_text()


def test_one_h1_per_view_and_the_landmarks(page: Page) -> None:
    assert page.get_by_role("main").count() == 1 and page.get_by_role("search").count() == 1
    h1 = page.get_by_role("heading", level=1)
    assert h1.count() == 1 and h1.inner_text() == "Find a skill"
    search(page, "profile slow python code")
    assert h1.count() == 1 and page.get_by_role("heading", level=2).count() == 10  # one per result
    page.locator("[data-testid=result-name]").first.click()
    page.wait_for_selector("[data-testid=detail-name]")
    assert h1.count() == 1 and h1.inner_text() == "python-profiling"
    # The skill's own Markdown headings sit under its "Instructions" heading, not beside it.
    assert page.locator("[data-testid=instructions]").locator("h1, h2").count() == 0
    assert page.locator("[data-testid=instructions] h3").count() >= 1


def test_only_the_outcome_of_a_search_is_announced(page: Page) -> None:
    """The whole results section was one polite live region: every result's name, description, tags and why
    line were read out after each search. Now the count, no match, the slow line and the advice are."""
    search(page, "roll back a bad deploy")  # a weak answer: advice shown
    live = "el => el.closest('[aria-live]')?.getAttribute('aria-live') || null"
    assert page.locator("#results").evaluate(live) is None
    assert page.locator("#status").evaluate(live) == "polite" and "result" in page.locator("#status").inner_text()
    assert page.locator("[data-testid=advice]").evaluate(live) == "polite"
    assert page.locator("#error").get_attribute("role") == "alert"
    search(page, "bake a sourdough loaf at home")
    assert page.locator("#status").inner_text().startswith("No good match")


def test_a_weak_confidence_is_said_in_words_not_by_colour_alone(page: Page) -> None:
    search(page, "roll back a bad deploy")
    badges = page.locator("[data-testid=result] [data-testid=confidence]")
    weak = badges.evaluate_all("bs => bs.map(b => [b.classList.contains('weak'), b.innerText])")
    assert any(w for w, _ in weak)
    assert all(text.endswith(" (weak)") == w for w, text in weak), weak


CONTRAST = """
() => {
  const rgb = (s) => s.match(/[\\d.]+/g).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map((c) => { c /= 255; return c <= 0.03928 ? c / 12.92
    : ((c + 0.055) / 1.055) ** 2.4; }).reduce((s, c, i) => s + c * [0.2126, 0.7152, 0.0722][i], 0);
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const background = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length < 4 || c[3] === 1) return c.slice(0, 3);
    }
    return [255, 255, 255];
  };
  const low = [];
  for (const el of document.querySelectorAll('body *')) {
    const text = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
    if (!text || !el.checkVisibility() || el.closest('.visually-hidden')) continue;
    const r = ratio(rgb(getComputedStyle(el).color).slice(0, 3), background(el));
    if (r < 4.5) low.push(`${el.tagName}.${el.className} "${el.textContent.trim().slice(0, 30)}" ${r.toFixed(2)}`);
  }
  for (const sel of ['#q', '#kind']) {  // a control's boundary: 3:1 against what is around it (WCAG 1.4.11)
    const el = document.querySelector(sel);
    const r = ratio(rgb(getComputedStyle(el).borderTopColor).slice(0, 3), background(el.parentElement));
    if (r < 3) low.push(`${sel} border ${r.toFixed(2)}`);
  }
  return low;
}
"""


def test_text_and_control_borders_keep_aa_contrast(page: Page) -> None:
    """The flow-template badge was 4.36:1 and the query box's and kind menu's borders 1.2:1."""
    assert page.evaluate(CONTRAST) == []  # the first screen
    search(page, "cut a tagged release")  # flow templates and knowledge, strong and weak confidences
    assert page.locator("[data-testid=result] .kind.flow_template").count() >= 1
    assert page.locator("[data-testid=result] .confidence.weak").count() >= 1
    assert page.evaluate(CONTRAST) == []
    search(page, "bake a sourdough loaf at home")  # the no-match state
    assert page.evaluate(CONTRAST) == []
    open_flow_template(page)
    assert page.evaluate(CONTRAST) == []


def test_the_focus_ring_shows_on_a_field_marked_invalid(page: Page) -> None:
    """The invalid mark was an outline, which replaced the focus ring: focused or not, the field looked the same."""
    open_flow_template(page)
    page.fill("#param-repo", "acme/tool")
    page.click("form.resolve button[type=submit]")
    page.locator("[data-testid=resolve-error]").wait_for(state="visible")
    version = page.locator("#param-version")
    assert version.get_attribute("aria-invalid") == "true"
    ring = "el => { const s = getComputedStyle(el); return [s.outlineStyle, s.outlineWidth, s.outlineColor]; }"
    page.locator("#param-repo").focus()
    unfocused = version.evaluate(ring)
    page.keyboard.press("Shift+Tab")
    assert page.evaluate("document.activeElement.id") == "param-version"
    shown = version.evaluate(ring)
    assert shown != unfocused and shown[0] == "solid" and shown[1] == "2px", (unfocused, shown)


def test_the_resolve_form_says_what_is_required_wrong_and_done(page: Page) -> None:
    open_flow_template(page)
    assert page.locator("#param-version").get_attribute("aria-required") == "true"
    assert page.locator("#param-branch").get_attribute("aria-required") is None
    button = page.locator("form.resolve button[type=submit]")
    page.fill("#param-repo", "acme/tool")
    button.click()
    box = page.locator("[data-testid=resolve-error]")
    box.wait_for(state="visible")
    # The field's problem is read with the field.
    assert page.locator("#param-version").get_attribute("aria-describedby") == box.get_attribute("id")
    said = page.locator("[data-testid=resolve-said]")
    assert said.get_attribute("role") == "status" and said.text_content() == ""
    page.fill("#param-version", "2.0.0")
    button.click()
    page.wait_for_selector("[data-testid=resolved] li")
    steps = page.locator("[data-testid=resolved] li").count()
    assert said.text_content() == f"Resolved {steps} steps, shown below. Nothing was executed."
    assert page.locator("#param-version").get_attribute("aria-describedby") is None


def test_a_files_button_says_which_file_and_whether_it_is_open(page: Page) -> None:
    """Every file's button was named "open": a screen reader's list of buttons could not tell them apart."""
    open_flow_template(page)
    button = page.locator("[data-testid=resource-open]").first
    path = page.locator("[data-testid=resource-open]").first.evaluate("b => b.parentElement.querySelector('code').textContent")
    assert page.get_by_role("button", name=f"open {path}", exact=True).count() == 1
    button.focus()
    page.keyboard.press("Enter")
    page.wait_for_selector("[data-testid=resource-text]:not([hidden])")
    assert button.get_attribute("aria-expanded") == "true"
    assert page.get_by_role("button", name=f"close {path}", exact=True).count() == 1
    assert page.get_by_role("region", name=path).count() == 1  # the text itself: focusable, so a keyboard scrolls it
    page.keyboard.press("Enter")
    assert button.get_attribute("aria-expanded") == "false" and page.locator("[data-testid=resource-text]").is_hidden()


def test_a_flow_templates_parameters_read_at_320_px(browser: Browser, server: str) -> None:
    """At 320 px (or 200% zoom) the six-column parameter table broke every word letter by letter ("ve/rs/io/n"):
    each parameter stacks as labelled lines now, still a table of rows and cells to a screen reader."""
    context = browser.new_context(viewport={"width": 320, "height": 800})
    p = context.new_page()
    try:
        p.goto(server + "/#/?q=cut+a+tagged+release&mode=hybrid&kind=flow_template")
        p.wait_for_selector("body[data-searches]")
        p.locator("[data-testid=result-name]").first.click()
        table = p.locator("[data-testid=parameters]")
        table.wait_for()
        assert p.evaluate("document.documentElement.scrollWidth <= innerWidth")
        lines = table.locator("tbody td").evaluate_all("""tds => tds.filter(td => td.textContent).map(td => {
            const r = document.createRange(); r.selectNodeContents(td.lastChild);
            return [td.textContent, new Set([...r.getClientRects()].map(x => Math.round(x.top))).size]; })""")
        words = {text: n for text, n in lines if " " not in text}  # a single word is never split over lines
        assert words and all(n == 1 for n in words.values()), words
        assert p.get_by_role("table").get_by_role("columnheader").count() == 6
        rows = p.get_by_role("table").get_by_role("row")
        assert all(rows.nth(i).get_by_role("cell").count() == 6 for i in range(1, rows.count()))
    finally:
        context.close()


def test_the_token_box_reads_its_hint_with_the_field(page: Page) -> None:
    """The hint under the token field (which token is in use, how to make one) was not tied to the field."""
    page.keyboard.press("Shift+Tab")  # from the query box, back to the token box's summary
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "token"
    expect(page.locator("#token")).to_have_accessible_name("Bearer token")
    expect(page.locator("#token")).to_have_accessible_description(page.locator("#token-hint").inner_text())


def test_the_token_hint_follows_the_token_in_use(page: Page) -> None:
    """Clearing the demo token, or pasting another, left "Using the demo token ..." beside the box: the reader was
    told a token was in use while every search was refused for want of one."""
    hint = page.locator("#token-hint")
    page.click("#token-summary")
    assert hint.inner_text().startswith("Using the demo token")
    for value, says in (("", "No token: searches are refused. The sample catalog's demo token is demo-token-not-secret."),
                        ("sks_some-other-token", "Using the token you pasted"),
                        ("demo-token-not-secret", "Using the demo token")):
        page.fill("#token", value)
        page.keyboard.press("Tab")  # the field's change
        assert hint.inner_text().startswith(says), (value, hint.inner_text())
        assert page.locator("#token-summary").inner_text() == ("token set" if value else "no token")


def test_a_skill_that_cannot_be_shown_leaves_focus_in_the_query_box(page: Page) -> None:
    """A link to a skill the token does not see (removed since, or another's) hid the focused link and showed
    only the error: focus fell to the body and the next Tab went to the footer."""
    search(page, "profile slow python code")
    link = page.locator("[data-testid=result-name]").first
    link.evaluate("a => a.setAttribute('href', '#/skill/sk_00000000000000000000')")
    link.focus()
    page.keyboard.press("Enter")
    page.locator("#error").wait_for(state="visible")
    assert "NOT_FOUND" in page.locator("#error").inner_text()
    assert page.evaluate("document.activeElement.id") == "q"  # set with the error, in the same task
    assert page.get_by_role("heading", level=1).inner_text() == "Find a skill"
