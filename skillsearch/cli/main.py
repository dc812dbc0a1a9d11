"""The ``skillsearch`` command line: the parser, ``main()`` and how errors are shown.

Contract relied on by scripts: a global ``--data-dir`` (env ``SKILLSEARCH_DATA_DIR``, default ``./index``);
``--json`` prints exactly one JSON object on stdout; errors in ``--json`` mode are
``{"error": {"code", "message", "details"}}``, usage errors included (``cli/usage.py``); the exit code is 0
on success, 1 on an error (or an import with invalid entries), 2 on a usage error (also a ``--data-dir``
that is a file or whose parent folder does not exist, but for a server, an unknown ``--encoder``, a
``--port`` outside 0-65535, a ``--limit`` out of range and any argument that is not valid UTF-8 text), 3
when a server cannot start (port in use, unusable data directory), 4 on a snapshot that ``snapshot
restore`` refused, 130 on Ctrl-C (under ``--json`` a one-shot command stopped by a signal before its
result prints an ``INTERRUPTED`` error object), 141 when stdout's reader went away (``| head -1``), and 143 on
SIGTERM for the commands whose work is an index write
(``cli/termination.py``: the write stops at its next batch of embeddings and says on stderr what the next
open will embed; any other command is ended by the signal at once). Progress bars and logs go to
stderr. A data directory the command had to create is said on stderr. With one or more ``--grant`` the
caller sees only those grants; without any, the CLI is the local operator.

The commands live in one module per group (``catalog``, ``sync``, ``mcp``, ``serve``, ``tokens``,
``snapshot``, ``bench``), each with an ``add_commands(sub)`` that declares its sub-commands.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import errno
import gc
import io
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO, cast

from skillsearch.cli import bench, catalog, mcp, serve, snapshot, sources, sync, termination, tokens
from skillsearch.cli.common import marks_of_the_call, note_new_data_dir
from skillsearch.cli.usage import (
    EXIT_USAGE,
    CliParser,
    UsageError,
    check_text,
    data_dir_problem,
    show_usage_error,
    usage_of,
    wants_json,
)
from skillsearch.core.errors import (
    IndexNotReadyError,
    SkillSearchError,
    StartupError,
    StoppedBySignal,
    WriteStopped,
    error_json,
)
from skillsearch.core.settings import Settings
from skillsearch.retrieval.encoders import ENCODERS

__all__ = ["build_parser", "main"]

EXIT_ERROR = 1
EXIT_PIPE = 128 + 13  # SIGPIPE: stdout's reader went away before all was written

log = logging.getLogger("skillsearch")


def build_parser() -> argparse.ArgumentParser:
    parser = CliParser(prog="skillsearch", description="Search-first skill catalog for LLM agents.")
    parser.add_argument("--data-dir", default=os.environ.get("SKILLSEARCH_DATA_DIR", "index"),
                        help="data directory (env SKILLSEARCH_DATA_DIR, default ./index)")
    parser.add_argument("--encoder", default=None, choices=sorted(ENCODERS),
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
    snapshot.add_commands(sub)  # snapshot create|restore
    catalog.add_calibrate(sub)
    bench.add_commands(sub)
    return parser


def _check_globals(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """A data directory that cannot be one, or an unknown encoder, is a usage error. A data directory that
    does not exist yet is created by the command, and said (``note_new_data_dir``): a typo would otherwise
    be a new catalog, silently."""
    path = Path(args.data_dir)
    # A server (``server=True``) checks its own data directory: one line and exit code 3 (``check_data_dir``).
    if not getattr(args, "server", False) and (problem := data_dir_problem(args.data_dir)) is not None:
        parser.error(problem)
    args.fresh_data_dir = not path.exists()
    encoder = args.encoder or os.environ.get("SKILLSEARCH_ENCODER")
    if encoder and encoder not in ENCODERS:
        parser.error(f"SKILLSEARCH_ENCODER={encoder}: unknown encoder; choose one of {', '.join(sorted(ENCODERS))}")
    try:  # every command reads its settings from the environment: a value that is not one is a usage error
        Settings.from_env()
    except ValueError as exc:
        parser.error(str(exc))


# The commands whose work is an index write that can embed for minutes (an import, a sync, a source's run, a
# server's): SIGTERM stops that write after the encoder's current batch, keeps what it embedded and exits 143
# saying what was left (cli/termination.py). A bench command unwinds on SIGTERM (cli/bench.py, its temporary
# catalogs removed). Every other command keeps the default: SIGTERM ends it at once.
_STOPPED_BETWEEN_BATCHES = frozenset({
    catalog.cmd_import, catalog.cmd_reindex, sync.cmd_sync, sources.cmd_sources_sync,
    serve.cmd_serve, mcp.cmd_mcp,
})


def _print_error(out: TextIO, args: argparse.Namespace, exc: SkillSearchError, text: str) -> None:
    if getattr(args, "json", False):
        out.write(error_json(exc) + "\n")
    else:
        print(text, file=sys.stderr)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run one command; its exit code. A usage error is shown (on stdout as a JSON error object when
    ``--json`` is on the command line) and is exit code 2; only ``--help`` exits (``SystemExit(0)``).
    A reader of stdout that has gone (``skillsearch list | head -1``) ends the command quietly, exit code 141."""
    out = out or sys.stdout
    entry = argv is None  # the process's own command (the console script, ``python -m``)
    argv = list(sys.argv[1:] if argv is None else argv)
    if entry:
        _fit_stdout(wants_json(argv))
    try:
        code = _main(argv, out, entry)
        out.flush()  # what is still buffered fails here, not in the interpreter's last flush
        return code
    except BrokenPipeError:
        # The rest is for nobody: stdout is pointed at /dev/null, so the interpreter's own flush at exit
        # raises nothing either; the exit code is the one a shell reports for a process SIGPIPE killed.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
        return EXIT_PIPE


