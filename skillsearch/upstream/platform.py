"""The reference upstream's state: one change log (:class:`Feed`) per subscription, the tokens it accepts, the
webhook target, and the platform's operations (publish, edit, archive, delete, revoke, expire cursors, notify)
that its admin routes and the tests call. :mod:`skillsearch.upstream.app` serves it over HTTP.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillsearch.catalog.frontmatter import split_front_matter
from skillsearch.catalog.importer import parse_path
from skillsearch.catalog.store import utc_now
from skillsearch.core.domain import SkillContent
from skillsearch.core.errors import UpstreamUnavailableError
from skillsearch.core.textual import is_text_media_type
from skillsearch.sync.client import send_webhook
from skillsearch.sync.contract import UpsertItem, WebhookEvent
from skillsearch.upstream.changelog import CursorUnknown, Feed

__all__ = ["ReferenceUpstream", "UpstreamError", "WebhookTarget", "wire_item"]


class UpstreamError(Exception):
    """A refusal of the platform: its HTTP status and the contract's error body (``app.py`` answers it)."""

    def __init__(self, status: int, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details or {}


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
