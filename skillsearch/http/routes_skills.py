"""The catalog's reads under ``/v1``: list, search, get, one resource's bytes, resolve (scope ``skills:read``)
and recall (``memory:read``). Each route hands the caller and its validated input to one :class:`Catalog` method.

Get, the resource read, resolve and recall are module-level route functions; list and search are built by
:func:`skills_router` because their query limits (tags per request, page sizes, query length) are the
app's :class:`Limits` and the catalog's settings, which the OpenAPI schema states.

This module does not use ``from __future__ import annotations``: FastAPI reads the route functions'
annotations at runtime, and those of list and search hold the per-app limits.
"""

import re
import time
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Body, Depends, Header, Query, Request, Response
from fastapi import Path as PathParam
from pydantic import StringConstraints

from skillsearch.core.domain import FusionMethod, SearchMode, SkillKind
from skillsearch.core.settings import Settings
from skillsearch.core.text_parts import instructions_part
from skillsearch.core.textual import is_text
from skillsearch.core.views import ListResponse, ResolvedFlow, SearchResponse, SkillDetail
from skillsearch.http.deps import CatalogDep, MetricsDep, Reader, Recaller, query_as_declared
from skillsearch.http.errors import located
from skillsearch.http.schemas import MAX_TAG_CHARS, Limits, RecallBody, ResolveBody, documented_errors
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.usecases.recall import CloudSkillEnvelope

__all__ = ["get_resource", "get_skill", "recall", "resolve_skill", "skills_router"]

Tag = Annotated[str, StringConstraints(min_length=1, max_length=MAX_TAG_CHARS)]
SkillId = Annotated[str, PathParam(min_length=1, max_length=200,
                                   description="A skill_id from list or search (sk_...), or the slug of a skill you"
                                               " can see when only one has it.")]
ResourcePath = Annotated[str, PathParam(min_length=1, max_length=512,
                                        description="A path from the skill's resources (or a resource_id).")]


def get_skill(
    principal: Reader, catalog: CatalogDep, skill_id: SkillId,
    offset: Annotated[int, Query(ge=0, description="Where to start reading the instructions, in characters: 0, or"
                                                   " the next_offset of the previous answer.")] = 0,
    max_chars: Annotated[int | None, Query(ge=1, description="Most characters of the instructions to return (a"
                                                             " part ends at a line end where it can); all of"
                                                             " them when left out.")] = None,
) -> SkillDetail:
    """A part of the instructions only when ``max_chars`` or ``offset`` asks for one (``core/text_parts``)."""
    with located("path"):
        detail = catalog.get_skill(principal, skill_id)
    with located("query"):
        return instructions_part(detail, offset, max_chars)


def get_resource(request: Request, principal: Reader, catalog: CatalogDep, skill_id: SkillId, path: ResourcePath,
                 if_none_match: Annotated[str | None, Header(max_length=200)] = None) -> Response:
    """The resource's exact bytes, under its media type (``charset=utf-8`` only for text that is UTF-8), its
    sha256 as a strong ETag (``If-None-Match`` naming it, its weak ``W/`` form included, or ``*``, answers 304)
    and its revision in ``X-Skill-Revision``. The file comes from whoever authored the skill: it is sent as an attachment,
    unsniffed and sandboxed, so an HTML or SVG resource never runs as a page of this origin (the search page's)."""
    with located("path"):
        _, revision_id, found = catalog.get_resource(principal, skill_id, path)
    etag = f'"{found.sha256}"'
    headers = {"ETag": etag, "X-Skill-Revision": revision_id, "X-Content-Type-Options": "nosniff",
               "Content-Security-Policy": "sandbox", "Cache-Control": "private, no-cache",
               "Content-Disposition": f"attachment; filename*=UTF-8''{quote(found.path.rsplit('/', 1)[-1])}"}
    # Every If-None-Match field line: a list field sent as several lines is one list (RFC 9110 5.3); the
    # parameter above holds the first only.
    sent = ",".join(request.headers.getlist("if-none-match")) if if_none_match is not None else ""
    if {etag, "*"} & {_strong(tag) for tag in sent.split(",") if tag.strip()}:
        return Response(status_code=304, headers=headers)
    return Response(found.content, headers={**headers, "Content-Type": _content_type(found.media_type, found.content)})


def _strong(tag: str) -> str:
    """One entity tag of ``If-None-Match`` as its opaque tag: the header compares weakly (RFC 9110 13.1.2), so
    ``W/"<sha256>"`` names the resource too (a proxy that compresses a response, nginx's gzip among them, hands
    its client the ETag weakened, and that client's revalidations were 200s with the whole file)."""
    tag = tag.strip()
    return tag[2:] if tag.startswith("W/") else tag


