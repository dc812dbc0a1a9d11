"""``skillsearch mcp``: the MCP tools over stdio (stdout carries nothing but protocol) or, with
``--http``, streamable HTTP at ``/mcp`` (served by ``http/server.py``), as one principal."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from skillsearch.cli import termination
from skillsearch.cli.common import (
    Subparsers,
    add_command,
    add_grants,
    check_data_dir,
    in_use,
    note_new_data_dir,
    progress_factory,
    settings_from_args,
)
from skillsearch.cli.mcp_sync import McpSync
from skillsearch.cli.termination import STOPPING
from skillsearch.cli.usage import UsageError, port_arg
from skillsearch.core.domain import SCOPE_MEMORY_READ, Principal
from skillsearch.core.errors import ValidationError
from skillsearch.core.grants import check_grants
from skillsearch.service import Catalog

if TYPE_CHECKING:
    from skillsearch.mcp.server import SkillSearchMCP
    from skillsearch.retrieval.encoder import Encoder

__all__ = ["add_commands", "mcp_principal_from_args", "mcp_server_from_args", "principal_from_file"]

log = logging.getLogger("skillsearch")


def principal_from_file(data_dir: Path, name: str) -> Principal:
    """The principal ``name`` of ``<data-dir>/principals.toml`` (tables ``[principals.NAME]`` with
    ``grants = [...]``, ``"*"`` for every grant, and ``scopes = [...]``; other keys such as the HTTP
    app's ``token_sha256`` are ignored): the stdio server runs as a principal named on the command line."""
    from skillsearch.http.auth import PRINCIPALS_FILE, read_entries

    path = Path(data_dir) / PRINCIPALS_FILE
    if not path.is_file():
        raise ValidationError(f"--principal {name}: no principals file at {path}", {"path": str(path)})
    entry = read_entries(path).get(name)
    if entry is None:
        raise ValidationError(f"--principal {name}: no [principals.{name}] table in {path}",
                              {"path": str(path), "principal": name})
    return entry.principal


def mcp_principal_from_args(args: argparse.Namespace) -> Principal:
    """``--principal NAME`` (from the principals file), else ``--grant``/``--scope``, else the operator.
    Options that contradict each other are a usage error (exit code 2)."""
    grants, scopes = args.grant or [], args.scope
    if args.principal and (grants or scopes is not None):
        raise UsageError("skillsearch mcp", "use either --principal or --grant/--scope, not both")
    if args.principal:
        return principal_from_file(Path(args.data_dir), args.principal)
    if scopes is not None and not grants:
        raise UsageError("skillsearch mcp",
                         "--scope needs --grant (the local operator has every grant and memory:read)")
    if not grants:
        return Principal.operator()
    grants = check_grants(grants)
    chosen = {SCOPE_MEMORY_READ} if scopes is None else {s for s in scopes if s}
    return Principal(name="cli", grants=frozenset(grants), scopes=frozenset(chosen))


def mcp_server_from_args(args: argparse.Namespace, encoder: Encoder | None = None,
                         catalog: Catalog | None = None, sync: McpSync | None = None) -> SkillSearchMCP:
    """The server ``skillsearch mcp`` runs: its principal, data directory and host tool names. ``catalog``:
    one already open (``--http`` opens it before it listens), else the server opens it at start; ``sync``: what
    of sync.toml it keeps, when the caller has read the file already (else it is read here)."""
    from skillsearch.mcp.changes import ChangeNotifier
    from skillsearch.mcp.server import build_mcp_server

    principal = mcp_principal_from_args(args)
    settings = settings_from_args(args)
    progress = progress_factory(not args.quiet)
    log.info("MCP server as principal %s (%s)", principal.name,
             "every grant" if principal.grants is None else ", ".join(sorted(principal.grants)))
    # Its sources and subscriptions kept as sync.toml changes (cli/mcp_sync.py). A file written after the server
    # started is read at its next start (an MCP host starts one a session): without one, nothing of it is imported.
    sync = sync or McpSync.from_args(args)
    stdio = not getattr(args, "http", False)

    def open_store() -> Catalog:
        # The store only: the server opens (and repairs) the index behind its first answer (prepare_in_background).
        opened = Catalog.open(settings, encoder=encoder, progress=progress, seed=sync.seed,
                              index=False, stopping=STOPPING)
        # Said now, in the host's server log, not when the session ends hours later.
        note_new_data_dir(args, opened.seeded)
        return opened

    return build_mcp_server(
        catalog or open_store,
        principal,
        known_tools=args.host_tool,
        log_level="INFO" if args.verbose else "WARNING",
        # Over stdio the one principal's sessions are told when what they see changes; HTTP is stateless.
        notifier=ChangeNotifier(principal) if stdio else None,
        while_open=sync.while_open(),
    )


def _http_banner(url: str, principal: Principal, catalog: Catalog) -> str:
    grants = "every grant" if principal.grants is None else ", ".join(sorted(principal.grants))
    scopes = ", ".join(sorted(principal.scopes)) or "none"
    return "\n".join([
        f"skillsearch MCP is serving on {url}/mcp (streamable HTTP; every caller acts as"
        " the principal below)",
        f"  principal:    {principal.name} ({grants}; scopes: {scopes})",
        f"  catalog:      {catalog.skill_count()} skills"
        + ("" if principal.grants is None else f" ({catalog.visible_count(principal)} visible to {principal.name})")
        + ", "
        + ("the index opening in the background" if catalog.index_opening()
           else f"{catalog.indexed_documents()} searchable") + f", in {catalog.data_dir}",
    ])


def _http_started(url: str, principal: Principal, catalog: Catalog) -> dict[str, object]:
    """``mcp --http --json``: the one object on stdout in place of the banner, a script's way to the port 0 picked."""
    visible = None if principal.grants is None else catalog.visible_count(principal)
    return {"url": url, "mcp": f"{url}/mcp",
            "principal": {"name": principal.name, "grants": None if principal.grants is None else sorted(principal.grants),
                          "scopes": sorted(principal.scopes)},
            "skills": catalog.skill_count(), "visible": visible, "index_opening": catalog.index_opening(),
            "data_dir": str(catalog.data_dir)}


def cmd_mcp(args: argparse.Namespace, out: TextIO) -> int:
    """Serve the MCP tools over stdio (stdout carries nothing but protocol) or streamable HTTP."""
    mcp_principal_from_args(args)  # a usage error or an unknown principal: refused before anything is created
    check_data_dir(Path(args.data_dir))
    if not args.http:
        in_use(Path(args.data_dir))
        server = mcp_server_from_args(args)

        def leave() -> None:  # the session has ended, its writes saved: the stdin reader is not waited for
            print("terminated", file=sys.stderr)
            note_new_data_dir(args)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(termination.EXIT_TERMINATED)

        # No server loop takes SIGTERM over stdio: it ends the session as a client closing stdin would.
        termination.on_terminate(lambda: server.stop(then=leave))
        if termination.terminated():
            server.stop(then=leave)
        try:
            server.run("stdio")
        except BaseExceptionGroup as group:  # the SDK's task groups wrap what stopped the server: say that
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        return 0
    from skillsearch.http.server import listen_socket, serve
    from skillsearch.mcp.transport import streamable_http_app

    principal = mcp_principal_from_args(args)
    listen_socket(args.host, args.port).close()  # a busy port fails before the catalog is opened
    in_use(Path(args.data_dir))  # after the port: a server that cannot start leaves no data directory behind
    sync = McpSync.from_args(args)  # read once: the seed here, the keepers in the server
    catalog = Catalog.open(settings_from_args(args), progress=progress_factory(not args.quiet),
                           seed=sync.seed, index=False, stopping=STOPPING)
    note_new_data_dir(args, catalog.seeded)
    catalog.prepare_in_background()  # answers at once; a search waits for the index's open and the model
    try:
        server = mcp_server_from_args(args, catalog=catalog, sync=sync)

        def started(url: str) -> None:
            if args.json:  # the one JSON object --json promises (over stdio, stdout is the protocol's)
                out.write(json.dumps(_http_started(url, principal, catalog)) + "\n")
                out.flush()
            else:
                print(_http_banner(url, principal, catalog), file=sys.stderr, flush=True)

        serve(streamable_http_app(server, host=args.host), host=args.host, port=args.port, on_started=started,
              stopping=STOPPING)
    finally:
        catalog.close()
    return 0


def add_commands(sub: Subparsers) -> None:
    p = add_command(sub, "mcp", cmd_mcp, "serve the MCP tools over stdio (default) or streamable HTTP (--http)")
    p.set_defaults(server=True)  # an unusable data directory: one line, exit code 3 (check_data_dir)
    p.epilog = ("With a <data-dir>/sync.toml when it starts, the server keeps it while it runs, as serve does: its"
                " [[sources]] mirrored and watched, its [[subscriptions]] polled on their intervals (a revocation"
                " upstream hides their skills at the next poll; no webhooks), and the file followed (a source or"
                " subscription added, removed or changed there is taken up without a restart). Several mcp"
                " processes on one data directory take turns to sync. Over stdio a session is told when the skills"
                " it can see change.")
    p.add_argument("--data-dir", default=argparse.SUPPRESS, help="data directory (same as the global option; default:"
                                                                 " the global one, env SKILLSEARCH_DATA_DIR, else ./index)")
    p.add_argument("--principal", metavar="NAME", help="run as this principal of <data-dir>/principals.toml (default:"
                                                       " the local operator, every grant, unless --grant)")
    add_grants(p)
    p.add_argument("--scope", action="append", metavar="S",
                   help="scope of the --grant principal (repeatable; default memory:read; '' for none)")
    p.add_argument("--host-tool", action="append", metavar="TOOL",
                   help="a tool name the host provides (repeatable): resolving a template that names any other"
                        " tool is SKILL_INVALID; default: no check")
    p.add_argument("--http", action="store_true", help="streamable HTTP on --host/--port at /mcp instead of stdio")
    p.add_argument("--host", default="127.0.0.1", help="interface --http binds (default 127.0.0.1)")
    p.add_argument("--port", type=port_arg, default=8765, help="port for --http, 0-65535 (default 8765; 0 picks a free one)")
    p.add_argument("--no-sync", action="store_true",
                   help="do not poll the subscription platform nor keep the local sources")
    p.add_argument("--no-sources", action="store_true",
                   help="do not mirror and watch the [[sources]] of <data-dir>/sync.toml (its subscriptions are"
                        " still polled)")
