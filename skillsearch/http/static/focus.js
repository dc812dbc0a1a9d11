// Where focus and the h1 go when the page changes view, for a keyboard or screen-reader user: a skill's view
// has its name as the h1 (app.js focuses it), the search view the page's own; back on the results, focus
// returns to the link of the skill that was opened.
import { $ } from "./dom.js";

// One h1 at a time: the page's own ("Find a skill") unless a skill's view shows its name as one.
export function oneHeading() {
  $("#page-heading").hidden = !$("#detail-view").hidden && !!$("#detail-view h1");
}

// The skill whose view was opened last.
let opened = null;

export function opening(skillId) {
  opened = skillId;
}

// Whether the change of view left focus nowhere: on the body, or inside a view now hidden (the link that
// opened a skill, the back link, an example request).
export function focusLost() {
  const active = document.activeElement;
  return !active || active === document.body || !!active.closest("[hidden]");
}

// After the results are shown: focus left nowhere goes to the opened skill's link among them, else to the
// query box. Focus the reader put somewhere else stays there.
export function refocus(results) {
  const href = opened === null ? null : "#/skill/" + encodeURIComponent(opened);
  const link = [...results.querySelectorAll("a[href]")].find((a) => a.getAttribute("href") === href);
  opened = null;
  if (focusLost()) (link || $("#q")).focus();
}
