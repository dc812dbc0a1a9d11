"""An encoder wrapper for benchmarks: document embeddings cached on disk, query embeddings precomputed.

Re-encoding the same corpus on every run dominates benchmark time (4,076 Seal-Tools APIs take about
1.5 minutes, 100k synthetic skills about half an hour on 2 cores), and tells us nothing new. Vectors are
keyed by ``sha256(model name + text)``, so a changed text, a changed embedded-text recipe or another model
misses the cache and is encoded for real. Each batch of new vectors is appended as one ``.npz`` chunk.

Queries for a relevance run are encoded once in batches (:meth:`BenchEncoder.prime_queries`) and then
served from memory: relevance numbers do not depend on how long encoding took, and the latency harness
never primes, so its query timings stay honest.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from skillsearch.retrieval.encoder import Encoder, ProgressCallback
from skillsearch.retrieval.search import query_texts
from skillsearch.retrieval.wrapper import Wrapper

__all__ = ["BenchEncoder", "folder_name"]


def folder_name(name: str) -> str:
    """A model name as one folder name (``sentence-transformers/all-MiniLM-L6-v2`` ->
    ``sentence-transformers_all-MiniLM-L6-v2``): the cache's, and the cached skills index's."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def _key(model: str, kind: str, text: str) -> str:
    return hashlib.sha256(f"{model}\n{kind}\n{text}".encode()).hexdigest()[:32]


class BenchEncoder(Wrapper):
    """Implements the ``Encoder`` protocol over another encoder (and describes itself as that one)."""

    def __init__(self, inner: Encoder, cache_dir: Path | None) -> None:
        super().__init__(inner)
        self.folder = Path(cache_dir) / folder_name(inner.name) if cache_dir else None
        self._vectors: dict[str, np.ndarray] = {}
        self._queries: dict[str, np.ndarray] = {}
        self._parts: dict[tuple[str, tuple[str, ...]], np.ndarray] = {}
        self.encoded_documents = 0
        self._load()

    def _load(self) -> None:
        if self.folder is None or not self.folder.is_dir():
            return
        for chunk in sorted(self.folder.glob("chunk-*.npz")):
            with np.load(chunk, allow_pickle=False) as data:
                keys, vecs = data["keys"], data["vectors"]
            if vecs.shape[1:] != (self.dim,):
                continue
            self._vectors.update(zip((str(k) for k in keys), vecs, strict=True))

    def _store(self, keys: list[str], vecs: np.ndarray) -> None:
        for k, v in zip(keys, vecs, strict=True):
            self._vectors[k] = v
        if self.folder is None or not keys:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        n = len(list(self.folder.glob("chunk-*.npz")))
        tmp = self.folder / f"chunk-{n:06d}.tmp.npz"
        np.savez(tmp, keys=np.asarray(keys), vectors=np.asarray(vecs, dtype=np.float32))
        tmp.rename(self.folder / f"chunk-{n:06d}.npz")

    def _cached(self, texts: Sequence[str], kind: str, progress: ProgressCallback | None) -> np.ndarray:
        keys = [_key(self.name, kind, t) for t in texts]
        missing = sorted({k: i for i, k in enumerate(keys) if k not in self._vectors}.values())
        if progress and len(missing) < len(texts):  # the cached ones first: the count ends at len(texts)
            progress(len(texts) - len(missing))
        if missing:
            vecs = self.inner.encode_documents([texts[i] for i in missing], progress)
            self._store([keys[i] for i in missing], vecs)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, k in enumerate(keys):
            out[i] = self._vectors[k]
        return out

    def encode_documents(self, texts: Sequence[str], progress: ProgressCallback | None = None) -> np.ndarray:
        before = len(self._vectors)
        out = self._cached(texts, "document", progress)
        self.encoded_documents += len(self._vectors) - before
        return out

    def cached_documents(self, texts: Sequence[str]) -> list[np.ndarray | None]:
        """The cached vector of each text, or ``None``; encodes nothing."""
        return [self._vectors.get(_key(self.name, "document", t)) for t in texts]

    def prime_queries(self, texts: Sequence[str], sentences: int = 0,
                      progress: ProgressCallback | None = None) -> None:
        """Encode these queries once so that search's ``encode_query_parts`` is a lookup: whole queries in
        batches (cached on disk), and for a query of several sentences its vectors as search asks for them.
        ``progress(n)`` counts the distinct texts done (3,000 MetaTool requests take a minute on 2 cores)."""
        parts = {text: tuple(query_texts(text, sentences)[1:]) for text in texts}
        # A query of several sentences is embedded through its parts only; the rest as a batch.
        whole = [text for text, p in parts.items() if not p]
        # A symmetric encoder embeds a query exactly like a document: batch them as documents (cached).
        if not self.symmetric:
            one = []
            for t in whole:
                one.append(self.inner.encode_query(t))
                if progress:
                    progress(1)
            vecs = np.stack(one) if one else np.zeros((0, self.dim))
        else:
            vecs = self._cached(whole, "query", progress)
        self._queries.update(zip(whole, vecs, strict=True))
        for text, p in parts.items():
            if p:
                self._parts[(text, p)] = self.inner.encode_query_parts(text, p)
                if progress:
                    progress(1)

    def encode_query(self, text: str) -> np.ndarray:
        vec = self._queries.get(text)
        return vec if vec is not None else self.inner.encode_query(text)

    def encode_query_parts(self, query: str, parts: Sequence[str]) -> np.ndarray:
        if not parts:
            return self.encode_query(query)[None, :]
        found = self._parts.get((query, tuple(parts)))
        return found if found is not None else self.inner.encode_query_parts(query, parts)
