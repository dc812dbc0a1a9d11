"""The sync commands: ``sync`` (pull every waiting change once, or ``--status``) and ``upstream`` (serve
folders of skills as a reference subscription platform, for demos and tests)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import TextIO

from skillsearch.cli.common import Subparsers, add_command, emit, in_use, progress_factory, settings_from_args
from skillsearch.cli.sources import command_prefix, report_text, run_sources, stored_status
from skillsearch.cli.termination import STOPPING
from skillsearch.cli.usage import port_arg
from skillsearch.core.errors import ValidationError, WriteStopped
from skillsearch.core.wellformed import terminal_safe
from skillsearch.service import Catalog
from skillsearch.sync.config import SyncConfig, default_config_path, load_config, load_subscriptions
from skillsearch.sync.sources import SourceConfig, load_sources
from skillsearch.sync.status import error_line

__all__ = ["add_commands"]

log = logging.getLogger("skillsearch")


def _sync_config(args: argparse.Namespace) -> tuple[Path, SyncConfig | None, tuple[SourceConfig, ...]]:
    """The sync file, its subscriptions and its local sources. No file is refused with what to write; a file
    that configures neither (``sources remove`` took out the last source) is nothing to do."""
    path = Path(args.config) if args.config else default_config_path(Path(args.data_dir))
    # A pull sends the token; nothing here takes webhooks, and --status sends nothing: a variable that only a
    # server's environment sets (webhook_secret_env, token_env) is not asked of this shell.
    config = load_subscriptions(path, frozenset() if args.status else frozenset({"token"}))
    sources = load_sources(path)
    if config is None and not sources and not path.exists():
        load_config(path)  # raises with the reason and what to write
    return path, config, sources


def cmd_sync(args: argparse.Namespace, out: TextIO) -> int:
    path, config, sources = _sync_config(args)
    nothing = (f"nothing configured in {path}: no [upstream] subscriptions and no [[sources]]; add a source with"
               " `skillsearch sources add`, or an [upstream] table (README: \"Sync from a subscription platform\")")
    if config is None and not sources and not args.status:
        if args.subscription:
            raise ValidationError(f"no subscriptions are configured in {path}", {"unknown": args.subscription})
        emit(out, args, {"subscriptions": [], "sources": []}, lambda: nothing)
        return 0
    if args.status:
        status = stored_status(args, config, sources)
        emit(out, args, status.model_dump(), lambda: "\n".join([
            *(f"{s.subscription_id}: cursor={s.cursor or '-'} last_success={s.last_success or '-'}"
              f" active={s.skills_active} archived={s.skills_archived}{' REVOKED' if s.revoked else ''}"
              + error_line(s.last_success, s.last_error, revoked=s.revoked) for s in status.subscriptions),
            *(f"source {s.name} ({s.kind}): last_success={s.last_success or '-'} active={s.skills_active}"
              f" archived={s.skills_archived}" + (f" commit={s.commit[:12]}" if s.commit else "")
              + error_line(s.last_success, s.last_error) for s in status.sources),
        ]) or nothing)
        return 0
    in_use(Path(args.data_dir))  # before the store is opened: a restore refuses this folder, or is waited for
    catalog = Catalog(settings_from_args(args), stopping=STOPPING)  # creates the store before anything is announced
    log.info("sync: opening the index in %s", args.data_dir)
    catalog.index(progress_factory(not args.quiet))  # opened (and repaired) before the first page, never seeded
    reports = catalog.subscriptions.sync_once(config, args.subscription or None, cancel=STOPPING) if config is not None else []
    if args.subscription and config is None:
        raise ValidationError("no subscriptions are configured", {"unknown": args.subscription})
    for r in reports:
        for rej in r.outcome.rejected:
            print(terminal_safe(f"rejected: {r.subscription_id}: {rej}"), file=sys.stderr)
        if r.error:
            print(terminal_safe(f"error: {r.subscription_id}: {r.error['code']}: {r.error['message']}"), file=sys.stderr)
    source_reports = run_sources(catalog, sources, command=command_prefix(args)) if not args.subscription else []
    payload = {"subscriptions": [r.to_dict() for r in reports], "sources": [r.to_dict() for r in source_reports]}

    def text() -> str:
        return "\n".join([*(
            f"{r.subscription_id}: failed" if r.error else
            f"{r.subscription_id}: {'full' if r.full else 'incremental'}{' REVOKED' if r.revoked else ''},"
            f" {r.pages} page(s): {len(r.outcome.created)} created, {len(r.outcome.updated)} updated,"
            f" {len(r.outcome.archived)} archived, {len(r.outcome.deleted)} deleted,"
            f" {len(r.outcome.rejected)} rejected, {r.embedded} embedded in {r.seconds:.1f}s"
            for r in reports
        ), *(f"source {report_text(r)}" for r in source_reports)]) or "no subscriptions or sources configured"

    emit(out, args, payload, text)
    if STOPPING.is_set():  # SIGTERM stopped a request (or kept a later subscription from starting): exit 143
        raise WriteStopped("stopped syncing: every page stored before the signal is kept, and the next"
                           " `skillsearch sync` resumes each subscription from its stored cursor")
    failed = any(r.error or r.outcome.rejected for r in reports) or any(r.error or r.refused for r in source_reports)
    return 1 if failed else 0


def cmd_upstream(args: argparse.Namespace, out: TextIO) -> int:
    from skillsearch.http.server import serve
    from skillsearch.upstream.app import load_upstream_app

    tokens = args.token or [os.environ.get("SKILLSEARCH_UPSTREAM_TOKEN", "demo-token")]
    app = load_upstream_app(args.sources, tokens=tokens, webhook_url=args.webhook_url,
                            webhook_secret=args.webhook_secret or os.environ.get("SKILLSEARCH_WEBHOOK_SECRET"))

    def started(url: str) -> None:  # the port it listens on (``--port 0`` picks one)
        if args.json:  # the one JSON object --json promises, on stdout
            out.write(json.dumps({"url": url, "skills": f"{url}/v1/subscriptions/{{id}}/skills"}) + "\n")
            out.flush()
        else:
            print(f"upstream: serving on {url}/v1/subscriptions/{{id}}/skills", file=sys.stderr, flush=True)

    serve(app, host=args.host, port=args.port, on_started=started)
    return 0


def add_commands(sub: Subparsers) -> None:
    p = add_command(sub, "sync", cmd_sync, "pull every waiting change from the subscription platform and mirror"
                    " every local source, once")
    p.add_argument("--config", help="sync settings (TOML); default <data-dir>/sync.toml")
    p.add_argument("--subscription", action="append", metavar="ID", help="only this subscription (repeatable;"
                                                                         " default: every subscription and source)")
    p.add_argument("--status", action="store_true", help="show cursor or commit, last success, last error, counts")

    p = add_command(sub, "upstream", cmd_upstream, "serve folders of skills as a reference subscription platform")
    p.add_argument("--from", dest="sources", action="append", required=True, metavar="[ID=]PATH",
                   help="a folder of Agent Skills or a JSON/JSONL bundle, served as subscription ID (repeatable)")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=port_arg, default=8765, help="port, 0-65535 (default 8765; 0 picks a free one)")
    p.add_argument("--token", action="append", help="accepted bearer token (env SKILLSEARCH_UPSTREAM_TOKEN,"
                   " default demo-token)")
    p.add_argument("--webhook-url", help="where to POST signed webhooks, e.g. http://127.0.0.1:8000/v1/sync/webhook"
                                         " (default: none sent)")
    p.add_argument("--webhook-secret", help="shared webhook secret (env SKILLSEARCH_WEBHOOK_SECRET; default: none)")
