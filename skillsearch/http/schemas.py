"""The HTTP API's own request and response models, the request limits and the documented error statuses.

The catalog's answers (list, search, get, resolve, recall) are the shared views of ``core/views.py`` and
``usecases/recall.py``; the models here exist only on HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from skillsearch.catalog.reads import MAX_PAGE, MAX_TAGS
from skillsearch.core.integers import JsonInt

__all__ = [
    "MAX_TAG_CHARS",
    "STATUS_TEXT",
    "ErrorBody",
    "ErrorInfo",
    "HealthResponse",
    "Limits",
    "ReadyResponse",
    "RecallBody",
    "ResolveBody",
    "documented_errors",
]


@dataclass(frozen=True)
class Limits:
    """Request limits; query length and search page size come from :class:`Settings`."""

    max_body_bytes: int = 64 * 1024
    max_tags: int = MAX_TAGS
    max_list_page: int = MAX_PAGE


# The longest tag a request may name (``tag=`` on list and search), in characters.
MAX_TAG_CHARS = 64


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
    # JsonInt: as the MCP tool takes it (``0`` and ``0.0``); a lax int also took ``"0"``, and ``true`` as 1.
    offset: JsonInt = Field(0, ge=0, description="Where to read on from: the next_offset of the previous answer (with"
                        " its revision_id); a root's instructions count characters, a resource counts bytes.")


class HealthResponse(BaseModel):
    status: Literal["ok"]


class ReadyResponse(BaseModel):
    status: Literal["ready", "degraded"] = Field(
        description="`degraded`: serving, but a sync has been failing for longer than the configured bound"
                    " (`serve --degraded-after`); the answers may be stale. Still 200: keep it in rotation.")
    degraded: list[str] = Field(default_factory=list, description="Why it is degraded, one sentence per sync.")
    writer: bool = Field(False, description="Whether this process runs sync and the source watchers.")
    documents: int = Field(description="Skills in the search index.")
    generation: int = Field(description="The catalog store generation the index reflects.")
    catching_up: bool = Field(False, description="The catalog moved and a write in progress is bringing the index"
                                                 " up to it; meanwhile the last whole snapshot answers.")
    changed_at: str | None = Field(None, description="When the catalog last changed (any sync, import or source).")


STATUS_TEXT = {400: "Invalid request (VALIDATION_ERROR, REVISION_PINNING_VIOLATION)",
               401: "Missing or invalid bearer token (UNAUTHENTICATED)",
               403: "The token lacks the scope this route needs (ACCESS_DENIED)",
               404: "No such skill visible to you (SKILL_NOT_FOUND and friends)",
               410: "The skill is archived (SKILL_ARCHIVED)",
               408: "The request body did not arrive in time (VALIDATION_ERROR); the connection is closed",
               413: "Request body too large (VALIDATION_ERROR)",
               415: "The request body was not sent as application/json (VALIDATION_ERROR)",
               422: "The skill cannot serve this request (SKILL_INVALID)",
               503: "The index is not loaded or is inconsistent (INDEX_NOT_READY)"}


def documented_errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` of a route: each status with the error body and what it means."""
    return {c: {"model": ErrorBody, "description": STATUS_TEXT[c]} for c in codes}
