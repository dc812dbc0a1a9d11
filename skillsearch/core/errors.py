"""One error tree for the whole package.

Every error a caller can see carries a stable ``code`` (the public contract), a human ``message`` and a
``details`` dict that is safe to show. A ``VALIDATION_ERROR``'s ``details.problems`` has one shape on every
surface: a list of ``{"field", "message"}``, plus ``"code"`` where a problem has a machine-readable kind
(resolve: ``missing``, ``invalid``, ``unknown``); see :func:`problem`. Surfaces translate these into an
MCP tool error result, an HTTP status with a JSON body, or a CLI message and exit code; nothing else ever
reaches a caller.

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
    ├── SnapshotInvalidError       SNAPSHOT_INVALID            (422)
    │   └── SnapshotEncoderError   SNAPSHOT_ENCODER_MISMATCH   (422)
    ├── UpstreamUnavailableError   UPSTREAM_UNAVAILABLE        (502)
    ├── StartupError               STARTUP_FAILED              (a server that cannot start; CLI exit 3)
    └── StoppedBySignal            INTERRUPTED                 (a CLI command's --json object at Ctrl-C or SIGTERM)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Protocol

__all__ = [
    "AccessDeniedError",
    "DataDirInUseError",
    "IndexMismatchError",
    "IndexNotReadyError",
    "ResourceNotFoundError",
    "RevisionNotFoundError",
    "RevisionPinningError",
    "SkillArchivedError",
    "SkillInvalidError",
    "SkillNotFoundError",
    "SkillSearchError",
    "SnapshotEncoderError",
    "SnapshotInvalidError",
    "StartupError",
    "StoppedBySignal",
    "SyncStopped",
    "UnauthenticatedError",
    "UpstreamUnavailableError",
    "ValidationError",
    "echo",
    "error_body",
    "error_bytes",
    "error_json",
    "invalid_input",
    "problem",
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
    """Bad input. Its ``details["problems"]``, when given, always leaves here in the one documented shape:
    a bare string becomes ``{"field": "", "message": text}`` (a problem of the request as a whole)."""

    code = "VALIDATION_ERROR"
    http_status = 400

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        if details and "problems" in details:
            details = {**details, "problems": [
                p if isinstance(p, Mapping) else problem("", str(p)) for p in details["problems"]
            ]}
        super().__init__(message, details)


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


class DataDirInUseError(IndexNotReadyError):
    """A data directory a live process serves or writes (``details.pids``), refused as a restore's target:
    that process would go on with the replaced files. Nothing was replaced."""


class SnapshotInvalidError(SkillSearchError):
    """A snapshot that is incomplete (a file missing or truncated), altered (a digest differs) or not a
    snapshot at all; ``details.reason`` says which. Nothing was replaced."""

    code = "SNAPSHOT_INVALID"
    http_status = 422


class SnapshotEncoderError(SnapshotInvalidError):
    """A snapshot whose index was built with other model files than the ones this replica would load."""

    code = "SNAPSHOT_ENCODER_MISMATCH"


class UpstreamUnavailableError(SkillSearchError):
    code = "UPSTREAM_UNAVAILABLE"
    http_status = 502


class SyncStopped(UpstreamUnavailableError):
    """A sync run ended because its process or poller is stopping (SIGTERM, a server's shutdown), during a
    request, a retry wait or the wait for another run: not a failure of the upstream, so it is not recorded
    as the subscription's last error (which would make it ``failing`` and, past ``--degraded-after``, a
    replica ``degraded``); every page stored before it stands."""


def error_body(exc: SkillSearchError) -> dict[str, Any]:
    """The one error body of every surface: ``{"error": {"code", "message", "details"}}`` (HTTP responses,
    MCP catalog tool results, the CLI's ``--json``). A ``VALIDATION_ERROR`` always has ``details.problems``:
    one on the input as a whole (``field`` ``""``) when the error named none."""
    body = exc.to_dict()
    details = body.get("details")
    if exc.code == ValidationError.code and not (isinstance(details, dict) and isinstance(details.get("problems"), list)):
        body["details"] = {**(details or {}), "problems": [problem("", exc.message)]}
    return {"error": body}


def error_json(exc: SkillSearchError) -> str:
    """:func:`error_body` as one line of JSON, spaced as ``JSONResponse`` spaces the HTTP answers (the CLI's
    ``--json`` errors; a detail that is not JSON, such as a path, as its text)."""
    return json.dumps(error_body(exc), ensure_ascii=False, separators=(",", ":"), default=str)


def error_bytes(exc: SkillSearchError) -> bytes:
    """:func:`error_json` as the bytes of a raw ASGI response (the HTTP middleware's refusals, the body
    deadline's 408, the server's 431 and 400)."""
    return error_json(exc).encode("utf-8")


ECHO_CHARS = 120


def echo(value: str, limit: int = ECHO_CHARS) -> str:
    """``value`` as an error message may show it back: at most ``limit`` characters, a longer one cut with
    how much was left out, so a huge input never makes a huge error."""
    if len(value) <= limit:
        return value
    return f"{value[:limit]}... ({len(value) - limit} more characters)"


def problem(field: str, message: str, code: str | None = None) -> dict[str, str]:
    """One entry of ``details.problems``: ``field`` names the input at fault (dotted: ``limit``,
    ``parameters.end_date``, ``query.limit`` over HTTP; ``""`` for the request as a whole), ``message`` says
    what is wrong, and the optional ``code`` is the kind of problem for programs (resolve's ``missing``,
    ``invalid``, ``unknown``)."""
    entry = {"field": field, "message": message}
    if code is not None:
        entry["code"] = code
    return entry


def invalid_input(errors: Iterable[Mapping[str, Any]], lead: str = "") -> ValidationError:
    """The one shape of a schema validation failure, for HTTP and MCP alike: ``details.problems`` is a list
    of ``{"field", "message"}`` (``field`` is the location joined by dots, e.g. ``query.limit``), built from
    pydantic-style error dicts. The rejected values are never echoed, and a field name (an unknown argument's
    own) is cut by :func:`echo`."""
    problems = [problem(echo(".".join(str(p) for p in e.get("loc", ()))), str(e.get("msg", ""))) for e in errors]
    text = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
    return ValidationError(lead + text if problems else "invalid request", {"problems": problems})


class StartupError(SkillSearchError):
    """A server cannot start: its port is taken, its data directory unusable. Never an API answer; the
    CLI prints it as one line and exits with code 3."""

    code = "STARTUP_FAILED"
    http_status = 500


class StoppedBySignal(SkillSearchError):
    """A one-shot CLI command stopped by Ctrl-C (SIGINT, exit 130) or SIGTERM (exit 143) before it printed
    its result: under ``--json`` its one object on stdout, so a script reads why there is no result.
    ``details.signal`` names the signal. Never an API answer."""

    code = "INTERRUPTED"
    http_status = 503


class StopFlag(Protocol):
    """What tells a long write or read to stop between two of its steps (``threading.Event`` is one; so is
    ``index_holder.WriteStops``, a catalog's): an index write, a lexical rebuild, a source's read, a git run."""

    def is_set(self) -> bool: ...


class WriteStopped(Exception):
    """An index write stopped between two batches of embeddings (or of lexical documents), or a source's read
    between two skills or during a git run, because its process is stopping (SIGTERM, a server's shutdown:
    ``SearchIndex.stopping``). Not an error any caller sees: the store keeps every row its transaction
    committed, the index what it embedded, and its manifest stays behind the store, so the next open (or
    another process's catch-up) embeds the rest and rebuilds a lexical side left incomplete; a stopped read
    applied nothing. The message says what was left. A signal
    between our own layers, not one of the API's errors (no code, no status): hence not in ``__all__``."""
