"""How the HTTP app answers errors: every one is ``{"error": {code, message, details}}`` (built by
``core.errors.error_body``) with the error's status. Request validation failures are ``400
VALIDATION_ERROR`` whose ``details.problems`` are ``{"field", "message"}`` (as MCP's), not FastAPI's 422,
which this API reserves for ``SKILL_INVALID``; routing failures keep their status with a stable code."""

from __future__ import annotations

from typing import ClassVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from skillsearch.core.errors import SkillSearchError, ValidationError, error_body, invalid_input

__all__ = ["error_response", "install_error_handlers"]


class _RoutingError(SkillSearchError):
    """An error of the routing layer (no such route, method not allowed), with Starlette's status."""

    code: ClassVar[str] = "HTTP_ERROR"


class _NotFound(_RoutingError):
    code = "NOT_FOUND"


class _MethodNotAllowed(_RoutingError):
    code = "METHOD_NOT_ALLOWED"


_ROUTING: dict[int, type[SkillSearchError]] = {400: ValidationError, 404: _NotFound, 405: _MethodNotAllowed}


def error_response(exc: SkillSearchError, status: int | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    status = exc.http_status if status is None else status
    if status == 401:
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    return JSONResponse(error_body(exc), status_code=status, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(SkillSearchError)
    async def on_error(_: Request, exc: SkillSearchError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def on_invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(invalid_input(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def on_http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        error = _ROUTING.get(exc.status_code, _RoutingError)(str(exc.detail))
        return error_response(error, exc.status_code, getattr(exc, "headers", None))
