"""The HTTP surface: the catalog's reads under ``/v1``, health, readiness, metrics and the search page.

``create_app(catalog, ...)`` builds a FastAPI app over one :class:`Catalog`. Every ``/v1`` route needs a
bearer token (see :mod:`skillsearch.http.auth`); list, search, get and resolve need scope ``skills:read``,
recall needs ``memory:read``. Errors are the package's error tree as ``{"error": {code, message,
details}}`` with the error's HTTP status; request validation failures are ``400 VALIDATION_ERROR`` (not
FastAPI's 422, which this API reserves for ``SKILL_INVALID``).

Other issues plug in through ``routers`` (e.g. the sync webhook under ``/v1/sync``), ``mounts`` (e.g. MCP's
streamable HTTP app at ``/mcp``: each is an exact route that requires a valid bearer token and sees the
caller as ``scope["state"]["principal"]``) and ``lifespans`` (async context managers entered at start-up, e.g.
``mcp.session_manager.run()``).

This module alone does not use ``from __future__ import annotations``: FastAPI reads the route functions'
annotations at runtime, and these close over per-app limits that a string annotation could not resolve.
"""

import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from importlib import resources as importlib_resources
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route

from skillsearch.catalog.reads import MAX_PAGE
from skillsearch.core.domain import SCOPE_MEMORY_READ, Principal
from skillsearch.core.errors import SkillSearchError
from skillsearch.core.views import ListResponse, ResolvedFlow, SearchResponse, SkillDetail
from skillsearch.http.auth import DEMO_TOKEN, SCOPE_SKILLS_READ, PrincipalRegistry, require_scope
from skillsearch.http.metrics import CONTENT_TYPE, HttpMetrics, sync_age_seconds
from skillsearch.http.middleware import ASGIApp, Receive, RequestContextMiddleware, Scope, Send, error_body
from skillsearch.retrieval.search import SearchRequest
from skillsearch.service import Catalog
from skillsearch.usecases.recall import CloudSkillEnvelope

__all__ = ["BearerGuard", "ErrorBody", "Lifespan", "Limits", "create_app", "require_bearer"]

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[Any]]
Tag = Annotated[str, StringConstraints(min_length=1, max_length=64)]
SkillId = Annotated[str, PathParam(min_length=1, max_length=200, description="A skill_id from list or search.")]


@dataclass(frozen=True)
class Limits:
    """Request limits; query length and search page size come from :class:`Settings`."""

    max_body_bytes: int = 64 * 1024
    max_tags: int = 16
    max_list_page: int = MAX_PAGE


class ErrorInfo(BaseModel):
    code: str = Field(description="Stable error code, e.g. VALIDATION_ERROR, UNAUTHENTICATED, SKILL_NOT_FOUND.")
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class ErrorBody(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"error": {"code": "SKILL_NOT_FOUND", "message": "no skill 'x' is visible to you",
                   "details": {"skill_id": "x"}}},
    ]})

    error: ErrorInfo


class ResolveBody(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"parameters": {"service": "checkout", "window_minutes": 30}},
    ]})

    parameters: dict[str, Any] = Field(default_factory=dict, description="Parameter values by name.")


class RecallBody(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"query": "profile a slow python function"},
    ]})

    query: str = Field("", max_length=2000)
    skill_id: str = Field("", max_length=200)
    slug: str = Field("", max_length=64)
    revision_id: str = Field("", max_length=200)
    resource: str = Field("", max_length=512)


class HealthResponse(BaseModel):
    status: Literal["ok"]


class ReadyResponse(BaseModel):
    status: Literal["ready"]
    documents: int = Field(description="Skills in the search index.")
    generation: int = Field(description="The catalog store generation the index reflects.")


