"""A deterministic bag-of-words encoder for fast unit tests (``--encoder hashing``); not a real model."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence

import numpy as np

from skillsearch.retrieval.cosines import normalise
from skillsearch.retrieval.model_files import builtin_fingerprint

__all__ = ["HashingEncoder"]

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEncoder:
    """Deterministic feature-hashing of words and character trigrams. For fast unit tests only."""

    name = "hashing-bow-256"
    dim = 256
    multilingual = False
    symmetric = True
    no_match_cosine: float | None = None

    def routed(self) -> None:
        return None

    def fingerprint(self) -> str:
        return builtin_fingerprint(self.name)

    def _vector(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float32)
        words = _WORD.findall(text.lower())
        grams = words + [w[i : i + 3] for w in words for i in range(max(1, len(w) - 2))]
        for g in grams:
            h = int.from_bytes(hashlib.blake2b(g.encode("utf-8"), digest_size=8).digest(), "little")
            vec[h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
        return vec

    def encode_documents(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        out = normalise(np.stack([self._vector(t) for t in texts])) if texts else np.zeros((0, self.dim), np.float32)
        if progress:
            progress(len(texts))
        return out

    def encode_query(self, text: str) -> np.ndarray:
        return normalise(self._vector(text))

    def encode_query_parts(self, query: str, parts: Sequence[str]) -> np.ndarray:
        return normalise(np.stack([self._vector(t) for t in (query, *parts)]))

    def encode_query_batch(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[np.ndarray]:
        return [self.encode_query_parts(query, parts) for query, parts in items]
