"""The reference upstream: a small subscription platform that serves folders of skills under our contract.

``skillsearch upstream --from starter-pack=skillsearch/sample/starter`` serves each folder (Agent Skills,
read by :func:`skillsearch.catalog.importer.parse_path`, or a JSON/JSONL bundle) as one subscription at
``GET /v1/subscriptions/{id}/skills`` with bearer auth, keeps a change log per subscription so ``since``
works (:mod:`skillsearch.upstream.changelog`; the state and operations are
:mod:`skillsearch.upstream.platform`), and offers admin routes (left out of the OpenAPI contract) to
publish a changed revision, archive, delete, revoke, reinstate, expire cursors and send signed webhooks.
It is what the README demo, the tests and the benchmarks sync from; it is not a production platform
(state lives in memory and is gone when it stops, which expires every cursor it handed out).
"""

from __future__ import annotations

import json
import re
import secrets
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import anyio
from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from skillsearch.core.errors import ValidationError, invalid_input, problem
from skillsearch.sync.contract import SUBSCRIPTION_ID_PATTERN, ChangePage, ErrorBody, UpsertItem, WebhookAccepted, WebhookEvent
from skillsearch.upstream.platform import ReferenceUpstream, UpstreamError, WebhookTarget

__all__ = ["contract_openapi", "create_upstream_app", "load_upstream_app", "parse_sources"]

MAX_PAGE = 1000
SubPath = Annotated[str, PathParam(pattern=SUBSCRIPTION_ID_PATTERN)]
BearerCredentials = Annotated[
    HTTPAuthorizationCredentials | None,
    Depends(HTTPBearer(auto_error=False, description="The deployment's API token for the platform.")),
]
TimestampHeader = Annotated[str, Header(description="Unix seconds when the event was sent; refused outside"
                                        " the receiver's window (default 300 s).")]
SignatureHeader = Annotated[str, Header(description='v1=hex(HMAC-SHA256(secret, "<timestamp>." + raw body))')]


def _errors(*statuses: tuple[int, str]) -> dict[int | str, dict[str, Any]]:
    """Declared error answers: each status with the contract's one error body."""
    return {code: {"model": ErrorBody, "description": text} for code, text in statuses}


# What the catalog's webhook receiver answers besides 202 (``POST /v1/sync/webhook``, http/sync_routes.py).
_WEBHOOK_ERRORS = _errors(
    (400, "VALIDATION_ERROR: signed but malformed, or no Content-Length"),
    (401, "UNAUTHENTICATED: unsigned, badly signed, stale or replayed"),
    (413, "VALIDATION_ERROR: the body is over 64 KiB"),
    (415, "VALIDATION_ERROR: not sent as Content-Type: application/json"),
)


