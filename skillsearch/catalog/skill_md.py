"""SKILL.md: reading its YAML front matter, and writing one deterministically (PyYAML's home).

The MCP Skills extension serves every skill as a ``SKILL.md`` whose front matter a host compares, field by
field, with the listing's ``frontmatter``, and whose bytes it checks against a digest. So the bytes served
must be a pure function of the stored revision:

- a revision that carries the authored ``skill_md`` (a folder import, or upstream's ``skill_md``) is served
  byte for byte, except when its ``name`` is not the skill's slug: the extension's URI ends with the name and
  the name must follow the Agent Skills naming rules, so then only the ``name:`` line is rewritten to the
  slug (everything else stays as authored), or, when that line cannot be rewritten alone, the front matter is
  written again with ``name`` = slug and the body is kept;
- any other revision (a bundle entry, a flow template, an upstream revision without ``skill_md``) is rendered:
  front matter ``name`` = slug, ``description``, then the rest of its authored ``frontmatter``; the body is
  the instructions, or for a flow template its parameters and steps as markdown (the machine-readable form is
  the ``assets/template.json`` resource (``assets/`` is where Agent Skills keep templates), :func:`template_json`).

Front matter from outside is hostile: aliases are refused (``yaml.safe_load`` would expand a few hundred bytes
into a billion objects) and values are reduced to JSON (dates become ISO strings, other tags their text).
"""

from __future__ import annotations

import datetime
import json
import re
from dataclasses import dataclass
from typing import Any

import yaml

from skillsearch.core.domain import Revision

__all__ = [
    "FRONT_MATTER",
    "FrontMatterError",
    "ServedSkillMd",
    "load_front_matter",
    "parse_skill_md",
    "render_skill_md",
    "served_skill_md",
    "template_json",
]

FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)(.*)\Z", re.DOTALL)
_NAME_LINE = re.compile(r"^name:[ \t]*(?P<value>[^\r\n]*)$", re.MULTILINE)
MAX_FRONT_MATTER = 64 * 1024


class FrontMatterError(ValueError):
    """The text has no usable YAML front matter; the message says why (and where, when YAML knows)."""


class _NoAliasLoader(yaml.SafeLoader):  # type: ignore[misc]
    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed", event.start_mark)
        return super().compose_node(parent, index)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    if value is None or isinstance(value, bool | int | float | str):
        if isinstance(value, float) and value != value:  # NaN is not JSON
            return str(value)
        return value
    return str(value)


