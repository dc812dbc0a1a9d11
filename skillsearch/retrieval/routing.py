"""Which model answers a request, against which document vectors, with which calibration.

An index snapshot owns its :class:`Routing` (built from the snapshot's vectors, the index's encoder and
its calibration, all immutable while the snapshot lives). With a single encoder there is one route: that
encoder, the whole matrix, the index's calibration. With ``minilm+e5`` (the encoder's ``routed()`` pair,
:class:`~skillsearch.retrieval.routed_encoder.RoutedEncoder`) the request's language picks a route, once per
request: an English request is embedded by MiniLM and scored against the MiniLM columns of the matrix with
MiniLM's numbers (the dev-measured ``no_match`` threshold, no centering); any other request by e5, against
the e5 columns, with e5's calibration (its threshold and per-language centering). Scoring only the route's
columns keeps the matrix product at one model's cost; the columns are a numpy view (no copy).

What a route computes once lives on it: the column view, the parsed centering and the documents'
languages under that centering (the first centered search asks the snapshot's ``nearest_of``, which answers
a large index from its int8 copy and keeps the answer across updates).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Any

import numpy as np

from skillsearch.retrieval.calibration import Centering, centering_of, language_codes
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.vector_scan import Shift

__all__ = ["NearestOf", "RequestRoute", "Routing"]

# Each row's index of its largest product with the given vectors over the given columns
# (``VectorSnapshot.nearest_of``).
NearestOf = Callable[[np.ndarray, slice | None], np.ndarray]


class RequestRoute:
    """``route`` is None for a single encoder; ``encoder`` embeds the request's texts, whose vectors are
    scored against ``matrix`` (the snapshot's ``columns``, all when None); ``calibration`` holds the numbers
    that apply to those scores, ``centering`` its parsed per-language centroids (None: plain cosines)."""

    def __init__(
        self, route: str | None, encoder: Encoder, matrix: np.ndarray, calibration: dict[str, Any] | None,
        columns: slice | None = None, nearest_of: NearestOf | None = None,
    ):
        self.route = route
        self.encoder = encoder
        self.matrix = matrix
        self.columns = columns
        self.calibration = calibration
        self.centering: Centering | None = centering_of(calibration)
        self.nearest_of = nearest_of

    def shift(self, queries: np.ndarray) -> Shift | None:
        """What centering takes off each query vector's cosine with each row (``calibration.centered_cosines``
        as the vector stage applies it), or None for plain cosines."""
        if self.centering is None or self.language_codes is None:
            return None
        q = np.atleast_2d(np.asarray(queries, dtype=np.float32))
        return Shift(np.asarray(q @ self.centering.centroids.T, dtype=np.float32), self.language_codes)

    @cached_property
    def language_codes(self) -> np.ndarray | None:
        """Each document's language (its nearest reference centroid), when the route centers: from the
        snapshot's ``nearest_of`` when it has one (a large index answers it from its int8 copy without
        reading the whole matrix), else over the matrix."""
        if self.centering is None:
            return None
        if self.nearest_of is not None:
            return self.nearest_of(self.centering.reference, self.columns)
        return language_codes(self.matrix, self.centering)


class Routing:
    """The routes of one index snapshot."""

    def __init__(
        self, encoder: Encoder, matrix: np.ndarray, calibration: dict[str, Any] | None,
        nearest_of: NearestOf | None = None,
    ) -> None:
        self.encoder = encoder
        self.calibration = calibration
        self._pair = encoder.routed()
        if self._pair is None:
            self._single: RequestRoute | None = RequestRoute(None, encoder, matrix, calibration, None, nearest_of)
            self._routes: dict[str, RequestRoute] = {}
        else:
            self._single = None
            routes = (calibration or {}).get("routes") or {}
            self._routes = {
                key: RequestRoute(key, part, matrix[:, self._pair.columns[key]], routes.get(key),
                                  self._pair.columns[key], nearest_of)
                for key, part in self._pair.parts.items()
            }

    def routes(self) -> list[RequestRoute]:
        """Every route of the snapshot (one for a single encoder)."""
        return [self._single] if self._single is not None else list(self._routes.values())

    def route(self, query: str) -> RequestRoute:
        """The route of ``query``: the whole request decides, so all its sentences use the same model."""
        if self._pair is None:
            assert self._single is not None
            return self._single
        return self._routes[self._pair.route(query)]
