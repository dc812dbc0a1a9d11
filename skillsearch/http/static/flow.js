// A flow template's part of a skill's view: its parameters, its steps, and the form that resolves them
// (POST /v1/skills/{id}/resolve; nothing is ever executed).
import { api, errorContent, showError } from "./api.js";
import { el, textAttrs } from "./dom.js";

function parameterInput(p) {
  const id = "param-" + p.name;
  let input;
  if (p.enum && p.enum.length) {
    input = el("select", { id, name: p.name },
      p.required ? null : el("option", { value: "" }, "(default)"),
      p.enum.map((v) => el("option", { value: JSON.stringify(v), selected: v === p.default }, String(v))));
    input.dataset.json = "1";
  } else if (p.type === "boolean") {
    input = el("select", { id, name: p.name }, el("option", { value: "" }, "(default)"),
      el("option", { value: "true" }, "true"), el("option", { value: "false" }, "false"));
  } else {
    input = el("input", { id, name: p.name, type: p.type === "string" ? "text" : "number",
      step: p.type === "number" ? "any" : null, placeholder: p.default !== null ? String(p.default) : "" });
  }
  input.dataset.type = p.type;
  if (p.required) input.setAttribute("aria-required", "true");  // not `required`: the server says what is missing
  return [el("label", { for: id }, p.name + (p.required ? " *" : "")), input];
}

function collectValues(form) {
  const values = {};
  for (const input of form.querySelectorAll("input, select")) {
    const raw = input.value;
    if (raw === "") continue;
    const type = input.dataset.type;
    if (input.dataset.json) values[input.name] = JSON.parse(raw);
    else if (type === "integer" || type === "number") values[input.name] = Number(raw);
    else if (type === "boolean") values[input.name] = raw === "true";
    else values[input.name] = raw;
  }
  return values;
}

export function flowSection(d) {
  const out = [];
  out.push(el("h2", {}, "Parameters"));
  // On a narrow screen (app.css) each row stacks as "name: value" lines: the roles keep it a table to a screen
  // reader then, and data-label names each value.
  const columns = ["name", "type", "required", "default", "allowed", "description"];
  const row = (cells) => el("tr", { role: "row" },
    cells.map((c, i) => el("td", { role: "cell", "data-label": columns[i],
      ...(columns[i] === "description" ? textAttrs(c, d.name + " " + d.description) : {}) }, c)));
  out.push(el("table", { class: "params", "data-testid": "parameters", role: "table" },
    el("thead", { role: "rowgroup" },
      el("tr", { role: "row" }, columns.map((h) => el("th", { role: "columnheader" }, h)))),
    el("tbody", { role: "rowgroup" }, (d.parameters || []).map((p) => row([
      el("code", {}, p.name), p.type, p.required ? "yes" : "no",
      p.default === null || p.default === undefined ? "" : JSON.stringify(p.default),
      p.enum ? p.enum.map(String).join(", ") : "", p.description || ""])))));
  out.push(el("h2", {}, "Steps"));
  const steps = el("ol", { class: "steps", "data-testid": "steps" },
    (d.steps || []).map((s) => el("li", {}, el("code", {}, s.tool), el("pre", {}, JSON.stringify(s.args)))));
  out.push(steps);
  const result = el("div", { "data-testid": "resolved" });
  // Said to a screen reader when the steps resolve (an error is said by the alert below).
  const said = el("p", { class: "visually-hidden", role: "status", "data-testid": "resolve-said" });
  // A resolve error shows here, beside the button that caused it (the page's error box is far above).
  const problems = el("div", { class: "error", role: "alert", id: "resolve-problems", "data-testid": "resolve-error",
    hidden: true });
  const form = el("form", { class: "resolve" }, (d.parameters || []).map(parameterInput),
    el("button", { type: "submit" }, "Resolve steps"));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    for (const input of form.querySelectorAll("[aria-invalid]")) {
      input.removeAttribute("aria-invalid");
      input.removeAttribute("aria-describedby");
    }
    try {
      const flow = await api(`/v1/skills/${encodeURIComponent(d.skill_id)}/resolve`, {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ parameters: collectValues(form) }),
      });
      showError(null);
      problems.hidden = true;
      said.textContent = `Resolved ${flow.steps.length} steps, shown below. Nothing was executed.`;
      result.replaceChildren(el("h3", {}, "Resolved (nothing was executed)"),
        el("ol", { class: "steps" }, flow.steps.map((s) => el("li", {}, el("code", {}, s.tool),
          el("pre", {}, JSON.stringify(s.args))))));
    } catch (err) {
      result.replaceChildren();
      said.textContent = "";
      problems.replaceChildren(...errorContent(err));
      problems.hidden = false;
      for (const p of (err.details && err.details.problems) || []) {
        // Over HTTP a parameter's problem is located in the body: body.parameters.<name>.
        const name = typeof p === "object" && String(p.field || "").startsWith("body.parameters.")
          ? p.field.slice("body.parameters.".length) : null;
        const input = name ? form.querySelector(`[name="${CSS.escape(name)}"]`) : null;
        if (input) {
          input.setAttribute("aria-invalid", "true");
          input.setAttribute("aria-describedby", problems.id);  // read with the field: what is wrong with it
        }
      }
      problems.scrollIntoView({ block: "nearest" });
    }
  });
  out.push(el("h2", {}, "Try it"), form, said, problems, result);
  return out;
}

