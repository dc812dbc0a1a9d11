"""The search page: ``/`` (static HTML), ``/static`` (its script and style) and ``/ui/config`` (what the
page needs before its first call: the demo token, only while the server runs on the sample catalog, and the
bounds of a search it may ask for: its largest ``limit``, how many tags and how long a tag).

The page and its files leave with :data:`PAGE_HEADERS`: a Content-Security-Policy that runs only this
server's script files (no inline script, no inline handler: markup that ever reached the page from catalog
text could not run, nor read the token the page keeps), and ``no-cache``, so a browser revalidates them by
their ETag and never runs an older ``app.js`` against a newer server."""

from __future__ import annotations

from importlib import resources as importlib_resources
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.types import Scope

from skillsearch.http.auth import DEMO_TOKEN, PrincipalRegistry
from skillsearch.http.deps import catalog_of, registry_of
from skillsearch.http.schemas import MAX_TAG_CHARS, Limits

__all__ = ["PAGE_HEADERS", "install_page", "router", "static_dir"]

router = APIRouter(include_in_schema=False)

PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


class PageFiles(StaticFiles):
    """The page's script and style, with :data:`PAGE_HEADERS` (a 304 too: it carries the cache policy)."""

    def file_response(self, full_path: Any, stat_result: Any, scope: Scope, status_code: int = 200) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers.update(PAGE_HEADERS)
        return response


def static_dir() -> Path:
    return Path(str(importlib_resources.files("skillsearch.http") / "static"))


def _wants_json(accept: str) -> bool:
    """A client that asks for JSON and not for HTML (an agent's HTTP tool, ``curl -H 'Accept: application/json'``);
    a browser always lists ``text/html``."""
    types = set()
    for part in accept.split(","):
        media, *params = (p.replace(" ", "").lower() for p in part.split(";"))
        if _weight(params) > 0:  # q=0 says "not this one"
            types.add(media)
    return "text/html" not in types and bool(types & {"application/json", "application/*"})


def _weight(params: list[str]) -> float:
    """An Accept entry's ``q`` (1 when it has none or an unreadable one)."""
    for p in params:
        if p.startswith("q="):
            try:
                return float(p[2:])
            except ValueError:
                return 1.0
    return 1.0


@router.get("/")
def index(request: Request) -> Response:
    """The search page; to a client that asks for JSON, where this server's surfaces are."""
    if _wants_json(request.headers.get("accept", "")):
        # Any route at /mcp: serve mounts MCP on an exact route (http/app.py), not a Starlette Mount.
        mcp = any(getattr(r, "path", None) == "/mcp" for r in request.app.routes)
        return JSONResponse({"service": "skillsearch", "version": request.app.version,
                             "auth": "every /v1 route and /mcp need Authorization: Bearer <token>",
                             "list": "/v1/skills", "search": "/v1/search?q=", "openapi": "/openapi.json",
                             "docs": "/docs", "mcp": "/mcp" if mcp else None, "health": "/healthz",
                             "ready": "/readyz", "metrics": "/metrics"},
                            headers={"Vary": "Accept", "Cache-Control": "no-cache"})
    return FileResponse(static_dir() / "index.html", media_type="text/html", headers={**PAGE_HEADERS, "Vary": "Accept"})


# Requests the first screen offers on the bundled sample catalog: each finds, as the demo token's caller
# (sub:starter-pack, team:data-science; not sub:ops-pro), the skill it names, with a confident first hit
# (tests/test_readme_examples.py runs them as that caller).
SAMPLE_EXAMPLES = ("profile slow python code", "clean a messy dataset with pandas", "detect drift in model features",
                   "cut a tagged release")


@router.get("/ui/config")
def ui_config(request: Request, registry: Annotated[PrincipalRegistry, Depends(registry_of)]) -> dict[str, Any]:
    demo = registry.demo
    limits: Limits = request.app.state.limits
    # What /v1/search takes (routes_skills.py): the page offers "Show more" up to max_limit and refuses a link's
    # limit or tag outside these before it asks.
    search = {"max_limit": catalog_of(request).settings.max_limit, "max_tags": limits.max_tags,
              "max_tag_chars": MAX_TAG_CHARS}
    return {"demo_token": DEMO_TOKEN if demo else None, "examples": list(SAMPLE_EXAMPLES) if demo else [],
            "search": search}


def install_page(app: FastAPI) -> None:
    app.mount("/static", PageFiles(directory=static_dir()), name="static")
    app.include_router(router)
