"""``recall_cloud_skill``: progressive disclosure of a skill in three levels (design section 6).

- **Level 0** (no ``skill_id``, no ``slug``): descriptors from the same search as ``search_skills``;
  discovery metadata only, never instructions.
- **Level 1** (``skill_id`` or ``slug``): the root manifest of the current revision, or of the revision
  pinned by ``revision_id``: instructions, revision metadata, ``canonical_hash``, the resource list.
  Instructions longer than the cap come a part at a time, by ``get_skill``'s rule (``core/text_parts.py``):
  a cut part says ``next_offset``, and the same skill with that ``revision_id`` and ``offset = next_offset``
  gives the next part (an ``offset`` without ``revision_id`` is ``REVISION_PINNING_VIOLATION``: the parts
  must come from one revision to join into its instructions).
- **Level 2** (``resource`` set): one resource, by logical path or id, of the revision pinned by
  ``revision_id``. Without a pin it is ``REVISION_PINNING_VIOLATION``: a resource read must name the
  immutable revision it belongs to, so that what the caller inspected is what it gets. A resource longer
  than the cap comes a part at a time too, counted in bytes (a resource may be binary; a text part never
  splits a UTF-8 character): ``offset = next_offset`` gives the next part, the parts joined are its bytes.

Every answer is one :class:`CloudSkillEnvelope`. Access follows the tool's own reference rather than the
catalog reads in one way: the ``memory:read`` scope is required at every level (``ACCESS_DENIED``
without it). A ``skill_id`` outside the caller's grants answers exactly as a missing one
(``SKILL_NOT_FOUND``, "no skill ... in your grants"): skill ids derive from grant and slug, so a distinct
``ACCESS_DENIED`` would let a caller confirm what another grant contains (issue 13). A slug is resolved
only inside the caller's grants. Content is capped at ``max_content_bytes``; a cut answer says so in ``render_status`` and
``warnings`` while ``sha256`` stays the hash of the whole resource; cut instructions also say where to read on.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from skillsearch.catalog.reads import ambiguous_slug, resource_infos
from skillsearch.catalog.store import CatalogStore
from skillsearch.core.domain import SCOPE_MEMORY_READ, Principal, Revision, Skill, slug_key
from skillsearch.core.errors import (
    AccessDeniedError,
    ResourceNotFoundError,
    RevisionNotFoundError,
    RevisionPinningError,
    SkillArchivedError,
    SkillNotFoundError,
    SkillSearchError,
    ValidationError,
    problem,
)
from skillsearch.core.skill_uri import skill_uri
from skillsearch.core.text_parts import offset_problem, text_part
from skillsearch.core.textual import is_text
from skillsearch.core.views import ParameterView, SearchResponse, StepView
from skillsearch.core.visibility import is_grant_revoked
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.usecases.recall_models import (
    SCHEMA_VERSION,
    CloudSkillEnvelope,
    Descriptor,
    DescriptorList,
    ErrorPayload,
    ResourcePayload,
    RevisionMeta,
    RootManifest,
)

__all__ = [
    "DEFAULT_MAX_CONTENT_BYTES",
    "DESCRIPTOR_LIMIT",
    "SCHEMA_VERSION",
    "CloudSkillEnvelope",
    "DescriptorList",
    "ErrorPayload",
    "RecallRequest",
    "ResourcePayload",
    "RootManifest",
    "error_envelope",
    "recall",
]


DEFAULT_MAX_CONTENT_BYTES = 256 * 1024
DESCRIPTOR_LIMIT = 10
MAX_QUERY_CHARS = 1000
_IDENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}$")

@dataclass(frozen=True)
class RecallRequest:
    query: str = ""
    skill_id: str = ""
    slug: str = ""
    revision_id: str = ""
    resource: str = ""
    offset: int = 0


SearchFn = Callable[[SearchRequest], SearchResponse]


def error_envelope(exc: SkillSearchError) -> CloudSkillEnvelope:
    return CloudSkillEnvelope(
        kind="error", render_status="error",
        data=ErrorPayload(code=exc.code, message=exc.message, details=exc.details),
    )


def recall(
    request: RecallRequest,
    principal: Principal,
    *,
    store: CatalogStore,
    search: SearchFn,
    max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES,
) -> CloudSkillEnvelope:
    """Answer one recall; raises a :class:`SkillSearchError` (see :func:`error_envelope`) on failure."""
    if not principal.has_scope(SCOPE_MEMORY_READ):
        raise AccessDeniedError(f"recall_cloud_skill needs the {SCOPE_MEMORY_READ} scope",
                                {"required_scope": SCOPE_MEMORY_READ})
    req = _validated(request)
    warnings: list[str] = []
    if not req.skill_id and not req.slug:
        return _level0(req, search)
    if req.query:
        warnings.append("query is ignored when skill_id or slug is given")
    skill = _skill_of(store, principal, req)
    if req.resource:
        if not req.revision_id:
            raise RevisionPinningError(
                "a resource read needs revision_id: recall the root manifest first and pin its revision_id",
                {"skill_id": skill.skill_id, "resource": req.resource},
            )
        revision = _revision_of(store, skill, req.revision_id, warnings)
        return _level2(store, skill, revision, req.resource, warnings, max_content_bytes, req.offset)
    if req.offset and not req.revision_id:
        raise RevisionPinningError(
            "reading the instructions on from offset needs revision_id: pass the revision_id of the answer"
            " that gave next_offset, so that the parts join into one revision's instructions",
            {"skill_id": skill.skill_id, "offset": req.offset},
        )
    revision = _revision_of(store, skill, req.revision_id or skill.current_revision_id, warnings)
    return _level1(store, skill, revision, warnings, max_content_bytes, req.offset)


def _validated(req: RecallRequest) -> RecallRequest:
    problems: list[dict[str, str]] = []
    values = {k: getattr(req, k) for k in ("query", "skill_id", "slug", "revision_id", "resource")}
    for name, value in values.items():
        if not isinstance(value, str):
            problems.append(problem(name, f"{name} must be a string"))
    offset = req.offset
    bad_offset = offset_problem(offset)
    if bad_offset is not None:
        problems.append(bad_offset)
    if problems:
        raise ValidationError("; ".join(p["message"] for p in problems), {"problems": problems})
    query, skill_id, slug = req.query.strip(), req.skill_id.strip(), req.slug.strip()
    revision_id, resource = req.revision_id.strip(), req.resource.strip()
    if len(req.query) > MAX_QUERY_CHARS:
        problems.append(problem("query", f"query is longer than {MAX_QUERY_CHARS} characters"))
    if skill_id and not _IDENT.match(skill_id):
        problems.append(problem("skill_id", "skill_id is not a valid identifier"))
    if slug:  # read as get_skill reads one (``slug_key``): ``Python-Profiling`` names ``python-profiling``
        key = slug_key(slug)
        if key is None:
            problems.append(problem("slug", "slug must be 1-64 characters of a-z, 0-9 and '-'"))
        else:
            slug = key
    if revision_id and not _IDENT.match(revision_id):
        problems.append(problem("revision_id", "revision_id is not a valid identifier"))
    if resource and (len(resource) > 512 or any(ord(c) < 32 for c in resource)):
        problems.append(problem("resource", "resource must be a logical path or resource id of at most 512 characters"))
    if offset and not (skill_id or slug):
        problems.append(problem("offset", "offset reads on from a part (Level 1's instructions, or a Level 2"
                                          " resource): give skill_id or slug and revision_id"))
    if not skill_id and not slug:
        if revision_id or resource:
            problems.append(problem("skill_id", "revision_id and resource need skill_id or slug"))
        elif not query:
            problems.append(problem("query", "give a query (Level 0), or a skill_id or slug (Level 1 and 2)"))
    if problems:
        raise ValidationError("; ".join(p["message"] for p in problems), {"problems": problems})
    return RecallRequest(query=query, skill_id=skill_id, slug=slug, revision_id=revision_id, resource=resource,
                         offset=offset)


def _level0(req: RecallRequest, search: SearchFn) -> CloudSkillEnvelope:
    found = search(SearchRequest(query=req.query, limit=DESCRIPTOR_LIMIT))
    descriptors = [
        Descriptor(skill_id=h.skill_id, slug=h.slug, name=h.name, description=h.description, kind=h.kind,
                   tags=list(h.tags), score=h.score, confidence=h.confidence, skill_uri=h.skill_uri)
        for h in found.hits
    ]
    # The search's own sentence for its no_match_reason says what to do next (rephrase, check the grants).
    said = f"no skill is a good match for this query. {found.no_match_message or ''}".strip()
    warnings = [said] if found.no_match else []
    if found.notice:
        warnings.append(found.notice)
    return CloudSkillEnvelope(
        kind="descriptor",
        render_status="empty" if not descriptors else "complete",
        warnings=warnings,
        data=DescriptorList(query=req.query, no_match=found.no_match, no_match_reason=found.no_match_reason,
                            notice=found.notice, descriptors=descriptors),
    )


def _in_grants(skill: Skill, principal: Principal, revoked: frozenset[str]) -> bool:
    if is_grant_revoked(skill.grant, revoked):
        return False
    return principal.grants is None or skill.grant in principal.grants


# What an agent does after a SKILL_NOT_FOUND: the same words for a missing skill and one outside the grants.
_FIND_IT = ": find the skill with query (Level 0) and pass a descriptor's skill_id or slug"


def _skill_of(store: CatalogStore, principal: Principal, req: RecallRequest) -> Skill:
    """The skill named by ``skill_id`` and/or ``slug``, checked against the caller's grants."""
    revoked = store.revoked_subscriptions()
    by_id: Skill | None = None
    if req.skill_id:
        by_id = store.skill(req.skill_id)
        if by_id is None or not _in_grants(by_id, principal, revoked):
            # One answer for a missing id and an id outside the caller's grants: ids derive from grant and
            # slug, so a different answer would tell a caller what another grant contains.
            raise SkillNotFoundError(f"no skill {req.skill_id!r} in your grants{_FIND_IT}", {"skill_id": req.skill_id})
        if req.slug and by_id.slug != req.slug:
            raise ValidationError("skill_id and slug name different skills: pass one of them",
                                  {"problems": [problem("slug", "names another skill than skill_id")]})
        skill = by_id
    else:
        mine = [s for s in store.skills_by_slug(req.slug) if _in_grants(s, principal, revoked)]
        active = [s for s in mine if s.status == "active"]
        if len(active) > 1:  # get_skill's answer to the same slug (``reads.ambiguous_slug``)
            raise ambiguous_slug("slug", req.slug, active)
        if not mine:
            raise SkillNotFoundError(f"no skill with slug {req.slug!r} in your grants{_FIND_IT}", {"slug": req.slug})
        skill = active[0] if active else mine[0]
    if skill.status != "active":
        raise SkillArchivedError(f"skill {skill.skill_id!r} is archived", {"skill_id": skill.skill_id})
    return skill


