"""A request target whose percent-encoded bytes are not UTF-8 text is a 400, not a search for what is left.

A URL carries non-ASCII text percent-encoded as its UTF-8 bytes (``q=%E3%83%AD%E3%82%B0`` is ``ログ``).
uvicorn and Starlette decode the path and the query with replacement characters, so a caller that cut such
a URL inside a character (``q=%E3%83%AD%E3%82``) or sent another encoding (Latin-1 ``%E9`` for ``é``) got
an answer for ``ロ\\ufffd``: hits for a request it never made, or a ``SKILL_NOT_FOUND`` naming ``\\ufffd``.
:class:`Utf8Target` refuses such a request before the routes read it, as the CLI refuses an argument that
is not UTF-8: ``VALIDATION_ERROR`` with a problem per field at fault (``path``, ``query.<name>``; the first ten).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote_to_bytes

from skillsearch.core.errors import ValidationError, echo, error_bytes, problem

__all__ = ["MAX_PROBLEMS", "Utf8Target", "target_problems"]

_NOT_UTF8 = "not UTF-8 text: percent-encode the UTF-8 bytes of each character (%E3%83%AD for ロ), whole characters only"


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# The most problems a 400 names: a head of tens of KB can hold thousands of fields at fault, and a body (and a
# message) naming each was a megabyte answered to every such request.
MAX_PROBLEMS = 10


def target_problems(scope: Any) -> list[dict[str, str]]:
    """The problems of the request target in ``scope`` (ASGI): its path and each query parameter's name and
    value, percent-decoded, must be UTF-8 text. Each problem once, the first :data:`MAX_PROBLEMS` of them."""
    problems: list[dict[str, str]] = []
    raw_path = scope.get("raw_path")
    # Some clients put the query in raw_path too (httpx's ASGI transport); the query is checked below.
    path = raw_path.split(b"?", 1)[0] if isinstance(raw_path, bytes) else str(scope.get("path", "")).encode()
    if not _utf8(unquote_to_bytes(path)):
        problems.append(problem("path", _NOT_UTF8))
    for pair in bytes(scope.get("query_string") or b"").split(b"&"):
        raw_name, _, raw_value = pair.partition(b"=")
        if len(problems) >= MAX_PROBLEMS:
            break
        name = unquote_to_bytes(raw_name.replace(b"+", b" "))
        if not _utf8(name):
            found = problem("query", f"a parameter name is {_NOT_UTF8}")
        elif not _utf8(unquote_to_bytes(raw_value.replace(b"+", b" "))):
            found = problem(echo(f"query.{name.decode('utf-8')}"), _NOT_UTF8)
        else:
            continue
        if found not in problems:
            problems.append(found)
    return problems


class Utf8Target:
    """ASGI middleware: an HTTP request whose target (:func:`target_problems`) is not UTF-8 text gets 400
    with the JSON error body; every other request goes to ``app`` unchanged."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            problems = target_problems(scope)
            if problems:
                fields = ", ".join(p["field"] for p in problems)
                body = error_bytes(ValidationError(f"the request's {fields} is not UTF-8 text", {"problems": problems}))
                await send({"type": "http.response.start", "status": 400, "headers": [
                    (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
