"""Per-encoder calibration of semantic scores, computed from built-in probes and stored with the index.

Why: cosines are not comparable across models. all-MiniLM-L6-v2 gives unrelated texts about 0.0-0.2;
multilingual-e5 gives them about 0.7-0.8 and a good match about 0.85-0.9. A code constant tuned on one
model is wrong for the other, so every index carries its own numbers (``manifest.json`` -> ``calibration``),
computed when it is built (``skillsearch reindex``) or on demand (``skillsearch calibrate``).

How: the encoder embeds small built-in probe sets, written in English, French, Japanese and Chinese:
- ``RELATED``: requests paired with a passage that answers them (some across languages);
- ``OFF_TOPIC``: requests no skill catalog should answer (weather, recipes, trivia, chit-chat).
Off-topic requests are scored against the probe passages *and* the index's own vectors, so the noise floor
reflects this catalog (a bigger catalog has a higher best-noise cosine). From these:

- ``noise_best_p90``/``noise_best_max``: the best cosine an off-topic request reaches in this catalog;
- ``related_p25``/``related_median``: the cosine of a request with an answering passage;
- ``no_match_cosine``: the threshold under which a candidate that matched no word is dropped: the mean of
  unrelated pairs (off-topic requests x probe passages) plus ``NO_MATCH_SIGMAS`` standard deviations. Not
  higher on purpose: on the 927 skills of the multilingual dev set, e5's (centered) score of the right skill
  has median 0.057 while the best noise of an off-topic request has median 0.06 -- the two overlap, so any
  threshold near the noise floor drops half the real cross-language matches (which share no word with their
  skill). With e5 a large catalog therefore rarely says ``no_match``; MiniLM separates them better;
- ``cosine_center``/``cosine_scale``: mean and spread of unrelated cosines, to read a raw cosine as "how far
  above noise" (used to explain hits, comparable across encoders).

For a multilingual encoder (``encoder.multilingual``) the calibration also holds ``centering``: the mean
vector of the built-in ``REFERENCE`` passages of each language (see :class:`Centering`); search then scores
``q . d - q . centroid[language(d)]`` and every number above is computed in that space.

For a routed encoder (``minilm+e5``, :class:`~skillsearch.retrieval.routed_encoder.RoutedEncoder`) the calibration holds one
calibration per route under ``routes`` (``minilm``, ``e5``), each computed by that route's model against
its own columns of the index's vectors: a request is scored with its route's numbers only.

A ``semantic_weight`` may also be stored: only ``skillsearch calibrate --queries FILE`` sets it, from
labelled requests over the live index (see :func:`tune_weight`); search uses it when the request names none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from skillsearch.core.settings import Settings
from skillsearch.retrieval.confidence import packaged_decision
from skillsearch.retrieval.cosines import nearest_rows
from skillsearch.retrieval.encoder import Encoder, Routed

DEFAULT_WEIGHT = Settings.semantic_weight

__all__ = [
    "CALIBRATION_VERSION", "LANGUAGES", "OFF_TOPIC", "REFERENCE", "RELATED", "Centering", "calibrate",
    "centered_cosines", "centering_of", "fit_centering", "is_current", "language_codes", "tune_weight",
    "with_packaged_decisions",
]

# 2: per-language centering of multilingual encoders' document vectors; 3: the fitted ``decision``
# (``skillsearch/retrieval/confidence.py``) copied in for encoders that have one.
CALIBRATION_VERSION = 3
# A semantic-only candidate must score this many standard deviations above unrelated pairs. With MiniLM it
# gives about 0.27 (the hand-set 0.25 of the first version); the same rule holds for any encoder's scale.
NO_MATCH_SIGMAS = 2.0

RELATED: tuple[tuple[str, str], ...] = (
    ("how do I undo my last git commit",
     ("Undo or amend the most recent git commit with git reset, git revert or git commit --amend, depending on "
      "whether it was already pushed.")),
    ("speed up a slow SQL query",
     ("Tune a slow database query by reading its execution plan, adding the right index and rewriting costly "
      "joins.")),
    ("write a README for my project",
     "Write a clear README: what the project does, how to install it, a quick start and how to contribute."),
    ("react component renders twice",
     ("Debug unexpected re-renders of React components with the profiler, memoisation and stable hook "
      "dependencies.")),
    ("mon conteneur docker s'arrête dès le démarrage",
     ("Debug a Docker container that exits at start-up: read its logs, check the entrypoint, environment "
      "variables and mounted volumes.")),
    ("sécuriser le stockage des mots de passe",
     "Store user passwords safely with a slow salted hash such as Argon2 or bcrypt, never in plain text."),
    ("préparer une présentation pour un client",
     ("Préparer un support de présentation client : fil conducteur, un message par diapositive, graphiques "
      "lisibles.")),
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

REFERENCE: dict[str, tuple[str, ...]] = {
    "en": (
       "Set up a continuous integration pipeline that runs linting, unit tests and a build on every pull request.",
       "Design a relational database schema with primary keys, foreign keys, indexes and migrations.",
       "Write clear API documentation with examples for each endpoint and its error responses.",
       "Monitor a web service with dashboards and alerts on latency, error rate and saturation.",
       "Plan a marketing email campaign: audience segments, subject lines, schedule and success metrics.",
       "Train a machine learning model, tune its hyperparameters and evaluate it on a held-out set.",
       "Review a contract for risky clauses and summarise obligations, deadlines and payment terms.",
       "Build a responsive web page layout with accessible navigation and forms.",
    ),
    "fr": (
       "Mettre en place une chaîne d'intégration continue qui lance les tests et la compilation à chaque demande de fusion.",
       "Concevoir un schéma de base de données relationnelle avec clés primaires, clés étrangères, index et migrations.",
       "Rédiger une documentation d'API claire avec des exemples pour chaque point d'accès et ses erreurs.",
       "Surveiller un service web avec des tableaux de bord et des alertes sur la latence et le taux d'erreur.",
       "Préparer une campagne d'e-mails marketing : segments d'audience, objets, calendrier et indicateurs de réussite.",
       "Entraîner un modèle d'apprentissage automatique, régler ses hyperparamètres et l'évaluer sur un jeu de test.",
       "Relire un contrat pour repérer les clauses risquées et résumer les obligations, échéances et conditions de paiement.",
       "Construire la mise en page adaptative d'une page web avec une navigation et des formulaires accessibles.",
    ),
    "ja": (
       "プルリクエストごとにリントとテストとビルドを実行する継続的インテグレーションを構築する手順。",
       "主キー、外部キー、インデックス、マイグレーションを含むリレーショナルデータベースのスキーマを設計する。",
       "各エンドポイントの例とエラー応答を含む分かりやすい API ドキュメントを書く。",
       "レイテンシやエラー率のダッシュボードとアラートで Web サービスを監視する。",
       "対象セグメント、件名、配信スケジュール、成果指標を決めてメールマーケティングを計画する。",
       "機械学習モデルを学習させ、ハイパーパラメータを調整し、テストデータで評価する。",
       "契約書のリスクのある条項を確認し、義務、期限、支払条件を要約する。",
       "アクセシブルなナビゲーションとフォームを備えたレスポンシブな Web ページを作る。",
    ),
    "zh": (
       "搭建持续集成流水线，在每个合并请求上运行代码检查、单元测试和构建。",
       "设计关系型数据库表结构，包括主键、外键、索引和迁移脚本。",
       "编写清晰的 API 文档，为每个接口提供示例和错误响应说明。",
       "用仪表盘和告警监控 Web 服务的延迟、错误率和资源饱和度。",
       "策划一次邮件营销活动：受众分群、邮件标题、发送时间和效果指标。",
       "训练机器学习模型，调整超参数，并在留出的测试集上评估效果。",
       "审阅合同中的风险条款，总结各方义务、期限和付款条件。",
       "制作带有无障碍导航和表单的响应式网页布局。",
    ),
}

LANGUAGES = tuple(REFERENCE)

class Centering(NamedTuple):
    """Per-language centroids of a multilingual encoder's passages (rows follow ``LANGUAGES``).

    ``reference`` (unit length) tells a document vector's language: its nearest reference centroid.
    ``centroids`` (the plain means of the built-in reference passages of each language) give the part of a
    request's cosine that only says "same language": a document of language L scores
    ``q . d - q . centroid_L``. Without it multilingual-e5 ranks a Japanese document about anything above
    an English one about the request's topic. Measured on the multilingual dev set over 927 skills (semantic
    hit@5, en/fr/ja/zh): raw cosine 0.63/0.79/0.88/0.71; this offset 0.83/0.75/0.83/0.75; subtracting the
    catalog's own language means and renormalising 0.67/0.54/0.79/0.71 (it helps a 34-skill catalog, hurts a
    large one). The centroids depend on the encoder only, not on the catalog.
    """

    reference: np.ndarray
    centroids: np.ndarray


class _Probes(NamedTuple):
    related_q: np.ndarray
    related_p: np.ndarray
    off_q: np.ndarray
    reference: dict[str, np.ndarray]


# Probe vectors per model name: the probes are fixed, so each model embeds them once per process (every
# catalog and wrapper of the same model shares them, as they share the loaded model, see make_encoder).
_PROBE_CACHE: dict[str, _Probes] = {}


def _probe_vectors(encoder: Encoder) -> _Probes:
    cached = _PROBE_CACHE.get(encoder.name)
    if cached is None:
        cached = _Probes(
            np.stack([encoder.encode_query(q) for q, _ in RELATED]),
            encoder.encode_documents([p for _, p in RELATED]),
            np.stack([encoder.encode_query(q) for q in OFF_TOPIC]),
            {lang: encoder.encode_documents(list(texts)) for lang, texts in REFERENCE.items()},
        )
        _PROBE_CACHE[encoder.name] = cached
    return cached


def _unit(m: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(m, axis=-1, keepdims=True)
    return np.asarray(m / np.where(norms == 0, 1.0, norms), dtype=np.float32)


def fit_centering(reference: dict[str, np.ndarray]) -> Centering:
    means = np.stack([reference[lang].mean(axis=0) for lang in LANGUAGES]).astype(np.float32)
    return Centering(_unit(means), means)


def language_codes(documents: np.ndarray, centering: Centering) -> np.ndarray:
    return nearest_rows(documents, centering.reference)


def centered_cosines(
    documents: np.ndarray, queries: np.ndarray, centering: Centering, codes: np.ndarray | None = None
) -> np.ndarray:
    """Each query's cosine with each document minus its projection on the document language's centroid:
    shape ``(queries, docs)``, or ``(docs,)`` for one query vector. ``codes`` are the documents'
    :func:`language_codes` when the caller keeps them (a search route does)."""
    if codes is None:
        codes = language_codes(documents, centering)
    q = np.atleast_2d(queries)
    scores = q @ documents.T - (q @ centering.centroids.T)[:, codes]
    return np.asarray(scores[0] if queries.ndim == 1 else scores, dtype=np.float32)


def centering_of(calibration: dict[str, Any] | None) -> Centering | None:
    """The centering stored in a calibration (a search route parses it once and keeps it)."""
    stored = (calibration or {}).get("centering")
    if not stored:
        return None
    return Centering(np.asarray(stored["reference"], np.float32), np.asarray(stored["centroids"], np.float32))


def calibrate(encoder: Encoder, catalog_vectors: np.ndarray | None = None) -> dict[str, Any]:
    """The calibration of ``encoder`` for an index whose document vectors are ``catalog_vectors``."""
    routed = encoder.routed()
    if routed is not None:
        return _calibrate_routes(routed, catalog_vectors)
    probes = _probe_vectors(encoder)
    catalog = np.zeros((0, encoder.dim), np.float32)
    if catalog_vectors is not None and len(catalog_vectors):
        catalog = np.asarray(catalog_vectors, dtype=np.float32)
    docs = np.concatenate([probes.related_p, catalog])
    centering = fit_centering(probes.reference) if encoder.multilingual else None

    def cos(queries: np.ndarray, documents: np.ndarray) -> np.ndarray:
        if centering is None:
            return np.asarray(queries @ documents.T)
        return centered_cosines(documents, queries, centering)

    related = np.diag(cos(probes.related_q, probes.related_p))
    noise_best = cos(probes.off_q, docs).max(axis=1)
    unrelated = cos(probes.off_q, probes.related_p).ravel()
    noise_p50 = float(np.median(noise_best))
    related_p25 = float(np.quantile(related, 0.25))
    out: dict[str, Any] = {
        "version": CALIBRATION_VERSION,
        "encoder": encoder.name,
        "documents": len(catalog),
        "no_match_cosine": round(float(unrelated.mean() + NO_MATCH_SIGMAS * max(float(unrelated.std()), 1e-3)), 4),
        "noise_best_median": round(noise_p50, 4),
        "noise_best_p90": round(float(np.quantile(noise_best, 0.9)), 4),
        "noise_best_max": round(float(noise_best.max()), 4),
        "related_p25": round(related_p25, 4),
        "related_median": round(float(np.median(related)), 4),
        "cosine_center": round(float(unrelated.mean()), 4),
        "cosine_scale": round(max(float(unrelated.std()), 1e-3), 4),
    }
    decision = packaged_decision(encoder.name)
    if decision is not None:
        out["decision"] = decision
    if centering is not None:
        codes = language_codes(catalog, centering)
        out["centering"] = {
            "languages": list(LANGUAGES),
            "documents_per_language": {lang: int((codes == i).sum()) for i, lang in enumerate(LANGUAGES)},
            "reference": np.round(centering.reference, 6).tolist(),
            "centroids": np.round(centering.centroids, 6).tolist(),
        }
    return out


def _calibrate_routes(routed: Routed, catalog_vectors: np.ndarray | None) -> dict[str, Any]:
    """Each route's model calibrated on its own columns; the top level only names the whole."""
    catalog = np.zeros((0, routed.dim), np.float32)
    if catalog_vectors is not None and len(catalog_vectors):
        catalog = np.asarray(catalog_vectors, dtype=np.float32)
    return {
        "version": CALIBRATION_VERSION,
        "encoder": routed.name,
        "documents": len(catalog),
        "routes": {key: calibrate(part, catalog[:, routed.columns[key]]) for key, part in routed.parts.items()},
    }


