// The search page: plain DOM, no build step. It calls the same /v1 API as agents, with a bearer token
// (the demo token on the sample catalog, otherwise one pasted into the token box and kept in localStorage).
// Every piece of catalog text is inserted as text or through the escaping Markdown renderer (dom.js).
import { api, call, currentToken, keepToken, showError } from "./api.js";
import { $, el, inline, renderMarkdown, textAttrs, visible } from "./dom.js";
import { flowSection } from "./flow.js";
import { focusLost, oneHeading, opening, refocus } from "./focus.js";
import { PAGE, adoptQueryString, applyState, checkTagBox, formState, linkOf, linkProblem, offerTags, readLink,
  searchParams, setBounds } from "./link.js";
import { focusAfterMore, forgetShown, hideMore, inShownOrder, showMore } from "./more.js";

let searches = 0;  // finished searches, exposed as body[data-searches] so tests can wait for the next one

// -- views ---------------------------------------------------------------------------------------------

function fmt(x, digits = 3) {
  return x === null || x === undefined ? "–" : Number(x).toFixed(digits);
}

function whyLine(e) {
  const parts = [
    e.lexical_rank ? `lexical #${e.lexical_rank} (BM25 ${fmt(e.lexical_score, 2)})` : "lexical: no match",
    e.semantic_rank ? `semantic #${e.semantic_rank} (cos ${fmt(e.semantic_score)})`
      : e.semantic_score !== null && e.semantic_score !== undefined ? `semantic: outside top (cos ${fmt(e.semantic_score)})`
        : "semantic: off",
    `fused ${fmt(e.fused_score)}` + (e.fusion ? ` (${e.fusion}, semantic weight ${e.semantic_weight})` : ""),
  ];
  return "why: " + parts.join(" · ");
}

// The number WEAK_CONFIDENCE holds in skillsearch/core/views.py: under it, read a hit's description first.
const WEAK_CONFIDENCE = 0.5;

// As the CLI prints it (cli/catalog.py, shown): "<0.01" rather than a row of "0.00".
function shownConfidence(c) {
  return c < 0.005 ? "<0.01" : fmt(c, 2);
}

// A weak confidence says so in words too, not by its colour alone.
function confidenceBadge(c) {
  if (c === null || c === undefined) return null;
  const weak = c < WEAK_CONFIDENCE;
  return el("span", { class: "confidence" + (weak ? " weak" : ""), "data-testid": "confidence",
    title: "the probability, fitted on labelled requests, that this is the skill asked for" },
  `confidence ${shownConfidence(c)}` + (weak ? " (weak)" : ""));
}

function advice(data) {
  // What to make of the answer beyond its hits: the language notice, a weak best hit, a lone hit.
  const top = data.hits.length ? data.hits[0].confidence : null;
  if (data.notice) {
    // The API's notice is written for whoever runs the server; the reader gets what it means for them.
    return [
      "This request does not read as English, and this catalog's search reads English only: the results share " +
        "words with it, but their meaning was not compared. Try it in English, or ask whoever runs this catalog " +
        "to turn on multilingual search.",
      el("details", { class: "operator" }, el("summary", {}, "How to turn it on"), el("p", {}, inline(data.notice))),
    ];
  }
  if (top !== null && top !== undefined && top < WEAK_CONFIDENCE) {
    return `Weak match: the first result's confidence is ${shownConfidence(top)}. Read its description before you ` +
      "rely on it; nothing in the catalog may fit.";
  }
  if (data.hits.length === 1) {
    return "This is the only skill you can see that matched: its score ranks it against no other result, " +
      "so judge it by its description.";
  }
  return "";
}

function showAdvice(content) {
  const box = $("#advice");
  box.replaceChildren(...[content || []].flat());
  box.hidden = !content || !content.length;
}

// The first screen: what to type, with a few requests to start from on the bundled sample catalog.
let examples = [];

