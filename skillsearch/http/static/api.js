// The page's calls of the /v1 API: with its bearer token (kept in localStorage), an error answer thrown as an
// ApiError, and an error shown as the page shows every error.
import { $, el } from "./dom.js";

const TOKEN_KEY = "skillsearch.token";
let token = localStorage.getItem(TOKEN_KEY) || "";

export function currentToken() {
  return token;
}

// The token every later call sends (an empty value forgets it); returns it trimmed.
export function keepToken(value) {
  token = value.trim();
  if (token) localStorage.setItem(TOKEN_KEY, token); else localStorage.removeItem(TOKEN_KEY);
  return token;
}

// Reason phrases, for an answer that came without one (HTTP/2 has none).
const REASONS = { 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
  408: "Request Timeout", 413: "Content Too Large", 429: "Too Many Requests", 500: "Internal Server Error",
  502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout" };

// An error answer without the API's error object (a proxy's HTML page for a 502, an empty 500) said in a
// sentence: "HTTP_502: request failed" told the reader nothing.
function unexplained(status, reason) {
  const said = `the server, or a proxy in front of it, answered ${status} ${reason || REASONS[status] || ""}`.trimEnd() +
    " without saying why.";
  if ([502, 503, 504].includes(status)) {
    return said + " The service behind it may be stopped or restarting: try again in a moment, and if it lasts, " +
      "tell whoever runs it.";
  }
  return said + (status >= 500 ? " Try again; if it keeps happening, tell whoever runs this server." : "");
}

export class ApiError extends Error {
  constructor(status, body, reason = "") {
    // Only the API's own error object is read as one: a proxy's JSON ({"error": "Bad Gateway"}) is not.
    const own = body && typeof body.error === "object" && body.error && typeof body.error.code === "string";
    const err = own ? body.error : { code: "HTTP_" + status, message: unexplained(status, reason) };
    super(err.message);
    this.status = status;
    this.code = err.code;
    this.details = err.details || {};
  }
}

// A call with the page's token; an error answer thrown as an ApiError. No answer at all (the server
// stopped, the network down) is one too, saying so: the browser's own words ("Failed to fetch") do not.
export async function call(path, options = {}) {
  const headers = { ...(options.headers || {}) };
  if (token) headers.Authorization = "Bearer " + token;
  let resp;
  try {
    resp = await fetch(path, { ...options, headers });
  } catch (_) {
    throw new ApiError(0, { error: { code: "SERVER_UNREACHABLE", message: "the server did not answer: it may " +
      "be stopped or restarting, or the network is down. Try again in a moment." } });
  }
  if (!resp.ok) {
    let body = null;
    try { body = await resp.json(); } catch (_) { body = null; }
    throw new ApiError(resp.status, body, resp.statusText);
  }
  return resp;
}

export async function api(path, options = {}) {
  const resp = await call(path, { ...options, headers: { Accept: "application/json", ...(options.headers || {}) } });
  try { return await resp.json(); } catch (_) { return null; }
}

// One problem of details.problems ({field, message, code?}) as a sentence: the message, led by the field
// when the message does not already name it.
function problemText(p) {
  if (typeof p === "string") return p;
  const field = String(p.field || "").split(".").pop();
  const message = String(p.message || "");
  return field && !message.includes(field) ? `${field}: ${message}` : message;
}

export function errorContent(err) {
  const problems = (err.details && err.details.problems) || [];
  const out = [el("strong", {}, err.code || "ERROR")];
  // A validation error's message repeats its problems: show the list alone then.
  out.push(": ", problems.length ? "please check the values below." : err.message);
  if (err.code === "UNAUTHENTICATED") out.push(" — open the token box at the top right and paste a token.");
  if (problems.length) out.push(el("ul", {}, problems.map((p) => el("li", {}, problemText(p)))));
  return out;
}

export function showError(err) {
  const box = $("#error");
  box.replaceChildren();
  if (!err) { box.hidden = true; return; }
  box.append(...errorContent(err));
  box.hidden = false;
}

