// A search as the page keeps it in its link, #/?q=...&mode=...&kind=...&tag=...&limit=...: read from the link,
// checked against what the form and the API offer, shown on the form (and its tag filter), and written back.
import { $, el } from "./dom.js";

// The first answer's limit, and how many more each "Show more" asks for.
export const PAGE = 10;

// The API's bounds on a search (/v1/search: limit, tag; sent by /ui/config); these defaults are the API's own.
const bounds = { max_limit: 100, max_tags: 16, max_tag_chars: 64 };

export function setBounds(given) {
  for (const key of Object.keys(bounds)) {
    if (given && Number.isInteger(given[key]) && given[key] > 0) bounds[key] = given[key];
  }
}

export function maxLimit() {
  return bounds.max_limit;
}

// The state a link says; its limit stays text until linkProblem() has checked it.
export function readLink(query) {
  const p = new URLSearchParams(query);
  return { q: p.get("q") || "", mode: p.get("mode") || "hybrid", kind: p.get("kind") || "", tags: p.getAll("tag"),
    limit: p.has("limit") ? p.get("limit") : String(PAGE) };
}

export function linkOf(state) {
  const p = new URLSearchParams({ q: state.q, mode: state.mode || "hybrid" });
  if (state.kind) p.set("kind", state.kind);
  for (const t of state.tags || []) p.append("tag", t);
  if (state.limit && Number(state.limit) !== PAGE) p.set("limit", String(state.limit));
  return "#/?" + p;
}

// /v1/search's query for a checked state.
export function searchParams(state) {
  const p = new URLSearchParams({ q: state.q, mode: state.mode, limit: String(state.limit) });
  if (state.kind) p.set("kind", state.kind);
  for (const t of state.tags) p.append("tag", t);
  return p;
}

const chars = (text) => [...text].length;  // as the API counts them: a character outside the BMP is one

// Why a link's state is not one the form offers or the API takes (#/?mode=bogus, a tag of 65 characters, limit=abc:
// a hand-edited or truncated link), else null.
export function linkProblem(state) {
  const modes = [...document.querySelectorAll("input[name=mode]")].map((r) => r.value);
  const kinds = [...$("#kind").options].map((o) => o.value);
  const pick = " Choose one above and search again.";
  if (!modes.includes(state.mode)) return `this link's mode "${state.mode}" is not one of ${modes.join(", ")}.` + pick;
  if (!kinds.includes(state.kind)) return `this link's kind "${state.kind}" is not one of ${kinds.filter(Boolean).join(", ")}.` + pick;
  const again = " Search again, adding a tag from a result or the tag box.";
  if (state.tags.length > bounds.max_tags) return `this link names ${state.tags.length} tags; a search takes at most ${bounds.max_tags}.` + again;
  const empty = state.tags.find((t) => !t.trim());
  if (empty !== undefined) return "this link names an empty tag." + again;
  const long = state.tags.find((t) => chars(t) > bounds.max_tag_chars);
  if (long !== undefined) {
    return `this link's tag "${[...long].slice(0, 24).join("")}…" is longer than a tag can be (${bounds.max_tag_chars} characters).` + again;
  }
  if (!/^[0-9]{1,6}$/.test(state.limit) || Number(state.limit) < 1 || Number(state.limit) > bounds.max_limit) {
    return `this link's limit "${state.limit}" is not a whole number from 1 to ${bounds.max_limit}.` +
      " Search again, then ask for more results below them.";
  }
  return null;
}

// The tags the form filters by (the last link's), each shown with a button that removes it.
let tags = [];

// A tag as the API compares it (core/domain.tag_key: NFKC, case-folded): "ＰＹＴＨＯＮ" typed beside the filter
// "python" is the same tag, not a second one. JavaScript has no full case fold (Python's casefold() makes "ß"
// "ss"); toLowerCase() is the nearest it has.
const tagKey = (t) => t.normalize("NFKC").toLowerCase();

// The tag box's bound, counted as the API counts it: in characters, an emoji one. The input's maxlength counted
// UTF-16 units (an emoji two) and cut a tag of 64 emoji to 32; now the form is not sent while the box holds a
// longer tag, and the browser says why.
export function checkTagBox() {
  const box = $("#tag");
  const n = chars(box.value.trim());
  const max = bounds.max_tag_chars;
  box.setCustomValidity(n > max ? `A tag is at most ${max} characters; this one has ${n}.` : "");
}

export function formState() {
  const mode = document.querySelector("input[name=mode]:checked").value;
  const typed = $("#tag").value.trim();
  const more = typed && !tags.some((t) => tagKey(t) === tagKey(typed)) ? [typed] : [];
  return { q: $("#q").value.trim(), mode, kind: $("#kind").value, tags: [...tags, ...more], limit: PAGE };
}

export function applyState(state) {
  $("#q").value = state.q || "";
  // Compared as a value, never put into a selector: the hash is anyone's text (#/?mode=%22%5D).
  const mode = state.mode || "hybrid";
  const radio = [...document.querySelectorAll("input[name=mode]")].find((r) => r.value === mode);
  if (radio) radio.checked = true;
  $("#kind").value = state.kind || "";
  $("#tag").value = "";
  checkTagBox();
  tags = state.tags || [];
  const chips = $("#tag-chips");
  chips.replaceChildren(...tags.map((t) => el("li", {}, el("button", {
    type: "button", class: "chip", "data-testid": "tag-remove", "aria-label": `remove the tag filter ${t}`, dir: "auto",
    onclick: () => {
      tags = tags.filter((x) => x !== t);
      $("#tag").focus();  // where the next tag is typed: this button is gone once the search is sent
      $("#search-form").requestSubmit();
    } }, t, el("span", { "aria-hidden": "true" }, " ×")))));
  $("#tag-filter-said").hidden = !tags.length;
}

// The tags of the results shown, offered as the tag box's suggestions.
export function offerTags(hits) {
  const chosen = new Set(tags.map(tagKey));
  const offered = [...new Set(hits.flatMap((h) => h.tags || []))].filter((t) => !chosen.has(tagKey(t))).sort();
  $("#tag-options").replaceChildren(...offered.map((t) => el("option", { value: t })));
}

// A search as the page's link: the form sent without script, a link written by hand or by a browser's site search
// (/?q=...&mode=...) becomes #/?q=..., so it searches rather than showing an empty box.
export function adoptQueryString() {
  const given = new URLSearchParams(location.search);
  if (!given.has("q") || location.hash.length > 1) return;
  const state = readLink(given);
  history.replaceState(null, "", location.pathname + linkOf({ ...state, q: state.q.trim() }));
}