function showIntro() {
  const intro = $("#intro");
  intro.replaceChildren(el("p", {}, "Describe what you need to do in a sentence, as you would ask a colleague. " +
    "Each result says why it ranked where it did and how confident the match is."));
  if (examples.length) {
    intro.append(el("p", {}, "Try: ", examples.map((q, i) => [i ? " · " : "",
      el("a", { href: "#/?" + new URLSearchParams({ q, mode: "hybrid" }), "data-testid": "example" }, q)])));
  }
  intro.hidden = false;
}

// A skill's tags; on a result, each is a link to the same search with that tag added as a filter. Out of the Tab
// order (a keyboard user goes from result to result; the tag box filters by any tag), read and followed by a
// screen reader as links.
function tagList(tags, state = null, context = "") {
  const item = (t) => !state || state.tags.includes(t) ? t
    : el("a", { href: linkOf({ ...state, tags: [...state.tags, t], limit: PAGE }), tabindex: "-1",
      "data-testid": "tag-link", title: `only skills tagged ${t}` }, t);
  return el("ul", { class: "tags", "data-testid": "tags" }, tags.map((t) => el("li", textAttrs(t, context), item(t))));
}

function kindBadge(kind) {
  return el("span", { class: "kind " + kind, "data-testid": "kind" }, kind === "flow_template" ? "flow template" : kind);
}

async function showChanged() {
  // When the catalog last changed (a sync, an import, a watched folder): from /readyz, no token needed.
  try {
    const ready = await (await fetch("/readyz")).json();
    $("#changed").textContent = ready.changed_at
      ? `Catalog last changed ${new Date(ready.changed_at).toLocaleString()} · ` : "";
    $("#changed").title = ready.changed_at || "";
  } catch (_) { /* the page works without it */ }
}

// A search still unanswered after this long is most often the first one after the server started, waiting for
// its model and index to load (the server bounds that wait, then answers INDEX_NOT_READY): the status says so.
const SLOW_MS = 3000;

async function runSearch(state, view) {
  $("#detail-view").hidden = true;
  $("#results-view").hidden = false;
  oneHeading();
  // Said as the link's fault, the form on what it offers: the kind box went blank and the previous view's mode
  // stayed checked beside the server's refusal, so the form showed another search than the one refused.
  const wrong = linkProblem(state);
  applyState(wrong ? { q: state.q } : state);
  const results = $("#results");
  showAdvice("");
  $("#intro").hidden = true;
  if (wrong || !state.q) {
    results.replaceChildren();
    hideMore();
    forgetShown();
    $("#status").textContent = "";
    if (wrong) showError({ code: "INVALID_LINK", message: wrong }); else showIntro();
    refocus(results);
    return;
  }
  state = { ...state, limit: Number(state.limit) };
  const params = searchParams(state);
  $("#status").textContent = "searching…";
  const slow = setTimeout(() => {
    if (view === views) {
      $("#status").textContent = "still searching… a server that has just started loads its model and index " +
        "first: this can take up to a minute.";
    }
  }, SLOW_MS);
  try {
    const data = await api("/v1/search?" + params);
    if (view !== views) return;  // replaced while it waited: shown, it would answer another request
    showError(null);
    const hits = inShownOrder(state, data.hits);
    results.replaceChildren(...hits.map((h, i) => el("li", { class: "hit", "data-testid": "result" },
      el("h2", {}, el("span", { class: "rank" }, `${i + 1}.`),
        el("a", { href: "#/skill/" + encodeURIComponent(h.skill_id), "data-testid": "result-name",
          ...textAttrs(h.name, h.description) }, h.name),
        kindBadge(h.kind), confidenceBadge(h.confidence)),
      el("p", { class: "desc", ...textAttrs(h.description, h.name) }, h.description),
      tagList(h.tags, state, h.name + " " + h.description),
      el("p", { class: "why", "data-testid": "why" }, whyLine(h.explanation)))));
    showAdvice(advice(data));
    offerTags(hits);
    showMore(state, data.hits.length, hits.length);
    if (!focusAfterMore(results)) refocus(results);
    $("#status").textContent = data.no_match
      ? "No good match. " + (data.no_match_message || "Nothing you can see is close enough to this request.")
      : `${hits.length} result${hits.length === 1 ? "" : "s"}` +
        (state.tags.length ? ` tagged ${state.tags.join(", ")}` : "") + ` · ${data.mode}` +
        (data.fusion ? ` (${data.fusion})` : "") + ` · ${fmt(data.took_ms, 1)} ms`;
  } catch (err) {
    if (view !== views) return;
    results.replaceChildren();
    hideMore();
    forgetShown();
    $("#status").textContent = "";
    showError(err);
    refocus(results);
  } finally {
    clearTimeout(slow);
    // Counted shown or not, so a test can wait for a replaced search's answer too.
    document.body.dataset.searches = String(++searches);
  }
  await showChanged();
}

