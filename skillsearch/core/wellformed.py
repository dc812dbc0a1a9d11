"""Checks that a value is safe to hash, store and render: valid Unicode text and bounded nesting.

Python strings may hold lone surrogates (``"\\ud800"`` from JSON escapes, ``os`` names of undecodable
bytes): they cannot be encoded as UTF-8, so the canonical hash, SQLite and every JSON answer would fail on
them. Deeply nested values blow the interpreter's recursion limit in ``json.dumps`` and in pydantic. Both
are refused here, per entry, with a reason that names where the problem is, before anything hashes them.
So are NaN and the infinities (JSON from an upstream and YAML's ``.nan`` carry them): Python's ``json``
writes them as the bare words ``NaN``/``Infinity``, which is not JSON, so a revision body holding one made
SQLite's JSON functions fail on every open of the catalog.
The walk is iterative, so the check itself cannot overflow.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["IllFormedError", "check_wellformed", "printable"]


class IllFormedError(ValueError):
    """What :func:`check_wellformed` refuses: ``where`` names the entry (``parameters.version``), ``reason``
    says what is wrong with it, never its value."""

    def __init__(self, where: str, reason: str, message: str) -> None:
        super().__init__(message)
        self.where = where
        self.reason = reason


def _bad_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def check_wellformed(value: Any, where: str, max_depth: int = 32) -> None:
    """Raise :class:`IllFormedError` (a ``ValueError``) when a string in ``value`` (keys included) is not
    valid Unicode, a number is NaN or infinite, or lists and mappings nest deeper than ``max_depth``."""
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    while stack:
        item, at, depth = stack.pop()
        if isinstance(item, str):
            if _bad_text(item):
                raise IllFormedError(at, "not valid Unicode text (a lone surrogate)",
                                    f"{at} is not valid Unicode text (a lone surrogate)")
        elif isinstance(item, float) and not math.isfinite(item):
            raise IllFormedError(at, "not a finite number (NaN and Infinity are not JSON)",
                                 f"{at} is not a finite number (NaN and Infinity are not JSON)")
        elif isinstance(item, dict | list | tuple):
            if depth >= max_depth:
                raise IllFormedError(at, f"nested deeper than {max_depth} levels",
                                    f"{at} nests deeper than {max_depth} levels")
            if isinstance(item, dict):
                for key, child in item.items():
                    if isinstance(key, str) and _bad_text(key):
                        raise IllFormedError(at, "a key is not valid Unicode text (a lone surrogate)",
                                        f"a key of {at} is not valid Unicode text (a lone surrogate)")
                    name = f"{at}.{key}" if isinstance(key, str) and len(key) < 40 and len(at) < 60 else at
                    stack.append((child, name, depth + 1))
            else:
                stack.extend((child, f"{at}[{i}]" if len(at) < 60 else at, depth + 1) for i, child in enumerate(item))


def printable(text: str) -> str:
    """``text`` with anything UTF-8 cannot carry escaped (``\\udc80``): safe for reports and logs."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
