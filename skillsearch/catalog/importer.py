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
import datetime
import json
import mimetypes
import re
import unicodedata
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic

from skillsearch.catalog.frontmatter import split_front_matter
from skillsearch.catalog.walk import FolderUnreadable, TooLarge, read_bounded, read_skill_folder, skill_folders
from skillsearch.core.domain import (
    SKILL_ID_PATTERN,
    SLUG_PATTERN,
    FlowStep,
    Parameter,
    Resource,
    ResourceKind,
    Revision,
    SkillContent,
    validation_text,
)
from skillsearch.core.errors import StopFlag, WriteStopped, echo
from skillsearch.core.hashing import stable_id
from skillsearch.core.limits import Limits
from skillsearch.core.wellformed import printable

__all__ = ["ImportProblem", "ParsedImport", "parse_path", "slugify"]

MAX_NAME = 64
MAX_RESOURCE_BYTES = Limits().max_resource_bytes
_SKILL_ID = re.compile(SKILL_ID_PATTERN)


@dataclass(frozen=True)
class ImportProblem:
    file: str
    reason: str

    def __post_init__(self) -> None:
        # Reports are printed and sent as JSON: a lone surrogate from a hostile name must not crash them.
        object.__setattr__(self, "file", printable(self.file))
        object.__setattr__(self, "reason", printable(self.reason))

    def __str__(self) -> str:
        return f"{self.file}: {self.reason}"


@dataclass
class ParsedImport:
    skills: list[SkillContent] = field(default_factory=list)
    problems: list[ImportProblem] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    # Why the folder as a whole could not be read (over a limit, not openable): a mirror keeps its last
    # good state instead of taking "no skills" for the truth. Also reported as a problem.
    unreadable: str | None = None


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
    if slug == "":
        # A name in a script with no ASCII spelling ("发布说明", "코드 리뷰") leaves slugify nothing.
        raise ValueError(f"no slug: the name {echo(name)!r} has no letter a-z or digit to make one from; name the"
                         " skill's folder with a-z, 0-9 and '-' (e.g. release-notes/SKILL.md) or give a bundle"
                         " entry a 'slug'; the name itself may stay as it is")
    if not isinstance(slug, str) or not SLUG_PATTERN.match(slug):
        raise ValueError(f"invalid slug {slug!r}: use 1-64 characters of a-z, 0-9 and '-'")
    tags = entry.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise ValueError("tags must be a list of strings")
    skill_id = entry.get("skill_id")
    if skill_id is not None and (not isinstance(skill_id, str) or not _SKILL_ID.match(skill_id)):
        # The shape the design allows (opaque, no '/', no whitespace, at most 200 characters); whether the
        # source and grant own an existing id is checked against the store (Catalog.import_path).
        raise ValueError("invalid skill_id: use 1-200 characters of A-Z, a-z, 0-9, '.', '_', ':', '-'")
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
            skill_md=entry.get("skill_md") or "",
            frontmatter=entry.get("frontmatter") or {},
        )
        return SkillContent(
            skill_id=skill_id or stable_id("sk", grant, slug),
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


def _folder_resources(files: list[tuple[str, bytes]]) -> list[Resource]:
    out = []
    for rel, content in sorted(files):
        try:
            out.append(Resource(path=rel, kind=_resource_kind(rel), media_type=media_type_of(rel), content=content))
        except pydantic.ValidationError as exc:
            raise ValueError(f"resource {rel!r}: {validation_text(exc)}") from None
    return out


def _parse_skill_dir(root: Path, name: str, source: str, grant: str, limits: Limits,
                     skipped: list[ImportProblem]) -> SkillContent:
    folder = read_skill_folder(root, name, limits)
    where = root / name if name else root
    skipped.extend(ImportProblem(str(where / rel), f"skipped: {reason}") for rel, reason in folder.skipped)
    try:
        authored = folder.skill_md.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("SKILL.md is not UTF-8 text") from None
    # The fields search uses come from the text with universal newlines; the bytes are kept as authored.
    text = authored.replace("\r\n", "\n").replace("\r", "\n")
    meta, body = split_front_matter(text, limits)
    metadata: dict[str, Any] = meta["metadata"] if isinstance(meta.get("metadata"), dict) else {}
    tags = meta.get("tags") or metadata.get("tags") or []
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",")]
    folder_name = where.name if name or not root.is_symlink() else root.resolve().name
    folder_slug = folder_name if SLUG_PATTERN.match(folder_name) else None
    extra = {k: v for k, v in meta.items() if k in ("license", "allowed-tools", "metadata") and v is not None}
    entry = {
        "name": _front_text(meta, "name"),
        "description": _front_text(meta, "description"),
        "slug": folder_slug or (slugify(str(meta.get("name") or "")) or None),
        "kind": "knowledge",
        "tags": tags,
        "version": meta.get("version") or (metadata.get("version") if metadata else None),
        "instructions": body.strip(),
        "metadata": json.loads(json.dumps(extra, default=str)),
        "skill_md": authored,
        "frontmatter": meta,
    }
    return _content(entry, source, grant, _folder_resources(folder.files))


