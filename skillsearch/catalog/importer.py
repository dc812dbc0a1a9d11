"""Reading skills from local files: Agent Skills folders and JSON/JSONL bundles (design section 3).

Parsing only: this module turns files into validated :class:`SkillContent` plus one :class:`ImportProblem`
per invalid entry, so that the valid entries can still be stored. Storing and indexing is the service's job.

- A folder holding ``SKILL.md`` is one skill; otherwise each sub-folder holding ``SKILL.md`` is one.
  ``SKILL.md`` starts with YAML front matter (``name``, ``description``, optional ``license``,
  ``metadata`` with ``tags``, ``allowed-tools``); every other file of the folder is a resource whose kind
  follows its top folder (``scripts/`` script, ``references/`` reference, ``assets/`` template or artifact).
- A ``.json`` file (a list, or an object with ``skills``) or a ``.jsonl`` file holds flat entries:
  ``slug, name, description, kind, tags, version, instructions, steps, parameters, resources`` where a
  resource has ``path``, ``kind``, ``media_type`` and ``text`` or ``base64``.
"""

from __future__ import annotations

import base64
import binascii
import json
import mimetypes
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic
import yaml

from skillsearch.core.domain import (
    SLUG_PATTERN,
    FlowStep,
    Parameter,
    Resource,
    ResourceKind,
    Revision,
    SkillContent,
    validation_text,
)
from skillsearch.core.hashing import stable_id

__all__ = ["ImportProblem", "ParsedImport", "parse_path", "slugify"]

MAX_NAME = 64
MAX_RESOURCE_BYTES = 5 * 1024 * 1024
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)(.*)\Z", re.DOTALL)
_TEXT_TYPES = ("text/", "application/json", "application/x-yaml", "application/yaml", "application/xml")


@dataclass(frozen=True)
class ImportProblem:
    file: str
    reason: str

    def __str__(self) -> str:
        return f"{self.file}: {self.reason}"


@dataclass
class ParsedImport:
    skills: list[SkillContent] = field(default_factory=list)
    problems: list[ImportProblem] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)


def slugify(text: str) -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    return slug[:64].strip("-")


def media_type_of(path: str) -> str:
    guessed, _ = mimetypes.guess_type(path)
    if guessed:
        return guessed
    suffix = Path(path).suffix.lower()
    return {".md": "text/markdown", ".yaml": "application/yaml", ".yml": "application/yaml",
            ".toml": "application/toml", ".sh": "text/x-shellscript", ".py": "text/x-python"}.get(
        suffix, "text/plain" if suffix in (".txt", ".cfg", ".ini", "") else "application/octet-stream"
    )


def is_text_media_type(media_type: str) -> bool:
    return media_type.startswith(_TEXT_TYPES) or media_type in ("application/toml",)


def _resource_kind(rel: str) -> ResourceKind:
    top = rel.split("/", 1)[0].lower()
    name = rel.lower()
    if top == "scripts":
        return "script"
    if top in ("references", "reference", "docs"):
        return "reference"
    if top in ("examples", "example"):
        return "example"
    if top in ("templates", "template") or "template" in name:
        return "template"
    if top == "assets":
        return "artifact"
    return "document"


def _content(entry: dict[str, Any], source: str, grant: str, resources: list[Resource]) -> SkillContent:
    """Validate one entry; raises ``ValueError`` with a readable reason."""
    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError("missing name")
    if len(name) > MAX_NAME:
        raise ValueError(f"name is {len(name)} characters, over the limit of {MAX_NAME}")
    description = entry.get("description")
    if not isinstance(description, str) or not description.strip():
        raise ValueError("missing description")
    slug = entry.get("slug") or slugify(name)
    if not isinstance(slug, str) or not SLUG_PATTERN.match(slug):
        raise ValueError(f"invalid slug {slug!r}: use 1-64 characters of a-z, 0-9 and '-'")
    tags = entry.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ValueError("tags must be a list of strings")
    try:
        revision = Revision(
            version=str(entry.get("version") or ""),
            name=name.strip(),
            description=description.strip(),
            kind=entry.get("kind") or "knowledge",
            tags=tuple(t.strip().lower() for t in tags if t.strip()),
            instructions=str(entry.get("instructions") or ""),
            steps=tuple(FlowStep(**s) if isinstance(s, dict) else s for s in entry.get("steps") or ()),
            parameters=tuple(Parameter(**p) if isinstance(p, dict) else p for p in entry.get("parameters") or ()),
            metadata=entry.get("metadata") or {},
        )
        return SkillContent(
            skill_id=str(entry.get("skill_id") or stable_id("sk", grant, slug)),
            slug=slug,
            grant=grant,
            source=source,
            revision=revision,
            resources=tuple(resources),
        )
    except pydantic.ValidationError as exc:
        raise ValueError(validation_text(exc)) from None
    except TypeError as exc:
        raise ValueError(str(exc)) from None


# -- Agent Skills folders -----------------------------------------------------------------------------


def _skill_dirs(root: Path) -> Iterator[Path]:
    if (root / "SKILL.md").is_file():
        yield root
        return
    for child in sorted(root.iterdir()):
        if child.is_dir() and not child.name.startswith(".") and (child / "SKILL.md").is_file():
            yield child


