// "Show more": the same search asked again with a larger limit (up to the API's), its list kept in the order it
// was shown (a larger limit may rank a few hits differently: what the reader has seen never reshuffles) with the
// new hits after it, and a line at the end that says when there are no more.
import { $ } from "./dom.js";
import { PAGE, linkOf, maxLimit } from "./link.js";

// The list shown last, and the search it answered (all but its limit).
let shown = { key: null, ids: [] };

const searchKey = (state) => JSON.stringify([state.q, state.mode, state.kind, state.tags]);

// The hits to show for an answer: those of the same search shown before keep their places (those still in it),
// the others follow in the answer's order.
export function inShownOrder(state, hits) {
  const key = searchKey(state);
  let out = hits;
  if (shown.key === key) {
    const now = new Map(hits.map((h) => [h.skill_id, h]));
    const before = shown.ids.filter((id) => now.has(id));
    const kept = new Set(before);
    out = [...before.map((id) => now.get(id)), ...hits.filter((h) => !kept.has(h.skill_id))];
  }
  shown = { key, ids: out.map((h) => h.skill_id) };
  return out;
}

export function forgetShown() {
  shown = { key: null, ids: [] };
}

// The link "Show more" went to, and how many results were shown when it was pressed.
let asked = null;

// Below the results: the button while there may be more, else the line saying why there are none.
export function showMore(state, answered, count) {
  const box = $("#more-box");
  const button = $("#more");
  const note = $("#more-note");
  const limit = Number(state.limit);
  box.hidden = count === 0;
  const complete = answered < limit;
  const capped = !complete && limit >= maxLimit();
  button.hidden = complete || capped;
  button.onclick = () => {
    asked = { link: linkOf({ ...state, limit: Math.min(limit + PAGE, maxLimit()) }), from: count };
    location.hash = asked.link;
  };
  note.hidden = !button.hidden;
  note.textContent = complete
    ? `No more results: ${count === 1 ? "this is the only one" : `all ${count} are shown`}.`
    : capped ? `A search shows at most ${maxLimit()} results: add a tag or a kind, or reword the request, to see others.`
      : "";
}

export function hideMore() {
  $("#more-box").hidden = true;
}

// After an answer to "Show more": focus goes to the first result it added, or, when it added none, to the line
// saying so, so a keyboard or screen-reader user goes on reading from where the list grew. Returns whether it moved.
export function focusAfterMore(results) {
  const was = asked;
  asked = null;
  if (!was || location.hash !== was.link) return false;
  const links = results.querySelectorAll("[data-testid=result-name]");
  const target = links.length > was.from ? links[was.from] : !$("#more-note").hidden ? $("#more-note") : null;
  if (target) target.focus();
  return !!target;
}
