"""The base of every encoder that wraps another: it describes itself as the encoder it wraps.

A query cache, the benchmarks' on-disk cache, a timer: each is an :class:`~skillsearch.retrieval.encoder.Encoder`
over an inner one, and answers ``name``, ``dim``, ``multilingual``, ``symmetric``, ``no_match_cosine``,
``routed()`` and ``fingerprint()`` as that one does, so no caller ever looks inside a wrapper (or tests a model's name).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from skillsearch.retrieval.encoder import Encoder, ProgressCallback, Routed

__all__ = ["Wrapper"]


class Wrapper:
    """The base of an encoder that wraps another (a cache, a timer): it describes itself as the encoder it
    wraps, so callers never look inside. Subclasses implement ``encode_query_parts``; documents go to the
    inner encoder and one query is the first row of its parts unless a subclass says otherwise."""

    def __init__(self, inner: Encoder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim

    @property
    def multilingual(self) -> bool:
        return self.inner.multilingual

    @property
    def symmetric(self) -> bool:
        return self.inner.symmetric

    @property
    def no_match_cosine(self) -> float | None:
        return self.inner.no_match_cosine

    def routed(self) -> Routed | None:
        return self.inner.routed()

    def fingerprint(self) -> str:
        return self.inner.fingerprint()

    def encode_documents(self, texts: Sequence[str], progress: ProgressCallback | None = None) -> np.ndarray:
        return self.inner.encode_documents(texts, progress)

    def encode_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self.encode_query_parts(text, ())[0]
        return vector

    def encode_query_parts(self, query: str, parts: Sequence[str]) -> np.ndarray:
        raise NotImplementedError
