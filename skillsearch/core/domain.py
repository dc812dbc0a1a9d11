"""Domain models: skill, revision, resource, flow step, parameter, grant and principal.

These are the shapes of the catalog (design section 1). Pydantic validates them where content enters
(import, sync); the hot search path works on plain arrays and never builds these per hit.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from skillsearch.core.integers import as_integer
from skillsearch.core.wellformed import check_text_field, check_wellformed

__all__ = [
    "FUSION_METHODS",
    "GRANT_PATTERN",
    "MAX_NESTING",
    "PLACEHOLDER",
    "SCOPE_MEMORY_READ",
    "SEARCH_MODES",
    "SKILL_ID_PATTERN",
    "SKILL_KINDS",
    "SLUG_PATTERN",
    "FlowStep",
    "FusionMethod",
    "Parameter",
    "Principal",
    "Resource",
    "ResourceKind",
    "Revision",
    "SearchMode",
    "Skill",
    "SkillContent",
    "SkillKind",
    "SkillStatus",
    "json_type",
    "placeholders_in",
    "slug_key",
    "tag_key",
    "validation_text",
]

# The value lists every surface offers (CLI choices, HTTP query enums, MCP tool schemas) and every use
# case checks: written once here, the tuples derived from the types.
SkillKind = Literal["knowledge", "flow_template"]
SearchMode = Literal["hybrid", "lexical", "semantic"]
FusionMethod = Literal["zscore", "minmax", "rrf"]
SKILL_KINDS: tuple[SkillKind, ...] = get_args(SkillKind)
SEARCH_MODES: tuple[SearchMode, ...] = get_args(SearchMode)
FUSION_METHODS: tuple[FusionMethod, ...] = get_args(FusionMethod)
SkillStatus = Literal["active", "archived"]
ResourceKind = Literal["reference", "example", "template", "document", "artifact", "script"]
ParameterType = Literal["string", "integer", "number", "boolean"]

SLUG_PATTERN = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
GRANT_PATTERN = re.compile(r"^(sub|team|user):[A-Za-z0-9._-]{1,128}$")
SCOPE_MEMORY_READ = "memory:read"
# A skill id: opaque, stable; ``sk_`` + 20 hex digits locally, the platform's own id for synced skills.
SKILL_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,199}$"
# Nesting of the JSON values of one entry (metadata, step args, parameter values): deeper is refused.
MAX_NESTING = 32

# `{name}` not preceded by another `{` (that would be the escape `{{`).
PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


def placeholders_in(value: Any) -> set[str]:
    """Every `{param}` name used in any string of a (nested) step value; `{{`/`}}` are literal braces."""
    found: set[str] = set()
    if isinstance(value, str):
        found.update(m.group(1) for m in PLACEHOLDER.finditer(value) if m.group(1))
    elif isinstance(value, dict):
        for item in value.values():
            found |= placeholders_in(item)
    elif isinstance(value, list):
        for item in value:
            found |= placeholders_in(item)
    return found


class Parameter(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=64)
    type: ParameterType = "string"
    required: bool = False
    description: str = ""
    default: Any = None
    enum: list[Any] | None = None

    def taken(self, value: Any) -> Any:
        """``value`` as this parameter holds it: for an ``integer``, a float with no fractional part is that
        int (JSON Schema's reading, ``core/integers.py``), so a step's ``{n}`` says ``5``, never ``5.0``."""
        return as_integer(value) if self.type == "integer" else value

    def presented(self) -> dict[str, Any]:
        """This parameter as every read shows it (get_skill, recall, ``skill://``'s SKILL.md and template.json):
        its ``default`` and ``enum`` members as resolve uses them (:meth:`taken`), so an ``integer`` default
        stored as ``5.0`` is shown as ``5``, the value a step's ``{n}`` gets. What is stored stays as sent
        (the canonical hash and sync read ``model_dump``); only the shown form is JSON Schema's reading."""
        shown = self.model_dump()
        if self.default is not None:
            shown["default"] = self.taken(self.default)
        if self.enum is not None:
            shown["enum"] = [self.taken(member) for member in self.enum]
        return shown

    def problem_with(self, value: Any) -> str | None:
        """Why ``value`` does not fit this parameter, or ``None`` when it does (``5.0`` fits an ``integer``)."""
        value = self.taken(value)
        expected: tuple[type, ...] = {
            "string": (str,),
            "integer": (int,),
            "number": (int, float),
            "boolean": (bool,),
        }[self.type]
        if isinstance(value, bool) and self.type != "boolean":
            return f"expected {self.type}, got boolean"
        if not isinstance(value, expected):
            if type(value) is float and self.type == "integer" and math.isfinite(value):
                return ("expected integer, got a number with a fractional part" if not value.is_integer() else
                        "expected integer, got a number past 2**53 written with a fraction or exponent, which JSON"
                        " cannot carry exactly: send its digits")
            return f"expected {self.type}, got {json_type(value)}"
        if isinstance(value, float) and not math.isfinite(value):
            return "must be a finite number (NaN and Infinity are refused)"
        if self.enum is not None and value not in self.enum:
            return f"must be one of {self.enum!r}"
        return None

    def enum_problem(self) -> str | None:
        """Why no value could match this parameter's enum (``[]``, ``[1, 2]`` for a string), or ``None``.
        Checked on what import and sync store (:class:`SkillContent`), not on every read of a stored one."""
        if self.enum is None:
            return None
        if not self.enum:
            return f"enum of parameter {self.name!r} is empty: no value could ever be given"
        typed = self.model_copy(update={"enum": None})
        for member in self.enum:
            problem = "null is no value" if member is None else typed.problem_with(member)
            if problem:
                return f"enum of parameter {self.name!r}: {json.dumps(member, ensure_ascii=False)}: {problem}"
        return None

    @model_validator(mode="after")
    def _default_fits(self) -> Parameter:
        if self.default is not None and (problem := self.problem_with(self.default)):
            raise ValueError(f"default of parameter {self.name!r}: {problem}")
        return self


def json_type(value: Any) -> str:
    """The JSON type a (parsed) value has, as an error names what it was given: ``integer``, ``string``..."""
    if value is None:
        return "null"
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}.get(
        type(value), type(value).__name__
    )


class FlowStep(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str = Field(min_length=1, max_length=128)
    args: dict[str, Any] = Field(default_factory=dict)


class Resource(BaseModel):
    """A file of a revision. ``content`` holds the bytes; text is decoded only at the surfaces."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    resource_id: str = ""
    path: str = Field(min_length=1, max_length=512)
    kind: ResourceKind = "document"
    media_type: str = "application/octet-stream"
    size: int = 0
    sha256: str = ""
    content: bytes = b""

    @field_validator("path")
    @classmethod
    def _relative_path(cls, value: str) -> str:
        parts = value.split("/")
        if value.startswith("/") or "\\" in value or any(p in ("", ".", "..") for p in parts):
            raise ValueError(f"resource path must be relative and normalised, got {value!r}")
        # A host may write resources to disk: no drive letters or streams (``C:x``), no home (``~/``), no
        # control or invisible format characters (NUL, newline, U+202E right-to-left override).
        if ":" in value or any(p.startswith("~") for p in parts) or any(
            unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp") for c in value
        ):
            raise ValueError(f"resource path must be a plain relative path, got {value!r}")
        return value


class Revision(BaseModel):
    """Immutable content of a skill at one point in time, identified by its ``canonical_hash``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    revision_id: str = ""
    skill_id: str = ""
    version: str = ""
    created_at: str = ""
    canonical_hash: str = ""
    name: str
    description: str
    kind: SkillKind
    tags: tuple[str, ...] = ()
    instructions: str = ""
    steps: tuple[FlowStep, ...] = ()
    parameters: tuple[Parameter, ...] = ()
    metadata: dict[str, Any] = Field(default_factory=dict)
    skill_md: str = Field("", description="The SKILL.md exactly as authored (folder import, or upstream's).")
    frontmatter: dict[str, Any] = Field(
        default_factory=dict, description="Its whole YAML front matter as authored, every key, as JSON."
    )


class Skill(BaseModel):
    """A skill's identity and its current state in the catalog."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    skill_id: str
    slug: str
    name: str = Field(min_length=1, max_length=200)
    description: str = Field(min_length=1, max_length=1024)
    kind: SkillKind
    tags: tuple[str, ...] = ()
    grant: str
    status: SkillStatus = "active"
    current_revision_id: str = ""
    updated_at: str = ""
    source: str = ""

    @field_validator("slug")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not SLUG_PATTERN.match(value):
            raise ValueError("slug must be 1-64 chars of a-z, 0-9 and '-', not starting or ending with '-'")
        return value

    @field_validator("grant")
    @classmethod
    def _grant(cls, value: str) -> str:
        if not GRANT_PATTERN.match(value):
            raise ValueError("grant must be sub:<id>, team:<id> or user:<id>")
        return value


class SkillContent(BaseModel):
    """What import and sync hand to the store: one skill and the revision content it should now have."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    skill_id: str
    slug: str
    grant: str
    source: str
    revision: Revision
    resources: tuple[Resource, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> SkillContent:
        check_wellformed(
            [self.skill_id, self.slug, self.source, self.revision.version, self.revision.created_at,
             self.revision.name, self.revision.description, list(self.revision.tags), self.revision.instructions,
             [s.model_dump() for s in self.revision.steps], [p.model_dump() for p in self.revision.parameters],
             [(r.path, r.media_type) for r in self.resources]],
            "entry", MAX_NESTING + 3,
        )
        check_wellformed(self.revision.metadata, "metadata", MAX_NESTING)
        check_wellformed(self.revision.frontmatter, "frontmatter", MAX_NESTING)
        self._check_text_fields()
        Skill(
            skill_id=self.skill_id,
            slug=self.slug,
            name=self.revision.name,
            description=self.revision.description,
            kind=self.revision.kind,
            grant=self.grant,
        )
        rev = self.revision
        if rev.kind == "flow_template":
            if not rev.steps:
                raise ValueError("a flow_template needs at least one step")
            declared = {p.name for p in rev.parameters}
            if len(declared) != len(rev.parameters):
                raise ValueError("parameter names must be unique")
            # An enum no value of its type can match imported fine and made a template that no call could
            # resolve: every value an agent gave was refused as "must be one of".
            for p in rev.parameters:
                if problem := p.enum_problem():
                    raise ValueError(problem)
            undeclared = sorted(placeholders_in([s.args for s in rev.steps]) - declared)
            if undeclared:
                raise ValueError(f"step placeholder(s) with no matching parameter: {', '.join(undeclared)}")
        elif rev.steps or rev.parameters:
            raise ValueError("only a flow_template may have steps or parameters")
        paths = [r.path for r in self.resources]
        if len(set(paths)) != len(paths):
            raise ValueError("resource paths must be unique within a revision")
        return self

    def _check_text_fields(self) -> None:
        """No control or bidi-override characters where a list or a terminal shows the text (names, tags,
        descriptions, tool and parameter names; tabs and line breaks only in descriptions). The Markdown
        body (``instructions``, ``skill_md``) and the resources' bytes are content: kept as authored."""
        rev = self.revision
        one_line: list[tuple[str, str]] = [
            ("name", rev.name), ("version", rev.version), ("created_at", rev.created_at),
            *((f"tags[{i}]", t) for i, t in enumerate(rev.tags)),
            *((f"steps[{i}].tool", s.tool) for i, s in enumerate(rev.steps)),
            *((f"parameters[{i}].name", p.name) for i, p in enumerate(rev.parameters)),
            *((f"resources[{i}].media_type", r.media_type) for i, r in enumerate(self.resources)),
        ]
        text: list[tuple[str, str]] = [
            ("description", rev.description),
            *((f"parameters[{i}].description", p.description) for i, p in enumerate(rev.parameters)),
        ]
        # The authored front matter's own name and description, which hosts are shown as they are.
        for key, fields in (("name", one_line), ("description", text)):
            if isinstance(value := rev.frontmatter.get(key), str):
                fields.append((f"frontmatter.{key}", value))
        for where, value in one_line:
            check_text_field(value, where)
        for where, value in text:
            check_text_field(value, where, one_line=False)


@dataclass(frozen=True)
class Principal:
    """The caller: a set of grant keys (``None`` means every grant, the local operator) and scopes."""

    name: str
    grants: frozenset[str] | None = None
    scopes: frozenset[str] = field(default_factory=lambda: frozenset({SCOPE_MEMORY_READ}))

    @classmethod
    def operator(cls) -> Principal:
        return cls(name="operator", grants=None, scopes=frozenset({SCOPE_MEMORY_READ}))

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes


def validation_text(exc: ValidationError, limit: int | None = None) -> str:
    """A pydantic validation failure as one readable line: ``field.path: reason; ...`` (the first ``limit``
    problems when given). Used for content refused at import and at sync."""
    parts = []
    for err in exc.errors()[:limit]:
        loc = ".".join(str(x) for x in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(parts)


def slug_key(text: str) -> str | None:
    """The slug ``text`` spells, read as a tag is (:func:`tag_key`: Unicode's compatibility form, case-folded)
    without the whitespace around it: ``Python-Profiling``, ``python-profiling `` (an agent's trailing space
    or newline) and full-width letters all spell ``python-profiling``; ``None`` when it spells no slug. Reads
    look a slug up by it among the skills the caller can see, never others. Any dash is the hyphen
    (Unicode's dash punctuation, category Pd, and the minus sign U+2212): ``pdf-tools`` typed with U+2010 HYPHEN, an
    en dash or a minus (what a word processor or a model's output puts for ``-``) spells ``pdf-tools``. Only
    the lookup reads them so; a stored slug is always ``SLUG_PATTERN``'s."""
    key = "".join("-" if ch == "\u2212" or unicodedata.category(ch) == "Pd" else ch for ch in tag_key(text.strip()))
    return key if SLUG_PATTERN.fullmatch(key) else None


def tag_key(tag: str) -> str:
    """What a tag filter compares: the tag in Unicode's compatibility form, case-folded, so ``Kubernetes``,
    ``kubernetes`` and its full-width letters (U+FF4B ..., a Japanese input method's) are one tag, and
    ``GRÖSSE`` finds ``größe``. Stored tags keep their spelling; only the comparison folds."""
    return unicodedata.normalize("NFKC", tag).casefold()
