"""The batching query encoder: concurrent searches get the answers they get alone, failures stay in their
batch, shutdown never leaves a caller waiting. The real model everywhere except the failure cases, which
need an encoder that fails (or blocks) on cue."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from skillsearch.core.domain import Principal
from skillsearch.core.errors import IndexNotReadyError
from skillsearch.core.settings import Settings
from skillsearch.retrieval.batching import BatchingEncoder, default_layout
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.hashing_encoder import HashingEncoder
from skillsearch.retrieval.query_cache import CachedQueryEncoder
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.service import Catalog

OPERATOR = Principal.operator()

QUERIES = [
    "find the commit that broke the build", "renew a TLS certificate before it expires", "deploy a service",
    "tidy up a messy csv file", "debug a regular expression", "write a SQL query over two tables",
    "roll back a bad database migration", "git bisect", "rotate the api keys", "feeding llamas",
    "Find the change that broke the tests. Then open a pull request that reverts it. Finally tell the team.",
    "Renew the certificate of the web server. Restart nginx afterwards.", "kubernetes pod keeps restarting",
    "clean up old docker images", "measure page load performance", "summarise a long log file",
    "convert markdown to html", "plan a sprint for the team", "review a pull request for security issues",
    "set up continuous integration for a python project", "translate the docs to french",
    "back up the postgres database every night", "investigate a memory leak", "profile a slow endpoint",
]


def _raw(encoder: Encoder) -> Encoder:
    return encoder.inner if isinstance(encoder, CachedQueryEncoder) else encoder


@pytest.fixture
def uncached(sample_dir: Path, tmp_path: Path, encoder: Encoder) -> Iterator[Catalog]:
    """The sample catalog with both caches off, so that every search reaches the model."""
    import shutil

    target = tmp_path / "data"
    shutil.copytree(sample_dir, target)
    settings = Settings(data_dir=target, result_cache_size=0, query_cache_size=0, query_batch_wait_ms=5.0)
    catalog = Catalog.open(settings, encoder=_raw(encoder))
    yield catalog
    catalog.close()


def _answer(catalog: Catalog, query: str, mode: str) -> list[tuple[str, float]]:
    return [(h.skill.skill_id, h.score) for h in catalog.search(OPERATOR, SearchRequest(query, mode=mode)).hits]


@pytest.mark.parametrize("mode", ["hybrid", "semantic"])
def test_concurrent_searches_get_the_answers_they_get_alone_while_batches_form(uncached: Catalog, mode: str) -> None:
    alone = {q: _answer(uncached, q, mode) for q in QUERIES}
    before = uncached.batch_stats()
    assert before is not None and before.largest == 1  # one at a time: every batch held one request

    barrier = threading.Barrier(12)

    def one(q: str) -> list[tuple[str, float]]:
        barrier.wait(timeout=30) if q in QUERIES[:12] else None
        return _answer(uncached, q, mode)

    with ThreadPoolExecutor(max_workers=12) as pool:
        together = list(pool.map(one, QUERIES * 2))
    for q, got in zip(QUERIES * 2, together, strict=True):
        assert [i for i, _ in got] == [i for i, _ in alone[q]], q
        np.testing.assert_allclose([s for _, s in got], [s for _, s in alone[q]], atol=1e-5, rtol=0, err_msg=q)
    stats = uncached.batch_stats()
    assert stats is not None
    assert stats.requests - before.requests == len(QUERIES) * 2
    assert stats.largest > 1 and stats.batches - before.batches < len(QUERIES) * 2
    assert sum(size * n for size, n in stats.sizes.items()) == stats.requests


def test_batched_vectors_match_the_model_called_alone(encoder: Encoder) -> None:
    model = _raw(encoder)
    texts = [(q, ()) for q in QUERIES[:10]] + [("a. b c d. e f g.", ("b c d.", "e f g."))]
    service = BatchingEncoder(model, workers=1, max_batch=64, max_wait_ms=50)
    try:
        futures = [service.submit(q, p) for q, p in texts]
        for (q, p), f in zip(texts, futures, strict=True):
            np.testing.assert_allclose(f.result(timeout=60), model.encode_query_parts(q, p), atol=1e-5)
    finally:
        service.close()
    assert service.stats().requests == len(texts)


class GatedEncoder(HashingEncoder):
    """Blocks each batch until ``gate`` is set; fails any batch holding a text with ``boom`` in it."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.entered = threading.Semaphore(0)
        self.batches: list[list[str]] = []

    def encode_query_batch(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[np.ndarray]:
        self.batches.append([q for q, _ in items])
        self.entered.release()
        assert self.gate.wait(timeout=30)
        if any("boom" in q for q, _ in items):
            raise RuntimeError("the model fell over")
        return [self.encode_query_parts(q, p) for q, p in items]


def test_a_failing_batch_fails_only_its_own_requests_and_the_worker_keeps_serving() -> None:
    fake = GatedEncoder()
    service = BatchingEncoder(fake, workers=1, max_batch=16, max_wait_ms=0)
    try:
        first = service.submit("hold the worker")
        assert fake.entered.acquire(timeout=10)  # the worker is inside the first batch
        doomed = [service.submit(q) for q in ("boom", "bystander one", "bystander two")]
        fake.gate.set()
        np.testing.assert_allclose(first.result(timeout=10), fake.encode_query_parts("hold the worker", ()))
        for f in doomed:
            with pytest.raises(IndexNotReadyError, match="query encoding failed: RuntimeError: the model fell over"):
                f.result(timeout=10)
        after = service.submit("still serving")
        np.testing.assert_allclose(after.result(timeout=10), fake.encode_query_parts("still serving", ()))
    finally:
        service.close()
    assert fake.batches == [["hold the worker"], ["boom", "bystander one", "bystander two"], ["still serving"]]
    stats = service.stats()
    assert (stats.batches, stats.failed_batches, stats.requests, stats.largest) == (3, 1, 5, 3)


def test_a_failing_batch_reaches_the_search_caller_as_a_typed_error(tmp_path: Path) -> None:
    fake = GatedEncoder()
    fake.gate.set()
    catalog = Catalog.open(Settings(data_dir=tmp_path / "data", result_cache_size=0, query_cache_size=0),
                           encoder=fake)
    try:
        with pytest.raises(IndexNotReadyError) as caught:
            catalog.search(OPERATOR, SearchRequest("boom goes the request", mode="semantic"))
        assert caught.value.code == "INDEX_NOT_READY" and "the model fell over" in caught.value.message
        assert catalog.search(OPERATOR, SearchRequest("git bisect", mode="semantic")).mode == "semantic"
    finally:
        catalog.close()


def test_shutdown_answers_what_is_queued_when_the_model_keeps_up(encoder: Encoder) -> None:
    model = _raw(encoder)
    service = BatchingEncoder(model, workers=2, max_batch=4, max_wait_ms=1)
    futures = [service.submit(q) for q in QUERIES]
    service.close(timeout=60)
    for q, f in zip(QUERIES, futures, strict=True):
        assert f.done()
        np.testing.assert_allclose(f.result(timeout=0), model.encode_query_parts(q, ()), atol=1e-5)
    with pytest.raises(IndexNotReadyError, match="shut down"):
        service.submit("too late")


def test_shutdown_with_a_stuck_model_fails_every_waiting_request_and_never_hangs() -> None:
    fake = GatedEncoder()
    service = BatchingEncoder(fake, workers=1, max_batch=2, max_wait_ms=0)
    futures: list[Future[np.ndarray]] = [service.submit("stuck in the model")]
    assert fake.entered.acquire(timeout=10)
    futures += [service.submit(f"waiting {i}") for i in range(5)]
    service.close(timeout=0.2)
    for f in futures:
        assert f.done()
        with pytest.raises(IndexNotReadyError, match="shut down before this request was encoded"):
            f.result(timeout=0)
    fake.gate.set()  # the stuck batch returns late: its answer is dropped, the worker exits
    for t in service._threads:
        t.join(timeout=10)
        assert not t.is_alive()


def test_the_catalog_closes_its_service_and_a_request_after_close_fails_cleanly(tmp_path: Path) -> None:
    catalog = Catalog.open(Settings(data_dir=tmp_path / "data"), encoder=HashingEncoder())
    assert catalog.search(OPERATOR, SearchRequest("deploy a service", mode="semantic")).hits
    service = catalog._queries.services[0]
    catalog.close()
    with pytest.raises(IndexNotReadyError, match="shut down"):
        service.submit("deploy a service")


def test_default_layout_is_one_thread_per_worker_and_overrides_win() -> None:
    assert default_layout(cpus=2) == (2, 1)
    assert default_layout(cpus=1) == (1, 1)
    assert default_layout(3, 2, cpus=2) == (3, 2)
    with pytest.raises(ValueError):
        BatchingEncoder(HashingEncoder(), workers=0)
