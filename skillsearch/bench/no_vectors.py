"""The encoder of a benchmark run whose modes read no vector (``bench relevance --modes lexical``).

A catalog's index holds a vector per skill, so the import embeds its corpus; but a lexical search reads no
vector, and no cosine, calibration or route it computes (``retrieval/search.py``: the route's encoder and
calibration are read by the semantic floor and the hybrid decision only). Embedding MetaTool's or
Seal-Tools' corpus with MiniLM for a lexical run was minutes of model time thrown away. This encoder loads
no model and embeds nothing: every text is the same constant unit vector, so the index is built as usual and
the lexical numbers are the same as a run with the real encoder's vectors.
"""

from __future__ import annotations

import numpy as np

from skillsearch.retrieval.hashing_encoder import HashingEncoder

__all__ = ["NoVectors"]


class NoVectors(HashingEncoder):
    """The ``Encoder`` protocol with no model: one constant unit vector for every text (the hashing encoder's
    plumbing, none of its hashing)."""

    name = "no-vectors"
    dim = 8

    def _vector(self, text: str) -> np.ndarray:
        return np.ones(self.dim, dtype=np.float32)
