"""The thin reads on the catalog: list (paged), get (kind-specific content) and flow-template resolve.

Every read applies the single visibility rule; a skill the caller may not see is ``SKILL_NOT_FOUND``,
exactly like one that does not exist, so nothing leaks its existence.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from skillsearch.catalog.store import CatalogStore
from skillsearch.core.domain import SKILL_KINDS, Principal, Resource, Revision, Skill, slug_key
from skillsearch.core.errors import (
    ResourceNotFoundError,
    SkillInvalidError,
    SkillNotFoundError,
    ValidationError,
    problem,
)
from skillsearch.core.skill_uri import SCHEME, skill_uri
from skillsearch.core.templates import resolve_steps
from skillsearch.core.views import (
    ListResponse,
    ParameterView,
    ResolvedFlow,
    ResolvedStep,
    ResourceInfo,
    SkillDetail,
    SkillSummary,
    StepView,
)
from skillsearch.core.visibility import is_visible, visible_grants
from skillsearch.core.wellformed import IllFormedError, check_wellformed

__all__ = ["MAX_PAGE", "MAX_TAGS", "ambiguous_slug", "get_detail", "list_page", "resolve_flow", "resource_infos", "visible_skill"]

MAX_PAGE = 200
# Tags one list may require: each is a clause of the SQL query, and SQLite refuses past about 1,000 of them (an
# INTERNAL error over MCP, whose tags were unbounded). The HTTP routes take as many (``http/schemas.Limits``).
MAX_TAGS = 16


def _encode_cursor(skill: Skill) -> str:
    return base64.urlsafe_b64encode(json.dumps([skill.name, skill.skill_id]).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[str, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        decoded = json.loads(raw)
        # Exactly the [name, skill_id] that _encode_cursor wrote: a two-key object unpacked into its keys, and
        # a lone surrogate (which JSON may escape but SQLite cannot bind), were a 500 once they reached the store.
        if not isinstance(decoded, list) or len(decoded) != 2 or not all(isinstance(v, str) for v in decoded):
            raise ValueError
        check_wellformed(decoded, "cursor")
        name, skill_id = decoded
        return name, skill_id
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError, RecursionError):  # nested past json's stack
        # The cursor is not echoed: details name the input at fault, never its value.
        raise ValidationError("invalid cursor: pass the next_cursor of a previous page", {"problems": [
            problem("cursor", "not a next_cursor this catalog gave: pass the next_cursor of a previous page")]}) from None


def list_page(
    store: CatalogStore,
    principal: Principal,
    *,
    kind: str | None = None,
    tags: Sequence[str] = (),
    cursor: str | None = None,
    limit: int = 50,
) -> ListResponse:
    if not 1 <= limit <= MAX_PAGE:
        message = f"limit must be between 1 and {MAX_PAGE}"
        raise ValidationError(message, {"problems": [problem("limit", message)]})
    if kind is not None and kind not in SKILL_KINDS:
        message = f"kind must be {' or '.join(SKILL_KINDS)}"
        raise ValidationError(message, {"problems": [problem("kind", message)]})
    if len(tags) > MAX_TAGS:
        message = f"at most {MAX_TAGS} tags"
        raise ValidationError(message, {"problems": [problem("tags", message)]})
    after = _decode_cursor(cursor) if cursor else None
    grants = visible_grants(principal, store.grants(), store.revoked_subscriptions())
    page = store.list_page(sorted(grants), kind=kind, tags=tags, after=after, limit=limit + 1)
    items = [
        SkillSummary(skill_id=s.skill_id, slug=s.slug, name=s.name, description=s.description, kind=s.kind,
                     tags=list(s.tags), skill_uri=skill_uri(s.grant, s.slug))
        for s in page[:limit]
    ]
    return ListResponse(items=items, next_cursor=_encode_cursor(page[limit - 1]) if len(page) > limit else None)


def ambiguous_slug(field: str, slug: str, same: Sequence[Skill]) -> ValidationError:
    """The one answer to a slug that several skills the caller can see share (one per grant): a
    ``VALIDATION_ERROR`` on ``field`` naming each one's skill_id and grant, so the next call passes one id.
    Not ``SKILL_NOT_FOUND``: they exist, and an agent told so searches again for what it already found.
    ``same`` holds only skills the caller can see (its grants, active, not revoked), so nothing else leaks."""
    ids = ", ".join(f"{s.skill_id} ({s.grant})" for s in same)
    message = f"the slug {slug!r} names {len(same)} skills you can see: pass one skill_id of {ids}"
    return ValidationError(message, {"problems": [problem(field, message, "ambiguous")],
                                     "candidates": [s.skill_id for s in same]})


def visible_skill(store: CatalogStore, principal: Principal, skill_id: str) -> Skill:
    """The skill if this principal may see it now; ``SKILL_NOT_FOUND`` otherwise (no existence leak).

    A slug is taken too when exactly one skill the caller can see has it (slugs are unique per grant, so a
    caller of several grants may see two): agents and people type the slug they read, as they typed it
    (``slug_key``: ``Python-Profiling``, full-width letters). The whitespace around an id or slug is no part
    of it (recall drops it too): an agent's trailing space or newline. Only visible skills are looked at, so
    the answer says nothing about the others."""
    if not isinstance(skill_id, str) or not skill_id.strip() or len(skill_id) > 200:
        message = "skill_id must be a non-empty string of at most 200 characters"
        raise ValidationError(message, {"problems": [problem("skill_id", message)]})
    skill_id = skill_id.strip()
    revoked = store.revoked_subscriptions()
    skill = store.skill(skill_id)
    if skill is not None and is_visible(skill.status, skill.grant, principal, revoked):
        return skill
    if slug := slug_key(skill_id):
        grants = sorted(visible_grants(principal, store.grants(), revoked))
        same = [s for g in grants if (s := store.skill_by_slug(g, slug)) is not None
                and is_visible(s.status, s.grant, principal, revoked)]
        if len(same) == 1:
            return same[0]
        if same:
            raise ambiguous_slug("skill_id", slug, same)
    if skill_id.startswith(SCHEME):  # a hit's skill_uri, passed where its skill_id belongs
        raise SkillNotFoundError(f"{skill_id!r} is a skill_uri, not a skill_id: pass the hit's skill_id (sk_...) or"
                                 " slug, or load this URI with resources/read", {"skill_id": skill_id})
    grants = sorted(visible_grants(principal, store.grants(), revoked))
    named = [s for g in grants if (s := store.skill_named(g, skill_id)) is not None
             and is_visible(s.status, s.grant, principal, revoked)]
    if named:  # a skill's name (what a person or an agent read in a list), passed where its id belongs
        which = "; ".join(f"slug {s.slug!r} (skill_id {s.skill_id}, {s.grant})" for s in named)
        raise SkillNotFoundError(f"{skill_id!r} is the name of {'a skill' if len(named) == 1 else 'skills'} you can"
                                 f" see, not a skill_id: pass its {which}",
                                 {"skill_id": skill_id, "candidates": [s.skill_id for s in named]})
    raise SkillNotFoundError(f"no skill {skill_id!r} is visible to you: pass a skill_id from search or list"
                             " (sk_...), or the slug of a skill you can see", {"skill_id": skill_id})


def _current_revision(store: CatalogStore, skill: Skill) -> Revision:
    revision = store.revision(skill.current_revision_id)
    if revision is None:  # the store's own invariant; never expected
        raise SkillNotFoundError(f"skill {skill.skill_id!r} has no current revision", {"skill_id": skill.skill_id})
    return revision


def resource_infos(store: CatalogStore, revision_id: str, skill: Skill | None = None) -> list[ResourceInfo]:
    """The resources of ``revision_id``; with ``skill`` (whose current revision it is), each with the
    skill:// URI the Skills extension serves it at, which serves only the current revision."""
    return [
        ResourceInfo(resource_id=r.resource_id, path=r.path, kind=r.kind, media_type=r.media_type, size=r.size,
                     sha256=r.sha256, uri=skill_uri(skill.grant, skill.slug, r.path) if skill is not None else "")
        for r in store.resources(revision_id)
    ]


