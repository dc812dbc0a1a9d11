"""MiniLM's traced forward kept between processes (``retrieval/forward_cache.py``): an entry gives the
model's own vectors, is found only for the same model files and torch, and a damaged or unwritable cache
costs a trace, never a wrong vector or an error. (The whole path over real processes, where the second one
never imports sentence-transformers: ``tests/test_startup.py``.)"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from skillsearch.retrieval import forward_cache
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.minilm import MiniLMEncoder
from skillsearch.retrieval.query_cache import CachedQueryEncoder
from skillsearch.retrieval.torch_ops import TracedForward

TEXTS = ["roll back a bad deploy", "証明書を更新する", "x", "word " * 400]


def _forward(encoder: Encoder) -> tuple[MiniLMEncoder, TracedForward]:
    model = encoder.inner if isinstance(encoder, CachedQueryEncoder) else encoder
    assert isinstance(model, MiniLMEncoder) and model.forward is not None
    return model, model.forward


@pytest.fixture
def cache(encoder: Encoder, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty cache folder of this test's own, once the session's model is loaded (its load saves to the
    cache it finds)."""
    _forward(encoder)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "skillsearch" / "forward"


def test_a_saved_forward_gives_the_models_vectors_and_tokens(encoder: Encoder, cache: Path) -> None:
    model, forward = _forward(encoder)
    assert forward_cache.load(model.fingerprint()) is None  # nothing saved yet
    folder = forward_cache.save(model.fingerprint(), forward)
    assert folder is not None and folder.parent == cache and not list(cache.glob(".*.tmp"))
    loaded = forward_cache.load(model.fingerprint())
    assert loaded is not None and loaded is not forward
    assert [t[0].tolist() for t in loaded.tokenize(TEXTS)] == [t[0].tolist() for t in forward.tokenize(TEXTS)]
    np.testing.assert_array_equal(loaded.encode(TEXTS, 2), forward.encode(TEXTS, 2))
    assert (loaded.pad_id, loaded.dim) == (forward.pad_id, forward.dim) == (forward.pad_id, 384)


def test_an_entry_is_found_only_for_the_same_model_files(encoder: Encoder, cache: Path) -> None:
    model, forward = _forward(encoder)
    folder = forward_cache.save(model.fingerprint(), forward)
    assert folder is not None
    assert forward_cache.entry_dir("sha256:" + "0" * 64) != folder
    assert forward_cache.load("sha256:" + "0" * 64) is None
    # An entry copied under another model's key (its check names the model it was saved for) is refused too.
    other = forward_cache.entry_dir("sha256:" + "1" * 64)
    folder.rename(other)
    assert forward_cache.load("sha256:" + "1" * 64) is None


@pytest.mark.parametrize("damage", ["truncated module", "other vectors", "no tokenizer", "bad json"])
def test_a_damaged_entry_is_ignored_and_written_again(
    encoder: Encoder, cache: Path, damage: str, caplog: pytest.LogCaptureFixture,
) -> None:
    model, forward = _forward(encoder)
    folder = forward_cache.save(model.fingerprint(), forward)
    assert folder is not None
    if damage == "truncated module":
        data = (folder / "forward.pt").read_bytes()
        (folder / "forward.pt").write_bytes(data[: len(data) // 2])
    elif damage == "other vectors":
        check = json.loads((folder / "check.json").read_text())
        check["vectors"][0][0] += 0.01
        (folder / "check.json").write_text(json.dumps(check))
    elif damage == "no tokenizer":
        (folder / "tokenizer.json").unlink()
    else:
        (folder / "shape.json").write_text("{not json")
    with caplog.at_level("WARNING", logger="skillsearch"):
        assert forward_cache.load(model.fingerprint()) is None
    assert "not usable" in caplog.text
    assert forward_cache.save(model.fingerprint(), forward) == folder
    loaded = forward_cache.load(model.fingerprint())
    assert loaded is not None
    np.testing.assert_array_equal(loaded.encode(TEXTS, 4), forward.encode(TEXTS, 4))


def test_a_cache_that_cannot_be_written_changes_nothing(
    encoder: Encoder, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    model, forward = _forward(encoder)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would be")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert forward_cache.save(model.fingerprint(), forward) is None
    assert forward_cache.load(model.fingerprint()) is None
    assert blocker.read_text() == "a file where the cache folder would be"


def test_an_encoder_that_took_its_forward_from_the_cache_still_reaches_the_model(encoder: Encoder, cache: Path) -> None:
    """A fresh MiniLMEncoder over the same files takes the saved forward (no sentence-transformers model
    loaded), and its ``model`` (benchmarks compare against it) is then loaded on demand, with the same
    vectors."""
    model, forward = _forward(encoder)
    forward_cache.save(model.fingerprint(), forward)
    fresh = MiniLMEncoder(model.model_dir)
    assert fresh.loading.get()[0] is None and fresh.forward is not None
    np.testing.assert_array_equal(fresh.encode_documents(TEXTS), model.encode_documents(TEXTS))
    eager = fresh.model.encode(TEXTS, batch_size=4, normalize_embeddings=True, convert_to_numpy=True,
                               show_progress_bar=False)
    np.testing.assert_allclose(eager, forward.encode(TEXTS, 4), atol=1e-5, rtol=0)


def test_saving_removes_entries_unused_for_a_month_and_leftovers_of_dead_saves(encoder: Encoder, cache: Path) -> None:
    model, forward = _forward(encoder)
    old = forward_cache.save("sha256:" + "2" * 64, forward)
    recent = forward_cache.save("sha256:" + "3" * 64, forward)
    assert old is not None and recent is not None
    month_ago = time.time() - 31 * 86400
    os.utime(old / "check.json", (month_ago, month_ago))
    os.utime(recent / "check.json", (month_ago, month_ago))
    leftover = cache / ".deadbeef.123.tmp"
    leftover.mkdir()
    os.utime(leftover, (month_ago, month_ago))
    # Loading an entry marks it used: the recent one was loaded (its check names its own fingerprint).
    assert forward_cache.load("sha256:" + "3" * 64) is not None
    saved = forward_cache.save(model.fingerprint(), forward)
    assert saved is not None and saved.is_dir() and recent.is_dir()
    assert not old.exists() and not leftover.exists()


def test_a_usable_entry_another_process_saved_is_kept_as_it_is(encoder: Encoder, cache: Path) -> None:
    """Processes started together on a new machine each trace the model and save it: the later save keeps
    the entry the first one wrote (a reader may be loading its files) instead of replacing it."""
    model, forward = _forward(encoder)
    folder = forward_cache.save(model.fingerprint(), forward)
    assert folder is not None
    before = {p.name: p.stat().st_ino for p in folder.iterdir()}
    assert forward_cache.save(model.fingerprint(), forward) == folder
    assert {p.name: p.stat().st_ino for p in folder.iterdir()} == before
    assert not list(cache.glob(".*.tmp"))
