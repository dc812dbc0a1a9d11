"""``skillsearch sources list|add|remove|sync``: local skill sources (folders, git repositories) kept in
``<data-dir>/sync.toml`` beside the subscriptions (see ``skillsearch/sync/sources.py``)."""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from skillsearch.catalog.store import CatalogStore
from skillsearch.cli.common import (
    Subparsers,
    add_command,
    emit,
    grant_arg,
    in_use,
    open_catalog,
    progress_factory,
    settings_from_args,
)
from skillsearch.cli.termination import STOPPING
from skillsearch.cli.usage import float_range
from skillsearch.core.errors import ValidationError, problem
from skillsearch.core.wellformed import terminal_safe
from skillsearch.service import Catalog
from skillsearch.sync.config import SyncConfig, default_config_path
from skillsearch.sync.sources import (
    DEFAULT_INTERVAL_S,
    MAX_INTERVAL_S,
    MIN_INTERVAL_S,
    SourceConfig,
    add_source,
    load_sources,
    name_problem,
    remove_source,
)
from skillsearch.sync.status import SyncStatus, error_line, sync_status

if TYPE_CHECKING:  # the mirror (and the importer, git) only for a command that runs a source
    from skillsearch.sync.mirror import SourceReport

__all__ = ["add_commands", "command_prefix", "config_path", "report_text", "run_sources", "stored_status"]


def config_path(args: argparse.Namespace) -> Path:
    return Path(args.config) if getattr(args, "config", None) else default_config_path(Path(args.data_dir))


def command_prefix(args: argparse.Namespace) -> str:
    """``skillsearch`` as the user runs it again on this data directory: ``--data-dir DIR`` when not the
    default (``SKILLSEARCH_DATA_DIR``, else ``index``), so a command a hint names acts on the same catalog."""
    given = str(args.data_dir)
    return "skillsearch" if given == os.environ.get("SKILLSEARCH_DATA_DIR", "index") else \
        f"skillsearch --data-dir {shlex.quote(given)}"


def report_text(r: SourceReport) -> str:
    if r.error:  # the error itself is on stderr (run_sources), once
        return f"{r.source}: failed"
    if r.skipped:
        return f"{r.source}: nothing new at {r.commit[:12] if r.commit else '-'}"
    at = f" at {r.commit[:12]}" if r.commit else ""
    return (f"{r.source}{at}: {len(r.added)} added, {len(r.changed)} changed, {len(r.removed)} removed,"
            f" {r.unchanged} unchanged, {len(r.refused)} refused, {r.index.embedded if r.index else 0} embedded")