def _fit_stdout(as_json: bool) -> None:
    """A stdout whose encoding cannot hold every character (``PYTHONIOENCODING=ascii``, a legacy Latin-1
    locale) made a skill named in Chinese or with an emoji an ``INTERNAL: UnicodeEncodeError``: JSON is
    written as UTF-8, as RFC 8259 has it exchanged; text shows what the encoding cannot hold as escapes
    (``\\u706b``), as Python's own stderr does."""
    stream = sys.stdout
    if not isinstance(stream, io.TextIOWrapper) or codecs.lookup(stream.encoding).name == "utf-8":
        return
    with contextlib.suppress(ValueError, LookupError):
        stream.reconfigure(encoding="utf-8") if as_json else stream.reconfigure(errors="backslashreplace")


def _main(argv: list[str], out: TextIO, entry: bool) -> int:
    out = cast(TextIO, _Watched(out))
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        check_text(parser, args)
        _check_globals(parser, args)
    except UsageError as exc:
        show_usage_error(exc, out, wants_json(argv), sys.stderr)
        return EXIT_USAGE
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.func in _STOPPED_BETWEEN_BATCHES:
        termination.install()
    try:
        # A caller in its own process goes on: the data directories its command marked in use are let go.
        with contextlib.nullcontext() if entry else marks_of_the_call():
            code = int(args.func(args, out))
        if termination.terminated():  # a server shut down by SIGTERM (uvicorn passes the signal on at its end)
            _say_stopped("terminated")
            return termination.EXIT_TERMINATED
        return code
    except WriteStopped as exc:  # SIGTERM during an index write: what it left for the next open
        print(f"terminated: {exc}", file=sys.stderr)
        _no_result(out, args, "SIGTERM", f"stopped by SIGTERM: {exc}")
        return termination.EXIT_TERMINATED
    except bench.BenchTerminated:  # SIGTERM during a benchmark: its temporary catalogs are removed on the way out
        _no_result(out, args, "SIGTERM", "stopped by SIGTERM: the benchmark wrote no result")
        raise
    except UsageError as exc:  # a command's own check of its arguments: shown with its usage, as argparse's are
        exc.usage = exc.usage or usage_of(parser, args)
        show_usage_error(exc, out, wants_json(argv), sys.stderr)
        return EXIT_USAGE
    except StartupError as exc:
        _print_error(out, args, exc, f"error: {exc.message}")
        return 3
    except SkillSearchError as exc:
        _print_error(out, args, exc, f"error: {exc.code}: {exc.message}")
        return EXIT_ERROR
    except KeyboardInterrupt:
        _say_stopped("interrupted")
        _no_result(out, args, "SIGINT", "stopped by Ctrl-C (SIGINT): what the command committed is kept")
        return 130
    except BrokenPipeError:  # the reader of stdout has gone: main() ends quietly, not an INTERNAL error
        raise
    except OSError as exc:
        if (refused := _refused_write(exc)) is None:
            return _internal(out, args, exc)
        _print_error(out, args, refused, f"error: {refused.code}: {refused.message}")
        return EXIT_ERROR
    except Exception as exc:  # the last line of defence: one line, never a traceback (-v logs it)
        return _internal(out, args, exc)
    finally:
        note_new_data_dir(args)
        if entry and getattr(args, "server", False):  # serve, mcp: about to exit
            _freeze_for_exit()


