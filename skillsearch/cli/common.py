"""What every command shares: the catalog it opens, the caller it runs as, progress bars on stderr, the
one-JSON-object-or-text output, and the parser helpers that give each command ``--json`` and ``--grant``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from skillsearch.core.domain import SCOPE_MEMORY_READ, Principal
from skillsearch.core.errors import StartupError
from skillsearch.core.settings import Settings
from skillsearch.service import Catalog

__all__ = [
    "Command",
    "Subparsers",
    "add_command",
    "add_grants",
    "check_data_dir",
    "emit",
    "open_catalog",
    "principal_from_args",
    "principals_path",
    "progress_factory",
    "settings_from_args",
]

Command = Callable[[argparse.Namespace, TextIO], int]
Subparsers = Any  # argparse's _SubParsersAction, private in typeshed


def progress_factory(enabled: bool) -> Callable[[int, str], Callable[[int], None]] | None:
    if not enabled:
        return None

    def factory(total: int, label: str) -> Callable[[int], None]:
        from tqdm import tqdm

        bar = tqdm(total=total, desc=label, unit="skill", file=sys.stderr, leave=False, dynamic_ncols=True)

        def tick(n: int) -> None:
            bar.update(n)
            if bar.n >= total:
                bar.close()

        return tick

    return factory


def principal_from_args(args: argparse.Namespace) -> Principal:
    grants = getattr(args, "grant", None) or []
    if not grants:
        return Principal.operator()
    return Principal(name="cli", grants=frozenset(grants), scopes=frozenset({SCOPE_MEMORY_READ}))


def settings_from_args(args: argparse.Namespace) -> Settings:
    return Settings.from_env(data_dir=args.data_dir, encoder=args.encoder)


def open_catalog(args: argparse.Namespace) -> Catalog:
    return Catalog.open(settings_from_args(args), progress=progress_factory(not args.quiet))


def emit(out: TextIO, args: argparse.Namespace, payload: Any, text: Callable[[], str]) -> None:
    if args.json:
        out.write(json.dumps(payload, ensure_ascii=False, default=str) + "\n")
    else:
        out.write(text() + "\n")


def add_command(sub: Subparsers, name: str, func: Command, help_text: str) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(name, help=help_text, description=help_text)
    p.set_defaults(func=func)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def add_grants(p: argparse.ArgumentParser) -> None:
    p.add_argument("--grant", action="append", metavar="G",
                   help="see only this grant (repeatable); default: every grant (local operator)")


def principals_path(args: argparse.Namespace) -> Path:
    """``--principals``, else ``<data-dir>/principals.toml``."""
    from skillsearch.http.auth import PRINCIPALS_FILE

    return Path(args.principals) if args.principals else Path(args.data_dir) / PRINCIPALS_FILE


def check_data_dir(path: Path) -> None:
    """A server's data directory must be a readable, writable folder, or a new one it can create:
    :class:`StartupError` (one line, exit code 3) otherwise, before anything is opened."""
    if path.exists():
        if not path.is_dir():
            raise StartupError(f"data directory {path} is not a directory", {"data_dir": str(path)})
        if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
            raise StartupError(f"data directory {path} is not readable and writable by this user",
                               {"data_dir": str(path)})
        return
    parent = path.absolute().parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise StartupError(f"data directory {path} does not exist and cannot be created in {parent}",
                           {"data_dir": str(path)})