class _PrintedHere(logging.Filter):
    """The mirror logs a source's warnings, error and each refusal for a server's log; a command prints each
    of them itself, once (``run_sources``), so those records are not also written to stderr."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.module == "mirror" and record.levelno == logging.WARNING)


def run_sources(catalog: Catalog, sources: tuple[SourceConfig, ...], names: list[str] | None = None,
                command: str = "skillsearch", **kwargs: Any) -> list[SourceReport]:
    """One run of each source (or of those named); problems go to stderr, one per line, a command they name
    (``skillsearch sources sync NAME --allow-rewind``) as ``command`` (:func:`command_prefix`) runs it."""
    if names:
        unknown = sorted(set(names) - {s.name for s in sources})
        if unknown:
            raise ValidationError(f"no source named {', '.join(unknown)}", {"unknown": unknown})
        sources = tuple(s for s in sources if s.name in names)
    printed = _PrintedHere()
    mirror_log = logging.getLogger("skillsearch.sync")
    mirror_log.addFilter(printed)
    try:
        reports = [catalog.sources.sync(s, **kwargs) for s in sources]
    finally:
        mirror_log.removeFilter(printed)
    for r in reports:
        for w in r.warnings:
            print(terminal_safe(f"warning: {r.source}: {w}"), file=sys.stderr)
        for ref in r.refused:
            print(terminal_safe(f"refused: {r.source}: {ref.file}: {ref.reason}"), file=sys.stderr)
        if r.error:
            error = r.error.replace("`skillsearch sources ", f"`{command} sources ")
            print(terminal_safe(f"error: {r.source}: {error}"), file=sys.stderr)
    return reports


def stored_status(args: argparse.Namespace, config: SyncConfig | None,
                  sources: tuple[SourceConfig, ...]) -> SyncStatus:
    """Where ``config``'s subscriptions and ``sources`` stand in the data directory's catalog (``sources list``,
    ``sync --status``). A read: a directory without a catalog (nothing has run yet, or a mistyped
    ``--data-dir``) is shown as such, and neither it nor a catalog in it is created; a catalog this user cannot
    write is read as it is."""
    if not (Path(args.data_dir) / CatalogStore.FILENAME).is_file():
        return sync_status(None, config, sources=sources)
    catalog = open_catalog(args, seed=False, index=False)  # the store alone, read-only where it must be
    try:
        return catalog.subscriptions.sync_status(config, sources=sources)
    finally:
        catalog.close()


def cmd_sources_list(args: argparse.Namespace, out: TextIO) -> int:
    sources = load_sources(config_path(args))
    status = stored_status(args, None, sources)
    emit(out, args, {"sources": [s.model_dump() for s in status.sources]}, lambda: "\n".join(
        f"{s.name} ({s.kind}, {s.grant}): {s.location}\n  active={s.skills_active} archived={s.skills_archived}"
        f" last_success={s.last_success or '-'}" + (f" commit={s.commit[:12]}" if s.commit else "")
        + error_line(s.last_success, s.last_error)
        for s in status.sources
    ) or f"no sources configured in {config_path(args)}")
    return 0


def cmd_sources_add(args: argparse.Namespace, out: TextIO) -> int:
    if (args.path is None) == (args.git is None):
        raise ValidationError("give exactly one of --path or --git")
    if args.path is not None and (args.ref or args.subdir):
        raise ValidationError("--ref and --subdir belong to a --git source")
    if args.path is not None and not args.allow_missing and not Path(args.path).expanduser().is_dir():
        raise ValidationError(
            f"--path {args.path}: no such folder; check the path, or pass --allow-missing to add it anyway"
            " (it is read once it exists)", {"problems": [problem("path", "no such folder")]})
    source = SourceConfig(
        args.name, args.grant,
        path=Path(args.path).expanduser().resolve() if args.path else None,
        git=args.git, ref=args.ref or "HEAD", subdir=args.subdir, interval_s=args.interval,
    )
    path = config_path(args)
    add_source(path, source)
    emit(out, args, {"added": source.to_dict(), "config": str(path)},
         lambda: f"added source {source.name} ({source.location}) to {path};"
                 f" run: {command_prefix(args)} sources sync {source.name}")
    return 0


def cmd_sources_remove(args: argparse.Namespace, out: TextIO) -> int:
    path = config_path(args)
    removed = remove_source(path, args.name)
    archived: list[str] = []
    if not args.keep_skills:
        in_use(Path(args.data_dir))
        catalog = Catalog.open(settings_from_args(args), seed=False, progress=progress_factory(not args.quiet),
                           stopping=STOPPING)
        try:
            archived = catalog.sources.retire(removed.name)
        finally:
            catalog.close()
    emit(out, args, {"removed": removed.to_dict(), "archived": archived},
         lambda: f"removed source {removed.name} from {path}; {len(archived)} of its skills archived")
    return 0


def _check_names(sources: tuple[SourceConfig, ...], names: list[str] | None, path: Path) -> None:
    """Every source named on the command line is configured in ``path``: else refused, before anything opens."""
    unknown = sorted(set(names or ()) - {s.name for s in sources})
    if unknown:
        held = ", ".join(s.name for s in sources)
        raise ValidationError(f"no source named {', '.join(repr(n) for n in unknown)} in {path}"
                              f" ({f'it configures: {held}' if held else 'it configures none'})",
                              {"unknown": unknown, "problems": [problem("name", f"no source named {n!r}") for n in unknown]})


def cmd_sources_sync(args: argparse.Namespace, out: TextIO) -> int:
    sources = load_sources(config_path(args))
    _check_names(sources, args.name, config_path(args))  # a mistyped name creates no data directory
    if not sources:  # nothing to run: no data directory, catalog or index is created for it, no model loaded
        emit(out, args, {"sources": []}, lambda: f"no sources configured in {config_path(args)}")
        return 0
    in_use(Path(args.data_dir))
    catalog = Catalog.open(settings_from_args(args), seed=False, progress=progress_factory(not args.quiet),
                           stopping=STOPPING)
    try:
        reports = run_sources(catalog, sources, args.name or None, command_prefix(args), force=args.force,
                              allow_rewind=args.allow_rewind,
                              progress=progress_factory(not args.quiet))
    finally:
        catalog.close()
    emit(out, args, {"sources": [r.to_dict() for r in reports]},
         lambda: "\n".join(report_text(r) for r in reports) or f"no sources configured in {config_path(args)}")
    return 1 if any(r.error or r.refused for r in reports) else 0


def source_name_arg(value: str) -> str:
    """argparse ``type`` of the name ``sources add`` is given: one that cannot be a source's name is a usage
    error (exit 2) naming what was typed, not the file's ``sources[0].name`` the check would otherwise say."""
    if wrong := name_problem(value):
        raise argparse.ArgumentTypeError(f"invalid source name {value!r}: it {wrong}")
    return value


