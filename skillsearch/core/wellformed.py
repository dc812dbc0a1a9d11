"""Checks that a value is safe to hash, store and render: valid Unicode text and bounded nesting.

Python strings may hold lone surrogates (``"\\ud800"`` from JSON escapes, ``os`` names of undecodable
bytes): they cannot be encoded as UTF-8, so the canonical hash, SQLite and every JSON answer would fail on
them. Deeply nested values blow the interpreter's recursion limit in ``json.dumps`` and in pydantic. Both
are refused here, per entry, with a reason that names where the problem is, before anything hashes them.
So are NaN and the infinities (JSON from an upstream and YAML's ``.nan`` carry them): Python's ``json``
writes them as the bare words ``NaN``/``Infinity``, which is not JSON, so a revision body holding one made
SQLite's JSON functions fail on every open of the catalog.
The walk is iterative, so the check itself cannot overflow.

Text a terminal or a list shows on one line (a name, a tag, a version, a tool name) may hold no control
characters (C0, DEL, C1: ESC starts the escape sequence that clears a screen or retitles a window) and no
bidirectional embedding, override or isolate controls (U+202A-U+202E, U+2066-U+2069, which make a name read
backwards); a description may also hold tabs and line breaks (YAML's block scalars keep them). Markdown
bodies and resource bytes are never checked here: they are kept byte for byte. :func:`terminal_safe` shows
what was stored before that rule as escapes, for the CLI's text output.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["IllFormedError", "check_text_field", "check_wellformed", "printable", "terminal_safe"]

# Bidirectional embeddings, overrides (U+202A-U+202E) and isolates (U+2066-U+2069).
_BIDI = r"\u202a-\u202e\u2066-\u2069"
# What a one-line field refuses: every control character, line breaks included (U+2028/U+2029 too), and
# the bidi controls.
_NOT_ONE_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029" + _BIDI + "]")
# What a text field (a description) refuses: the same, less tab, line feed and carriage return.
_NOT_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f" + _BIDI + "]")
# What a terminal would act on: the text rule, and a carriage return that does not end a line.
_TERMINAL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f" + _BIDI + r"]|\r(?!\n)")


class IllFormedError(ValueError):
    """What :func:`check_wellformed` refuses: ``where`` names the entry (``parameters.version``), ``reason``
    says what is wrong with it, never its value."""

    def __init__(self, where: str, reason: str, message: str) -> None:
        super().__init__(message)
        self.where = where
        self.reason = reason


def is_unicode(value: str) -> bool:
    """Whether ``value`` is valid Unicode text: a ``str`` can hold lone surrogates (a JSON ``\\ud800``, a file
    name's undecodable bytes under ``surrogateescape``), which UTF-8 cannot encode."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# Python writes an integer as text up to 4,300 digits (``sys.get_int_max_str_digits``) and raises past
# them; an MCP request's JSON parser reads longer ones, which then failed where they were written.
_MAX_INT_DIGITS = 4000
_MAX_INT_BITS = int(_MAX_INT_DIGITS * math.log2(10))
_TOO_LONG = f"an integer too long to write as text (about {_MAX_INT_DIGITS:,} digits or more)"


def check_wellformed(value: Any, where: str, max_depth: int = 32) -> None:
    """Raise :class:`IllFormedError` (a ``ValueError``) when a string in ``value`` (keys included) is not
    valid Unicode, a number is NaN or infinite, an integer is too long to write as text, or lists and mappings
    nest deeper than ``max_depth``."""
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    while stack:
        item, at, depth = stack.pop()
        if isinstance(item, str):
            if not is_unicode(item):
                raise IllFormedError(at, "not valid Unicode text (a lone surrogate)",
                                    f"{at} is not valid Unicode text (a lone surrogate)")
        elif isinstance(item, float) and not math.isfinite(item):
            raise IllFormedError(at, "not a finite number (NaN and Infinity are not JSON)",
                                 f"{at} is not a finite number (NaN and Infinity are not JSON)")
        elif isinstance(item, int) and item.bit_length() > _MAX_INT_BITS:
            raise IllFormedError(at, _TOO_LONG, f"{at} is {_TOO_LONG}")
        elif isinstance(item, dict | list | tuple):
            if depth >= max_depth:
                raise IllFormedError(at, f"nested deeper than {max_depth} levels",
                                    f"{at} nests deeper than {max_depth} levels")
            if isinstance(item, dict):
                for key, child in item.items():
                    if isinstance(key, str) and not is_unicode(key):
                        raise IllFormedError(at, "a key is not valid Unicode text (a lone surrogate)",
                                        f"a key of {at} is not valid Unicode text (a lone surrogate)")
                    name = f"{at}.{key}" if isinstance(key, str) and len(key) < 40 and len(at) < 60 else at
                    stack.append((child, name, depth + 1))
            else:
                stack.extend((child, f"{at}[{i}]" if len(at) < 60 else at, depth + 1) for i, child in enumerate(item))


def check_text_field(value: str, where: str, *, one_line: bool = True) -> None:
    """Raise :class:`IllFormedError` when ``value`` holds a character its field refuses: a control character
    or a bidi control; ``one_line=False`` (a description) allows tab, line feed and carriage return."""
    found = (_NOT_ONE_LINE if one_line else _NOT_TEXT).search(value)
    if found is not None:
        reason = (f"holds a control or bidirectional-override character (U+{ord(found.group()):04X}),"
                  f" refused in {'a one-line field' if one_line else 'a description'}")
        raise IllFormedError(where, reason, f"{where} {reason}")


def terminal_safe(text: str, *, one_line: bool = False) -> str:
    """``text`` for a terminal: each control character and bidi control shown as its escape (``\\x1b``,
    ``\\u202e``); tabs and line breaks stay unless ``one_line``. Anything else is unchanged."""
    pattern = _NOT_ONE_LINE if one_line else _TERMINAL
    return pattern.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), printable(text))


def printable(text: str) -> str:
    """``text`` with anything UTF-8 cannot carry escaped (``\\udc80``): safe for reports and logs."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
