"""What every command shares: the catalog it opens, the caller it runs as (its progress: ``progress.py``), the
one-JSON-object-or-text output, and the parser helpers that give each command ``--json`` and ``--grant``."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TextIO

from skillsearch.catalog.connections import opens_read_only
from skillsearch.catalog.store import CatalogStore
from skillsearch.cli.progress import progress_factory
from skillsearch.cli.termination import STOPPING
from skillsearch.core.domain import SCOPE_MEMORY_READ, Principal
from skillsearch.core.errors import StartupError
from skillsearch.core.grants import grant_problem
from skillsearch.core.settings import Settings
from skillsearch.core.wellformed import terminal_safe
from skillsearch.service import Catalog

__all__ = [
    "Command",
    "Subparsers",
    "add_command",
    "add_grants",
    "check_data_dir",
    "emit",
    "grant_arg",
    "grant_or_all_arg",
    "in_use",
    "marks_of_the_call",
    "note_new_data_dir",
    "open_catalog",
    "principal_from_args",
    "principals_path",
    "progress_factory",
    "settings_from_args",
]

Command = Callable[[argparse.Namespace, TextIO], int]
Subparsers = Any  # argparse's _SubParsersAction, private in typeshed


def principal_from_args(args: argparse.Namespace) -> Principal:
    grants = getattr(args, "grant", None) or []
    if not grants:
        return Principal.operator()
    return Principal(name="cli", grants=frozenset(grants), scopes=frozenset({SCOPE_MEMORY_READ}))


def settings_from_args(args: argparse.Namespace) -> Settings:
    return Settings.from_env(data_dir=args.data_dir, encoder=args.encoder)


def open_catalog(args: argparse.Namespace, seed: bool | None = None, index: bool = True,
                 reads_only: bool | None = None) -> Catalog:
    """The data directory's catalog; ``index=False`` for commands that read only the store. A command that
    only reads (those, and ``search``: ``reads_only``) opens a catalog this user cannot write read-only, its
    index as it is; any other open may write the directory (create the catalog, upgrade it, seed an empty
    one with the sample, build or repair the index), so it marks the directory in use first (:func:`in_use`)."""
    reads_only = not index if reads_only is None else reads_only
    if not reads_only or not opens_read_only(Path(args.data_dir) / CatalogStore.FILENAME):
        in_use(Path(args.data_dir))
    catalog = Catalog.open(settings_from_args(args), seed=seed, progress=progress_factory(not args.quiet), index=index,
                           stopping=STOPPING, reads_only=reads_only)
    note_new_data_dir(args, catalog.seeded)
    return catalog


def note_new_data_dir(args: argparse.Namespace, seeded: int = 0) -> None:
    """One line on stderr when this command created the data directory (a mistyped ``--data-dir`` would
    otherwise be a new catalog, silently seeded with the sample), said once per run."""
    if getattr(args, "fresh_data_dir", False) and Path(args.data_dir).is_dir():
        args.fresh_data_dir = False
        seeds = f" and seeded it with the bundled sample catalog ({seeded} skills)" if seeded else ""
        print(f"note: {args.data_dir} did not exist: created it{seeds}", file=sys.stderr)


def emit(out: TextIO, args: argparse.Namespace, payload: Any, text: Callable[[], str]) -> None:
    """``payload`` as one JSON object (``--json``: every string exactly as stored, JSON-escaped), else the
    text, with control and bidi-override characters shown as escapes (``\\x1b``): a name or description
    stored before import and sync refused them must not drive the terminal."""
    if args.json:
        out.write(json.dumps(payload, ensure_ascii=False, default=str) + "\n")
    else:
        out.write(terminal_safe(text()) + "\n")


def add_command(sub: Subparsers, name: str, func: Command, help_text: str) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(name, help=help_text, description=help_text)
    p.set_defaults(func=func)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def grant_arg(value: str) -> str:
    """argparse ``type`` of every ``--grant``: a value that is not a grant key is a usage error (exit 2),
    on every command alike (``core/grants.py``)."""
    if text := grant_problem(value):
        raise argparse.ArgumentTypeError(text)
    return value


def grant_or_all_arg(value: str) -> str:
    """``--grant`` of ``token add``: a grant key or ``*`` (every grant)."""
    if text := grant_problem(value, allow_all=True):
        raise argparse.ArgumentTypeError(text)
    return value


def add_grants(p: argparse.ArgumentParser) -> None:
    p.add_argument("--grant", action="append", metavar="G", type=grant_arg,
                   help="see only this grant (repeatable): sub:<id>, team:<id> or user:<id>;"
                        " default: every grant (local operator)")


def principals_path(args: argparse.Namespace) -> Path:
    """``--principals``, else ``<data-dir>/principals.toml``."""
    from skillsearch.http.auth import PRINCIPALS_FILE

    return Path(args.principals) if args.principals else Path(args.data_dir) / PRINCIPALS_FILE


def in_use(path: Path) -> None:
    """Mark the data directory used by this process (``serve``, ``mcp``, every command that writes it:
    ``import``, ``reindex``, ``sync``, ``sources sync``/``remove``, ``calibrate``, and the reads ``search``,
    ``list``, ``get`` and ``resolve`` on a directory they may write: they create its catalog, seed an empty
    one with the sample, upgrade it, build or repair its index; :func:`open_catalog`; ``sources list`` and
    ``sync --status`` on a catalog they may upgrade) before anything in it
    is opened, so ``snapshot restore`` refuses to swap it under us, and one that is swapping it now is waited
    for (``retrieval/inuse.py``). A writer that opened the old files and then waited for a lock the restore
    held (``sync.lock``, ``write.lock``), or for SQLite's own, wrote into the deleted catalog once the swap
    had let it go. The command's process keeps the mark until it exits; a caller of ``main(argv)`` in its own
    process has the marks its command took let go when it returns (:func:`marks_of_the_call`)."""
    from skillsearch.retrieval.inuse import hold_in_use

    path.mkdir(parents=True, exist_ok=True)
    if hold_in_use(path) and (taken := _TAKEN.get()) is not None:
        taken.append(path)


# The data directories the running command of a ``main(argv)`` call marked in use (``None``: not in one).
_TAKEN: ContextVar[list[Path] | None] = ContextVar("skillsearch_in_use_taken", default=None)


@contextlib.contextmanager
def marks_of_the_call() -> Iterator[None]:
    """Let go of the in-use marks the command run inside takes (:func:`in_use`) when it returns: for a caller
    of ``main(argv)`` in its own process (tests, tools), which goes on; each mark held for that process's
    life would keep a file open per data directory, and refuse its own later ``snapshot restore`` there. A
    mark the process held before the call (a server it runs beside) is kept."""
    from skillsearch.retrieval.inuse import release_in_use

    taken: list[Path] = []
    token = _TAKEN.set(taken)
    try:
        yield
    finally:
        _TAKEN.reset(token)
        for path in taken:
            release_in_use(path)


# What a server writes in place in its data directory (the rest it replaces by a rename, which the folder's
# own permission allows).
_SERVER_WRITES = ("catalog.sqlite3", "catalog.sqlite3-wal", "catalog.sqlite3-shm", "write.lock", "in-use.lock",
                  "leader.lock", "sync.lock", "lexical", "vectors")


def check_data_dir(path: Path) -> None:
    """A server's data directory must be a readable, writable folder, or a new one it can create:
    :class:`StartupError` (one line, exit code 3) otherwise, before anything is opened."""
    if path.exists():
        if not path.is_dir():
            raise StartupError(f"data directory {path} is not a directory", {"data_dir": str(path)})
        if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
            raise StartupError(f"data directory {path} is not readable and writable by this user",
                               {"data_dir": str(path)})
        for name in _SERVER_WRITES:  # left by another user (a first run as root): the first write would fail
            entry = path / name
            if entry.exists() and not os.access(entry, os.R_OK | os.W_OK | (os.X_OK if entry.is_dir() else 0)):
                raise StartupError(f"data directory {path}: {entry} is not readable and writable by this user",
                                   {"data_dir": str(path), "path": str(entry)})
        return
    if path.is_symlink():  # a link to nothing: mkdir would say only "File exists"
        raise StartupError(f"data directory {path} is a symbolic link to {os.readlink(path)}, which does not exist;"
                           " create that folder first, or check the path", {"data_dir": str(path)})
    parent = path.absolute().parent
    if parent.exists() and not parent.is_dir():
        raise StartupError(f"data directory {path} cannot be created: {parent} is a file, not a folder",
                           {"data_dir": str(path)})
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise StartupError(f"data directory {path} does not exist and cannot be created in {parent}",
                           {"data_dir": str(path)})
    try:  # os.access passes for root where the folder still cannot be made (/proc): try it
        path.mkdir()
        path.rmdir()
    except OSError as exc:
        raise StartupError(f"data directory {path} cannot be created: {exc.strerror or exc}",
                           {"data_dir": str(path)}) from None