def add_commands(sub: Subparsers) -> None:
    p = sub.add_parser("sources", help="local skill sources: folders and git repositories the catalog mirrors",
                       description="local skill sources: folders and git repositories the catalog mirrors")
    inner = p.add_subparsers(dest="sources_command", required=True, metavar="COMMAND")

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("--config", help="the TOML file holding [[sources]]; default <data-dir>/sync.toml")

    q = add_command(inner, "list", cmd_sources_list, "the configured sources and where each stands")
    common(q)
    q = add_command(inner, "add", cmd_sources_add, "add a folder (--path) or git repository (--git) source")
    common(q)
    q.add_argument("name", type=source_name_arg, help="the source's name (also the catalog's `source` of its skills)")
    q.add_argument("--grant", required=True, type=grant_arg, help="grant of its skills: sub:<id>, team:<id> or user:<id>")
    q.add_argument("--path", help="a folder of skills (or one skill's folder); this or --git (no default)")
    q.add_argument("--allow-missing", action="store_true", help="add a --path that does not exist (yet)")
    q.add_argument("--git", help="an https:// or file:// repository URL; this or --path (no default)")
    q.add_argument("--ref", help="branch, tag or commit (default HEAD: the remote's default branch)")
    q.add_argument("--subdir", help="the folder of the repository that holds the skills (default: its top)")
    q.add_argument("--interval", type=float_range(MIN_INTERVAL_S, MAX_INTERVAL_S, "a number of seconds"),
                   default=DEFAULT_INTERVAL_S, metavar="SECONDS",
                   help=f"seconds between runs under serve/mcp, {MIN_INTERVAL_S:g}-{MAX_INTERVAL_S:g}"
                        f" (default {DEFAULT_INTERVAL_S:.0f})")
    q = add_command(inner, "remove", cmd_sources_remove, "remove a source; its skills are archived")
    common(q)
    q.add_argument("name", help="the source's name, as `sources list` shows it")
    q.add_argument("--keep-skills", action="store_true", help="leave its skills in the catalog as they are")
    q = add_command(inner, "sync", cmd_sources_sync, "mirror every source (or those named) once")
    common(q)
    q.add_argument("name", nargs="*", help="only these sources")
    q.add_argument("--force", action="store_true", help="re-read a git source even at the commit it applied")
    q.add_argument("--allow-rewind", action="store_true", help="accept a git ref that moved backwards")