// One file of the skill: "open" fetches its bytes (with the token) and shows UTF-8 text in place, as text
// (never as markup); anything else is saved as a download under its own name.
function resourceItem(d, r) {
  // Focusable, so a keyboard can scroll a long file's text.
  const shown = el("pre", { class: "resource-text", "data-testid": "resource-text", hidden: true, tabindex: "0",
    role: "region", "aria-label": r.path });
  // Its name says which file: a list of buttons each called "open" tells a screen reader nothing.
  const label = (verb) => { open.textContent = verb; open.setAttribute("aria-label", `${verb} ${r.path}`); };
  const open = el("button", { type: "button", class: "resource-open", "data-testid": "resource-open",
    "aria-label": `open ${r.path}`, onclick: async () => {
      if (!shown.hidden) { shown.hidden = true; label("open"); open.setAttribute("aria-expanded", "false"); return; }
      try {
        const resp = await call("/v1/skills/" + encodeURIComponent(d.skill_id) + "/resources/" +
          r.path.split("/").map(encodeURIComponent).join("/"));
        showError(null);
        if (/;\s*charset="?utf-8"?/i.test(resp.headers.get("content-type") || "")) {
          shown.textContent = visible(await resp.text());
          shown.hidden = false;
          label("close");
          open.setAttribute("aria-expanded", "true");
        } else {
          const url = URL.createObjectURL(await resp.blob());
          const link = el("a", { href: url, download: r.path.split("/").pop() });
          document.body.append(link);
          link.click();
          link.remove();
          setTimeout(() => URL.revokeObjectURL(url), 10000);
        }
      } catch (err) {
        showError(err);
      }
    } }, "open");
  return el("li", {}, el("code", {}, r.path), ` (${r.kind}, ${r.media_type}, ${r.size} bytes) `, open, shown);
}

// Back to the results this page showed before, or, for a skill's link opened on its own (shared, bookmarked,
// a new tab), to the search box: history.back() would leave the page then.
function backLink() {
  if (!movedWithin) return el("a", { class: "back", href: "#/" }, "← search");
  return el("a", { class: "back", href: "#/", onclick: (ev) => { ev.preventDefault(); history.back(); } },
    "← back to results");
}

async function showSkill(skillId, view) {
  $("#results-view").hidden = true;
  const box = $("#detail-view");
  box.hidden = false;
  opening(skillId);
  box.replaceChildren(el("p", { class: "status" }, "loading…"));
  try {
    const d = await api("/v1/skills/" + encodeURIComponent(skillId));
    if (view !== views) return;
    showError(null);
    document.title = d.name + " · skillsearch";
    box.replaceChildren(...[
      backLink(),
      el("h1", { "data-testid": "detail-name", tabindex: "-1", ...textAttrs(d.name, d.description) }, d.name),
      kindBadge(d.kind), tagList(d.tags, null, d.name + " " + d.description),
      el("p", { class: "desc", ...textAttrs(d.description, d.name) }, d.description),
      el("p", { class: "meta" }, `slug ${d.slug} · version ${d.version || "–"} · revision ${d.revision_id} · updated ${d.updated_at}`),
      d.kind === "flow_template" ? flowSection(d) : [],
      d.instructions ? [el("h2", {}, d.kind === "flow_template" ? "Notes" : "Instructions"), renderMarkdown(d.instructions)] : [],
      d.resources.length ? [el("h2", {}, "Resources"), el("ul", {}, d.resources.map((r) => resourceItem(d, r)))] : [],
    ].flat());
    box.querySelector(".instructions")?.setAttribute("data-testid", "instructions");
    oneHeading();
    box.querySelector("h1").focus();  // a keyboard or screen-reader user lands on what opened
  } catch (err) {
    if (view !== views) return;
    box.replaceChildren();
    oneHeading();
    showError(err);
    if (focusLost()) $("#q").focus();  // the link that opened it is hidden: back to where a search starts
  }
}