class _Watched:
    """The command's stdout, noting whether anything was written to it (a ``--json`` result, in full or begun)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.written = False

    def write(self, text: str) -> int:
        self.written = self.written or bool(text)
        return self.stream.write(text)

    def __getattr__(self, name: str) -> object:
        return getattr(self.stream, name)


def _no_result(out: TextIO, args: argparse.Namespace, signal_name: str, message: str) -> None:
    """A one-shot ``--json`` command stopped by a signal before it printed its object: the one object its
    contract promises says so (``INTERRUPTED``), rather than an empty stdout. A server's stop is its normal end,
    and a command that had begun its object (``sync`` prints its reports before it exits 143) keeps it alone."""
    if getattr(args, "json", False) and not getattr(args, "server", False) \
            and not getattr(out, "written", True):
        out.write(error_json(StoppedBySignal(message, {"signal": signal_name})) + "\n")


def _internal(out: TextIO, args: argparse.Namespace, exc: Exception) -> int:
    log.info("unexpected error", exc_info=True)  # shown under -v (INFO), never by default
    internal = SkillSearchError(f"{type(exc).__name__}: {exc}")
    _print_error(out, args, internal, f"error: INTERNAL: {internal.message} (run with -v for details)")
    return EXIT_ERROR


# What the permissions or the disk refuse a write (or a read) with: README's "a write that the disk or the
# permissions refuse is one line naming the file and the cause, INDEX_NOT_READY and exit code 1".
_REFUSED = {errno.EACCES: "this user lacks the permission", errno.EPERM: "this user lacks the permission",
            errno.EROFS: "its file system is read-only", errno.ENOSPC: "its disk is full",
            errno.EDQUOT: "this user's disk quota is used up", errno.EFBIG: "it is over the file size limit"}


def _refused_write(exc: OSError) -> IndexNotReadyError | None:
    """A file operation the commands do not wrap themselves (``token add``'s principals file, ``sources add``'s
    ``sync.toml``) that the permissions or the disk refused, as the one line every other refused write is
    (naming the file and the cause); ``None`` for any other ``OSError`` (an ``INTERNAL`` one)."""
    if exc.errno not in _REFUSED or not exc.filename:
        return None
    path = os.fsdecode(exc.filename)
    return IndexNotReadyError(f"{path}: {exc.strerror} ({_REFUSED[exc.errno]})",
                              {"path": path, "errno": errno.errorcode[exc.errno]})


def _freeze_for_exit() -> None:
    """The interpreter's last collection walks every tracked object (torch and the model: about a million),
    1-9 s of a server's SIGTERM-to-exit (benchmarks/shutdown.py); frozen, the heap is skipped. What that
    collection also did, closing the SQLite connections of every thread (the last one checkpoints and
    removes the WAL), is done first. Only for a server's own process, never for a caller of ``main(argv)``
    that goes on, nor for the one-shot commands, whose exit the collection does not delay."""
    connections = sys.modules.get("skillsearch.catalog.connections")
    if connections is not None:
        connections.close_every_connection()
    gc.freeze()


def _say_stopped(word: str) -> None:
    """``terminated`` / ``interrupted`` on stderr; a server whose stderr is its JSON log (``serve``: the
    ``skillsearch`` logger has its own handler there) says it as one more JSON line, so a log shipper that
    parses every line of that stream never meets a plain one at each shutdown."""
    package = logging.getLogger("skillsearch")
    if package.handlers and not package.propagate:
        package.info(word)
    else:
        print(word, file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
