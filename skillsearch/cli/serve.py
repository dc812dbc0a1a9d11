"""``skillsearch serve``: the composition of the serve process.

One :class:`Catalog`, one :class:`PrincipalRegistry`, and on them the HTTP app (``http/app.py``) with the
MCP server (``mcp/server.py``) mounted at ``/mcp`` over its streamable HTTP transport, both authenticated by
the same bearer tokens; with a sync configuration also the sync routes (``http/sync_routes.py``) and the
background poller. ``http/server.py`` runs the result. The surfaces never import each other: this module
is where they meet.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from skillsearch.cli.common import (
    EXIT_CANNOT_LISTEN,
    Subparsers,
    add_command,
    cannot_listen,
    note_new_data_dir,
    principals_path,
    progress_factory,
    settings_from_args,
)
from skillsearch.core.domain import Principal
from skillsearch.service import Catalog
from skillsearch.sync.config import SyncConfig, default_config_path, load_config, load_subscriptions
from skillsearch.sync.sources import SourceConfig, load_sources

if TYPE_CHECKING:
    from fastapi import APIRouter, FastAPI

    from skillsearch.http.app import Lifespan
    from skillsearch.http.auth import PrincipalRegistry

__all__ = ["add_commands", "build_serve_app"]


def _serve_banner(url: str, demo: bool, principals: Path) -> str:
    from skillsearch.http.auth import DEMO_TOKEN

    lines = [f"skillsearch is serving on {url}", f"  search page:  {url}/", f"  MCP:          {url}/mcp (streamable HTTP)",
             f"  API:          {url}/openapi.json  (Swagger UI at {url}/docs needs internet for its assets)"]
    if demo:
        lines += [
            f"  demo token:   {DEMO_TOKEN}   (sample catalog only: sees sub:starter-pack and team:data-science)",
            f"  try:          curl -H 'Authorization: Bearer {DEMO_TOKEN}' '{url}/v1/search?q=profile+python+code'",
        ]
    else:
        lines += [
            f"  principals:   {principals}",
            "  add a token:  skillsearch token add NAME --grant sub:<id> --scope skills:read",
            f"  try:          curl -H 'Authorization: Bearer <token>' '{url}/v1/search?q=profile+python+code'",
        ]
    return "\n".join(lines)


def build_serve_app(catalog: Catalog, registry: PrincipalRegistry, host: str = "127.0.0.1",
                    sync: SyncConfig | None = None, sources: Sequence[SourceConfig] = ()) -> FastAPI:
    """What ``skillsearch serve`` runs: the HTTP app with MCP's streamable HTTP transport at ``/mcp``, both
    authenticated by the same bearer tokens (the MCP catalog tools need ``skills:read`` as the REST routes
    do; recall needs ``memory:read`` on both). With ``sync``, a background poller keeps the subscriptions in
    sync, and ``POST /v1/sync/webhook`` (HMAC-signed) and ``GET /v1/sync/status`` (bearer token) are served.
    With ``sources``, the local sources are mirrored on their intervals and folder sources watched."""
    from skillsearch.http.app import create_app
    from skillsearch.http.auth import SCOPE_SKILLS_READ
    from skillsearch.mcp.server import build_mcp_server
    from skillsearch.mcp.transport import mountable

    def principal_of(headers: Mapping[str, str] | None) -> Principal:
        return registry.authenticate_header((headers or {}).get("authorization"))

    mcp_app, mcp_lifespan = mountable(build_mcp_server(catalog, principal_of, catalog_scope=SCOPE_SKILLS_READ),
                                      host=host)
    routers: list[APIRouter] = []
    lifespans: list[Lifespan] = [lambda _app: mcp_lifespan()]
    if sync is not None or sources:
        from skillsearch.http.sync_routes import make_sync_router

        poller = catalog.make_poller(sync) if sync is not None else None
        keeper = catalog.sources.keeper(sources) if sources else None
        routers.append(make_sync_router(catalog, sync, poller, authenticate=registry.authenticate_header,
                                        sources=sources, keeper=keeper))
        if poller is not None:
            lifespans.append(lambda _app: poller.lifespan())
        if keeper is not None:
            lifespans.append(lambda _app: keeper.lifespan())
    return create_app(catalog, principals=registry, mounts=[("/mcp", mcp_app)], routers=routers,
                      lifespans=lifespans)


def cmd_serve(args: argparse.Namespace, out: TextIO) -> int:
    from skillsearch.http.auth import PrincipalRegistry
    from skillsearch.http.middleware import configure_json_logging
    from skillsearch.http.server import serve

    if cannot_listen(args.host, args.port):
        return EXIT_CANNOT_LISTEN
    sync_path = Path(args.sync_config) if args.sync_config else default_config_path(Path(args.data_dir))
    use = not args.no_sync and (args.sync_config or sync_path.exists())
    sync = (load_config(sync_path) if args.sync_config else load_subscriptions(sync_path)) if use else None
    sources = load_sources(sync_path) if use else ()
    # A synced catalog is not seeded with the sample: its demo subscriptions would collide with real ones.
    catalog = Catalog.open(settings_from_args(args), seed=False if sync or sources else None,
                           progress=progress_factory(not args.quiet))
    note_new_data_dir(args, catalog.seeded)
    principals = principals_path(args)
    registry = PrincipalRegistry.for_catalog(catalog, principals)
    app = build_serve_app(catalog, registry, args.host, sync, sources)
    configure_json_logging(logging.DEBUG if args.verbose else logging.INFO)

    def started(url: str) -> None:
        out.write(_serve_banner(url, registry.demo, principals) + "\n")
        out.flush()

    catalog.load_model_in_background()  # answers at once; a search that needs the model waits for it
    try:
        serve(app, host=args.host, port=args.port, on_started=started)
    finally:
        catalog.close()
    return 0


def add_commands(sub: Subparsers) -> None:
    p = add_command(sub, "serve", cmd_serve, "serve the HTTP API, metrics and the search page (FastAPI + uvicorn)")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    p.add_argument("--principals", help="principals file (default <data-dir>/principals.toml)")
    p.add_argument("--sync-config", help="sync settings (TOML); default <data-dir>/sync.toml when it exists")
    p.add_argument("--no-sync", action="store_true", help="do not poll the subscription platform nor keep the local sources")
