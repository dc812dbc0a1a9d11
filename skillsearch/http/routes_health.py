"""Operations: ``/healthz`` (the process is up), ``/readyz`` (the index reflects the catalog) and
``/metrics`` (Prometheus), none behind a bearer token."""

from __future__ import annotations

from typing import cast

from fastapi import APIRouter, Request
from fastapi.responses import Response

from skillsearch.core.errors import IndexNotReadyError
from skillsearch.http.deps import CatalogDep, MetricsDep
from skillsearch.http.metrics import CONTENT_TYPE, Operations
from skillsearch.http.schemas import HealthResponse, ReadyResponse, documented_errors
from skillsearch.sync.health import behind, degraded_reasons

__all__ = ["router"]

router = APIRouter(tags=["operations"])


@router.get("/healthz", response_model=HealthResponse, operation_id="healthz", summary="The process is up.")
def healthz() -> HealthResponse:
    return HealthResponse(status="ok")


@router.get("/readyz", response_model=ReadyResponse, responses=documented_errors(503), operation_id="readyz",
            summary="The index is loaded and reflects the catalog store (503 until it does); `degraded` when a "
                    "sync has been failing for longer than the configured bound.")
def readyz(catalog: CatalogDep, request: Request) -> ReadyResponse:
    ready = catalog.readiness()  # INDEX_NOT_READY (503) otherwise
    ops = cast(Operations, request.app.state.operations)
    health = ops.health()
    if ready.documents == 0 and health and all(h.last_success_age_s is None for h in health):
        # A new replica whose first sync has not stored anything yet (still running, or failing: an unreachable
        # platform) has nothing to serve: it stays out of the balancer's pool, as docs/deploy.md says.
        raise IndexNotReadyError("nothing to serve yet: the catalog is empty and no sync has succeeded (see"
                                 " /v1/sync/status)", {"first_sync": [f"{h.kind} {h.name}" for h in health]})
    pending = behind(health)
    if pending:
        # Restarted, or restored from a snapshot: until its writer's first pull since it took the lead has
        # finished, the replica may still hold skills revoked or removed meanwhile (a webhook it missed).
        raise IndexNotReadyError("catching up with the platform: no pull has finished since this data"
                                 " directory's writer started (see /v1/sync/status)", {"first_pull": pending})
    reasons = degraded_reasons(health, ops.degraded_after_s)
    return ReadyResponse(status="degraded" if reasons else "ready", degraded=reasons, writer=ops.writer(),
                         documents=ready.documents, generation=ready.generation, changed_at=ready.changed_at,
                         catching_up=ready.catching_up)


@router.get("/metrics", operation_id="metrics", summary="Prometheus metrics.", response_class=Response,
            responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                             "description": "Prometheus text exposition format."}})
def metrics_route(metrics: MetricsDep) -> Response:
    return Response(metrics.render(), media_type=CONTENT_TYPE)
