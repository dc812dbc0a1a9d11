"""SKILL.md: the one the Skills extension serves for a revision, written deterministically.

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

Front matter is read and written by ``catalog/frontmatter.py`` (PyYAML's home: no aliases, bounded, JSON values).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from skillsearch.catalog.frontmatter import (
    FRONT_MATTER,
    FrontMatterError,
    dump_front_matter,
    is_plain_scalar,
    split_front_matter,
)
from skillsearch.core.domain import Parameter, Revision

__all__ = [
    "ServedSkillMd",
    "render_skill_md",
    "served_skill_md",
    "template_json",
]

_NAME_LINE = re.compile(r"^name:[ \t]*(?P<value>[^\r\n]*)$", re.MULTILINE)


def render_skill_md(front: dict[str, Any], body: str) -> str:
    """``---``, the front matter in the given key order, ``---``, a blank line and the body."""
    text = f"---\n{dump_front_matter(front)}---\n"
    body = body.strip("\n")
    return f"{text}\n{body}\n" if body else text


def _param_row(parameter: Parameter) -> str:
    p = parameter.presented()  # an integer's default and enum as resolve takes them: 5, never 5.0
    default = "" if p["default"] is None else f"`{json.dumps(p['default'], ensure_ascii=False)}`"
    allowed = f" One of: {', '.join(json.dumps(v, ensure_ascii=False) for v in p['enum'])}." if p["enum"] else ""
    text = f"{p['description']}{allowed}".replace("|", "\\|").replace("\n", " ")
    return f"| `{p['name']}` | {p['type']} | {'yes' if p['required'] else 'no'} | {default} | {text} |"


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
        "parameters": [p.presented() for p in revision.parameters],
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
    plain = slug if is_plain_scalar(slug) else json.dumps(slug)
    start, end = block_start + line.start("value"), block_start + line.end("value")
    candidate = text[:start] + plain + text[end:]
    try:
        front, _ = split_front_matter(candidate)
    except FrontMatterError:
        return None
    return candidate if front == {**authored, "name": slug} else None


def served_skill_md(slug: str, revision: Revision) -> ServedSkillMd:
    """The SKILL.md the extension serves for this revision of the skill ``slug`` (deterministic)."""
    if revision.skill_md:
        try:
            authored, body = split_front_matter(revision.skill_md)
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
        return ServedSkillMd(text, split_front_matter(text)[0], False)
    authored = revision.frontmatter
    described = authored.get("description")
    front = {"name": slug, "description": described if isinstance(described, str) and described.strip()
             else revision.description}
    front.update({k: v for k, v in authored.items() if k not in ("name", "description")})
    body = _flow_body(revision) if revision.kind == "flow_template" else revision.instructions
    text = render_skill_md(front, body)
    return ServedSkillMd(text, split_front_matter(text)[0], False)
