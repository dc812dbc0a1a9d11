"""The ``skillsearch`` command line: the parser, ``main()`` and how errors are shown.

Contract relied on by scripts: a global ``--data-dir`` (env ``SKILLSEARCH_DATA_DIR``, default ``./index``);
``--json`` prints exactly one JSON object on stdout; errors in ``--json`` mode are
``{"error": {"code", "message", "details"}}``; the exit code is 0 on success, 1 on an error (or an import
with invalid entries), 2 on a usage error. Progress bars and logs go to stderr. With one or more
``--grant`` the caller sees only those grants; without any, the CLI is the local operator.

The commands live in one module per group (``catalog``, ``sync``, ``mcp``, ``serve``, ``tokens``,
``bench``), each with an ``add_commands(sub)`` that declares its sub-commands.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from skillsearch.cli import bench, catalog, mcp, serve, sources, sync, tokens
from skillsearch.core.errors import SkillSearchError, error_body

__all__ = ["build_parser", "main"]

log = logging.getLogger("skillsearch")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="skillsearch", description="Search-first skill catalog for LLM agents.")
    parser.add_argument("--data-dir", default=os.environ.get("SKILLSEARCH_DATA_DIR", "index"),
                        help="data directory (env SKILLSEARCH_DATA_DIR, default ./index)")
    parser.add_argument("--encoder", default=None,
                        help="embedding model: minilm+e5 (default for a new index: MiniLM for English requests, e5"
                             " for the others), minilm (English only, builds faster), e5, hashing; without it a"
                             " command uses the encoder the index was built with (env SKILLSEARCH_ENCODER)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level on stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    catalog.add_commands(sub)  # import, search, list, get, resolve, reindex
    sync.add_commands(sub)  # sync, upstream
    sources.add_commands(sub)  # sources list|add|remove|sync
    mcp.add_commands(sub)
    serve.add_commands(sub)
    tokens.add_commands(sub)
    catalog.add_calibrate(sub)
    bench.add_commands(sub)
    return parser


def _print_error(out: TextIO, args: argparse.Namespace, exc: SkillSearchError, text: str) -> None:
    if getattr(args, "json", False):
        out.write(json.dumps(error_body(exc), ensure_ascii=False, default=str) + "\n")
    else:
        print(text, file=sys.stderr)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        return int(args.func(args, out))
    except SkillSearchError as exc:
        _print_error(out, args, exc, f"error: {exc.code}: {exc.message}")
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # the last line of defence: one line, never a traceback (-v logs it)
        log.debug("unexpected error", exc_info=True)
        internal = SkillSearchError(f"{type(exc).__name__}: {exc}")
        _print_error(out, args, internal, f"error: INTERNAL: {internal.message} (run with -v for details)")
        return 1


if __name__ == "__main__":
    sys.exit(main())
