"""What every ``/v1`` route depends on: the app's catalog and the authenticated caller.

The app keeps its :class:`Catalog`, :class:`PrincipalRegistry` and :class:`HttpMetrics` in ``app.state``
(set by ``create_app``), so the routers are module-level objects shared by every app.
"""

from __future__ import annotations

from typing import Annotated, cast

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from skillsearch.core.domain import SCOPE_MEMORY_READ, Principal
from skillsearch.http.auth import SCOPE_SKILLS_READ, PrincipalRegistry, require_scope
from skillsearch.http.metrics import HttpMetrics
from skillsearch.http.query_names import request_refusal
from skillsearch.service import Catalog

__all__ = [
    "CatalogDep",
    "MetricsDep",
    "Reader",
    "Recaller",
    "authenticated",
    "catalog_of",
    "metrics_of",
    "query_as_declared",
    "reader",
    "recaller",
    "registry_of",
]

bearer = HTTPBearer(auto_error=False, description="A token from `skillsearch token add` (or the demo token).")


def catalog_of(request: Request) -> Catalog:
    return cast(Catalog, request.app.state.catalog)


def registry_of(request: Request) -> PrincipalRegistry:
    return cast(PrincipalRegistry, request.app.state.principals)


def metrics_of(request: Request) -> HttpMetrics:
    return cast(HttpMetrics, request.app.state.metrics)


def authenticated(request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> Principal:
    principal = registry_of(request).authenticate_header(request.headers.get("authorization"))
    request.state.principal = principal
    return principal


def reader(principal: Annotated[Principal, Depends(authenticated)]) -> Principal:
    require_scope(principal, SCOPE_SKILLS_READ)
    return principal


def recaller(principal: Annotated[Principal, Depends(authenticated)]) -> Principal:
    require_scope(principal, SCOPE_MEMORY_READ)
    return principal


CatalogDep = Annotated[Catalog, Depends(catalog_of)]
MetricsDep = Annotated[HttpMetrics, Depends(metrics_of)]
Reader = Annotated[Principal, Depends(reader)]
Recaller = Annotated[Principal, Depends(recaller)]


def query_as_declared(request: Request, _: Annotated[Principal, Depends(authenticated)]) -> None:
    """Refuse a query parameter the route does not declare (``?limt=5``: FastAPI would ignore it) and one that
    takes one value given more than once (``?limit=1&limit=500``: FastAPI would take the last, a proxy or log
    reader in front the first), as ``http/query_names.query_refusal`` says: a ``VALIDATION_ERROR`` with a
    problem per parameter (``query.limt``), after the token is checked like every other input error."""
    if (refused := request_refusal(request)) is not None:
        raise refused
