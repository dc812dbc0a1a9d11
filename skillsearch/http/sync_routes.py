"""The sync routes of our HTTP app: ``POST /v1/sync/webhook`` and ``GET /v1/sync/status``.

The webhook proves itself with its HMAC (``sync/webhook.py``), never with the app's bearer tokens; the
status route names subscriptions, locations and errors, so it is guarded by ``authenticate``, needs the
``skills:read`` scope (what it describes is where the skills that scope reads come from: a token minted for
recall alone, or for nothing, reads no more than it was given) and shows a caller only the subscriptions and
sources of its grants (``sync/status.visible_to``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import pydantic
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from skillsearch.core.domain import Principal
from skillsearch.core.errors import SkillSearchError, UnauthenticatedError, ValidationError, invalid_input, problem
from skillsearch.http.auth import SCOPE_SKILLS_READ, require_scope
from skillsearch.http.errors import NOT_JSON_STATUS, TOO_LARGE_STATUS, error_response, is_json, not_json, too_large
from skillsearch.http.query_names import request_refusal
from skillsearch.http.schemas import documented_errors
from skillsearch.sync.config import SyncConfig
from skillsearch.sync.contract import WebhookAccepted, WebhookEvent
from skillsearch.sync.sources import SourceConfig
from skillsearch.sync.status import SyncStatus, visible_to
from skillsearch.sync.webhook import MAX_WEBHOOK_BYTES, verify_webhook

if TYPE_CHECKING:
    from skillsearch.service import Catalog
    from skillsearch.sync.local import LocalSources
    from skillsearch.sync.poller import Poller

__all__ = ["make_sync_router"]

log = logging.getLogger("skillsearch.sync")


class _Refused(Exception):
    """A webhook refused with a status of its own (413, 415) rather than its error's."""

    def __init__(self, error: SkillSearchError, status: int) -> None:
        super().__init__(error.message)
        self.error, self.status = error, status


def _error(exc: SkillSearchError, status: int | None = None) -> JSONResponse:
    """The webhook's refusal: the app's one error body (``http/errors.py``), but a 401 names no bearer
    scheme, as the webhook's proof is its signature."""
    response = error_response(exc, status)
    if "www-authenticate" in response.headers:
        del response.headers["www-authenticate"]
    return response


def make_sync_router(
    catalog: Catalog,
    config: SyncConfig | None,
    poller: Poller | None = None,
    *,
    authenticate: Callable[[str | None], Principal] | None = None,
    clock: Callable[[], float] = time.time,
    sources: Sequence[SourceConfig] = (),
    keeper: LocalSources | None = None,
    pull: Callable[[str], object] | None = None,
    configured: Callable[[], SyncConfig | None] | None = None,
) -> APIRouter:
    """The sync routes, self-contained (they answer their own errors). ``authenticate`` guards the status
    route, which names subscriptions and errors: it gets the ``Authorization`` header and raises a
    :class:`SkillSearchError` (e.g. ``UNAUTHENTICATED``) to refuse. The webhook has its own HMAC proof and
    must not sit behind the app's bearer tokens. Without ``config`` (only local ``sources``) there is no
    webhook; the status route then shows the sources alone. ``pull(subscription_id)`` asks for the pull a
    webhook calls for (default: the poller's trigger; under several workers, the writer's, ``sync/leader.py``).
    ``configured`` (a server that follows ``sync.toml``): the upstream and subscriptions the file holds now,
    which each request answers for instead of ``config``; the webhook is then served even while the file
    configures no upstream (refused, 401, until it configures one with a secret)."""
    router = APIRouter(tags=["sync"])
    now: Callable[[], SyncConfig | None] = configured or (lambda: config)
    if config is not None or configured is not None:
        _add_webhook(router, catalog, now, pull or (poller.trigger if poller is not None else None), clock)
    _add_status(router, catalog, now, poller, authenticate, sources, keeper)
    return router


