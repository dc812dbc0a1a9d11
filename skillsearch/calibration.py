"""Per-encoder calibration of semantic scores, computed from built-in probes and stored with the index.

Why: cosines are not comparable across models. all-MiniLM-L6-v2 gives unrelated texts about 0.0-0.2;
multilingual-e5 gives them about 0.7-0.8 and a good match about 0.85-0.9. A code constant tuned on one
model is wrong for the other, so every index carries its own numbers (``manifest.json`` -> ``calibration``),
computed when it is built (``skillsearch reindex``) or on demand (``skillsearch calibrate``).

How: the encoder embeds two small built-in probe sets, written in English, French, Japanese and Chinese:
- ``RELATED``: requests paired with a passage that answers them (some across languages);
- ``OFF_TOPIC``: requests no skill catalog should answer (weather, recipes, trivia, chit-chat).
Off-topic requests are scored against the probe passages *and* the index's own vectors, so the noise floor
reflects this catalog (a bigger catalog has a higher best-noise cosine). From these:

- ``noise_best_p90``/``noise_best_max``: the best cosine an off-topic request reaches in this catalog;
- ``related_p25``/``related_median``: the cosine of a request with an answering passage;
- ``no_match_cosine``: the threshold under which a candidate that matched no word is dropped; halfway
  between the noise floor (p90 of off-topic bests) and the lower quartile of related pairs, never above the
  latter, so a real cross-language match (which has no word in common) is kept;
- ``cosine_center``/``cosine_scale``: mean and spread of unrelated cosines, to read a raw cosine as "how far
  above noise" (used to explain hits, comparable across encoders).

A ``semantic_weight`` may also be stored: only ``skillsearch calibrate --queries FILE`` sets it, from
labelled requests over the live index (see :func:`tune_weight`); search uses it when the request names none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from skillsearch.encoder import Encoder

__all__ = ["CALIBRATION_VERSION", "OFF_TOPIC", "RELATED", "calibrate", "tune_weight"]

CALIBRATION_VERSION = 1

RELATED: tuple[tuple[str, str], ...] = (
    ("how do I undo my last git commit",
     "Undo or amend the most recent git commit with git reset, git revert or git commit --amend, depending on "
     "whether it was already pushed."),
    ("speed up a slow SQL query",
     "Tune a slow database query by reading its execution plan, adding the right index and rewriting costly "
     "joins."),
    ("write a README for my project",
     "Write a clear README: what the project does, how to install it, a quick start and how to contribute."),
    ("react component renders twice",
     "Debug unexpected re-renders of React components with the profiler, memoisation and stable hook "
     "dependencies."),
    ("mon conteneur docker s'arrête dès le démarrage",
     "Debug a Docker container that exits at start-up: read its logs, check the entrypoint, environment "
     "variables and mounted volumes."),
    ("sécuriser le stockage des mots de passe",
     "Store user passwords safely with a slow salted hash such as Argon2 or bcrypt, never in plain text."),
    ("préparer une présentation pour un client",
     "Préparer un support de présentation client : fil conducteur, un message par diapositive, graphiques "
     "lisibles."),
    ("API のレート制限を設計したい",
     "Design rate limiting for an HTTP API with token buckets, per-client quotas and clear 429 responses."),
    ("CSV ファイルのデータをきれいにしたい",
     "Clean a CSV dataset: fix column types, trim strings, handle missing values and duplicate rows."),
    ("本番サーバーのメモリ使用量が増え続ける",
     "本番環境のメモリリークを調査する手順。ヒープのスナップショットを比較し、増え続けるオブジェクトを特定する。"),
    ("如何配置 nginx 反向代理",
     "Configure nginx as a reverse proxy with upstream servers, TLS termination, headers and timeouts."),
    ("给函数写单元测试",
     "Write unit tests for a function: cover normal cases, edge cases and errors, keep each test independent."),
    ("网站加载太慢怎么优化",
     "优化网页加载速度：压缩图片、合并静态资源、启用缓存和 CDN，并用性能工具测量首屏时间。"),
    ("translate the user manual into Spanish",
     "Translate a document between languages while keeping its tone, formatting and terminology consistent."),
)

OFF_TOPIC: tuple[str, ...] = (
    "what's the weather like in Lisbon tomorrow",
    "who won the football match last night",
    "tell me a joke about cats",
    "how tall is mount everest",
    "best beaches in Thailand for a honeymoon",
    "recette de la tarte aux pommes de ma grand-mère",
    "quel âge a la tour Eiffel",
    "j'ai perdu mes clés ce matin",
    "quels films sortent au cinéma ce week-end",
    "今日の晩ごはんは何にしよう",
    "富士山の高さはどれくらいですか",
    "好きな映画を教えてください",
    "明天会下雨吗",
    "我的猫为什么总是睡觉",
    "推荐一首好听的歌",
    "zxqv plomb wibble frotz",
)

# Probe vectors per encoder name: the probes are fixed, so they are embedded once per process.
_PROBE_CACHE: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def _probe_vectors(encoder: Encoder) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    cached = _PROBE_CACHE.get(encoder.name)
    if cached is None:
        related_q = np.stack([encoder.encode_query(q) for q, _ in RELATED])
        related_p = encoder.encode_documents([p for _, p in RELATED])
        off_q = np.stack([encoder.encode_query(q) for q in OFF_TOPIC])
        cached = (related_q, related_p, off_q)
        _PROBE_CACHE[encoder.name] = cached
    return cached


def calibrate(encoder: Encoder, catalog_vectors: np.ndarray | None = None) -> dict[str, Any]:
    """The calibration of ``encoder`` for an index whose document vectors are ``catalog_vectors``."""
    related_q, related_p, off_q = _probe_vectors(encoder)
    related = np.einsum("ij,ij->i", related_q, related_p)
    docs = related_p
    if catalog_vectors is not None and len(catalog_vectors):
        docs = np.concatenate([related_p, np.asarray(catalog_vectors, dtype=np.float32)])
    off = off_q @ docs.T
    noise_best = off.max(axis=1)
    unrelated = (off_q @ related_p.T).ravel()
    noise_p90 = float(np.quantile(noise_best, 0.9))
    related_p25 = float(np.quantile(related, 0.25))
    threshold = min((noise_p90 + related_p25) / 2.0, related_p25)
    return {
        "version": CALIBRATION_VERSION,
        "encoder": encoder.name,
        "documents": int(len(docs) - len(related_p)),
        "no_match_cosine": round(threshold, 4),
        "noise_best_p90": round(noise_p90, 4),
        "noise_best_max": round(float(noise_best.max()), 4),
        "related_p25": round(related_p25, 4),
        "related_median": round(float(np.median(related)), 4),
        "cosine_center": round(float(unrelated.mean()), 4),
        "cosine_scale": round(max(float(unrelated.std()), 1e-3), 4),
    }


def tune_weight(
    evaluate: Callable[[float], float], grid: Sequence[float] = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
) -> tuple[float, dict[float, float]]:
    """The semantic weight that maximises ``evaluate(weight)`` (e.g. MRR over labelled requests); ties go
    to the weight nearest 0.6, the set-wide default supported by the dev data."""
    scores = {w: float(evaluate(w)) for w in grid}
    best = max(scores.values())
    choice = min((w for w, s in scores.items() if s >= best - 1e-9), key=lambda w: abs(w - 0.6))
    return choice, scores
