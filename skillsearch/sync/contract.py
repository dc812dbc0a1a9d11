"""The wire format between the subscription platform and this catalog (``docs/upstream-api.md``).

Pydantic models of what travels over HTTP, shared by the client (which parses them), the reference upstream
(which produces them) and the webhook receiver (which checks them). The models are tolerant readers
(unknown fields are ignored) so the platform can add fields without breaking us; what we rely on is
validated strictly, one item at a time, so one malformed item never costs the valid ones beside it.

The webhook signature lives here too because it is part of the contract both sides must compute alike:
``v1=hex(HMAC-SHA256(secret, "<timestamp>." + raw_body))``. The timestamp is inside the signed bytes, so
a captured request cannot be replayed later under a fresh timestamp.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from skillsearch.core.domain import SKILL_ID_PATTERN, SLUG_PATTERN, FlowStep, Parameter, ResourceKind, SkillKind
from skillsearch.core.wellformed import terminal_safe
from skillsearch.sync.config import SUBSCRIPTION_ID_PATTERN

__all__ = [
    "ERROR_CODE",
    "SIGNATURE_HEADER",
    "SUBSCRIPTION_ID_PATTERN",
    "TIMESTAMP_HEADER",
    "ChangeItem",
    "ChangePage",
    "DeleteItem",
    "ErrorBody",
    "RawChangePage",
    "UpsertItem",
    "WebhookAccepted",
    "WebhookEvent",
    "WireResource",
    "WireRevision",
    "WireSkill",
    "error_text",
    "parse_error_body",
    "parse_item",
    "sign_webhook",
    "signature_matches",
]

SIGNATURE_HEADER = "X-Skillsearch-Signature"
TIMESTAMP_HEADER = "X-Skillsearch-Timestamp"

_TOLERANT = ConfigDict(extra="ignore", frozen=True)


class WireResource(BaseModel):
    """A file of a revision. ``sha256`` is checked against the decoded content when present."""

    model_config = _TOLERANT

    path: str = Field(min_length=1, max_length=512, description="Logical path, e.g. scripts/check.py.")
    kind: ResourceKind = "document"
    media_type: str = Field("application/octet-stream", max_length=200)
    encoding: Literal["utf-8", "base64"] = Field("utf-8", description="How `content` carries the bytes.")
    content: str = Field("", description="The file: text as is, binary as base64.")
    sha256: str | None = Field(None, description="Hex sha256 of the decoded bytes; a mismatch rejects the item.")

    def data(self) -> bytes:
        """The decoded bytes; raises ``ValueError`` on bad base64 or a hash that does not match."""
        if self.encoding == "base64":
            try:
                raw = base64.b64decode(self.content, validate=True)
            except (binascii.Error, ValueError):
                raise ValueError(f"resource {self.path}: content is not valid base64") from None
        else:
            raw = self.content.encode("utf-8")
        if self.sha256 is not None and hashlib.sha256(raw).hexdigest() != self.sha256.lower():
            raise ValueError(f"resource {self.path}: sha256 does not match its content")
        return raw


class WireSkill(BaseModel):
    """The skill's identity as the platform knows it."""

    model_config = _TOLERANT

    skill_id: str = Field(pattern=SKILL_ID_PATTERN, description="Stable, opaque; kept as the local skill id.")
    # The pattern is checked with the item (core/domain.py, whose message names the rule); it is in the schema
    # so a platform validating against docs/upstream-openapi.json finds the rule there too.
    slug: str = Field(min_length=1, max_length=64, json_schema_extra={"pattern": SLUG_PATTERN.pattern},
                      description="Unique within the subscription; a-z, 0-9 and '-', not starting or ending with '-'.")
    status: Literal["active", "archived"] = "active"
    updated_at: str | None = None


class WireRevision(BaseModel):
    """The content of the skill's current revision."""

    model_config = _TOLERANT

    version: str = Field("", max_length=128, description="The platform's own version label.")
    created_at: str = ""
    name: str = Field(min_length=1, max_length=200)
    description: str = Field(min_length=1, max_length=1024)
    kind: SkillKind = "knowledge"
    tags: list[str] = Field(default_factory=list, max_length=64)
    instructions: str = Field("", max_length=1_000_000)
    steps: list[FlowStep] = Field(default_factory=list)
    parameters: list[Parameter] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    skill_md: str | None = Field(
        None, max_length=1_000_000,
        description="Optional: the SKILL.md as authored (YAML front matter with name and description, then the "
                    "body), served byte for byte by the MCP Skills extension.",
    )
    frontmatter: dict[str, Any] | None = Field(
        None, description="Optional: the front matter as authored when there is no skill_md; skillsearch then "
                          "renders the SKILL.md (name = slug, description, these keys, the instructions).",
    )


class UpsertItem(BaseModel):
    """Create the skill or give it new content (a new revision locally) or a new status."""

    model_config = _TOLERANT

    op: Literal["upsert"]
    skill: WireSkill
    revision: WireRevision
    resources: list[WireResource] = Field(default_factory=list, max_length=500)


class DeleteItem(BaseModel):
    """The skill is gone from the subscription: remove it and its revisions."""

    model_config = _TOLERANT

    op: Literal["delete"]
    skill_id: str = Field(pattern=SKILL_ID_PATTERN)


# Opaque, but printed by `sync --status` and stored: no control characters (a terminal's escapes).
CURSOR_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]+$"

ChangeItem = Annotated[UpsertItem | DeleteItem, Field(discriminator="op")]