def _add_webhook(router: APIRouter, catalog: Catalog, configured: Callable[[], SyncConfig | None],
                 pull: Callable[[str], object] | None, clock: Callable[[], float]) -> None:

    @router.post(
        "/v1/sync/webhook",
        status_code=202,
        summary="Receive a signed change notification from the subscription platform",
        responses={**documented_errors(400, 401, 413, 415),
                   400: {**documented_errors(400)[400],
                         "description": "signed but malformed, or no Content-Length (VALIDATION_ERROR)"},
                   401: {**documented_errors(401)[401],
                         "description": "unsigned, badly signed, stale or replayed (UNAUTHENTICATED)"}},
    )
    async def webhook(request: Request) -> JSONResponse:
        # Its query is not read, nor checked (``http/query_names``): it is outside the signature, and a marker in
        # the URL an operator gave the platform must not make every delivery a 400.
        # Before the body is read: its length must be declared and within the bound.
        declared = request.headers.get("content-length", "")
        if not declared.isdigit():
            return _error(ValidationError(
                f"a webhook must declare its body's length (Content-Length), at most {MAX_WEBHOOK_BYTES} bytes",
                {"problems": [problem("header.content-length", "required")]}))
        if int(declared) > MAX_WEBHOOK_BYTES:
            return _error(too_large(MAX_WEBHOOK_BYTES), TOO_LARGE_STATUS)
        body = await request.body()
        now = clock()
        config = configured()  # as sync.toml says now: a subscription added there is one of ours
        try:
            if len(body) > MAX_WEBHOOK_BYTES:
                raise _Refused(too_large(MAX_WEBHOOK_BYTES), TOO_LARGE_STATUS)
            # The proof first: an unsigned request learns nothing more than 401, whatever it sent.
            if config is None:  # the file configures no upstream (now): no secret, so no webhook
                raise UnauthenticatedError("webhooks are not enabled here (no upstream is configured)")
            verify_webhook(config.upstream.webhook_secret, request.headers, body, now,
                           config.upstream.webhook_tolerance_s)
            if not is_json(request.headers.get("content-type")):
                raise _Refused(not_json(), NOT_JSON_STATUS)
            try:
                event = WebhookEvent.model_validate_json(body)
            except pydantic.ValidationError as exc:
                raise invalid_input([{**e, "loc": ("body", *e.get("loc", ()))} for e in exc.errors()],
                                    "malformed webhook event: ") from None
            action = await anyio.to_thread.run_sync(catalog.subscriptions.receive_webhook_event, config, event, now)
        except _Refused as refused:
            log.warning("webhook refused: %s", refused.error.message)
            return _error(refused.error, refused.status)
        except SkillSearchError as exc:
            log.warning("webhook refused: %s", exc.message)
            return _error(exc)
        if action in ("revoked", "pull_scheduled") and pull is not None:
            await anyio.to_thread.run_sync(pull, event.subscription_id)
        log.info("webhook %s %s for %s: %s", event.id, event.type, event.subscription_id, action)
        accepted = WebhookAccepted(accepted=True, event_id=event.id, type=event.type, action=action)
        return JSONResponse(accepted.model_dump(), status_code=202)


def _add_status(router: APIRouter, catalog: Catalog, configured: Callable[[], SyncConfig | None], poller: Poller | None,
                authenticate: Callable[[str | None], Principal] | None, sources: Sequence[SourceConfig],
                keeper: LocalSources | None) -> None:
    @router.get(
        "/v1/sync/status",
        response_model=SyncStatus,
        summary="Per subscription and local source: cursor or commit, last success, last error, counts",
        responses={**documented_errors(400, 403),
                   401: {**documented_errors(401)[401], "description": "missing or unknown bearer token"}},
        # The token is checked here, not by a FastAPI security dependency: the document says it is needed.
        openapi_extra={"security": [{"HTTPBearer": []}]} if authenticate is not None else None,
    )
    def status(request: Request) -> Any:
        """Each subscription and source the caller's grants see (all of them for the operator); the caller
        needs ``skills:read``, as every catalog read does (403 ``ACCESS_DENIED`` otherwise)."""
        grants: frozenset[str] | None = None
        if authenticate is not None:
            try:
                principal = authenticate(request.headers.get("authorization"))
                require_scope(principal, SCOPE_SKILLS_READ)
                grants = principal.grants
            except SkillSearchError as exc:
                return error_response(exc)
        # As every /v1 route: a query parameter it does not take (it takes none) is refused, not ignored.
        if (refused := request_refusal(request)) is not None:
            return error_response(refused)
        current = keeper.current() if keeper is not None else sources  # as sync.toml says now
        return visible_to(catalog.subscriptions.sync_status(configured(), poller, current, keeper), grants)