def _contract_openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document without the 422 ``HTTPValidationError`` it adds to every operation with input:
    neither side sends it (the feed answers 400 ``VALIDATION_ERROR``, as the webhook receiver does)."""
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, description=app.description,
                             routes=app.routes, webhooks=app.webhooks.routes)
        for section in ("paths", "webhooks"):
            for item in schema.get(section, {}).values():
                for op in item.values():
                    responses = op.get("responses", {})
                    if "HTTPValidationError" in json.dumps(responses.get("422", {})):
                        del responses["422"]
        for unused in ("HTTPValidationError", "ValidationError"):
            schema.get("components", {}).get("schemas", {}).pop(unused, None)
        app.openapi_schema = schema
    return app.openapi_schema


def _error_response(exc: UpstreamError) -> JSONResponse:
    body = {"error": {"code": exc.code, "message": exc.message, "details": exc.details}}
    return JSONResponse(body, status_code=exc.status)


def create_upstream_app(upstream: ReferenceUpstream) -> FastAPI:
    app = FastAPI(
        title="Subscription platform (skillsearch reference upstream)",
        version="1",
        description="The contract skillsearch syncs from: each subscription's changes since a cursor, paged"
                    " (GET /v1/subscriptions/{subscription_id}/skills); the schemas below are the whole of it.",
    )

    @app.exception_handler(UpstreamError)
    async def _upstream_error(request: Request, exc: UpstreamError) -> JSONResponse:
        return _error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        error = invalid_input(exc.errors())
        return _error_response(UpstreamError(400, error.code, error.message, error.details))

    app.openapi = lambda: _contract_openapi(app)  # type: ignore[method-assign]

    def bearer(credentials: BearerCredentials) -> None:
        upstream.requests += 1
        token = credentials.credentials if credentials is not None else ""
        # As bytes: compare_digest refuses str with a non-ASCII character (a header is read as Latin-1), a 500.
        presented = token.encode("utf-8", "surrogateescape")
        if not any(secrets.compare_digest(presented, t.encode("utf-8", "surrogateescape")) for t in upstream.tokens):
            raise UpstreamError(401, "UNAUTHENTICATED", "a valid bearer token is required")

    auth = [Depends(bearer)]
    errors = _errors((400, "VALIDATION_ERROR: a parameter out of range (limit, since)"),
                     (401, "missing or wrong bearer token"), (403, "SUBSCRIPTION_REVOKED"),
                     (404, "SUBSCRIPTION_NOT_FOUND"), (410, "CURSOR_EXPIRED: sync again without since"),
                     (429, "slow down; honour Retry-After"), (503, "try again later; honour Retry-After"))

    @app.get("/v1/subscriptions/{subscription_id}/skills", response_model=ChangePage, dependencies=auth,
             responses=errors, summary="Changes of a subscription's skills since a cursor")
    def changes(
        subscription_id: SubPath,
        since: Annotated[str | None, Query(max_length=512, description="next_cursor of the previous page; "
                                           "omit for a full listing")] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    ) -> JSONResponse:
        return JSONResponse(upstream.changes(subscription_id, since, limit))

    @app.webhooks.post("skills.changed", summary="Skills of a subscription changed: pull now",
                       status_code=202, responses=_WEBHOOK_ERRORS, response_model=WebhookAccepted)
    def skills_changed(
        event: WebhookEvent,
        x_skillsearch_timestamp: TimestampHeader,
        x_skillsearch_signature: SignatureHeader,
    ) -> None:
        """Sent to the catalog's `POST /v1/sync/webhook` after changes were published. Only an accelerator:
        the catalog pulls `GET /v1/subscriptions/{id}/skills` on its interval anyway."""

    @app.webhooks.post("subscription.revoked", summary="A subscription was revoked: hide its skills now",
                       status_code=202, responses=_WEBHOOK_ERRORS, response_model=WebhookAccepted)
    def subscription_revoked(
        event: WebhookEvent,
        x_skillsearch_timestamp: TimestampHeader,
        x_skillsearch_signature: SignatureHeader,
    ) -> None:
        """Sent after the revocation took effect (the feed already answers 403 `SUBSCRIPTION_REVOKED`). The
        catalog hides the subscription's skills before answering, then pulls to confirm."""

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        return {"status": "ok", "epoch": upstream.epoch}

    # -- admin ------------------------------------------------------------------------------------

    async def _changed(change: Callable[[], int], notify: bool, subscription_id: str,
                       event_type: str = "skills.changed") -> dict[str, Any]:
        """Make ``change`` (it returns the feed's new seq) and answer; with ``notify`` a receiver must be configured
        before anything changes (409), and the matching signed webhook is sent first: one that is not delivered
        is a 502 saying that the change was made (not to make it again)."""
        if notify:
            upstream.receiver()
        seq = change()
        try:
            status = await anyio.to_thread.run_sync(upstream.notify, event_type, subscription_id) if notify else None
        except UpstreamError as exc:
            raise UpstreamError(exc.status, exc.code, f"the change was made (seq {seq}), but its webhook was not"
                                f" delivered: {exc.message}; send it again: POST /admin/webhooks/{event_type}/"
                                f"{subscription_id}", {"changed": True, "seq": seq}) from None
        return {"seq": seq, "webhook_status": status}

    def _revoked(subscription_id: str, revoked: bool) -> int:
        """(Un)revoke a subscription: no feed changes, seq 0."""
        upstream.set_revoked(subscription_id, revoked)
        return 0

    @app.get("/admin/subscriptions/{subscription_id}/skills", include_in_schema=False, dependencies=auth)
    def live(subscription_id: SubPath) -> dict[str, Any]:
        return {"items": list(upstream.feed(subscription_id).live().values())}

    @app.put("/admin/subscriptions/{subscription_id}/skills", include_in_schema=False, dependencies=auth)
    async def publish(subscription_id: SubPath, item: UpsertItem, notify: bool = False) -> dict[str, Any]:
        return await _changed(lambda: upstream.publish(subscription_id, item.model_dump(mode="json")), notify,
                              subscription_id)

    @app.post("/admin/subscriptions/{subscription_id}/skills/{skill_id}/edit", include_in_schema=False,
              dependencies=auth)
    async def edit(subscription_id: SubPath, skill_id: str, changes: dict[str, Any],
                   notify: bool = False) -> dict[str, Any]:
        return await _changed(lambda: upstream.edit(subscription_id, skill_id, **changes), notify, subscription_id)

    @app.post("/admin/subscriptions/{subscription_id}/skills/{skill_id}/archive", include_in_schema=False,
              dependencies=auth)
    async def archive(subscription_id: SubPath, skill_id: str, notify: bool = False) -> dict[str, Any]:
        return await _changed(lambda: upstream.archive(subscription_id, skill_id), notify, subscription_id)

    @app.delete("/admin/subscriptions/{subscription_id}/skills/{skill_id}", include_in_schema=False,
                dependencies=auth)
    async def delete(subscription_id: SubPath, skill_id: str, notify: bool = False) -> dict[str, Any]:
        return await _changed(lambda: upstream.delete(subscription_id, skill_id), notify, subscription_id)

    @app.post("/admin/subscriptions/{subscription_id}/revoke", include_in_schema=False, dependencies=auth)
    async def revoke(subscription_id: SubPath, notify: bool = False) -> dict[str, Any]:
        return {"revoked": True, **await _changed(lambda: _revoked(subscription_id, True), notify, subscription_id,
                                                  "subscription.revoked")}

    @app.post("/admin/subscriptions/{subscription_id}/reinstate", include_in_schema=False, dependencies=auth)
    async def reinstate(subscription_id: SubPath, notify: bool = False) -> dict[str, Any]:
        """With ``notify``, a ``skills.changed``: the catalog's pull then lifts the revocation at once."""
        return {"revoked": False, **await _changed(lambda: _revoked(subscription_id, False), notify, subscription_id)}

    @app.post("/admin/subscriptions/{subscription_id}/expire-cursors", include_in_schema=False,
              dependencies=auth)
    def expire(subscription_id: SubPath) -> dict[str, Any]:
        upstream.expire_cursors(subscription_id)
        return {"expired": True}

    @app.post("/admin/webhooks/{event_type}/{subscription_id}", include_in_schema=False, dependencies=auth)
    async def webhook(event_type: str, subscription_id: SubPath) -> dict[str, Any]:
        upstream.feed(subscription_id)
        return {"webhook_status": await anyio.to_thread.run_sync(upstream.notify, event_type, subscription_id)}

    return app