def _revision_of(store: CatalogStore, skill: Skill, revision_id: str, warnings: list[str]) -> Revision:
    revision = store.revision(revision_id)
    if revision is None or revision.skill_id != skill.skill_id:
        # What to do next: the current revision is the skill's to show (the caller sees the skill).
        raise RevisionNotFoundError(
            f"skill {skill.skill_id!r} has no revision {revision_id!r}: recall the skill without revision_id for"
            f" its current revision ({skill.current_revision_id}), then pin that one",
            {"skill_id": skill.skill_id, "revision_id": revision_id, "current_revision_id": skill.current_revision_id},
        )
    if revision.revision_id != skill.current_revision_id:
        warnings.append(
            f"revision {revision.revision_id} is not the current revision of this skill"
            f" (current: {skill.current_revision_id})"
        )
    return revision


def _revision_meta(skill: Skill, revision: Revision) -> RevisionMeta:
    return RevisionMeta(revision_id=revision.revision_id, version=revision.version, created_at=revision.created_at,
                        canonical_hash=revision.canonical_hash,
                        is_current=revision.revision_id == skill.current_revision_id)


def _instructions_part(text: str, offset: int, max_bytes: int) -> tuple[str, int | None]:
    """``text`` from ``offset``, at most ``max_bytes`` of UTF-8 (at least one character, so reading on always
    moves), cut where ``get_skill`` cuts (``core/text_parts.text_part``: after a line end where it can);
    ``next_offset`` as there. An offset past the end is a ``VALIDATION_ERROR`` naming it."""
    window = text[offset: offset + max_bytes].encode("utf-8")[:max_bytes].decode("utf-8", errors="ignore")
    return text_part(text, offset, max(len(window), 1))


