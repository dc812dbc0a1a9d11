"""Fitting the decision with the leave-one-dataset-out protocol (``skillsearch.bench.decision``): the
threshold honours the false-refusal budget of every set it is chosen on, and every set is scored by a model
fitted without it.

The retriever outputs are synthetic (the fitting reads arrays, not a catalog): three sets whose wanted row
scores higher on average, one of them with negatives."""

from __future__ import annotations

import numpy as np
import pytest

from skillsearch.bench.decision import CONFIDENCE, QUANTILES, REFUSAL, REFUSALS, abstention, lodo_decision, threshold
from skillsearch.bench.lodo import Plan
from skillsearch.bench.lodo_data import SetData


def test_the_threshold_lets_at_most_the_budget_of_each_sets_positives_fall_under_it() -> None:
    a = (np.arange(200) + 1) / 200  # 0.005 .. 1.0
    b = 0.5 + np.arange(100) / 200  # 0.5 .. 0.995
    for budget, falls_a, falls_b in ((0.01, 2, 0), (0.02, 4, 0), (0.0, 0, 0)):
        below = threshold([a, b], budget)
        assert abstention(a, np.ones(200, bool), below)["false_refusals"] == falls_a / 200
        assert abstention(b, np.ones(100, bool), below)["false_refusals"] == falls_b / 100
    # Two of b's low: b may lose one of its 100, so its second-lowest bounds the threshold, below a's 0.015.
    b_low = b.copy()
    b_low[:2] = (0.003, 0.004)
    assert threshold([a, b_low], 0.01) == pytest.approx(0.004 - 1e-6)


def _synthetic(name: str, n: int, negatives: int, rows: int = 40, seed: int = 0) -> SetData:
    rng = np.random.default_rng(seed)
    sem = rng.normal(0.1, 0.08, (n + negatives, rows)).astype(np.float32)
    relevant: list[dict[int, int]] = []
    lex = []
    for i in range(n + negatives):
        if i < n:
            want = int(rng.integers(rows))
            sem[i, want] += 0.35
            relevant.append({want: 1})
        else:
            relevant.append({})
        order = np.argsort(-sem[i])[:10]
        lex.append((order.astype(np.int64), np.sort(rng.uniform(0.5, 3.0, 10))[::-1].astype(np.float32)))
    terms = [frozenset({f"t{r}"}) for r in range(rows)]
    return SetData(name, "ndcg@10", [f"{name}{i}" for i in range(n + negatives)], ["q"] * (n + negatives), relevant,
                   {"pruned": lex, "all": lex}, {"whole": sem, "sentences": sem},
                   [np.zeros(0, np.int64)] * (n + negatives), [{"t1": 1.0, "t2": 2.0}] * (n + negatives), terms, 0.27,
                   [np.zeros(0, np.int64)] * (n + negatives))


def test_the_decision_is_scored_on_each_set_by_a_model_fitted_without_it() -> None:
    sets = [_synthetic("a", 300, 0, seed=1), _synthetic("b", 200, 0, seed=2), _synthetic("c", 150, 60, seed=3)]
    out = lodo_decision(sets, Plan())
    assert set(out["left_out"]) == {"a", "b", "c"}
    assert out["quantile"] in QUANTILES
    worst = max(b["false_refusals"] for b in out["left_out"].values())
    assert out["worst_left_out_false_refusals"] == worst
    # The shipped threshold, fitted on every set, refuses at most the chosen share of each set's positives.
    for name, block in out["fitted_on_all"].items():
        assert block["false_refusals"] <= out["quantile"] + 1e-9, name
    # The negatives (only set c has them) are refused more often than its positives.
    assert out["left_out"]["c"]["no_match"] > out["left_out"]["c"]["false_refusals"]
    # Every candidate fit is scored left out, and the shipped model names the fit no_match reads.
    assert set(out["refusals"]) == {*REFUSALS, CONFIDENCE}
    assert out["model"]["refusal"] == REFUSALS[REFUSAL]
    assert out["refusals"][REFUSAL]["quantile"] == out["quantile"]