# A media type a header can carry: ``type/subtype`` of RFC 9110 tokens, then printable ASCII parameters.
_MEDIA_TYPE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+/[!#$%&'*+.^_`|~0-9A-Za-z-]+(\s*;[\x20-\x7e]*)?")


def _content_type(media_type: str, content: bytes) -> str:
    """The resource's ``Content-Type``: its media type, ``application/octet-stream`` when that is not one a header
    can carry (a bundle's author sets it: a non-Latin-1 character failed the response, a 500); ``charset=utf-8``
    added to every textual type whose bytes are UTF-8 (``core/textual``: JSON, YAML, TOML as well as ``text/*``),
    the mark the search page shows a file in place by (it downloaded a skill's JSON or YAML instead)."""
    if len(media_type) > 200 or not _MEDIA_TYPE.fullmatch(media_type):
        return "application/octet-stream"
    if "charset=" not in media_type.lower() and is_text(media_type, content):
        media_type += "; charset=utf-8"
    return media_type


def resolve_skill(
    principal: Reader, catalog: CatalogDep, skill_id: SkillId,
    body: Annotated[ResolveBody, Body()] = ResolveBody(),  # noqa: B008
) -> ResolvedFlow:
    with located("body", path=("skill_id",)):
        return catalog.resolve(principal, skill_id, body.parameters)


def recall(principal: Recaller, catalog: CatalogDep, body: RecallBody) -> CloudSkillEnvelope:
    with located("body"):
        return catalog.recall(principal, **body.model_dump())


def skills_router(limits: Limits, settings: Settings) -> APIRouter:
    """The ``/v1`` router, with list and search bounded by ``limits`` and ``settings``."""
    v1 = APIRouter(prefix="/v1", tags=["skills"], dependencies=[Depends(query_as_declared)])

    @v1.get("/skills", response_model=ListResponse, responses=documented_errors(400, 401, 403),
            operation_id="list_skills", summary="List the skills you can see, paged, ordered by name.")
    def list_skills(
        principal: Reader,
        catalog: CatalogDep,
        kind: Annotated[SkillKind | None, Query(description="Only this kind.")] = None,
        tag: Annotated[list[Tag], Query(max_length=limits.max_tags, description="Require every tag.")] = [],  # noqa: B006
        cursor: Annotated[str | None, Query(max_length=1000, description="next_cursor of the previous page.")] = None,
        limit: Annotated[int, Query(ge=1, le=limits.max_list_page)] = 50,
    ) -> ListResponse:
        with located("query", {"tags": "tag"}):
            return catalog.list_skills(principal, kind=kind, tags=tag, cursor=cursor, limit=limit)

    @v1.get("/search", response_model=SearchResponse, responses=documented_errors(400, 401, 403, 503),
            operation_id="search_skills",
            summary="Hybrid (BM25 + embedding) search over the skills you can see; each hit explains its rank.")
    def search(
        principal: Reader,
        catalog: CatalogDep,
        metrics: MetricsDep,
        q: Annotated[str, Query(min_length=1, max_length=settings.max_query_chars, description="What you need.",
                                openapi_examples={"profiling": {"value": "profile a slow python function"},
                                                  "french": {"value": "nettoyer des données avec pandas"}})],
        mode: SearchMode = "hybrid",
        kind: SkillKind | None = None,
        tag: Annotated[list[Tag], Query(max_length=limits.max_tags, description="Require every tag.")] = [],  # noqa: B006
        limit: Annotated[int, Query(ge=1, le=settings.max_limit)] = 10,
        fusion: Annotated[FusionMethod | None, Query(description="Hybrid fusion.")] = None,
        semantic_weight: Annotated[float | None, Query(ge=0.0, le=1.0, allow_inf_nan=False)] = None,
        min_confidence: Annotated[float | None, Query(
            ge=0.0, le=1.0, allow_inf_nan=False,
            description="Leave out hits whose confidence is under this (hybrid mode), before limit applies: up to"
                        " limit hits that reach it, in rank order; hits whose confidence is null are kept.")] = None,
    ) -> SearchResponse:
        started = time.perf_counter()
        try:
            with located("query", {"query": "q", "tags": "tag"}):
                return catalog.search_view(principal, SearchRequest(
                    query=q, limit=limit, mode=mode, kind=kind, tags=tuple(tag), fusion=fusion,
                    semantic_weight=semantic_weight, min_confidence=min_confidence,
                ))
        finally:
            metrics.observe_search(mode, time.perf_counter() - started)

    v1.add_api_route("/skills/{skill_id}", get_skill, methods=["GET"], response_model=SkillDetail,
                     responses=documented_errors(400, 401, 403, 404), operation_id="get_skill",
                     summary="One skill: instructions (knowledge) or steps and parameters (flow template).")
    v1.add_api_route("/skills/{skill_id}/resources/{path:path}", get_resource, methods=["GET"],
                     response_class=Response, responses={
                         200: {"description": "The file's exact bytes, under its media type",
                               "content": {"application/octet-stream": {}}},
                         304: {"description": "Not modified: If-None-Match named the resource's ETag (its sha256),"
                                              " weak (W/) or not"},
                         **documented_errors(400, 401, 403, 404)},
                     operation_id="get_resource",
                     summary="One file of a skill's current revision, byte for byte (a path from its resources).")
    v1.add_api_route("/skills/{skill_id}/resolve", resolve_skill, methods=["POST"], response_model=ResolvedFlow,
                     responses=documented_errors(400, 401, 403, 404, 408, 413, 415, 422),
                     operation_id="resolve_skill",
                     summary="Substitute parameter values into a flow template's steps (nothing is executed).")
    v1.add_api_route("/recall", recall, methods=["POST"], response_model=CloudSkillEnvelope,
                     responses=documented_errors(400, 401, 403, 404, 408, 410, 413, 415, 503),
                     operation_id="recall_cloud_skill",
                     summary="Progressive disclosure: descriptors (query), a revision's root manifest (skill_id or"
                             " slug), or one resource of a pinned revision (resource + revision_id).")
    return v1
