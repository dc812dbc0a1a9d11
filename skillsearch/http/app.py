"""The HTTP surface: the catalog's reads under ``/v1``, health, readiness, metrics and the search page.

``create_app(catalog, ...)`` assembles a FastAPI app over one :class:`Catalog` from the module-level
parts: ``routes_skills`` (``/v1``), ``routes_health`` (``/healthz``, ``/readyz``, ``/metrics``),
``routes_page`` (the search page), ``errors`` (the error handlers), ``openapi`` and ``middleware``. Every
``/v1`` route needs a bearer token (see :mod:`skillsearch.http.auth`); list, search, get and resolve need
scope ``skills:read``, recall needs ``memory:read``. Errors are the package's error tree as ``{"error":
{code, message, details}}`` with the error's HTTP status; request validation failures are ``400
VALIDATION_ERROR`` (not FastAPI's 422, which this API reserves for ``SKILL_INVALID``).

The process composes more through ``routers`` (e.g. the sync webhook under ``/v1/sync``), ``mounts`` (e.g.
MCP's streamable HTTP app at ``/mcp``: each is an exact route that requires a valid bearer token and sees
the caller as ``scope["state"]["principal"]``) and ``lifespans`` (async context managers entered at
start-up, e.g. ``mcp.session_manager.run()``); ``skillsearch/cli/serve.py`` is that composition.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI
from starlette.routing import Match, Route
from starlette.types import Scope

from skillsearch.http import routes_health, routes_page
from skillsearch.http.auth import DEMO_TOKEN, PrincipalRegistry
from skillsearch.http.errors import install_error_handlers
from skillsearch.http.guard import BearerGuard, require_bearer
from skillsearch.http.head import HeadAsGet
from skillsearch.http.metrics import HttpMetrics, Operations, sync_age_seconds
from skillsearch.http.middleware import ASGIApp, RequestContextMiddleware
from skillsearch.http.openapi import install_openapi
from skillsearch.http.routes_skills import skills_router
from skillsearch.http.schemas import ErrorBody, Limits
from skillsearch.http.utf8_target import Utf8Target
from skillsearch.service import Catalog

__all__ = ["BearerGuard", "ErrorBody", "Lifespan", "Limits", "Operations", "create_app", "require_bearer"]

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[Any]]


class _MountRoute(Route):
    """A mounted app's exact route that, as FastAPI's routes do, puts itself in the scope: the request
    metrics and the access log label its requests with its path (``/mcp``), not ``other``."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        if match is not Match.NONE:
            child["route"] = self
        return match, child


def create_app(
    catalog: Catalog,
    *,
    principals: PrincipalRegistry | None = None,
    limits: Limits | None = None,
    routers: Sequence[APIRouter] = (),
    mounts: Sequence[tuple[str, ASGIApp]] = (),
    lifespans: Sequence[Lifespan] = (),
    operations: Operations | None = None,
) -> FastAPI:
    """The HTTP app over ``catalog``. ``principals`` defaults to the data dir's principals file (plus the
    demo principal on the sample catalog). ``operations``: the process's sync duties, for ``/metrics`` and
    ``/readyz`` (default: no sync, and the process counts as the writer)."""
    registry = principals or PrincipalRegistry.for_catalog(catalog)
    limits = limits or Limits()
    operations = operations or Operations()
    metrics = HttpMetrics(
        documents=catalog.indexed_documents,
        skills=catalog.skill_count,
        sync_age=lambda: sync_age_seconds(catalog.subscriptions.last_sync_successes()),
        batches=lambda: (stats.to_dict() if (stats := catalog.batch_stats()) else None),
        operations=operations,
        generation=catalog.index_generation,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:  # at exit, last pushed first
            stack.callback(catalog.resume_writes)  # last: the pollers are joined; the catalog may outlive this app
            for factory in lifespans:
                await stack.enter_async_context(factory(app))
            # First at shutdown (SIGTERM): a sync's embedding stops at its next batch before the poller is joined.
            stack.callback(catalog.stop_writes)
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
    app.state.operations = operations
    app.state.limits = limits
    # Inside the request middleware (a request id and a log line for its 400): a target that is not UTF-8.
    app.add_middleware(Utf8Target)
    # Inside the request middleware, which sees (and logs) HEAD as sent; not for the mounts (MCP's GET is a stream).
    app.add_middleware(HeadAsGet, exclude=frozenset(path for path, _ in mounts))
    app.add_middleware(RequestContextMiddleware, metrics=metrics, max_body_bytes=limits.max_body_bytes)
    app.include_router(skills_router(limits, catalog.settings))
    for router in routers:
        app.include_router(router)
    for path, sub_app in mounts:
        # An exact route, not a Mount: a Mount would first redirect every POST to "<path>/". Every method goes
        # to the mounted app, which says which it takes (MCP: 405 with Allow: POST); a method list here answered
        # the others itself with an Allow naming methods the mounted app refuses.
        app.router.routes.append(_MountRoute(path, endpoint=require_bearer(sub_app, registry),
                                             methods=None, include_in_schema=False))
    app.include_router(routes_health.router)
    routes_page.install_page(app)
    install_error_handlers(app)
    install_openapi(app)
    return app