def parse_item(raw: Any) -> UpsertItem | DeleteItem:
    """One change item, strictly; raises pydantic's ``ValidationError`` when it is malformed, ``ValueError``
    when it is no object or its ``op`` is missing or unknown."""
    # Each op by its own model, so a problem is named where it sits in the item (``revision.name``), not under
    # the union's tag (``upsert.revision.name``: no such field on the wire), and a missing or unknown op says
    # so in the contract's words (pydantic's was "Unable to extract tag using discriminator 'op'").
    if not isinstance(raw, dict):
        raise ValueError(f"an item must be a JSON object, not {_json_type(raw)}")
    op = raw.get("op")
    if op == "upsert":
        return UpsertItem.model_validate(raw)
    if op == "delete":
        return DeleteItem.model_validate(raw)
    if op is None:
        raise ValueError("op: Field required ('upsert' or 'delete')")
    shown = terminal_safe(op if isinstance(op, str) else json.dumps(op), one_line=True)[:40]
    raise ValueError(f"op: must be 'upsert' or 'delete', not '{shown}'")


def _json_type(value: Any) -> str:
    """The JSON name of a parsed value's type, for a message (``array``, not ``list``)."""
    for kind, name in ((bool, "a boolean"), (int, "a number"), (float, "a number"), (str, "a string"),
                       (list, "an array")):
        if isinstance(value, kind):
            return name
    return "null" if value is None else type(value).__name__


class ChangePage(BaseModel):
    """One page of changes since a cursor, as the platform sends it."""

    model_config = _TOLERANT

    items: list[ChangeItem]
    next_cursor: str = Field(min_length=1, max_length=512, pattern=CURSOR_PATTERN,
                             description="Pass as `since` for the next page; no control characters.")
    has_more: bool = Field(description="True while more changes are waiting after `next_cursor`.")


class RawChangePage(BaseModel):
    """The page envelope as the client reads it: items stay raw and are validated one by one later."""

    model_config = _TOLERANT

    items: list[Any]
    next_cursor: str = Field(min_length=1, max_length=512, pattern=CURSOR_PATTERN)
    has_more: bool


class ErrorDetail(BaseModel):
    model_config = _TOLERANT

    code: str
    message: str = ""
    details: dict[str, Any] = Field(default_factory=dict)


class ErrorBody(BaseModel):
    """Every non-2xx answer of the platform: ``CURSOR_EXPIRED`` (410), ``SUBSCRIPTION_REVOKED`` (403), ..."""

    model_config = _TOLERANT

    error: ErrorDetail


# An error code is printed and stored as it came only when it is a code: never a terminal's escape sequences.
ERROR_CODE = re.compile(r"[A-Za-z0-9_.-]{1,100}")
_ERROR_MESSAGE_CHARS = 300
_ERROR_FIELD_CHARS = 120
_ERROR_PROBLEMS = 3


def parse_error_body(body: bytes) -> ErrorDetail | None:
    """The platform's ``{"error": {...}}`` body, or ``None`` when the body is not one."""
    try:
        return ErrorBody.model_validate(json.loads(body)).error
    except (ValueError, RecursionError, ValidationError):
        return None


def error_text(body: bytes) -> str:
    """`` CODE: message (field: problem; ...)`` from the platform's error body, or ``""`` without one: bounded
    and one line, each control character and bidi control escaped, as every upstream text that is printed."""
    error = parse_error_body(body)
    if error is None:
        return ""
    code = error.code if ERROR_CODE.fullmatch(error.code) else ""
    text = f" {code}" if code else ""
    message = terminal_safe(error.message, one_line=True)[:_ERROR_MESSAGE_CHARS]
    if message:
        text += f": {message}"
    problems = error.details.get("problems")
    if isinstance(problems, list):
        named = []
        for problem in problems[:_ERROR_PROBLEMS]:
            if isinstance(problem, dict):
                field = terminal_safe(str(problem.get("field", "")), one_line=True)[:_ERROR_FIELD_CHARS]
                what = terminal_safe(str(problem.get("message", "")), one_line=True)[:_ERROR_FIELD_CHARS]
                named.append(f"{field}: {what}" if field else what)
        if named:
            more = len(problems) - len(named)
            text += " (" + "; ".join(named) + (f"; {more} more" if more > 0 else "") + ")"
    return text


class WebhookEvent(BaseModel):
    """A push notification. ``id`` is unique per event: the receiver refuses to act on one twice."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str = Field(min_length=1, max_length=128)
    type: str = Field(min_length=1, max_length=64, description="skills.changed | subscription.revoked")
    subscription_id: str = Field(pattern=SUBSCRIPTION_ID_PATTERN)
    created_at: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


WebhookAction = Literal["pull_scheduled", "revoked", "ignored"]


class WebhookAccepted(BaseModel):
    """The catalog's ``202`` to an event it took (its id is spent from then on)."""

    accepted: Literal[True]
    event_id: str
    type: str
    action: WebhookAction = Field(
        description="pull_scheduled: the next pull moved to now; revoked: the subscription's skills are hidden"
                    " and a pull scheduled; ignored: a type the catalog does not act on, or a subscription it"
                    " does not sync (nothing changed).")


def sign_webhook(secret: str, timestamp: int | str, body: bytes) -> str:
    """The signature header value for ``body`` sent at ``timestamp`` (unix seconds)."""
    mac = hmac.new(secret.encode("utf-8"), f"{timestamp}.".encode("ascii") + body, hashlib.sha256)
    return "v1=" + mac.hexdigest()


def signature_matches(secret: str, timestamp: str, body: bytes, header: str) -> bool:
    """Constant-time check of a signature header (it may list several ``v1=`` values during a key roll). A
    candidate that is not ASCII never matches (``compare_digest`` refuses to compare such strings)."""
    expected = sign_webhook(secret, timestamp, body)
    candidates = [part.strip() for part in header.split(",") if part.strip()]
    return any(c.isascii() and hmac.compare_digest(expected, c) for c in candidates)
