"""Fitting the "does anything fit?" decision (``skillsearch.bench.decision``): the threshold honours the
false-abstention budget on every set, and ``fit_decision`` applies the budget it is given everywhere it
chooses a threshold (in-sample, each cross-validation fold, leave one set out).

The hits are synthetic (the fitting reads arrays, not a catalog): two tool sets of positives only and a
skills set with negatives, each feature column drawn so that positives score higher on average."""

from __future__ import annotations

import numpy as np
import pytest

from skillsearch.bench.decision import DevHits, abstention, fit_decision, request_scores, threshold
from skillsearch.retrieval.confidence import FEATURES


def test_the_threshold_lets_at_most_the_budget_of_each_sets_positives_fall_under_it() -> None:
    # 200 positives scored 0.005 .. 1.0 in one set, 100 scored 0.5 .. 0.995 in another, and a negative.
    tops = {("a", f"a{i}"): (i + 1) / 200 for i in range(200)}
    tops |= {("b", f"b{i}"): 0.5 + i / 200 for i in range(100)}
    tops[("a", "neg")] = 0.001
    requests = {"a": {f"a{i}": True for i in range(200)} | {"neg": False}, "b": {f"b{i}": True for i in range(100)}}
    for budget, falls_a, falls_b in ((0.01, 2, 0), (0.02, 4, 0), (0.0, 0, 0)):
        below = threshold(tops, requests, budget)
        out = abstention(tops, requests, below)
        assert out["a"]["false_abstention"] == falls_a / 200
        assert out["b"]["false_abstention"] == falls_b / 100
        assert out["a"]["abstention"] == 1.0  # the negative, under every threshold here
    # Set b binds once its share is the tighter one: 10 % of a is 20 requests (under 0.105); b has none there.
    assert threshold(tops, requests, 0.1) == pytest.approx(0.105 - 1e-6)
    # Two of b's low: b may lose one of its 100, so its second-lowest bounds the threshold, below a's 0.015.
    tops_b_low = tops | {("b", "b0"): 0.003, ("b", "b1"): 0.004}
    below = threshold(tops_b_low, requests, 0.01)
    assert below == pytest.approx(0.004 - 1e-6)
    assert abstention(tops_b_low, requests, below)["b"]["false_abstention"] == 0.01


def _synthetic_hits(seed: int = 3) -> DevHits:
    rng = np.random.default_rng(seed)
    rows: list[tuple[str, str, int, np.ndarray, bool]] = []
    requests: dict[str, dict[str, bool]] = {}
    for name, n_pos, n_neg in (("skills", 120, 60), ("metatool", 200, 0), ("sealtools", 150, 0)):
        requests[name] = {}
        for j in range(n_pos + n_neg):
            positive = j < n_pos
            qid = f"{name}-{j}"
            requests[name][qid] = positive
            for rank in range(1, 4):
                wanted = positive and rank == 1
                x = rng.normal(0.6 if wanted else 0.0, 1.0, len(FEATURES))
                x[FEATURES.index("log_rank")] = np.log(rank)
                rows.append((name, qid, rank, x, wanted))
    return DevHits(np.asarray([r[0] for r in rows]), np.asarray([r[1] for r in rows]), np.asarray([r[2] for r in rows]),
                   np.asarray([r[3] for r in rows]), np.asarray([r[4] for r in rows]), requests)


@pytest.mark.parametrize("budget", [0.01, 0.05])
def test_fit_decision_holds_every_set_to_the_budget_it_is_given(budget: float) -> None:
    hits = _synthetic_hits()
    fitted = fit_decision(hits, max_false=budget)
    below = fitted["request"]["no_match_below"]
    for name in hits.requests:
        assert fitted["dev"][name]["false_abstention"] <= budget
    # The stored threshold is the one the in-sample numbers were computed with.
    tops = request_scores(fitted["request"], hits, np.ones(len(hits.y), bool))
    assert abstention(tops, hits.requests, below) == {k: v for k, v in fitted["dev"].items() if k in hits.requests}


def test_a_larger_budget_abstains_on_at_least_as_many_negatives() -> None:
    hits = _synthetic_hits()
    tight, loose = fit_decision(hits, max_false=0.01), fit_decision(hits, max_false=0.1)
    assert loose["request"]["no_match_below"] > tight["request"]["no_match_below"]
    assert loose["dev"]["skills"]["abstention"] >= tight["dev"]["skills"]["abstention"]
    assert loose["cv_skills_5fold"]["skills"]["abstention"] >= tight["cv_skills_5fold"]["skills"]["abstention"]
    assert loose["dev"]["metatool"]["false_abstention"] > tight["dev"]["metatool"]["false_abstention"]