// -- routing: #/?q=...&mode=...&kind=... and #/skill/<id> -------------------------------------------------

// A link's skill id, or null when its percent-encoding is malformed (#/skill/%E0%A4%A).
function linkedSkillId(encoded) {
  try { return decodeURIComponent(encoded); } catch (_) { return null; }
}

function showBadLink(message) {
  $("#results-view").hidden = true;
  $("#detail-view").hidden = false;
  $("#detail-view").replaceChildren();
  oneHeading();
  showError({ code: "INVALID_LINK", message });
  if (focusLost()) $("#q").focus();
}

// Each route() is a new view; an answer that arrives after the next one began is not shown.
let views = 0;
// Whether this page has moved from one of its views to another (a hashchange): then the history entry
// before this one is one of its own.
let movedWithin = false;

function route() {
  const view = ++views;
  const hash = location.hash.replace(/^#/, "") || "/";
  if (hash.startsWith("/skill/")) {
    const skillId = linkedSkillId(hash.slice("/skill/".length));
    if (skillId === null) return showBadLink("this link's skill id is not valid percent-encoded text.");
    return showSkill(skillId, view);
  }
  const query = hash.includes("?") ? hash.slice(hash.indexOf("?") + 1) : "";
  document.title = "skillsearch";
  return runSearch(readLink(query), view);
}

// route(), with anything it did not expect shown as the page's error rather than left blank.
async function safeRoute() {
  try { await route(); } catch (err) { showError({ code: "ERROR", message: String((err && err.message) || err) }); }
}

// The sample catalog's demo token, while the server offers one (/ui/config).
let demoToken = null;

// What the token box says of the token every call sends: it changes with the token (clearing the demo token
// left "Using the demo token" beside an empty box, and a pasted one kept it too).
function tokenHint(token) {
  if (token && token === demoToken) {
    return "Using the demo token of the bundled sample catalog: it sees sub:starter-pack and team:data-science, " +
      "not sub:ops-pro.";
  }
  if (token) return "Using the token you pasted, kept in this browser until you clear this box.";
  return demoToken ? `No token: searches are refused. The sample catalog's demo token is ${demoToken}.`
    : "No token: searches are refused. Create one with: skillsearch token add NAME --grant sub:<id>";
}

function setToken(value) {
  const token = keepToken(value);
  $("#token").value = token;
  $("#token-summary").textContent = token ? "token set" : "no token";
  $("#token-hint").textContent = tokenHint(token);
}

async function init() {
  adoptQueryString();
  try {
    const config = await (await fetch("/ui/config")).json();
    if (config.demo_token) examples = config.examples || [];
    setBounds(config.search);
    demoToken = config.demo_token || null;
    if (demoToken && !currentToken()) keepToken(demoToken);
  } catch (_) { /* the page still works with a pasted token */ }
  setToken(currentToken());
  $("#token-form").addEventListener("submit", (ev) => { ev.preventDefault(); $("#token").blur(); });
  $("#token").addEventListener("change", (ev) => { setToken(ev.target.value); safeRoute(); });
  $("#search-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const target = linkOf(formState());
    if (location.hash === target) safeRoute(); else location.hash = target;
  });
  for (const radio of document.querySelectorAll("input[name=mode]")) {
    radio.addEventListener("change", () => { if ($("#q").value.trim()) $("#search-form").requestSubmit(); });
  }
  $("#kind").addEventListener("change", () => { if ($("#q").value.trim()) $("#search-form").requestSubmit(); });
  $("#tag").addEventListener("input", checkTagBox);
  window.addEventListener("hashchange", () => { movedWithin = true; safeRoute(); });
  await showChanged();
  await safeRoute();
  document.body.dataset.ready = "true";
}

init();