def _front_text(meta: dict[str, Any], key: str) -> str | None:
    """A front matter field that is text: a string, or a number or date YAML read from unquoted text (``name:
    2048``), as written. A list, a mapping or a yes/no (``description: [a, b]`` would have been stored as
    ``"['a', 'b']"``) refuses the skill, saying so."""
    value = meta.get(key)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float, datetime.date)):
        kind = {list: "a list", dict: "a mapping", bool: "true/false"}.get(type(value), type(value).__name__)
        raise ValueError(f"front matter {key!r} must be text, not {kind} (quote it if it is meant as text)")
    return str(value)


# -- bundles ------------------------------------------------------------------------------------------


def _bundle_entries(path: Path, limits: Limits) -> Iterator[tuple[str, Any]]:
    try:
        raw = read_bounded(path, limits.max_bundle_bytes, follow=True)
    except TooLarge as exc:
        yield str(path), ValueError(f"the bundle is {exc} (SKILLSEARCH_MAX_BUNDLE_BYTES)")
        return
    except (ValueError, OSError) as exc:
        yield str(path), ValueError(f"the bundle cannot be read: {exc}")
        return
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        yield str(path), ValueError("the bundle is not UTF-8 text")
        return
    del raw
    if path.suffix.lower() == ".jsonl":
        for lineno, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    yield f"{path}:{lineno}", json.loads(line)
                except json.JSONDecodeError as exc:
                    yield f"{path}:{lineno}", ValueError(f"invalid JSON: {exc.msg}")
                except RecursionError:
                    yield f"{path}:{lineno}", ValueError("JSON nested too deeply")
        return
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        yield str(path), ValueError(f"invalid JSON at line {exc.lineno}: {exc.msg}")
        return
    except RecursionError:
        yield str(path), ValueError("JSON nested too deeply")
        return
    items = data.get("skills") if isinstance(data, dict) else data
    if not isinstance(items, list):
        yield str(path), ValueError("a bundle is a JSON list of skills or an object with a 'skills' list")
        return
    for i, item in enumerate(items):
        yield f"{path}[{i}]", item


def _bundle_resources(entry: dict[str, Any], limits: Limits) -> list[Resource]:
    """The resources of one bundle entry, under the same limits as a folder's (count, bytes each, total)."""
    out = []
    raws = entry.get("resources") or []
    if not isinstance(raws, list):
        raise ValueError("resources must be a list")
    if len(raws) > limits.max_resources:
        raise ValueError(f"{len(raws)} resources, over the limit of {limits.max_resources}")
    total = 0
    for raw in raws:
        if not isinstance(raw, dict) or not isinstance(raw.get("path"), str):
            raise ValueError("each resource needs a 'path'")
        path = raw["path"]
        encoded = raw["base64"] if "base64" in raw else raw.get("text", "")
        if not isinstance(encoded, str):
            raise ValueError(f"resource {path!r}: base64 and text must be strings")
        # Checked before decoding: base64 decodes to 3/4 of its length, text to at least its length.
        size = len(encoded) * 3 // 4 if "base64" in raw else len(encoded)
        if size > limits.max_resource_bytes:
            raise ValueError(f"resource {path!r} is about {size} bytes, over the limit of {limits.max_resource_bytes}")
        try:
            content = base64.b64decode(encoded, validate=True) if "base64" in raw else encoded.encode("utf-8")
        except (binascii.Error, ValueError):
            raise ValueError(f"resource {path!r}: invalid base64") from None
        except UnicodeEncodeError:
            raise ValueError(f"resource {path!r}: text is not valid Unicode (a lone surrogate)") from None
        if len(content) > limits.max_resource_bytes:
            raise ValueError(f"resource {path!r} is {len(content)} bytes, over the limit of {limits.max_resource_bytes}")
        total += len(content)
        if total > limits.max_skill_bytes:
            raise ValueError(f"the skill's resources exceed {limits.max_skill_bytes} bytes, over the limit")
        try:
            kind = raw.get("kind") or _resource_kind(path)
            out.append(Resource(path=path, kind=kind, media_type=raw.get("media_type") or media_type_of(path),
                                content=content))
        except pydantic.ValidationError as exc:
            raise ValueError(f"resource {path!r}: {validation_text(exc)}") from None
    return out