def _folder_resources(skill_dir: Path) -> list[Resource]:
    out = []
    for path in sorted(skill_dir.rglob("*")):
        rel = path.relative_to(skill_dir).as_posix()
        if not path.is_file() or rel == "SKILL.md" or any(p.startswith(".") for p in rel.split("/")):
            continue
        if "__pycache__" in rel.split("/"):
            continue
        size = path.stat().st_size
        if size > MAX_RESOURCE_BYTES:
            raise ValueError(f"resource {rel} is {size} bytes, over the limit of {MAX_RESOURCE_BYTES}")
        out.append(Resource(path=rel, kind=_resource_kind(rel), media_type=media_type_of(rel),
                            content=path.read_bytes()))
    return out


def _parse_skill_dir(skill_dir: Path, source: str, grant: str) -> SkillContent:
    try:
        text = (skill_dir / "SKILL.md").read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError("SKILL.md is not UTF-8 text") from None
    match = _FRONT_MATTER.match(text.lstrip("\ufeff"))
    if not match:
        raise ValueError("no YAML front matter (the file must start with a line '---')")
    try:
        meta = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        raise ValueError(f"bad front matter{where}: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(meta, dict):
        raise ValueError("bad front matter: expected a mapping of keys to values")
    metadata: dict[str, Any] = meta["metadata"] if isinstance(meta.get("metadata"), dict) else {}
    tags = meta.get("tags") or metadata.get("tags") or []
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",")]
    folder_slug = skill_dir.name if SLUG_PATTERN.match(skill_dir.name) else None
    extra = {k: v for k, v in meta.items() if k in ("license", "allowed-tools", "metadata") and v is not None}
    entry = {
        "name": meta.get("name") if meta.get("name") is None else str(meta.get("name")),
        "description": meta.get("description") if meta.get("description") is None else str(meta["description"]),
        "slug": folder_slug or (slugify(str(meta.get("name") or "")) or None),
        "kind": "knowledge",
        "tags": tags,
        "version": meta.get("version") or (metadata.get("version") if metadata else None),
        "instructions": match.group(2).strip(),
        "metadata": json.loads(json.dumps(extra, default=str)),
    }
    return _content(entry, source, grant, _folder_resources(skill_dir))


# -- bundles ------------------------------------------------------------------------------------------


def _bundle_entries(path: Path) -> Iterator[tuple[str, Any]]:
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".jsonl":
        for lineno, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    yield f"{path}:{lineno}", json.loads(line)
                except json.JSONDecodeError as exc:
                    yield f"{path}:{lineno}", ValueError(f"invalid JSON: {exc.msg}")
        return
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        yield str(path), ValueError(f"invalid JSON at line {exc.lineno}: {exc.msg}")
        return
    items = data.get("skills") if isinstance(data, dict) else data
    if not isinstance(items, list):
        yield str(path), ValueError("a bundle is a JSON list of skills or an object with a 'skills' list")
        return
    for i, item in enumerate(items):
        yield f"{path}[{i}]", item


def _bundle_resources(entry: dict[str, Any]) -> list[Resource]:
    out = []
    for raw in entry.get("resources") or []:
        if not isinstance(raw, dict) or not isinstance(raw.get("path"), str):
            raise ValueError("each resource needs a 'path'")
        if "base64" in raw:
            try:
                content = base64.b64decode(raw["base64"], validate=True)
            except (binascii.Error, TypeError):
                raise ValueError(f"resource {raw['path']}: invalid base64") from None
        else:
            content = str(raw.get("text", "")).encode("utf-8")
        try:
            kind = raw.get("kind") or _resource_kind(raw["path"])
            out.append(Resource(path=raw["path"], kind=kind,
                                media_type=raw.get("media_type") or media_type_of(raw["path"]), content=content))
        except pydantic.ValidationError as exc:
            raise ValueError(f"resource {raw['path']}: {validation_text(exc)}") from None
    return out


# -- entry point --------------------------------------------------------------------------------------


def parse_path(path: Path, source: str, grant: str) -> ParsedImport:
    """Every skill under ``path`` (folder or bundle), with one problem per invalid entry.

    Slugs must be unique within the import: a later duplicate is a problem, the first one stays.
    """
    path = Path(path)
    result = ParsedImport()
    if not path.exists():
        result.problems.append(ImportProblem(str(path), "no such file or folder"))
        return result
    entries: list[tuple[str, SkillContent | Exception]] = []
    if path.is_dir():
        for skill_dir in _skill_dirs(path):
            where = str(skill_dir / "SKILL.md")
            try:
                entries.append((where, _parse_skill_dir(skill_dir, source, grant)))
            except (ValueError, OSError) as exc:
                entries.append((where, exc))
        if not entries:
            result.problems.append(ImportProblem(str(path), "no SKILL.md in this folder or its sub-folders"))
    elif path.suffix.lower() in (".json", ".jsonl"):
        for where, raw in _bundle_entries(path):
            if isinstance(raw, Exception):
                entries.append((where, raw))
            elif not isinstance(raw, dict):
                entries.append((where, ValueError("each bundle entry must be a JSON object")))
            else:
                try:
                    entries.append((where, _content(raw, source, grant, _bundle_resources(raw))))
                except ValueError as exc:
                    entries.append((where, exc))
    else:
        result.problems.append(ImportProblem(str(path), "not a folder of skills or a .json/.jsonl bundle"))
    seen: dict[str, str] = {}
    for where, item in entries:
        if isinstance(item, Exception):
            result.problems.append(ImportProblem(where, str(item)))
        elif item.slug in seen:
            result.problems.append(ImportProblem(where, f"duplicate slug {item.slug!r} in grant {grant} "
                                                        f"(first defined in {seen[item.slug]})"))
        else:
            seen[item.slug] = where
            result.skills.append(item)
            result.files[item.skill_id] = where
    return result
