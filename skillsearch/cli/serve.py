"""``skillsearch serve``: the composition of the serve process.

One :class:`Catalog`, one :class:`PrincipalRegistry`, and on them the HTTP app (``http/app.py``) with the
MCP server (``mcp/server.py``) mounted at ``/mcp`` over its streamable HTTP transport, both authenticated by
the same bearer tokens; with a sync configuration also the sync routes (``http/sync_routes.py``) and the
background poller. ``http/server.py`` runs the result. The surfaces never import each other: this module
is where they meet.

With ``--workers N`` (N > 1) this process prepares the data directory once (checks the configuration,
seeds the sample into the store of a new one), then supervises N worker processes on one socket; each
worker builds the same app from ``SKILLSEARCH_SERVE_ARGS`` (:func:`worker_app`) and, as a single ``serve``
does, answers at once and opens the index in the background: whatever the index needs (built, repaired) is
done by the one worker that takes the data directory's write lock first, and the others, waiting on that
lock, open what it wrote. In every case the sync duties run in the one process that holds the data
directory's ``leader.lock`` (``sync/leader.py``).
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import signal
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from skillsearch.cli import termination
from skillsearch.cli.common import (
    Subparsers,
    add_command,
    check_data_dir,
    in_use,
    note_new_data_dir,
    principals_path,
    progress_factory,
    settings_from_args,
)
from skillsearch.cli.termination import STOPPING
from skillsearch.cli.usage import float_range, int_range, port_arg
from skillsearch.core.domain import Principal
from skillsearch.service import Catalog
from skillsearch.sync.config import SyncConfig, default_config_path, load_config, load_subscriptions
from skillsearch.sync.sources import SourceConfig, load_sources

if TYPE_CHECKING:
    from fastapi import APIRouter, FastAPI

    from skillsearch.http.app import Lifespan
    from skillsearch.http.auth import PrincipalRegistry

__all__ = ["SERVE_ARGS_ENV", "add_commands", "build_serve_app", "worker_app"]

SERVE_ARGS_ENV = "SKILLSEARCH_SERVE_ARGS"
DEFAULT_DEGRADED_AFTER_S = 900.0


def _serve_banner(url: str, demo: bool, principals: Path, building: bool = False, named: bool = False,
                  webhooks_off: Path | None = None) -> str:
    """What ``serve`` prints once it listens. ``named``: the principals file was given (``--principals``), so a
    file that is not there (a mistyped path) is said even beside the demo token. ``webhooks_off``: the sync
    configuration whose ``[upstream]`` has no webhook secret, so every webhook is refused (401)."""
    from skillsearch.http.auth import DEMO_TOKEN

    lines = [f"skillsearch is serving on {url}", f"  search page:  {url}/", f"  MCP:          {url}/mcp (streamable HTTP)",
             f"  API:          {url}/openapi.json  (Swagger UI at {url}/docs needs internet for its assets)"]
    if demo:
        lines += [
            f"  demo token:   {DEMO_TOKEN}   (sample catalog only: sees sub:starter-pack and team:data-science)",
            f"  try:          curl -H 'Authorization: Bearer {DEMO_TOKEN}' '{url}/v1/search?q=profile+python+code'",
        ]
    missing = "" if principals.is_file() else " (does not exist yet: no token of yours works until `token add` writes it)"
    if demo and named and missing:
        lines.append(f"  principals:   {principals}{missing}")
    if not demo:
        lines += [
            f"  principals:   {principals}{missing}",
            "  add a token:  skillsearch token add NAME --grant sub:<id> --scope skills:read"
            + (f" --principals {principals}" if named else ""),
            f"  try:          curl -H 'Authorization: Bearer <token>' '{url}/v1/search?q=profile+python+code'",
        ]
    if webhooks_off is not None:
        lines.append(f"  webhooks:     off: every POST {url}/v1/sync/webhook is 401 (the catalog still pulls on its"
                     f" interval); to take them, set webhook_secret (or webhook_secret_env) in [upstream] of"
                     f" {webhooks_off}")
    if building:  # the first run: say why the first search waits (20-30 s on 2 cores for the sample)
        lines.append(f"  index:        no index yet: building it in the background; searches wait for it and"
                     f" {url}/readyz answers 200 once it is ready")
    return "\n".join(lines)


def build_serve_app(catalog: Catalog, registry: PrincipalRegistry, host: str = "127.0.0.1",
                    sync: SyncConfig | None = None, sources: Sequence[SourceConfig] = (),
                    degraded_after_s: float = DEFAULT_DEGRADED_AFTER_S, config_path: Path | None = None) -> FastAPI:
    """What ``skillsearch serve`` runs: the HTTP app with MCP's streamable HTTP transport at ``/mcp``, both
    authenticated by the same bearer tokens (the MCP catalog tools need ``skills:read`` as the REST routes
    do; recall needs ``memory:read`` on both). With ``sync``, a background poller keeps the subscriptions in
    sync, and ``POST /v1/sync/webhook`` (HMAC-signed) and ``GET /v1/sync/status`` (bearer token with ``skills:read``) are served.
    With ``sources``, the local sources are mirrored on their intervals and folder sources watched; with
    ``config_path``, the file both come from is followed while the server runs: a source added there is
    run and watched, one removed is no longer run, one changed runs as it now says; a subscription added there
    is pulled at once (and its webhooks taken), one removed is no longer pulled, a changed interval or
    ``[upstream]`` is used from the next run. The
    poller and the sources' runner run only while this process is the data directory's writer
    (``sync/leader.py``); ``/readyz`` says ``degraded`` once a sync has failed for ``degraded_after_s``."""
    from skillsearch.http.app import Operations, create_app
    from skillsearch.http.auth import SCOPE_SKILLS_READ
    from skillsearch.mcp.server import build_mcp_server
    from skillsearch.mcp.transport import mountable
    from skillsearch.sync.leader import Duty, Leadership

    def principal_of(headers: Mapping[str, str] | None) -> Principal:
        return registry.authenticate_header((headers or {}).get("authorization"))

    mcp_app, mcp_lifespan = mountable(build_mcp_server(catalog, principal_of, catalog_scope=SCOPE_SKILLS_READ),
                                      host=host)
    routers: list[APIRouter] = []
    lifespans: list[Lifespan] = [lambda _app: mcp_lifespan()]
    operations = Operations(degraded_after_s=degraded_after_s)
    if sync is not None or sources or config_path is not None:
        from skillsearch.http.sync_routes import make_sync_router

        # Following the file, the subscriptions are kept even when it configures none yet (one may be added).
        subs = catalog.subscriptions.keeper(sync, followed=config_path) if sync is not None or config_path else None
        poller = subs.poller if subs is not None else None
        keeper = catalog.sources.keeper(sources, config=config_path) if sources or config_path else None
        duties: list[Duty] = [d for d in (subs, keeper) if d is not None]
        leadership = Leadership(catalog.data_dir, duties, on_pull=subs.trigger if subs is not None else None)
        configured = subs.current if subs is not None else None
        routers.append(make_sync_router(catalog, sync, poller, authenticate=registry.authenticate_header,
                                        sources=sources, keeper=keeper, pull=leadership.request_pull,
                                        configured=configured))
        lifespans.append(lambda _app: leadership.lifespan())
        started = time.time()
        operations = Operations(writer=lambda: leadership.is_writer,
                                health=lambda: catalog.subscriptions.sync_health(
                                    configured() if configured is not None else sync,
                                    keeper.current() if keeper is not None else sources, started, poller,
                                    added=subs.added() if subs is not None else None),
                                degraded_after_s=degraded_after_s)
    return create_app(catalog, principals=registry, mounts=[("/mcp", mcp_app)], routers=routers,
                      lifespans=lifespans, operations=operations)


def sync_config_path(args: argparse.Namespace) -> Path:
    """The file ``serve`` reads its subscriptions and sources from (``--sync-config``, else the default)."""
    return Path(args.sync_config) if args.sync_config else default_config_path(Path(args.data_dir))


def _followed(args: argparse.Namespace) -> Path | None:
    """The sync file a server follows while it runs for its sources and its subscriptions (added, removed or
    changed there, they are kept from then on; one first written while it runs too: ``sources add`` beside
    ``make serve``), ``None`` with ``--no-sync``."""
    return None if args.no_sync else sync_config_path(args)


def _open(args: argparse.Namespace, index: bool) -> tuple[Catalog, SyncConfig | None, Sequence[SourceConfig]]:
    """The data directory's catalog; ``index``: its index opened (built, repaired) now, else left to
    ``Catalog.prepare_in_background``, behind the server's first answers."""
    sync_path = sync_config_path(args)
    use = not args.no_sync and (args.sync_config or sync_path.exists())
    if use and args.sync_config and not sync_path.exists():
        load_config(sync_path, option="--sync-config")  # raises with the reason and what to write
    # Read as <data-dir>/sync.toml is: a file may hold only [[sources]] (what `sources add` writes).
    sync = load_subscriptions(sync_path) if use else None
    sources = load_sources(sync_path) if use else ()
    in_use(Path(args.data_dir))  # before any file is opened: a restore refuses this directory while we live
    # A synced catalog is not seeded with the sample: its demo subscriptions would collide with real ones.
    catalog = Catalog.open(settings_from_args(args), seed=False if sync or sources else None,
                           progress=progress_factory(not args.quiet), index=index, stopping=STOPPING)
    note_new_data_dir(args, catalog.seeded)
    return catalog, sync, sources


