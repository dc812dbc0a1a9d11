"""MiniLM's forward as one TorchScript call (``retrieval/torch_ops.py``): the same tokens and the same vectors
as sentence-transformers running the model module by module, any other pipeline left to the model, and the
batching service's caller-side tokenizing (``prepare_query``) failing as cleanly as a failed batch, and a lone
request of several sentences split over the idle workers answering exactly as the model alone."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from skillsearch.core.errors import IndexNotReadyError
from skillsearch.retrieval.batching import BatchingEncoder
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.hashing_encoder import HashingEncoder
from skillsearch.retrieval.minilm import MiniLMEncoder
from skillsearch.retrieval.query_cache import CachedQueryEncoder
from skillsearch.retrieval.torch_ops import TracedForward

ROOT = Path(__file__).resolve().parents[1]
TEXTS = [
    "roll back a bad deploy", "  spaced\tout  ", "証明書を更新する", "Renouveler le certificat TLS du serveur web",
    "Find the change that broke the tests. Then open a pull request that reverts it.", "x",
    "word " * 400,  # longer than the model's 256 tokens: truncated like the model truncates
]


def _minilm(encoder: Encoder) -> MiniLMEncoder:
    model = encoder.inner if isinstance(encoder, CachedQueryEncoder) else encoder
    assert isinstance(model, MiniLMEncoder)
    return model


def _eager(model: MiniLMEncoder, texts: Sequence[str], batch_size: int) -> np.ndarray:
    return np.asarray(model.model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True,
                                         convert_to_numpy=True, show_progress_bar=False))


def test_the_default_model_runs_traced_with_the_models_own_tokens_and_vectors(encoder: Encoder) -> None:
    model = _minilm(encoder)
    assert model.forward is not None
    features = model.model.preprocess(TEXTS)
    for i, (ids, types) in enumerate(model.forward.tokenize(TEXTS)):
        n = int(features["attention_mask"][i].sum())
        assert ids.tolist() == features["input_ids"][i][:n].tolist()
        assert types.tolist() == features["token_type_ids"][i][:n].tolist()
    for batch_size in (1, 3, 8):  # padded sub-batches of every width give each text the vector it gets alone
        np.testing.assert_allclose(model.forward.encode(TEXTS, batch_size), _eager(model, TEXTS, 8), atol=1e-5, rtol=0)
    documents = [p.read_text(encoding="utf-8")[:4000] for p in sorted((ROOT / "skillsearch").rglob("*.py"))[:12]]
    np.testing.assert_allclose(model.encode_documents(documents), _eager(model, documents, 32), atol=1e-5, rtol=0)


def test_documents_sorted_by_length_across_batches_come_back_in_the_callers_order(encoder: Encoder) -> None:
    model = _minilm(encoder)
    rng = np.random.default_rng(4)
    words = ["deploy", "review", "migrate", "profile", "translate", "summarise", "audit", "backup", "rotate", "monitor"]
    # Long and short texts interleaved, so every batch of the caller's order would mix lengths.
    documents = [" ".join(rng.choice(words, int(n))) for n in rng.permutation(np.r_[np.arange(1, 41), np.arange(60, 100)])]
    heard: list[int] = []
    got = model.encode_documents(documents, heard.append)
    assert sum(heard) == len(documents) and max(heard) <= model.batch_size
    np.testing.assert_allclose(got, _eager(model, documents, 16), atol=1e-5, rtol=0)


def test_queries_through_prepare_and_the_batch_path_match_the_model_alone(encoder: Encoder) -> None:
    model = _minilm(encoder)
    items = [(t, ()) for t in TEXTS] + [("a b c. d e f.", ("a b c.", "d e f."))]
    prepared = model.encode_prepared([model.prepare_query(q, p) for q, p in items])
    for (q, p), got in zip(items, prepared, strict=True):
        alone = _eager(model, list(p) or [q], 8)
        if p:  # the parts' normalised mean stands first, then each part
            mean = alone.mean(axis=0)
            alone = np.vstack([mean / np.linalg.norm(mean), alone])
        np.testing.assert_allclose(got, alone, atol=1e-5, rtol=0)


def test_a_pipeline_that_is_not_mean_pooled_bert_keeps_the_model(encoder: Encoder) -> None:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling

    model = _minilm(encoder).model
    cls_pooled = SentenceTransformer(modules=[model[0], Pooling(384, pooling_mode="cls"), Normalize()], device="cpu")
    assert TracedForward.of(cls_pooled) is None
    assert TracedForward.of(model) is not None


class PreparingEncoder(HashingEncoder):
    """Tokenizes in the caller's thread like MiniLM traced; fails to prepare a request with ``boom`` in it."""

    def prepare_query(self, query: str, parts: Sequence[str]) -> tuple[str, tuple[str, ...]]:
        if "boom" in query:
            raise ValueError("the tokenizer fell over")
        return query, tuple(parts)

    def encode_prepared(self, items: Sequence[tuple[str, tuple[str, ...]]]) -> list[np.ndarray]:
        return [self.encode_query_parts(q, p) for q, p in items]


