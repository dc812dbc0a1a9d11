"""One error tree for the whole package.

Every error a caller can see carries a stable ``code`` (the public contract), a human ``message`` and a
``details`` dict that is safe to show. Surfaces translate these into an MCP tool error result, an HTTP
status with a JSON body, or a CLI message and exit code; nothing else ever reaches a caller.

    SkillSearchError
    ├── ValidationError            VALIDATION_ERROR            (400)
    ├── UnauthenticatedError       UNAUTHENTICATED             (401)
    ├── AccessDeniedError          ACCESS_DENIED               (403)
    ├── SkillNotFoundError         SKILL_NOT_FOUND             (404)
    ├── SkillArchivedError         SKILL_ARCHIVED              (410)
    ├── SkillInvalidError          SKILL_INVALID               (422)
    ├── RevisionNotFoundError      REVISION_NOT_FOUND          (404)
    ├── RevisionPinningError       REVISION_PINNING_VIOLATION  (400)
    ├── ResourceNotFoundError      RESOURCE_NOT_FOUND          (404)
    ├── IndexNotReadyError         INDEX_NOT_READY             (503)
    │   └── IndexMismatchError     INDEX_NOT_READY             (503)
    ├── UpstreamUnavailableError   UPSTREAM_UNAVAILABLE        (502)
    └── StartupError               STARTUP_FAILED              (a server that cannot start; CLI exit 3)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

__all__ = [
    "AccessDeniedError",
    "IndexMismatchError",
    "IndexNotReadyError",
    "ResourceNotFoundError",
    "RevisionNotFoundError",
    "RevisionPinningError",
    "SkillArchivedError",
    "SkillInvalidError",
    "SkillNotFoundError",
    "SkillSearchError",
    "StartupError",
    "UnauthenticatedError",
    "UpstreamUnavailableError",
    "ValidationError",
    "error_body",
    "invalid_input",
]


class SkillSearchError(Exception):
    """Base of every error this package shows to a caller."""

    code: ClassVar[str] = "INTERNAL"
    http_status: ClassVar[int] = 500

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details or {}

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}


class ValidationError(SkillSearchError):
    code = "VALIDATION_ERROR"
    http_status = 400


class UnauthenticatedError(SkillSearchError):
    code = "UNAUTHENTICATED"
    http_status = 401


class AccessDeniedError(SkillSearchError):
    code = "ACCESS_DENIED"
    http_status = 403


class SkillNotFoundError(SkillSearchError):
    code = "SKILL_NOT_FOUND"
    http_status = 404


class SkillArchivedError(SkillSearchError):
    code = "SKILL_ARCHIVED"
    http_status = 410


class SkillInvalidError(SkillSearchError):
    code = "SKILL_INVALID"
    http_status = 422


class RevisionNotFoundError(SkillSearchError):
    code = "REVISION_NOT_FOUND"
    http_status = 404


class RevisionPinningError(SkillSearchError):
    code = "REVISION_PINNING_VIOLATION"
    http_status = 400


class ResourceNotFoundError(SkillSearchError):
    code = "RESOURCE_NOT_FOUND"
    http_status = 404


class IndexNotReadyError(SkillSearchError):
    code = "INDEX_NOT_READY"
    http_status = 503


class IndexMismatchError(IndexNotReadyError):
    """The index on disk was built for another model or store; the message says what to run."""


class UpstreamUnavailableError(SkillSearchError):
    code = "UPSTREAM_UNAVAILABLE"
    http_status = 502


def error_body(exc: SkillSearchError) -> dict[str, Any]:
    """The one error body of every surface: ``{"error": {"code", "message", "details"}}`` (HTTP responses,
    MCP catalog tool results, the CLI's ``--json``)."""
    return {"error": exc.to_dict()}


def invalid_input(errors: Iterable[Mapping[str, Any]], lead: str = "") -> ValidationError:
    """The one shape of a schema validation failure, for HTTP and MCP alike: ``details.problems`` is a list
    of ``{"field", "message"}`` (``field`` is the location joined by dots, e.g. ``query.limit``), built from
    pydantic-style error dicts. The rejected values are never echoed."""
    problems = [
        {"field": ".".join(str(p) for p in e.get("loc", ())), "message": str(e.get("msg", ""))} for e in errors
    ]
    text = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
    return ValidationError(lead + text if problems else "invalid request", {"problems": problems})


class StartupError(SkillSearchError):
    """A server cannot start: its port is taken, its data directory unusable. Never an API answer; the
    CLI prints it as one line and exits with code 3."""

    code = "STARTUP_FAILED"
    http_status = 500