def _webhooks_off(args: argparse.Namespace, sync: SyncConfig | None) -> Path | None:
    """The sync configuration of an upstream that has no webhook secret (webhooks are refused), else ``None``."""
    return sync_config_path(args) if sync is not None and sync.upstream.webhook_secret is None else None


def _compose(args: argparse.Namespace) -> tuple[Catalog, PrincipalRegistry, FastAPI, SyncConfig | None]:
    from skillsearch.http.auth import PrincipalRegistry

    catalog, sync, sources = _open(args, index=False)
    catalog.prepare_in_background()  # answers at once; a search waits for the index's open and the model
    registry = PrincipalRegistry.for_catalog(catalog, principals_path(args))
    app = build_serve_app(catalog, registry, args.host, sync, sources, degraded_after_s=args.degraded_after,
                          config_path=_followed(args))
    return catalog, registry, app, sync


def _prepare(shared: dict[str, Any]) -> tuple[bool, Path | None]:
    """In a short-lived process before the workers start: open the data directory's store once (the sample
    seeded into a new one, so the workers never race to), then close it. The index is left to the workers'
    background opens: the first to take the write lock builds or repairs it while every worker already
    answers (``/readyz`` 503 meanwhile). Whether the demo principal is on, and whether webhooks are off
    (:func:`_webhooks_off`)."""
    from skillsearch.http.auth import PrincipalRegistry

    args = argparse.Namespace(**shared)
    termination.install()  # this process is spawned: SIGTERM (passed on by the supervisor) ends it (it embeds nothing)
    catalog, sync, _ = _open(args, index=False)
    try:
        return PrincipalRegistry.for_catalog(catalog, principals_path(args)).demo, _webhooks_off(args, sync)
    finally:
        catalog.close()


