"""How the HTTP app answers errors: every one is ``{"error": {code, message, details}}`` (built by
``core.errors.error_body``) with the error's status. Request validation failures are ``400
VALIDATION_ERROR`` whose ``details.problems`` are ``{"field", "message"}`` (as MCP's), not FastAPI's 422,
which this API reserves for ``SKILL_INVALID``; routing failures keep their status with a stable code.

Every ``VALIDATION_ERROR`` leaves here with ``details.problems`` whose fields are locations in the HTTP
request, joined by dots (``query.q``, ``body.parameters.end_date``; ``""`` for the request as a whole):
the catalog names its inputs (``query``, ``cursor``, ``parameters.end_date``), and each route says where
those came from with :func:`located`. A body that is not JSON at all (not UTF-8, nested past the parser's
depth, a syntax error) is a problem of ``body``; a body sent without a JSON content type (FastAPI does not
read it as JSON) is 415 with a problem on ``header.content-type``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from skillsearch.core.errors import SkillSearchError, ValidationError, error_body, invalid_input, problem

__all__ = ["NOT_JSON_STATUS", "TOO_LARGE_STATUS", "error_response", "install_error_handlers", "is_json", "located",
           "not_json", "too_large"]


class _RoutingError(SkillSearchError):
    """An error of the routing layer (no such route, method not allowed), with Starlette's status."""

    code: ClassVar[str] = "HTTP_ERROR"


class _NotFound(_RoutingError):
    code = "NOT_FOUND"


class _MethodNotAllowed(_RoutingError):
    code = "METHOD_NOT_ALLOWED"


_ROUTING: dict[int, type[SkillSearchError]] = {404: _NotFound, 405: _MethodNotAllowed}


@contextmanager
def located(where: str, rename: Mapping[str, str] | None = None, *, path: Iterable[str] = ()) -> Iterator[None]:
    """Inside it, a ``ValidationError`` of the catalog has its problems' fields moved under ``where``
    (``query``, ``body``, ``path``), each first name renamed by ``rename`` (search's ``query`` is the HTTP
    ``q``): the same names as FastAPI's own validation gives for that input. A first name in ``path`` is
    moved under ``path`` instead (resolve's ``skill_id``, in the path beside a body)."""
    in_path = frozenset(path)
    try:
        yield
    except ValidationError as exc:
        problems = exc.details.get("problems")
        if isinstance(problems, list):
            exc.details = {**exc.details, "problems": [_moved(p, where, rename or {}, in_path) for p in problems]}
        raise


def _moved(entry: Mapping[str, Any], where: str, rename: Mapping[str, str], in_path: frozenset[str]) -> dict[str, Any]:
    field = str(entry.get("field", ""))
    if not field:
        return dict(entry)
    head, dot, rest = field.partition(".")
    return {**entry, "field": f"{'path' if head in in_path else where}.{rename.get(head, head)}{dot}{rest}"}


def error_response(exc: SkillSearchError, status: int | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    status = exc.http_status if status is None else status
    if status == 401:
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    return JSONResponse(error_body(exc), status_code=status, headers=headers)


def is_json(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` header names JSON (``application/json`` or ``application/*+json``)."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


NOT_JSON_STATUS = 415
TOO_LARGE_STATUS = 413


def too_large(max_bytes: int) -> ValidationError:
    """The refusal of a body over ``max_bytes`` (answered with :data:`TOO_LARGE_STATUS`): a problem of ``body``."""
    return ValidationError(f"request body is larger than {max_bytes} bytes", {
        "problems": [problem("body", f"larger than {max_bytes} bytes")], "max_body_bytes": max_bytes})


def not_json() -> ValidationError:
    """The refusal of a body sent without a JSON content type (answered with :data:`NOT_JSON_STATUS`)."""
    return ValidationError("the request body must be JSON, sent with Content-Type: application/json",
                           {"problems": [problem("header.content-type", "must be application/json")]})


def _body_problem(error: Mapping[str, Any]) -> dict[str, Any]:
    """FastAPI's JSON syntax error is located at ``("body", character offset)``: it is a problem of the body."""
    if error.get("type") == "json_invalid":
        why = (error.get("ctx") or {}).get("error")
        return {**error, "loc": ("body",), "msg": f"not valid JSON ({why})" if why else "not valid JSON"}
    return dict(error)


def _unparsed(cause: BaseException | None) -> str:
    """Why FastAPI could not read a body as JSON (it says only "There was an error parsing the body")."""
    if isinstance(cause, UnicodeDecodeError):
        return "not valid JSON: the body is not UTF-8 text"
    if isinstance(cause, RecursionError):
        return "not valid JSON: arrays or objects nest too deeply"
    if isinstance(cause, json.JSONDecodeError | ValueError):
        return "not valid JSON"
    return "the body could not be read as JSON"


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(SkillSearchError)
    async def on_error(_: Request, exc: SkillSearchError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def on_invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [_body_problem(e) for e in exc.errors()]
        content_type = request.headers.get("content-type")
        if any(tuple(e.get("loc", ()))[:1] == ("body",) for e in errors) and not is_json(content_type):
            return error_response(not_json(), NOT_JSON_STATUS)
        return error_response(invalid_input(errors))

    @app.exception_handler(StarletteHTTPException)
    async def on_http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:  # FastAPI: a body it could not parse
            reason = _unparsed(exc.__cause__)
            error: SkillSearchError = ValidationError(f"body: {reason}", {"problems": [problem("body", reason)]})
        else:
            error = _ROUTING.get(exc.status_code, _RoutingError)(str(exc.detail))
        return error_response(error, exc.status_code, _with_head(getattr(exc, "headers", None)))


def _with_head(headers: dict[str, str] | None) -> dict[str, str] | None:
    """A 405's ``Allow`` names ``HEAD`` wherever it names ``GET``: ``head.HeadAsGet`` answers it on every GET route."""
    allow = (headers or {}).get("Allow")
    if headers is None or allow is None:
        return headers
    methods = [m.strip() for m in allow.split(",") if m.strip()]
    if "GET" in methods and "HEAD" not in methods:
        methods.insert(methods.index("GET") + 1, "HEAD")
    return {**headers, "Allow": ", ".join(methods)}
