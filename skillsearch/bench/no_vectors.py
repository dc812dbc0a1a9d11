"""The encoder of a benchmark run whose modes read no vector (``bench relevance --modes lexical``).

A catalog's index holds a vector per skill, so the import embeds its corpus; but a lexical search reads no
vector, and no cosine, calibration or route it computes (``retrieval/search.py``: the route's encoder and
calibration are read by the semantic floor and the hybrid decision only). Embedding MetaTool's or
Seal-Tools' corpus with MiniLM for a lexical run was minutes of model time thrown away. This encoder loads
no model and embeds nothing: every text is the same constant unit vector, so the index is built as usual and
the lexical numbers are the same as a run with the real encoder's vectors.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from skillsearch.retrieval.encoder import ProgressCallback
from skillsearch.retrieval.model_files import builtin_fingerprint

__all__ = ["NoVectors"]


class NoVectors:
    """Implements the ``Encoder`` protocol with no model: one constant unit vector for every text."""

    name = "no-vectors"
    dim = 8
    multilingual = False
    symmetric = True
    no_match_cosine: float | None = None

    def routed(self) -> None:
        return None

    def fingerprint(self) -> str:
        return builtin_fingerprint(self.name)

    def _constant(self, n: int) -> np.ndarray:
        return np.full((n, self.dim), 1.0 / np.sqrt(self.dim), dtype=np.float32)

    def encode_documents(self, texts: Sequence[str], progress: ProgressCallback | None = None) -> np.ndarray:
        return self._constant(len(texts))

    def encode_query(self, text: str) -> np.ndarray:
        return np.full(self.dim, 1.0 / np.sqrt(self.dim), dtype=np.float32)

    def encode_query_parts(self, query: str, parts: Sequence[str]) -> np.ndarray:
        return self._constant(1 + len(parts))