def test_a_request_that_cannot_be_prepared_fails_typed_and_the_service_keeps_serving() -> None:
    model = PreparingEncoder()
    service = BatchingEncoder(model, workers=1)
    try:
        with pytest.raises(IndexNotReadyError, match="query encoding failed: ValueError: the tokenizer fell over"):
            service.submit("boom goes the request")
        np.testing.assert_allclose(service.submit("deploy a service").result(timeout=30),
                                   model.encode_query_parts("deploy a service", ()), atol=1e-6)
    finally:
        service.close()
    assert service.stats().requests == 1 and service.stats().failed_batches == 0


def test_a_lone_request_of_several_sentences_is_split_over_idle_workers_and_answers_as_alone(encoder: Encoder) -> None:
    model = _minilm(encoder)
    query = "Find the change that broke the tests. Then open a pull request that reverts it. Finally tell the team."
    parts = ("Find the change that broke the tests.", "Then open a pull request that reverts it.", "Finally tell the team.")
    service = BatchingEncoder(model, workers=2)
    try:
        service.submit("warm the workers up").result(timeout=60)
        wait_idle(service, 2)
        before = service.stats()
        got = service.submit(query, parts).result(timeout=60)
        after = service.stats()
    finally:
        service.close()
    np.testing.assert_allclose(got, model.encode_query_parts(query, parts), atol=1e-5, rtol=0)
    assert got.shape == (4, model.dim) and not got.flags.writeable
    assert after.batches - before.batches == 2  # one piece per idle worker
    assert after.requests - before.requests == 1 and after.texts - before.texts == 3


def wait_idle(service: BatchingEncoder, workers: int) -> None:
    """Until ``workers`` workers wait for a request (a worker answers a future before it waits again)."""
    deadline = time.monotonic() + 30
    while service.idle_workers() < workers:
        assert time.monotonic() < deadline, "the workers never went idle"
        time.sleep(0.005)


class SplittingEncoder(PreparingEncoder):
    """Splits a request's parts like MiniLM; a piece holding ``crash`` fails in the worker."""

    def split_prepared(self, prepared: tuple[str, tuple[str, ...]], n: int) -> list[tuple[tuple[str, tuple[str, ...]], int]]:
        _, parts = prepared
        return [((part, ()), 1) for part in parts]

    def join_prepared(self, prepared: tuple[str, tuple[str, ...]], rows: Sequence[np.ndarray]) -> np.ndarray:
        return np.vstack(list(rows))

    def encode_prepared(self, items: Sequence[tuple[str, tuple[str, ...]]]) -> list[np.ndarray]:
        if any("crash" in q for q, _ in items):
            raise RuntimeError("the model fell over")
        return super().encode_prepared(items)


def test_a_failing_piece_fails_the_split_request_typed_and_the_workers_keep_serving() -> None:
    service = BatchingEncoder(SplittingEncoder(), workers=2)
    try:
        service.submit("warm").result(timeout=30)
        wait_idle(service, 2)
        with pytest.raises(IndexNotReadyError, match="RuntimeError: the model fell over"):
            service.submit("fine. crash.", ("fine.", "crash.")).result(timeout=30)
        wait_idle(service, 2)
        assert service.stats().batches == 3 and service.stats().failed_batches == 1  # warm, then two pieces
        ok = service.submit("one two. three four.", ("one two.", "three four.")).result(timeout=30)
        assert ok.shape == (2, 256)
    finally:
        service.close()