def get_detail(store: CatalogStore, principal: Principal, skill_id: str) -> SkillDetail:
    skill = visible_skill(store, principal, skill_id)
    rev = _current_revision(store, skill)
    flow = skill.kind == "flow_template"
    return SkillDetail(
        skill_id=skill.skill_id,
        slug=skill.slug,
        name=skill.name,
        description=skill.description,
        kind=skill.kind,
        tags=list(skill.tags),
        revision_id=rev.revision_id,
        version=rev.version,
        canonical_hash=rev.canonical_hash,
        updated_at=skill.updated_at,
        instructions=rev.instructions if (rev.instructions or not flow) else None,
        instructions_chars=len(rev.instructions),
        steps=[StepView(tool=s.tool, args=s.args) for s in rev.steps] if flow else None,
        parameters=[ParameterView(**p.presented()) for p in rev.parameters] if flow else None,
        resources=resource_infos(store, rev.revision_id, skill),
        skill_uri=skill_uri(skill.grant, skill.slug),
    )


def get_resource(store: CatalogStore, principal: Principal, skill_id: str, path: str) -> tuple[Skill, str, Resource]:
    """One resource of a visible skill's current revision, with its bytes: ``(skill, revision_id, resource)``.
    ``path`` is the resource's path or its ``resource_id``; ``RESOURCE_NOT_FOUND`` names the paths there are."""
    skill = visible_skill(store, principal, skill_id)
    revision_id = _current_revision(store, skill).revision_id
    found = store.resource(revision_id, path) if isinstance(path, str) and 0 < len(path) <= 512 else None
    if found is None:
        paths = [r.path for r in store.resources(revision_id)]
        raise ResourceNotFoundError(
            f"{skill.slug!r} has no resource {path!r}"
            + (f"; its resources: {', '.join(paths[:20])}{' ...' if len(paths) > 20 else ''}" if paths
               else "; it has no resources"),
            {"skill_id": skill.skill_id, "revision_id": revision_id, "resource": path, "resources": paths[:100]},
        )
    return skill, revision_id, found


def resolve_flow(
    store: CatalogStore,
    principal: Principal,
    skill_id: str,
    values: Mapping[str, Any],
    known_tools: Iterable[str] | None = None,
) -> ResolvedFlow:
    skill = visible_skill(store, principal, skill_id)
    if skill.kind != "flow_template":
        raise SkillInvalidError(
            f"skill {skill_id!r} is a {skill.kind} skill, not a flow_template: read it with get_skill",
            {"skill_id": skill_id, "kind": skill.kind},
        )
    if not isinstance(values, Mapping):
        raise ValidationError("parameters must be an object of name to value",
                              {"problems": [problem("parameters", "must be an object of name to value")]})
    try:  # the names: a value that is no JSON value is one of the problems resolve_steps reports together
        check_wellformed(dict.fromkeys(values), "parameters")
    except IllFormedError as exc:
        raise ValidationError(str(exc), {"problems": [problem(exc.where, exc.reason, "invalid")]}) from None
    rev = _current_revision(store, skill)
    steps, effective = resolve_steps(rev.steps, rev.parameters, values, known_tools)
    return ResolvedFlow(
        skill_id=skill.skill_id,
        revision_id=rev.revision_id,
        steps=[ResolvedStep(**s) for s in steps],
        parameters=effective,
    )
