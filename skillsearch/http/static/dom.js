// The page's DOM helpers: elements built from text (never from markup), the escapes of control and bidi
// characters, and the escaping Markdown renderer every piece of catalog text goes through.

export const $ = (sel) => document.querySelector(sel);

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : document.createTextNode(visible(String(c))));
  }
  return node;
}

// Control characters (but tab and line breaks) and the bidi embeddings, overrides and isolates, shown as
// their escapes, as the CLI shows them (core/wellformed.py, terminal_safe): a skill's instructions and files
// are kept byte for byte, and U+202E there makes "abc\u202egnp.exe" read "abcexe.png", or code read in
// another order than it runs.
const HIDDEN = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]|\r(?!\n)/g;

export function visible(text) {
  return text.replace(HIDDEN, (c) => {
    const code = c.charCodeAt(0);
    return code < 0x100 ? "\\x" + code.toString(16).padStart(2, "0") : "\\u" + code.toString(16).padStart(4, "0");
  });
}

// Catalog text in Japanese, Korean or Chinese, under the page's <html lang="en">, was drawn with another
// language's glyph shapes (Han characters differ between them) and read by a screen reader's English voice.
// Each piece is marked with the language its characters show: any kana is Japanese (its kanji are Han too),
// Hangul Korean, Han without either Chinese; anything else keeps the page's. No API field says the language.
// A piece in Han alone (a Japanese heading "手順", a name "日本語") takes the language of the skill's other text
// (its ``context``) where that is Japanese or Korean.
const KANA = /[\p{Script=Hiragana}\p{Script=Katakana}]/u;
const HANGUL = /\p{Script=Hangul}/u;
const HAN = /\p{Script=Han}/u;

function scriptLang(s) {
  return KANA.test(s) ? "ja" : HANGUL.test(s) ? "ko" : HAN.test(s) ? "zh" : null;
}

export function langOf(text, context = "") {
  const own = scriptLang(String(text ?? ""));
  const around = own === "zh" ? scriptLang(String(context ?? "")) : null;
  return around === "ja" || around === "ko" ? around : own;
}

// The attributes of an element holding one piece of catalog text: its own direction (an Arabic description
// reads right to left on the English page) and, for Japanese, Korean or Chinese, its language.
export function textAttrs(text, context = "") {
  return { dir: "auto", lang: langOf(text, context) };
}

// -- Markdown (a safe subset: headings, lists, code, quotes, emphasis, links) --------------------------

export function inline(text) {
  const out = document.createDocumentFragment();
  const pattern = /(`[^`]+`)|(\*\*[^*]+\*\*)|(\*[^*\s][^*]*\*)|(\[[^\]]+\]\((https?:\/\/[^)\s]+)\))/g;
  let last = 0;
  for (const m of text.matchAll(pattern)) {
    out.append(text.slice(last, m.index));
    if (m[1]) out.append(el("code", {}, m[1].slice(1, -1)));
    else if (m[2]) out.append(el("strong", {}, m[2].slice(2, -2)));
    else if (m[3]) out.append(el("em", {}, m[3].slice(1, -1)));
    else if (m[4]) out.append(el("a", { href: m[5], rel: "noopener noreferrer" }, m[4].slice(1, m[4].indexOf("]"))));
    last = m.index + m[0].length;
  }
  out.append(text.slice(last));
  return out;
}

export function renderMarkdown(source) {
  const root = el("div", { class: "instructions" });
  const lines = visible((source || "").replace(/\r\n?/g, "\n")).split("\n");
  let para = [];
  let list = null;
  const flush = () => {
    if (para.length) root.append(el("p", {}, inline(para.join(" "))));
    para = [];
    list = null;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = line.match(/^\s*(```|~~~)\s*([\w+-]*)/);
    if (fence) {
      flush();
      const body = [];
      for (i++; i < lines.length && !lines[i].trim().startsWith(fence[1]); i++) body.push(lines[i]);
      root.append(el("pre", {}, el("code", { "data-lang": fence[2] || null }, body.join("\n"))));
      continue;
    }
    const heading = line.match(/^(#{1,6})\s+(.*)$/);
    const bullet = line.match(/^\s*[-*+]\s+(.*)$/);
    const numbered = line.match(/^\s*\d+[.)]\s+(.*)$/);
    const quote = line.match(/^>\s?(.*)$/);
    if (heading) {
      flush();
      // Under the view's own h2 ("Instructions", "Notes"): "#" is an h3, so the outline stays one outline.
      root.append(el("h" + Math.min(6, heading[1].length + 2), {}, inline(heading[2])));
    } else if (bullet || numbered) {
      const tag = bullet ? "ul" : "ol";
      if (para.length) { root.append(el("p", {}, inline(para.join(" ")))); para = []; }
      if (!list || list.tagName.toLowerCase() !== tag) { list = el(tag); root.append(list); }
      list.append(el("li", {}, inline((bullet || numbered)[1])));
    } else if (quote) {
      flush();
      root.append(el("blockquote", {}, inline(quote[1])));
    } else if (!line.trim()) {
      flush();
    } else if (list && /^\s+/.test(line)) {
      list.lastChild.append(" ", inline(line.trim()));
    } else {
      list = null;
      para.push(line.trim());
    }
  }
  flush();
  // Each block takes the direction of its own first strong letter (an Arabic or Hebrew paragraph reads right to
  // left, its final "." and its parentheses where its reader expects them); the page's English stays left to right.
  // A list takes its first item's (its items, and their bullets, follow it: an item of its own dir would hide its
  // letters from the list's).
  for (const block of root.querySelectorAll("p, ul, ol, blockquote, h3, h4, h5, h6")) block.dir = "auto";
  for (const block of root.querySelectorAll("p, li, blockquote, h3, h4, h5, h6")) {
    const lang = langOf(block.textContent, source);
    if (lang) block.lang = lang;
  }
  return root;
}

