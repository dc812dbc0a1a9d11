"""The query-vector cache in front of an encoder: a repeated request (or sentence) costs a dict lookup, and a
request's encoding can start before the caller waits for it (``encode_soon``, over the batching service).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from skillsearch.core.lru import LRU
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.wrapper import Wrapper

__all__ = ["CachedQueryEncoder"]


class CachedQueryEncoder(Wrapper):
    """An encoder whose query vectors are kept in a small LRU: a repeated query costs a dict lookup."""

    def __init__(self, inner: Encoder, size: int = 1024, shared: CachedQueryEncoder | None = None) -> None:
        super().__init__(inner)  # ``shared``: use its very LRU (the batching service over the same model)
        self._cache: LRU[tuple[str, tuple[str, ...]], np.ndarray] = shared._cache if shared else LRU(size)

    @property
    def hits(self) -> int:
        return self._cache.hits

    @property
    def misses(self) -> int:
        return self._cache.misses

    def encode_query_parts(self, query: str, parts: Sequence[str]) -> np.ndarray:
        return self.encode_soon(query, parts)()

    def encode_soon(self, query: str, parts: Sequence[str]) -> Callable[[], np.ndarray]:
        """``encode_query_parts``, started now when the inner encoder can ``submit`` (the batching service,
        ``retrieval/batching.py``): a worker encodes while the caller goes on (search runs Tantivy meanwhile),
        and the returned call waits for it. Any other encoder runs when the call is made."""
        key = (query, tuple(parts))
        vectors = self._cache.get(key)
        if vectors is not None:
            return lambda: vectors
        submit = getattr(self.inner, "submit", None)
        started = submit(query, parts).result if submit else lambda: self.inner.encode_query_parts(query, parts)

        def wait() -> np.ndarray:
            out: np.ndarray = started()
            out.setflags(write=False)
            self._cache.put(key, out)
            return out

        return wait