def parse_sources(values: Sequence[str]) -> list[tuple[str, Path]]:
    """``--from [ID=]PATH`` values; without an id the folder or file name is the subscription id."""
    out = []
    for value in values:
        sid, sep, path = value.partition("=")
        if not sep:
            sid, path = Path(value).stem or "default", value
        if not re.match(SUBSCRIPTION_ID_PATTERN, sid):
            raise ValidationError(f"invalid subscription id {sid!r} in --from {value!r}")
        out.append((sid, Path(path)))
    return out


def load_upstream_app(sources: Sequence[str], *, tokens: Sequence[str], webhook_url: str | None = None,
                      webhook_secret: str | None = None) -> FastAPI:
    """``skillsearch upstream``: load the folders (problems reported on stderr) into the app that serves
    them; the CLI runs it with ``http/server.py``."""
    if bool(webhook_url) != bool(webhook_secret):
        raise ValidationError("--webhook-url and --webhook-secret go together")
    upstream = ReferenceUpstream(tokens, WebhookTarget(webhook_url, webhook_secret) if webhook_url and webhook_secret
                                 else None)
    parsed = parse_sources(sources)
    for sid, path in parsed:  # a mistyped path would otherwise serve an empty subscription
        if not Path(path).exists():
            raise ValidationError(f"--from {sid}={path}: no such folder or bundle",
                                  {"problems": [problem("from", "no such folder or bundle")]})
    for sid, path in parsed:
        before = len(upstream.feeds[sid].live()) if sid in upstream.feeds else 0
        for invalid in upstream.load(sid, path):
            print(f"upstream {sid}: invalid skill {invalid}", file=sys.stderr)
        print(f"upstream {sid}: {len(upstream.feed(sid).live()) - before} skills from {path}", file=sys.stderr)
    return create_upstream_app(upstream)


def contract_openapi() -> dict[str, Any]:
    """The contract as OpenAPI (``docs/upstream-openapi.json``): the feed route and the two webhooks."""
    return create_upstream_app(ReferenceUpstream([])).openapi()


if __name__ == "__main__":
    json.dump(contract_openapi(), sys.stdout, indent=2)
    sys.stdout.write("\n")
