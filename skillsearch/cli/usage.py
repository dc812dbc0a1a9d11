"""Usage errors: what the command line refuses before a command runs, and how the refusal is shown.

Every parser of the command line is a :class:`CliParser`, whose ``error()`` raises :class:`UsageError`
instead of exiting, so ``main()`` shows argparse's own errors, the checks of the parsed arguments
(:func:`check_text`, the ``type=`` helpers below) and a command's own usage problems alike: exit code 2,
argparse's ``usage:`` and ``error:`` lines on stderr, or with ``--json`` anywhere on the command line the
documented ``{"error": {"code": "VALIDATION_ERROR", "message", "details"}}`` object on stdout.

The command line is read as UTF-8 (Python decodes undecodable bytes of ``argv`` to lone surrogates):
:func:`check_text` refuses, once, every text argument that is not valid UTF-8, naming the argument, before
anything is opened or created.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from skillsearch.core.errors import ValidationError, error_json
from skillsearch.core.wellformed import check_wellformed

__all__ = [
    "EXIT_USAGE",
    "CliParser",
    "UsageError",
    "check_text",
    "data_dir_problem",
    "float_range",
    "int_range",
    "non_empty",
    "port_arg",
    "show_usage_error",
    "usage_of",
    "wants_json",
]

EXIT_USAGE = 2
MAX_PORT = 65535


class UsageError(Exception):
    """A command line the command cannot run: ``prog`` (``skillsearch search``) and the one-line reason.
    ``usage``: the parser's usage text, when the error comes from a parser."""

    def __init__(self, prog: str, message: str, usage: str = "") -> None:
        super().__init__(message)
        self.prog = prog
        self.message = message
        self.usage = usage


class CliParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are raised (:class:`UsageError`), not printed and exited on;
    its sub-command parsers are ``CliParser`` too (argparse makes them of their parent's class)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self.prog, message, self.format_usage())


def wants_json(argv: Sequence[str]) -> bool:
    """Whether the command line asks for JSON: ``--json`` anywhere before a ``--``, parsed or not."""
    for arg in argv:
        if arg == "--":
            return False
        if arg == "--json":
            return True
    return False


def show_usage_error(exc: UsageError, out: TextIO, as_json: bool, stderr: TextIO) -> None:
    """argparse's two lines on stderr, or the JSON error object on ``out``."""
    if as_json:
        error = ValidationError(f"{exc.prog}: {exc.message}", {"usage": exc.usage.strip()} if exc.usage else None)
        out.write(error_json(error) + "\n")
        return
    if exc.usage:
        stderr.write(exc.usage)
    stderr.write(f"{exc.prog}: error: {exc.message}\n")


# -- argument types: a value out of range is a usage error, as an unparsable one is -----------------------


def int_range(low: int, high: int | None = None, what: str = "a whole number") -> Callable[[str], int]:
    """``type=`` of an integer option between ``low`` and ``high`` (inclusive; ``None``: no upper bound)."""
    span = f"between {low} and {high}" if high is not None else f"{low} or more"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{value} is out of range: give {what} {span}")
        return value

    return parse


def float_range(low: float, high: float | None = None, what: str = "a number") -> Callable[[str], float]:
    """``type=`` of a number option between ``low`` and ``high`` (inclusive; ``None``: no upper bound);
    NaN is refused."""
    span = f"between {low:g} and {high:g}" if high is not None else f"{low:g} or more"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not low <= value <= (math.inf if high is None else high):  # NaN compares false
            raise argparse.ArgumentTypeError(f"{text} is out of range: give {what} {span}")
        return value

    return parse


port_arg = int_range(0, MAX_PORT, "a port number")
"""``type=`` of every ``--port``: 0 to 65535 (0: a free one); anything else never reaches a socket."""


def non_empty(text: str) -> str:
    """``type=`` of a name that must not be empty or blank."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


# -- text that is not UTF-8 ---------------------------------------------------------------------------


def _invalid_text(value: str) -> bool:
    try:
        check_wellformed(value, "")
    except ValueError:
        return True
    return False


def _as_typed(value: str) -> str:
    """``value`` as its bytes were typed, undecodable ones as ``\\xe9``."""
    try:
        raw = value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate no byte decodes to
        return value.encode("utf-8", "backslashreplace").decode("ascii", "replace")
    return raw.decode("utf-8", "backslashreplace")


def _chain(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[argparse.ArgumentParser]:
    """``parser`` and the sub-command parsers ``args`` went through, outermost first."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None) or "")
            if isinstance(chosen, argparse.ArgumentParser):
                return [parser, *_chain(chosen, args)]
    return [parser]


def usage_of(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """The usage text of the (sub-)command ``args`` ran: what a command's own usage problem shows, as
    argparse's own errors show theirs (``details.usage`` under ``--json``)."""
    return _chain(parser, args)[-1].format_usage()


def _name(action: argparse.Action) -> str:
    if action.option_strings:
        return max(action.option_strings, key=len)
    return action.metavar if isinstance(action.metavar, str) else action.dest


def check_text(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Raise :class:`UsageError` naming the first text argument that is not valid UTF-8 (a value of a
    repeatable option included, and a default taken from the environment)."""
    chain = _chain(parser, args)
    names = {a.dest: _name(a) for p in chain for a in p._actions if a.dest != argparse.SUPPRESS}
    for dest, value in vars(args).items():
        values: list[Any] = list(value) if isinstance(value, list | tuple) else [value]
        for item in values:
            if isinstance(item, str) and _invalid_text(item):
                raise UsageError(
                    chain[-1].prog,
                    f"argument {names.get(dest, dest)}: '{_as_typed(item)}' is not valid UTF-8 text (the command"
                    " line is read as UTF-8: set your terminal to UTF-8, or type the text again)",
                    chain[-1].format_usage(),
                )


def data_dir_problem(given: str) -> str | None:
    """Why ``--data-dir given`` cannot be a data directory for a command other than a server (a usage error):
    a file, a symbolic link to nothing, a new folder whose parent does not exist or may not be written."""
    path = Path(given)
    if path.exists() and not path.is_dir():
        return f"--data-dir {given}: not a folder (a data directory is a folder)"
    if not path.exists() and not path.absolute().parent.is_dir():
        return f"--data-dir {given}: the folder {path.absolute().parent} does not exist; create it first, or check the path"
    if path.is_symlink() and not path.exists():
        return (f"--data-dir {given}: a symbolic link to {os.readlink(path)}, which does not exist;"
                " create that folder first, or check the path")
    if not path.exists() and not os.access(path.absolute().parent, os.W_OK | os.X_OK):
        return (f"--data-dir {given}: does not exist and cannot be created: this user may not write"
                f" the folder {path.absolute().parent}")
    return None