_STATUS_TEXT = {400: "Invalid request (VALIDATION_ERROR, REVISION_PINNING_VIOLATION)",
                401: "Missing or invalid bearer token (UNAUTHENTICATED)",
                403: "The token lacks the scope this route needs (ACCESS_DENIED)",
                404: "No such skill visible to you (SKILL_NOT_FOUND and friends)",
                410: "The skill is archived (SKILL_ARCHIVED)",
                413: "Request body too large (VALIDATION_ERROR)",
                422: "The skill cannot serve this request (SKILL_INVALID)",
                503: "The index is not loaded or is inconsistent (INDEX_NOT_READY)"}


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {c: {"model": ErrorBody, "description": _STATUS_TEXT[c]} for c in codes}


def _error_response(exc: SkillSearchError) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if exc.http_status == 401 else None
    return JSONResponse({"error": exc.to_dict()}, status_code=exc.http_status, headers=headers)


class BearerGuard:
    """An ASGI app that runs ``app`` only for a valid bearer token, with the caller's :class:`Principal` in
    ``scope["state"]["principal"]``; otherwise it answers 401 with the JSON error body. A class, not a
    function, so that Starlette's ``Route`` treats it as an ASGI app."""

    def __init__(self, app: ASGIApp, registry: PrincipalRegistry) -> None:
        self.app = app
        self.registry = registry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            try:
                principal = self.registry.authenticate_header(headers.get("authorization"))
            except SkillSearchError as exc:
                body = error_body(exc.code, exc.message, exc.details)
                await send({"type": "http.response.start", "status": exc.http_status, "headers": [
                    (b"content-type", b"application/json"), (b"www-authenticate", b"Bearer"),
                    (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
            scope.setdefault("state", {})["principal"] = principal
        await self.app(scope, receive, send)


def require_bearer(app: ASGIApp, registry: PrincipalRegistry) -> BearerGuard:
    return BearerGuard(app, registry)


def _static_dir() -> Path:
    return Path(str(importlib_resources.files("skillsearch.http") / "static"))


def create_app(
    catalog: Catalog,
    *,
    principals: PrincipalRegistry | None = None,
    limits: Limits | None = None,
    routers: Sequence[APIRouter] = (),
    mounts: Sequence[tuple[str, ASGIApp]] = (),
    lifespans: Sequence[Lifespan] = (),
) -> FastAPI:
    """The HTTP app over ``catalog``. ``principals`` defaults to the data dir's principals file (plus the
    demo principal on the sample catalog)."""
    registry = principals or PrincipalRegistry.for_catalog(catalog)
    limits = limits or Limits()
    settings = catalog.settings
    metrics = HttpMetrics(
        documents=lambda: _documents(catalog),
        skills=catalog.store.count,
        sync_age=lambda: sync_age_seconds([s.last_success for s in catalog.store.sync.states()]),
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            for factory in lifespans:
                await stack.enter_async_context(factory(app))
            yield

    app = FastAPI(
        title="skillsearch",
        version="0.1.0",
        summary="Search-first skill catalog for LLM agents: list, search, get, resolve and recall skills.",
        description="Every /v1 route needs `Authorization: Bearer <token>`. On the bundled sample catalog the "
                    f"demo token is `{DEMO_TOKEN}`. Errors are `{{\"error\": {{code, message, details}}}}`.",
        lifespan=lifespan,
    )
    app.state.catalog = catalog
    app.state.principals = registry
    app.state.metrics = metrics
    app.add_middleware(RequestContextMiddleware, metrics=metrics, max_body_bytes=limits.max_body_bytes)
    bearer = HTTPBearer(auto_error=False, description="A token from `skillsearch token add` (or the demo token).")

    def authenticated(
        request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
    ) -> Principal:
        principal = registry.authenticate_header(request.headers.get("authorization"))
        request.state.principal = principal
        return principal

    def reader(principal: Annotated[Principal, Depends(authenticated)]) -> Principal:
        require_scope(principal, SCOPE_SKILLS_READ)
        return principal

    def recaller(principal: Annotated[Principal, Depends(authenticated)]) -> Principal:
        require_scope(principal, SCOPE_MEMORY_READ)
        return principal

    Reader = Annotated[Principal, Depends(reader)]
    v1 = APIRouter(prefix="/v1", tags=["skills"])

    @v1.get("/skills", response_model=ListResponse, responses=_errors(400, 401, 403), operation_id="list_skills",
            summary="List the skills you can see, paged, ordered by name.")
    def list_skills(
        principal: Reader,
        kind: Annotated[Literal["knowledge", "flow_template"] | None, Query(description="Only this kind.")] = None,
        tag: Annotated[list[Tag], Query(max_length=limits.max_tags, description="Require every tag.")] = [],  # noqa: B006
        cursor: Annotated[str | None, Query(max_length=1000, description="next_cursor of the previous page.")] = None,
        limit: Annotated[int, Query(ge=1, le=limits.max_list_page)] = 50,
    ) -> ListResponse:
        return catalog.list_skills(principal, kind=kind, tags=tag, cursor=cursor, limit=limit)

    @v1.get("/search", response_model=SearchResponse, responses=_errors(400, 401, 403, 503),
            operation_id="search_skills",
            summary="Hybrid (BM25 + embedding) search over the skills you can see; each hit explains its rank.")
    def search(
        principal: Reader,
        q: Annotated[str, Query(min_length=1, max_length=settings.max_query_chars, description="What you need.",
                                openapi_examples={"profiling": {"value": "profile a slow python function"},
                                                  "french": {"value": "nettoyer des données avec pandas"}})],
        mode: Literal["hybrid", "lexical", "semantic"] = "hybrid",
        kind: Literal["knowledge", "flow_template"] | None = None,
        tag: Annotated[list[Tag], Query(max_length=limits.max_tags, description="Require every tag.")] = [],  # noqa: B006
        limit: Annotated[int, Query(ge=1, le=settings.max_limit)] = 10,
        fusion: Annotated[Literal["zscore", "minmax", "rrf"] | None, Query(description="Hybrid fusion.")] = None,
        semantic_weight: Annotated[float | None, Query(ge=0.0, le=1.0)] = None,
    ) -> SearchResponse:
        started = time.perf_counter()
        try:
            return catalog.search_view(principal, SearchRequest(
                query=q, limit=limit, mode=mode, kind=kind, tags=tuple(tag), fusion=fusion,
                semantic_weight=semantic_weight,
            ))
        finally:
            metrics.observe_search(mode, time.perf_counter() - started)

    @v1.get("/skills/{skill_id}", response_model=SkillDetail, responses=_errors(400, 401, 403, 404),
            operation_id="get_skill",
            summary="One skill: instructions (knowledge) or steps and parameters (flow template).")
    def get_skill(principal: Reader, skill_id: SkillId) -> SkillDetail:
        return catalog.get_skill(principal, skill_id)

    @v1.post("/skills/{skill_id}/resolve", response_model=ResolvedFlow,
             responses=_errors(400, 401, 403, 404, 413, 422), operation_id="resolve_skill",
             summary="Substitute parameter values into a flow template's steps (nothing is executed).")
    def resolve_skill(
        principal: Reader, skill_id: SkillId, body: Annotated[ResolveBody, Body()] = ResolveBody()  # noqa: B008
    ) -> ResolvedFlow:
        return catalog.resolve(principal, skill_id, body.parameters)

    @v1.post("/recall", response_model=CloudSkillEnvelope, responses=_errors(400, 401, 403, 404, 410, 413),
             operation_id="recall_cloud_skill",
             summary="Progressive disclosure: descriptors (query), a revision's root manifest (skill_id or slug),"
                     " or one resource of a pinned revision (resource + revision_id).")
    def recall(principal: Annotated[Principal, Depends(recaller)], body: RecallBody) -> CloudSkillEnvelope:
        return catalog.recall(principal, **body.model_dump())

    app.include_router(v1)
    for router in routers:
        app.include_router(router)
    for path, sub_app in mounts:
        # An exact route, not a Mount: a Mount would first redirect every POST to "<path>/".
        app.router.routes.append(Route(path, endpoint=require_bearer(sub_app, registry),
                                       methods=["GET", "POST", "DELETE"], include_in_schema=False))

    ops = APIRouter(tags=["operations"])

    @ops.get("/healthz", response_model=HealthResponse, operation_id="healthz", summary="The process is up.")
    def healthz() -> HealthResponse:
        return HealthResponse(status="ok")

    @ops.get("/readyz", response_model=ReadyResponse, responses=_errors(503), operation_id="readyz",
             summary="The index is loaded and reflects the catalog store.")
    def readyz() -> ReadyResponse | JSONResponse:
        idx = catalog.index()
        snap = idx.snapshot()
        generation = catalog.store.generation()
        docs = len(snap.vectors)
        lexical_docs = idx.lexical.num_docs()
        if snap.generation != generation or lexical_docs != docs:
            return JSONResponse({"error": {
                "code": "INDEX_NOT_READY", "message": "the index does not match the catalog yet",
                "details": {"index_generation": snap.generation, "store_generation": generation,
                            "vectors": docs, "lexical": lexical_docs}}}, status_code=503)
        return ReadyResponse(status="ready", documents=docs, generation=generation)

    @ops.get("/metrics", operation_id="metrics", summary="Prometheus metrics.", response_class=Response,
             responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                              "description": "Prometheus text exposition format."}})
    def metrics_route() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    app.include_router(ops)
    _mount_page(app, registry)
    _install_error_handlers(app)
    _install_openapi(app)
    return app


def _documents(catalog: Catalog) -> int:
    try:
        return len(catalog.index().snapshot().vectors)
    except SkillSearchError:
        return 0


def _mount_page(app: FastAPI, registry: PrincipalRegistry) -> None:
    static = _static_dir()
    app.mount("/static", StaticFiles(directory=static), name="static")

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(static / "index.html", media_type="text/html")

    @app.get("/ui/config", include_in_schema=False)
    def ui_config() -> dict[str, Any]:
        """What the page needs before its first call: the demo token, only on the sample catalog."""
        return {"demo_token": DEMO_TOKEN if registry.demo else None}


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(SkillSearchError)
    async def on_error(_: Request, exc: SkillSearchError) -> JSONResponse:
        return _error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def on_invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            {"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", ""))} for e in exc.errors()
        ]
        message = "; ".join(f"{'.'.join(p['loc'])}: {p['msg']}" for p in problems) or "invalid request"
        return JSONResponse({"error": {"code": "VALIDATION_ERROR", "message": message,
                                       "details": {"problems": problems}}}, status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def on_http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {400: "VALIDATION_ERROR", 404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED"}.get(exc.status_code, "HTTP_ERROR")
        return JSONResponse({"error": {"code": code, "message": str(exc.detail), "details": {}}},
                            status_code=exc.status_code, headers=getattr(exc, "headers", None))


def _install_openapi(app: FastAPI) -> None:
    """FastAPI documents a 422 with its own validation schema on every route with parameters; this API
    answers request validation with 400 ``ErrorBody`` instead, so that 422 is removed where it is not ours."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, summary=app.summary,
                                 description=app.description, routes=app.routes)
            for item in schema.get("paths", {}).values():
                for op in item.values():
                    responses = op.get("responses", {})
                    ref = json.dumps(responses.get("422", {}))
                    if "HTTPValidationError" in ref:
                        del responses["422"]
                    if op.get("parameters") or op.get("requestBody"):
                        responses.setdefault("400", {"description": _STATUS_TEXT[400], "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}})
            comps = schema.get("components", {}).get("schemas", {})
            for unused in ("HTTPValidationError", "ValidationError"):
                comps.pop(unused, None)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