def _level1(
    store: CatalogStore, skill: Skill, revision: Revision, warnings: list[str], max_bytes: int, offset: int = 0,
) -> CloudSkillEnvelope:
    whole = revision.instructions
    instructions, next_offset = _instructions_part(whole, offset, max_bytes)
    cut = offset > 0 or next_offset is not None
    if next_offset is not None:
        warnings.append(
            f"instructions truncated at {max_bytes} bytes: characters {offset} to {next_offset} of {len(whole)};"
            f" for the rest recall again with this skill_id, revision_id={revision.revision_id} and"
            f" offset={next_offset}"
        )
    flow = revision.kind == "flow_template"
    manifest = RootManifest(
        skill_id=skill.skill_id,
        slug=skill.slug,
        name=revision.name,
        description=revision.description,
        kind=revision.kind,
        tags=list(revision.tags),
        current_revision_id=skill.current_revision_id,
        revision=_revision_meta(skill, revision),
        canonical_hash=revision.canonical_hash,
        instructions=instructions,
        instructions_truncated=cut,
        instructions_chars=len(whole),
        instructions_offset=offset,
        next_offset=next_offset,
        steps=[StepView(tool=s.tool, args=s.args) for s in revision.steps] if flow else None,
        parameters=[ParameterView(**p.presented()) for p in revision.parameters] if flow else None,
        resources=resource_infos(store, revision.revision_id,
                                 skill if revision.revision_id == skill.current_revision_id else None),
        skill_uri=skill_uri(skill.grant, skill.slug),
    )
    return CloudSkillEnvelope(kind="root", render_status="truncated" if cut else "complete", warnings=warnings,
                              data=manifest)


