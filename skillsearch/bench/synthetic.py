"""Synthetic skill catalogs of any size, with text that reads like real skills.

Sentences and vocabulary come from real tool and skill descriptions (the Seal-Tools and MetaTool corpora
and the 883 real skills, when ``../shared/data`` is present; a small built-in list otherwise), so token
statistics, text lengths and embedding cost look like a real catalog's. Generation is seeded: the same
``n`` and ``seed`` give the same bundle, which keeps the on-disk embedding cache useful between runs.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["sentence_pool", "stand_in_vectors", "synthetic_skills", "write_synthetic_bundle", "write_synthetic_bundles"]

_FALLBACK = [
    "Analyze server logs to find the root cause of an outage.",
    "Convert a CSV export into a cleaned, typed table.",
    "Write a pull request description from the diff and the linked issue.",
    "Renew TLS certificates before they expire and verify the chain.",
    "Profile a slow Python function and report the hottest lines.",
    "Plan a database failover with a checklist and rollback steps.",
]
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[A-Za-z][a-z]{3,}")


def sentence_pool(data_root: Path | None) -> list[str]:
    """Sentences of real descriptions under ``data_root`` (BEIR corpora, skills-catalog manifest)."""
    pool: list[str] = []
    if data_root is not None:
        for corpus in sorted(data_root.glob("*/corpus.jsonl")):
            for line in corpus.read_text(encoding="utf-8").splitlines():
                text = str(json.loads(line).get("text") or "").split("\n", 1)[0]
                pool.extend(s.strip() for s in _SENTENCE.split(text) if len(s.strip()) > 20)
        manifest = data_root / "skills-catalog" / "manifest.jsonl"
        if manifest.is_file():
            for line in manifest.read_text(encoding="utf-8").splitlines():
                text = str(json.loads(line).get("description") or "")
                pool.extend(s.strip() for s in _SENTENCE.split(text) if len(s.strip()) > 20)
    return pool or list(_FALLBACK)


def synthetic_skills(n: int, pool: list[str], seed: int = 7) -> Iterator[dict[str, Any]]:
    """``n`` flat bundle entries: a three-word name, a 1-2 sentence description, 2 tags, ~600 chars of
    instructions."""
    rng = random.Random(seed)
    words = sorted({w.lower() for s in pool for w in _WORD.findall(s)})
    tags = words[:: max(1, len(words) // 300)][:300]
    for i in range(n):
        name_words = rng.sample(words, 3)
        description = " ".join(rng.sample(pool, rng.randint(1, 2)))[:1000]
        instructions = "\n".join(f"- {s}" for s in rng.sample(pool, 6))[:700]
        yield {
            "slug": "-".join(name_words)[:50].strip("-") + f"-{i}",
            "name": " ".join(name_words).capitalize(),
            "description": description,
            "tags": rng.sample(tags, 2),
            "instructions": instructions,
        }


def write_synthetic_bundle(path: Path, n: int, data_root: Path | None, seed: int = 7) -> Path:
    return write_synthetic_bundles(path, n, data_root, n, seed)[0]


def write_synthetic_bundles(path: Path, n: int, data_root: Path | None, per_file: int, seed: int = 7) -> list[Path]:
    """The bundle of :func:`write_synthetic_bundle`, cut into files of ``per_file`` skills (``path`` itself
    when one is enough, else ``<stem>-<i><suffix>``): a catalog of a million skills is imported as batches
    of a size a sync applies, not held in memory at once."""
    pool = sentence_pool(data_root)
    entries = synthetic_skills(n, pool, seed)
    count = max(1, -(-n // max(1, per_file)))
    paths = [Path(path)] if count == 1 else [Path(path).with_name(f"{Path(path).stem}-{i}{Path(path).suffix}")
                                              for i in range(count)]
    for i, target in enumerate(paths):
        with target.open("w", encoding="utf-8") as f:
            size = min(per_file, n - i * per_file) if count > 1 else n
            f.writelines(json.dumps(next(entries), ensure_ascii=False) + "\n" for _ in range(size))
    return paths


def stand_in_vectors(pool: np.ndarray, keys: np.ndarray, parts: Sequence[slice] = ()) -> np.ndarray:
    """One stand-in document vector per key (a 64-bit hash of its text, or any number): a normalised mix of
    three real vectors of ``pool``, ``w a + (1 - w) b + 0.15 c`` with ``w`` in [0.5, 0.8), all chosen by
    the key. Neighbourhoods look like a real catalog's (topics, near-duplicates), search cost does not
    depend on the values, and distinct keys nearly always give distinct vectors (not ties by the thousand,
    which a mix of two of 512 vectors gave at 1M rows: recall against an exact scan would measure tie order).

    ``parts``: column ranges normalised each on its own, as a routed encoder's document vector is the
    concatenation of two models' unit vectors (``RoutedEncoder.columns``); the whole row when empty."""
    keys = np.asarray(keys, dtype=np.uint64)
    p = np.uint64(len(pool))
    a, b, c = pool[keys % p], pool[(keys >> np.uint64(20)) % p], pool[(keys >> np.uint64(40)) % p]
    w = (0.5 + ((keys >> np.uint64(52)) & np.uint64(0xFFF)).astype(np.float32) / np.float32(4096 / 0.3))[:, None]
    mixed: np.ndarray = (w * a + (1 - w) * b + np.float32(0.15) * c).astype(np.float32)
    for cols in parts or (slice(0, mixed.shape[1]),):
        norms = np.linalg.norm(mixed[:, cols], axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        mixed[:, cols] /= norms
    return mixed