def load_front_matter(yaml_text: str) -> dict[str, Any]:
    """The front matter block as a JSON object; :class:`FrontMatterError` when it is not a mapping."""
    if len(yaml_text) > MAX_FRONT_MATTER:
        raise FrontMatterError(f"front matter is over {MAX_FRONT_MATTER} characters")
    # The block ends with the line break before the closing '---': without it, PyYAML would drop the final
    # line break of a block scalar (``description: |``) that other parsers (the JavaScript ``yaml`` hosts use)
    # keep, and the host's front matter would differ from the listing's.
    try:
        meta = yaml.load(yaml_text + "\n", Loader=_NoAliasLoader)  # a SafeLoader that refuses aliases
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        raise FrontMatterError(f"bad front matter{where}: {getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(meta, dict):
        raise FrontMatterError("bad front matter: expected a mapping of keys to values")
    out = _jsonable(meta)
    assert isinstance(out, dict)
    return out


def parse_skill_md(text: str) -> tuple[dict[str, Any], str]:
    """``(front matter, body)`` of a SKILL.md text; :class:`FrontMatterError` when it has none."""
    match = FRONT_MATTER.match(text.removeprefix("\ufeff"))
    if not match:
        raise FrontMatterError("no YAML front matter (the file must start with a line '---')")
    return load_front_matter(match.group(1)), match.group(2)


def _dump(front: dict[str, Any]) -> str:
    return str(yaml.safe_dump(front, sort_keys=False, allow_unicode=True, default_flow_style=False, width=1_000_000))


def render_skill_md(front: dict[str, Any], body: str) -> str:
    """``---``, the front matter in the given key order, ``---``, a blank line and the body."""
    text = f"---\n{_dump(front)}---\n"
    body = body.strip("\n")
    return f"{text}\n{body}\n" if body else text


def _param_row(p: Any) -> str:
    default = "" if p.default is None else f"`{json.dumps(p.default, ensure_ascii=False)}`"
    allowed = f" One of: {', '.join(json.dumps(v, ensure_ascii=False) for v in p.enum)}." if p.enum else ""
    text = f"{p.description}{allowed}".replace("|", "\\|").replace("\n", " ")
    return f"| `{p.name}` | {p.type} | {'yes' if p.required else 'no'} | {default} | {text} |"


def _flow_body(revision: Revision) -> str:
    parts = []
    if revision.instructions.strip():
        parts.append(revision.instructions.strip())
    parts.append("This is a flow template: call each step's tool yourself, in order, with `{param}` placeholders "
                 "filled in. The same template, machine-readable, is [assets/template.json](assets/template.json).")
    if revision.parameters:
        rows = "\n".join(_param_row(p) for p in revision.parameters)
        parts.append(f"## Parameters\n\n| name | type | required | default | description |\n| --- | --- | --- | --- | --- |"
                     f"\n{rows}")
    steps = []
    for i, step in enumerate(revision.steps, start=1):
        args = json.dumps(step.args, indent=2, sort_keys=True, ensure_ascii=False)
        steps.append(f"{i}. Call `{step.tool}` with:\n\n   ```json\n" + "\n".join(
            f"   {line}" for line in args.splitlines()) + "\n   ```")
    parts.append("## Steps\n\n" + "\n\n".join(steps))
    return "\n\n".join(parts)


def template_json(revision: Revision) -> bytes:
    """A flow template's steps and parameters as pretty, key-sorted JSON (the same bytes every time)."""
    doc = {
        "kind": "flow_template",
        "parameters": [p.model_dump() for p in revision.parameters],
        "steps": [s.model_dump() for s in revision.steps],
    }
    return (json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


@dataclass(frozen=True)
class ServedSkillMd:
    text: str
    frontmatter: dict[str, Any]
    verbatim: bool  # the authored bytes, unchanged


def _with_name_line(text: str, slug: str, authored: dict[str, Any]) -> str | None:
    """The authored text with only its top-level ``name:`` line set to ``slug``, when that is enough."""
    offset = 1 if text.startswith("\ufeff") else 0
    match = FRONT_MATTER.match(text[offset:])
    if match is None:
        return None
    block_start = offset + match.start(1)
    line = _NAME_LINE.search(match.group(1))
    if line is None:
        return None
    plain = slug if yaml.safe_load(slug) == slug else json.dumps(slug)
    start, end = block_start + line.start("value"), block_start + line.end("value")
    candidate = text[:start] + plain + text[end:]
    try:
        front, _ = parse_skill_md(candidate)
    except FrontMatterError:
        return None
    return candidate if front == {**authored, "name": slug} else None


def served_skill_md(slug: str, revision: Revision) -> ServedSkillMd:
    """The SKILL.md the extension serves for this revision of the skill ``slug`` (deterministic)."""
    if revision.skill_md:
        try:
            authored, body = parse_skill_md(revision.skill_md)
        except FrontMatterError:
            authored, body = {}, revision.skill_md
        if authored.get("name") == slug and isinstance(authored.get("description"), str):
            return ServedSkillMd(revision.skill_md, authored, True)
        if authored and isinstance(authored.get("description"), str):
            rewritten = _with_name_line(revision.skill_md, slug, authored)
            if rewritten is not None:
                return ServedSkillMd(rewritten, {**authored, "name": slug}, False)
        rest = {k: v for k, v in authored.items() if k not in ("name", "description")}
        description = authored.get("description")
        front = {"name": slug, "description": description if isinstance(description, str) and description
                 else revision.description, **rest}
        text = render_skill_md(front, body)
        return ServedSkillMd(text, parse_skill_md(text)[0], False)
    authored = revision.frontmatter
    described = authored.get("description")
    front = {"name": slug, "description": described if isinstance(described, str) and described.strip()
             else revision.description}
    front.update({k: v for k, v in authored.items() if k not in ("name", "description")})
    body = _flow_body(revision) if revision.kind == "flow_template" else revision.instructions
    text = render_skill_md(front, body)
    return ServedSkillMd(text, parse_skill_md(text)[0], False)
