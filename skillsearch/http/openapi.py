"""The app's OpenAPI document: FastAPI documents a 422 with its own validation schema on every route with
parameters; this API answers request validation with 400 ``ErrorBody`` instead, so that 422 is removed
where it is not ours and a 400 is documented wherever there is input, and on every ``/v1`` route, which refuses
a query parameter it does not take (``http/query_names``) even when it takes none."""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from skillsearch.http.schemas import STATUS_TEXT

__all__ = ["install_openapi"]


def install_openapi(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, summary=app.summary,
                                 description=app.description, routes=app.routes)
            for path, item in schema.get("paths", {}).items():
                for op in item.values():
                    responses = op.get("responses", {})
                    ref = json.dumps(responses.get("422", {}))
                    if "HTTPValidationError" in ref:
                        del responses["422"]
                    if op.get("parameters") or op.get("requestBody") or path.startswith("/v1/"):
                        responses.setdefault("400", {"description": STATUS_TEXT[400], "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}})
            comps = schema.get("components", {}).get("schemas", {})
            for unused in ("HTTPValidationError", "ValidationError"):
                comps.pop(unused, None)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
