"""Which model answers a request, against which document vectors, with which calibration.

With a single encoder the answer is always the same: that encoder, the whole matrix, the index's
calibration. With ``minilm+e5`` (:class:`~skillsearch.retrieval.encoder.RoutedEncoder`) the request's language picks
a route, once per request: an English request is embedded by MiniLM and scored against the MiniLM columns
of the matrix with MiniLM's numbers (the dev-measured ``no_match`` threshold, no centering); any other
request by e5, against the e5 columns, with e5's calibration (its threshold and per-language centering).
Scoring only the route's columns keeps the matrix product at one model's cost; the columns are a numpy
view (no copy), kept per matrix so that caches keyed by the matrix's identity (the documents' languages in
``calibration.centered_cosines``) stay warm.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from skillsearch.retrieval.encoder import Encoder, as_routed

__all__ = ["RequestRoute", "route_request"]


class RequestRoute(NamedTuple):
    """``route`` is None for a single encoder; ``encoder`` embeds the request's texts, whose vectors are
    scored against ``matrix``; ``calibration`` holds the numbers that apply to those scores."""

    route: str | None
    encoder: Encoder
    matrix: np.ndarray
    calibration: dict[str, Any] | None


# (matrix, start, stop, view): the column views of the last matrices seen; matrices are immutable.
_VIEWS: list[tuple[np.ndarray, int, int, np.ndarray]] = []
_KEPT_VIEWS = 4


def _columns(matrix: np.ndarray, columns: slice) -> np.ndarray:
    start, stop = int(columns.start or 0), int(columns.stop)
    for m, a, b, view in _VIEWS:
        if m is matrix and a == start and b == stop:
            return view
    view = matrix[:, start:stop]
    _VIEWS[:] = [(matrix, start, stop, view), *_VIEWS[: _KEPT_VIEWS - 1]]
    return view


def route_request(
    encoder: Encoder, matrix: np.ndarray, calibration: dict[str, Any] | None, query: str
) -> RequestRoute:
    """The route of ``query``: the whole request decides, so all its sentences use the same model."""
    routed = as_routed(encoder)
    if routed is None:
        return RequestRoute(None, encoder, matrix, calibration)
    route = routed.route(query)
    routes = (calibration or {}).get("routes") or {}
    return RequestRoute(route, routed.parts[route], _columns(matrix, routed.columns[route]), routes.get(route))