def _level2(
    store: CatalogStore, skill: Skill, revision: Revision, wanted: str, warnings: list[str], max_bytes: int,
    offset: int = 0,
) -> CloudSkillEnvelope:
    found = store.resource(revision.revision_id, wanted)
    if found is None:
        raise ResourceNotFoundError(
            f"revision {revision.revision_id!r} has no resource {wanted!r}",
            {"skill_id": skill.skill_id, "revision_id": revision.revision_id, "resource": wanted},
        )
    raw = found.content
    text = is_text(found.media_type, raw)
    end = _resource_part_end(raw, offset, max_bytes, text)
    encoding: Literal["text", "base64"] = "text" if text else "base64"
    content = raw[offset:end].decode("utf-8") if text else base64.b64encode(raw[offset:end]).decode("ascii")
    next_offset = end if end < len(raw) else None
    cut = offset > 0 or next_offset is not None
    returned = end - offset
    if cut:
        read_on = "" if next_offset is None else (
            f"; read on: the same skill, revision_id={revision.revision_id}, resource={found.path} and"
            f" offset={next_offset}")
        warnings.append(f"content truncated: bytes {offset} to {end} of {len(raw)}{read_on}; sha256 and size"
                        " describe the whole resource")
    payload = ResourcePayload(
        skill_id=skill.skill_id, revision_id=revision.revision_id, resource_id=found.resource_id, path=found.path,
        kind=found.kind, media_type=found.media_type, size=len(raw), sha256=found.sha256, encoding=encoding,
        content=content, returned_bytes=returned, truncated=cut, offset=offset, next_offset=next_offset,
    )
    return CloudSkillEnvelope(kind="resource", render_status="truncated" if cut else "complete", warnings=warnings,
                              data=payload)


def _resource_part_end(raw: bytes, offset: int, max_bytes: int, text: bool) -> int:
    """Where the part of a resource that starts at byte ``offset`` ends: at most ``max_bytes`` on, and for text
    never inside a UTF-8 character (at least one character, so reading on always moves). An offset past the
    end, or inside a character of a text resource, is a ``VALIDATION_ERROR`` naming it."""
    if offset > len(raw):
        raise ValidationError(f"offset {offset} is past the end of the resource ({len(raw)} bytes)",
                              {"problems": [problem("offset", "past the end of the resource")]})
    if text and offset < len(raw) and raw[offset] & 0xC0 == 0x80:
        raise ValidationError(f"offset {offset} falls inside a UTF-8 character of the resource: pass the"
                              " next_offset of the previous part", {"problems": [problem("offset", "inside a character")]})
    end = min(len(raw), offset + max_bytes)
    if not text:
        return end
    while offset < end < len(raw) and raw[end] & 0xC0 == 0x80:
        end -= 1
    if end == offset and end < len(raw):  # a cap smaller than one character: that character whole
        end += 1
        while end < len(raw) and raw[end] & 0xC0 == 0x80:
            end += 1
    return end
