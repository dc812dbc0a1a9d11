"""The search page: ``/`` (static HTML), ``/static`` (its script and style) and ``/ui/config`` (what the
page needs before its first call: the demo token, only while the server runs on the sample catalog)."""

from __future__ import annotations

from importlib import resources as importlib_resources
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from skillsearch.http.auth import DEMO_TOKEN, PrincipalRegistry
from skillsearch.http.deps import registry_of

__all__ = ["install_page", "router", "static_dir"]

router = APIRouter(include_in_schema=False)


def static_dir() -> Path:
    return Path(str(importlib_resources.files("skillsearch.http") / "static"))


@router.get("/")
def index() -> FileResponse:
    return FileResponse(static_dir() / "index.html", media_type="text/html")


# Requests the first screen offers on the bundled sample catalog: each finds, as the demo token's caller
# (sub:starter-pack, team:data-science; not sub:ops-pro), the skill it names, with a confident first hit
# (tests/test_readme_examples.py runs them as that caller).
SAMPLE_EXAMPLES = ("profile slow python code", "clean a messy dataset with pandas", "detect drift in model features",
                   "cut a tagged release")


@router.get("/ui/config")
def ui_config(registry: Annotated[PrincipalRegistry, Depends(registry_of)]) -> dict[str, Any]:
    demo = registry.demo
    return {"demo_token": DEMO_TOKEN if demo else None, "examples": list(SAMPLE_EXAMPLES) if demo else []}


def install_page(app: FastAPI) -> None:
    app.mount("/static", StaticFiles(directory=static_dir()), name="static")
    app.include_router(router)
