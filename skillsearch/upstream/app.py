"""The reference upstream: a small subscription platform that serves folders of skills under our contract.

``skillsearch upstream --from starter-pack=skillsearch/sample/starter`` serves each folder (Agent Skills,
read by :func:`skillsearch.catalog.importer.parse_path`, or a JSON/JSONL bundle) as one subscription at
``GET /v1/subscriptions/{id}/skills`` with bearer auth, keeps a change log per subscription so ``since``
works (:mod:`skillsearch.upstream.changelog`), and offers admin routes (left out of the OpenAPI contract) to
publish a changed revision, archive, delete, revoke, reinstate, expire cursors and send signed webhooks.
It is what the README demo, the tests and the benchmarks sync from; it is not a production platform
(state lives in memory and is gone when it stops, which expires every cursor it handed out).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import sys
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import anyio
from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from skillsearch.catalog.frontmatter import split_front_matter
from skillsearch.catalog.importer import parse_path
from skillsearch.catalog.store import utc_now
from skillsearch.core.domain import SkillContent
from skillsearch.core.errors import UpstreamUnavailableError, ValidationError, invalid_input, problem
from skillsearch.core.textual import is_text_media_type
from skillsearch.sync.client import send_webhook
from skillsearch.sync.contract import SUBSCRIPTION_ID_PATTERN, ChangePage, ErrorBody, UpsertItem, WebhookEvent
from skillsearch.upstream.changelog import CursorUnknown, Feed

__all__ = ["ReferenceUpstream", "UpstreamError", "WebhookTarget", "create_upstream_app", "parse_sources", "wire_item"]

MAX_PAGE = 1000
SubPath = Annotated[str, PathParam(pattern=SUBSCRIPTION_ID_PATTERN)]
BearerCredentials = Annotated[
    HTTPAuthorizationCredentials | None,
    Depends(HTTPBearer(auto_error=False, description="The deployment's API token for the platform.")),
]
TimestampHeader = Annotated[str, Header(description="Unix seconds when the event was sent; refused outside"
                                        " the receiver's window (default 300 s).")]
SignatureHeader = Annotated[str, Header(description='v1=hex(HMAC-SHA256(secret, "<timestamp>." + raw body))')]


class UpstreamError(Exception):
    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details or {}

    def response(self) -> JSONResponse:
        body = {"error": {"code": self.code, "message": self.message, "details": self.details}}
        return JSONResponse(body, status_code=self.status)


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


def wire_item(content: SkillContent, status: str = "active") -> dict[str, Any]:
    """A stored or imported skill as an ``upsert`` item of the contract."""
    rev = content.revision
    resources = []
    for r in content.resources:
        text: str | None = None
        if is_text_media_type(r.media_type) or r.media_type == "application/octet-stream":
            try:
                text = r.content.decode("utf-8")
            except UnicodeDecodeError:
                text = None
        resources.append({
            "path": r.path, "kind": r.kind, "media_type": r.media_type,
            "encoding": "utf-8" if text is not None else "base64",
            "content": text if text is not None else base64.b64encode(r.content).decode("ascii"),
            "sha256": hashlib.sha256(r.content).hexdigest(),
        })
    authored: dict[str, Any] = {}
    if rev.skill_md:
        authored["skill_md"] = rev.skill_md
    elif rev.frontmatter:
        authored["frontmatter"] = rev.frontmatter
    return {
        "op": "upsert",
        "skill": {"skill_id": content.skill_id, "slug": content.slug, "status": status, "updated_at": utc_now()},
        "revision": {
            "version": rev.version, "created_at": rev.created_at or utc_now(), "name": rev.name,
            "description": rev.description, "kind": rev.kind, "tags": list(rev.tags),
            "instructions": rev.instructions, "steps": [s.model_dump() for s in rev.steps],
            "parameters": [p.model_dump(exclude_none=True) for p in rev.parameters], "metadata": rev.metadata,
            **authored,
        },
        "resources": resources,
    }


@dataclass
class WebhookTarget:
    url: str
    secret: str


class ReferenceUpstream:
    """The platform's state: one :class:`Feed` per subscription, the accepted tokens, the webhook target."""

    def __init__(self, tokens: Sequence[str], webhook: WebhookTarget | None = None) -> None:
        self.tokens = frozenset(tokens)
        self.webhook = webhook
        self.epoch = secrets.token_hex(4)
        self.feeds: dict[str, Feed] = {}
        self._lock = threading.Lock()
        self.requests = 0

    def feed(self, subscription_id: str, create: bool = False) -> Feed:
        with self._lock:
            feed = self.feeds.get(subscription_id)
            if feed is None and create:
                feed = self.feeds[subscription_id] = Feed(subscription_id, self.epoch)
        if feed is None:
            raise UpstreamError(404, "SUBSCRIPTION_NOT_FOUND", f"no subscription {subscription_id!r}")
        return feed

    def load(self, subscription_id: str, path: Path) -> list[str]:
        """Publish every skill of a folder or bundle; returns the problems of the invalid ones."""
        parsed = parse_path(Path(path), f"upstream:{subscription_id}", f"sub:{subscription_id}")
        feed = self.feed(subscription_id, create=True)
        for content in parsed.skills:
            feed.put(wire_item(content))
        return [str(p) for p in parsed.problems]

    # -- the platform's operations (also behind the admin routes) -----------------------------------

    def publish(self, subscription_id: str, item: dict[str, Any]) -> int:
        """Publish new content (or a new status) for a skill; the item is checked against the contract."""
        checked = UpsertItem.model_validate(item)
        return self.feed(subscription_id).put(checked.model_dump(mode="json"))

    def edit(self, subscription_id: str, skill_id: str, **revision_changes: Any) -> int:
        """Publish the skill's current item with some revision fields changed (a new revision)."""
        item = self._current(subscription_id, skill_id)
        revision = dict(item["revision"])
        if revision.get("skill_md") and "skill_md" not in revision_changes and \
                {"name", "description", "instructions"} & set(revision_changes):
            # The edited fields no longer match the authored SKILL.md: keep its front matter, drop the file.
            front, _ = split_front_matter(revision.pop("skill_md"))
            revision["frontmatter"] = {k: v for k, v in front.items() if k not in ("name", "description")}
        item = {**item, "revision": {**revision, **revision_changes, "created_at": utc_now()}}
        return self.publish(subscription_id, item)

    def archive(self, subscription_id: str, skill_id: str) -> int:
        item = self._current(subscription_id, skill_id)
        return self.publish(subscription_id, {**item, "skill": {**item["skill"], "status": "archived"}})

    def delete(self, subscription_id: str, skill_id: str) -> int:
        self._current(subscription_id, skill_id)
        return self.feed(subscription_id).put({"op": "delete", "skill_id": skill_id})

    def set_revoked(self, subscription_id: str, revoked: bool) -> None:
        self.feed(subscription_id).revoked = revoked

    def expire_cursors(self, subscription_id: str) -> None:
        self.feed(subscription_id).expire_cursors()

    def _current(self, subscription_id: str, skill_id: str) -> dict[str, Any]:
        item = self.feed(subscription_id).get(skill_id)
        if item is None:
            raise UpstreamError(404, "SKILL_NOT_FOUND", f"no skill {skill_id!r} in {subscription_id!r}")
        return item

    def receiver(self) -> WebhookTarget:
        """Where webhooks go; none is a 409 (an admin route's ``?notify=true`` asks before making its change)."""
        if self.webhook is None:
            raise UpstreamError(409, "WEBHOOK_NOT_CONFIGURED", "start the upstream with --webhook-url and a secret")
        return self.webhook

    def notify(self, event_type: str, subscription_id: str) -> int:
        """Send one signed webhook to the configured receiver; returns its HTTP status."""
        webhook = self.receiver()
        event = WebhookEvent(id=f"evt_{uuid.uuid4().hex}", type=event_type, subscription_id=subscription_id,
                             created_at=utc_now())
        try:
            return send_webhook(webhook.url, webhook.secret, event)
        except UpstreamUnavailableError as exc:
            raise UpstreamError(502, "WEBHOOK_FAILED", exc.message) from None

    # -- the contract's read ----------------------------------------------------------------------

    def changes(self, subscription_id: str, since: str | None, limit: int) -> dict[str, Any]:
        feed = self.feed(subscription_id)
        if feed.revoked:
            raise UpstreamError(403, "SUBSCRIPTION_REVOKED", f"subscription {subscription_id!r} is revoked")
        try:
            page = feed.page(since, limit)
        except CursorUnknown:
            raise UpstreamError(410, "CURSOR_EXPIRED", "unknown or expired cursor: sync again from the start") \
                from None
        return {"items": page.items, "next_cursor": page.next_cursor, "has_more": page.has_more}


def create_upstream_app(upstream: ReferenceUpstream) -> FastAPI:
    app = FastAPI(
        title="Subscription platform (skillsearch reference upstream)",
        version="1",
        description="The contract skillsearch syncs from: each subscription's changes since a cursor, paged"
                    " (GET /v1/subscriptions/{subscription_id}/skills); the schemas below are the whole of it.",
    )

    @app.exception_handler(UpstreamError)
    async def _upstream_error(request: Request, exc: UpstreamError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        error = invalid_input(exc.errors())
        return UpstreamError(400, error.code, error.message, error.details).response()

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
                       status_code=202, responses=_WEBHOOK_ERRORS)
    def skills_changed(
        event: WebhookEvent,
        x_skillsearch_timestamp: TimestampHeader,
        x_skillsearch_signature: SignatureHeader,
    ) -> None:
        """Sent to the catalog's `POST /v1/sync/webhook` after changes were published. Only an accelerator:
        the catalog pulls `GET /v1/subscriptions/{id}/skills` on its interval anyway."""

    @app.webhooks.post("subscription.revoked", summary="A subscription was revoked: hide its skills now",
                       status_code=202, responses=_WEBHOOK_ERRORS)
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