def is_current(calibration: dict[str, Any], encoder: Encoder) -> bool:
    """Whether a stored calibration is this code's for this encoder: same version and encoder, and the
    fitted decision the package ships now (an index calibrated before a refit is recalibrated on open)."""
    if calibration.get("version") != CALIBRATION_VERSION or calibration.get("encoder") != encoder.name:
        return False
    routed = encoder.routed()
    parts = routed.parts.items() if routed is not None else [(None, encoder)]
    for key, part in parts:
        own = calibration if key is None else (calibration.get("routes") or {}).get(key) or {}
        if own.get("decision") != packaged_decision(part.name):
            return False
    return True


def with_packaged_decisions(calibration: dict[str, Any], encoder: Encoder) -> dict[str, Any] | None:
    """``calibration`` with the fitted decisions this package ships for its encoder (each route's, for a
    routed one) in place of the stored ones, when nothing else makes it out of date (same version and
    encoder); else None. A refit decision is only numbers: an index adopts it without its model, where a
    recalibration embeds the probes (the first command after an upgrade loaded the model for it, a lexical
    search included)."""
    if calibration.get("version") != CALIBRATION_VERSION or calibration.get("encoder") != encoder.name:
        return None
    out = dict(calibration)
    routed = encoder.routed()
    if routed is not None:
        routes = dict(out.get("routes") or {})
        if set(routes) != set(routed.parts):
            return None
        for key, part in routed.parts.items():
            routes[key] = _with_decision(routes[key], part.name)
        out["routes"] = routes
        return out
    return _with_decision(out, encoder.name)


def _with_decision(calibration: dict[str, Any], encoder_name: str) -> dict[str, Any]:
    out = {k: v for k, v in calibration.items() if k != "decision"}
    decision = packaged_decision(encoder_name)
    if decision is not None:
        out["decision"] = decision
    return out


def tune_weight(
    evaluate: Callable[[float], float], grid: Sequence[float] = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
) -> tuple[float, dict[float, float]]:
    """The semantic weight that maximises ``evaluate(weight)`` (e.g. MRR over labelled requests); ties go
    to the weight nearest the set-wide default supported by the dev data."""
    scores = {w: float(evaluate(w)) for w in grid}
    best = max(scores.values())
    choice = min((w for w, s in scores.items() if s >= best - 1e-9), key=lambda w: abs(w - DEFAULT_WEIGHT))
    return choice, scores
