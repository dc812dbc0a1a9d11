"""The query parameters a ``/v1`` route takes, as it declares them: any other name is refused, not ignored.

FastAPI ignores a query parameter its route does not declare, so ``/v1/search?q=tls&limt=5`` (a typo) was
answered with the default limit and no hint, while an unknown JSON body field or MCP argument is refused.
:func:`query_refusal` is the one check of a request's query names: each must be one the route declares
(:func:`declared_query`), and only :data:`LIST_PARAMETERS` may be given more than once (FastAPI would take
the last, a proxy or log reader in front the first). Its ``VALIDATION_ERROR`` has a problem per name at
fault (``query.<name>``, cut by ``core.errors.echo``; the first ``utf8_target.MAX_PROBLEMS``), and its
message names the parameters the route takes (also in ``details.query_parameters``).

Only the JSON API under ``/v1`` is this strict; the search page (``/``, which a browser or a shared link
may decorate with ``?utm_source=``), the probes (``/healthz``, ``/readyz``, ``/metrics``: a scraper's
``params``), the documents (``/openapi.json``, ``/docs``), ``/mcp`` (whose tools refuse unknown arguments)
and the sync webhook (its query is outside its signature; a URL an operator configured with a marker must
not make every delivery fail) read no query parameter and ignore what they are sent.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from fastapi import Request

from skillsearch.core.errors import ValidationError, echo, problem
from skillsearch.http.utf8_target import MAX_PROBLEMS

__all__ = ["LIST_PARAMETERS", "declared_query", "query_refusal", "request_refusal"]

# Query parameters that may repeat (each value one more filter); any other given twice is refused.
LIST_PARAMETERS = frozenset({"tag"})


def declared_query(route: Any) -> tuple[str, ...]:
    """The query parameter names ``route`` (a FastAPI ``APIRoute``) declares, its dependencies' included, in
    declaration order. A route that is not FastAPI's (no ``dependant``) declares none."""
    names: list[str] = []
    pending = [getattr(route, "dependant", None)]  # a few dependants: walked on each request, nothing cached
    while pending:
        dependant = pending.pop(0)
        if dependant is not None:
            names.extend(f.alias for f in dependant.query_params if f.alias not in names)
            pending.extend(dependant.dependencies)
    return tuple(names)


def query_refusal(pairs: Iterable[tuple[str, str]], declared: Sequence[str], route: str) -> ValidationError | None:
    """Why the query ``pairs`` (names and values as sent) do not fit a route ``route`` (``GET /v1/search``, for
    the message) that takes ``declared``: each unknown name once, in the order sent, then each name that takes
    one value and was given more than once; a bare ``=`` (no name, no value) says nothing, like ``&&``, and
    is passed over, while a value without a name (``?=5``) is refused. ``None`` when they fit."""
    counts = Counter(name for name, value in pairs if name or value)
    unknown = [name for name in counts if name not in declared]
    twice = sorted(name for name, n in counts.items() if n > 1 and name in declared and name not in LIST_PARAMETERS)
    if not unknown and not twice:
        return None
    takes = f"{route} takes {', '.join(declared)}" if declared else f"{route} takes no query parameters"
    problems = [problem("query", "a parameter without a name") if not name
                else problem(echo(f"query.{name}"), "not a parameter of this route") for name in unknown]
    problems += [problem(f"query.{name}", "takes one value and was given more than once") for name in twice]
    said = []
    if unknown:
        said.append(f"unknown query parameter: {', '.join(repr(echo(name)) for name in unknown[:MAX_PROBLEMS])}"
                    f" ({takes})")
    if twice:
        said.append(f"query parameter given more than once: {', '.join(twice)}")
    return ValidationError("; ".join(said), {"problems": problems[:MAX_PROBLEMS], "query_parameters": list(declared)})


def request_refusal(request: Request) -> ValidationError | None:
    """:func:`query_refusal` of a request as its matched route declares it (the route named by its method and
    path template in the message): what the ``/v1`` router's dependency and the sync status route each ask."""
    route = request.scope.get("route")
    return query_refusal(request.query_params.multi_items(), declared_query(route),
                         f"{request.method} {getattr(route, 'path_format', request.url.path)}")