def _bundle_entry(raw: dict[str, Any], source: str, grant: str, limits: Limits) -> SkillContent:
    instructions = raw.get("instructions")
    if isinstance(instructions, str) and len(instructions) > limits.max_skill_md_bytes:
        raise ValueError(f"instructions are {len(instructions)} characters, over the limit of "
                         f"{limits.max_skill_md_bytes}")
    return _content(raw, source, grant, _bundle_resources(raw, limits))


# -- entry point --------------------------------------------------------------------------------------


def parse_path(path: Path, source: str, grant: str, limits: Limits | None = None, *,
               only: Collection[str] | None = None, stopping: StopFlag | None = None,
               progress: Callable[[int, str], Callable[[int], None]] | None = None) -> ParsedImport:
    """Every skill under ``path`` (folder or bundle), with one problem per invalid entry.

    ``only``: of a folder, read only the skill folders among these top-level names (a watcher's batch),
    through the same symlink-refusing walk. ``stopping`` (SIGTERM, a server's shutdown): looked at before
    each skill folder; once set, ``WriteStopped`` (a large folder's read ends there; nothing was stored).
    ``progress(total, label)``: a folder's read is shown skill by skill (``reading``).

    Slugs must be unique within the import: a later duplicate is a problem, the first one stays. A refused
    entry never costs the others; a skipped file (a symbolic link, a FIFO, a hard link) is reported as a
    problem of its own while the rest of its skill is imported.
    """
    limits = limits or Limits.from_env()
    path = Path(path)
    result = ParsedImport()
    if not path.exists():
        result.problems.append(ImportProblem(str(path), "no such file or folder"))
        return result
    entries: list[tuple[str, SkillContent | Exception]] = []
    if path.is_dir():
        try:
            names, skipped = skill_folders(path, limits, only)
        except FolderUnreadable as exc:
            names, skipped = [], [("", str(exc))]
            result.unreadable = str(exc)
        result.problems.extend(ImportProblem(str(path / n), f"skipped: {r}") for n, r in skipped)
        tick = progress(len(names), "reading") if progress is not None and names else None
        for done, name in enumerate(names):
            if stopping is not None and stopping.is_set():
                raise WriteStopped(f"stopped reading {path} after {done} of {len(names)} skill folders (the process"
                                   " is stopping); nothing of it was stored: the next run reads it again")
            where = str(path / name / "SKILL.md")
            try:
                entries.append((where, _parse_skill_dir(path, name, source, grant, limits, result.problems)))
            except (ValueError, OSError) as exc:
                entries.append((where, exc))
            except RecursionError:
                entries.append((where, ValueError("nested too deeply")))
            if tick is not None:
                tick(1)
        if not entries and not skipped:
            result.problems.append(ImportProblem(str(path), "no SKILL.md in this folder or its sub-folders"))
    elif path.suffix.lower() in (".json", ".jsonl"):
        for where, raw in _bundle_entries(path, limits):
            if isinstance(raw, Exception):
                entries.append((where, raw))
            elif not isinstance(raw, dict):
                entries.append((where, ValueError("each bundle entry must be a JSON object")))
            else:
                try:
                    entries.append((where, _bundle_entry(raw, source, grant, limits)))
                except ValueError as exc:
                    entries.append((where, exc))
                except RecursionError:
                    entries.append((where, ValueError("nested too deeply")))
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