def worker_app() -> FastAPI:
    """One worker of ``serve --workers N``: the app ``cmd_serve`` composes, from the parent's arguments."""
    from skillsearch.http.middleware import configure_json_logging

    args = argparse.Namespace(**json.loads(os.environ[SERVE_ARGS_ENV]))
    configure_json_logging(logging.DEBUG if args.verbose else logging.INFO)
    return _compose(args)[2]  # the catalog lives as long as the worker process


def cmd_serve(args: argparse.Namespace, out: TextIO) -> int:
    from skillsearch.http.middleware import configure_json_logging
    from skillsearch.http.server import listen_socket, serve, serve_workers
    from skillsearch.retrieval.manifest import MANIFEST

    check_data_dir(Path(args.data_dir))
    principals = principals_path(args)
    building = not (Path(args.data_dir) / MANIFEST).exists()  # looked at before anything starts building it

    def started(url: str, demo: bool, webhooks_off: Path | None) -> None:
        if args.json:  # the one JSON object --json promises, a script's way to the port 0 picked
            out.write(json.dumps({"url": url, "search_page": f"{url}/", "mcp": f"{url}/mcp",
                                  "openapi": f"{url}/openapi.json", "principals": str(principals), "demo": demo,
                                  "building_index": building,
                                  "webhooks_off": None if webhooks_off is None else str(webhooks_off)}) + "\n")
        else:
            out.write(_serve_banner(url, demo, principals, building, named=bool(args.principals),
                                    webhooks_off=webhooks_off) + "\n")
        out.flush()

    listen_socket(args.host, args.port).close()  # a busy port fails before the data directory is opened
    if args.workers == 1:
        catalog, registry, app, sync = _compose(args)
        configure_json_logging(logging.DEBUG if args.verbose else logging.INFO)
        off = _webhooks_off(args, sync)
        try:
            serve(app, host=args.host, port=args.port, on_started=lambda url: started(url, registry.demo, off),
                  stopping=STOPPING)
        finally:
            catalog.close()
        return 0
    shared: dict[str, Any] = {k: v for k, v in vars(args).items() if k != "func"}
    # In its own process, so that this supervisor holds nothing of the data directory (its store, the imports of
    # a seeding) while the workers serve.
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        preparing = pool.submit(_prepare, shared)
        # SIGTERM here reaches only this process: pass it on, so the preparation (a seeding's store writes) ends too.
        def pass_on() -> None:
            for pid in list(pool._processes or {}):  # None once the pool has shut down
                os.kill(pid, signal.SIGTERM)

        termination.on_terminate(pass_on)
        demo, off = preparing.result()
    # The preparing process created (and seeded) a new data directory and said so: neither this supervisor
    # nor a worker, which find it made, says it again.
    args.fresh_data_dir = shared["fresh_data_dir"] = False
    if termination.terminated():
        return 0  # main says terminated
    os.environ[SERVE_ARGS_ENV] = json.dumps(shared)
    configure_json_logging(logging.DEBUG if args.verbose else logging.INFO)
    serve_workers("skillsearch.cli.serve:worker_app", args.host, args.port, args.workers,
                  on_started=lambda url: started(url, demo, off))
    return 0


def add_commands(sub: Subparsers) -> None:
    p = add_command(sub, "serve", cmd_serve, "serve the HTTP API, metrics and the search page (FastAPI + uvicorn)")
    p.set_defaults(server=True)  # an unusable data directory: one line, exit code 3 (check_data_dir)
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=port_arg, default=8000, help="port, 0-65535 (default 8000; 0 picks a free one)")
    p.add_argument("--principals", help="principals file (default <data-dir>/principals.toml)")
    p.add_argument("--sync-config", help="sync settings (TOML); default <data-dir>/sync.toml when it exists")
    p.add_argument("--no-sync", action="store_true", help="do not poll the subscription platform nor keep the local sources")
    p.add_argument("--workers", type=int_range(1, None, "a number of worker processes"), default=1, metavar="N",
                   help="worker processes on the one port (default 1; about one per core, each holds its own copy"
                        " of the model); one of them at a time runs sync")
    p.add_argument("--degraded-after", type=float_range(0, None, "a number of seconds"),
                   default=DEFAULT_DEGRADED_AFTER_S, metavar="SECONDS",
                   help="/readyz says degraded once a sync has been failing this long (default 900)")
