"""Leave-one-dataset-out (LODO) ablation of every ranking rule and tuned constant (``skillsearch bench lodo``).

A rule earns its place only on data it was not chosen on. For each rule (a setting with the value that
turns it off) and each dev set ``s`` in turn: its value is chosen on the *other* sets (the best mean of
their metrics, nDCG@10, hit@5 on the skills set), then scored on ``s`` against the rule turned off. A rule
stays when that left-out effect is positive on average over the sets and no set loses more than
``MAX_LOSS`` (0.005). A constant with no "off" (the semantic weight, the candidate depth, the fusion) is
scored against the value the product ships.

Every variant runs over the retriever outputs :mod:`skillsearch.bench.lodo_data` collects once per set,
through the search's own fuse and order stages; the rules already taken out of the product are written
here as variants only (:class:`Plan`), so the table still shows why they went.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from skillsearch.bench.lodo_data import SetData
from skillsearch.core.fusion import Candidates, candidates, fuse
from skillsearch.retrieval.cosines import top_k
from skillsearch.retrieval.exact_name import exact_name_first

__all__ = ["MAX_LOSS", "RULES", "SHIPPED", "Plan", "lodo_table", "rank", "score_plan"]

MAX_LOSS = 0.005
LIMIT = 10


@dataclass(frozen=True)
class Plan:
    """One ranking configuration: the product's constants and the rules under trial."""

    fusion: str = "zscore"
    weight: float = 0.6
    slope: float = 1.0  # lexical share slope (adapted weight); 0: off
    unlisted: float = 0.25  # share of a full lexical list's last score for a candidate below it; 0: off
    depth: int = 100
    sentences: bool = True
    pruning: bool = True
    exact_name: bool = True


TODAY = Plan()
# What the product ships now (``retrieval/search.py``); the ablation starts from it.
SHIPPED = Plan(unlisted=0.0)


@dataclass(frozen=True)
class Rule:
    name: str
    field: str
    values: tuple[Any, ...]
    off: Any  # None: a constant, scored against the shipped value
    where: str


RULES: tuple[Rule, ...] = (
    Rule("lexical share slope (adapted weight)", "slope", (0.0, 0.5, 1.0, 1.5), 0.0, "core/fusion.py"),
    Rule("unlisted lexical share", "unlisted", (0.0, 0.125, 0.25, 0.5), 0.0, "retrieval/search.py"),
    Rule("sentence splitting of long requests", "sentences", (False, True), False, "retrieval/search.py"),
    Rule("common-term pruning", "pruning", (False, True), False, "retrieval/lexical.py"),
    Rule("exact-name first", "exact_name", (False, True), False, "retrieval/search.py"),
    Rule("semantic weight", "weight", (0.4, 0.5, 0.6, 0.7, 0.8), None, "core/settings.py"),
    Rule("candidate depth", "depth", (50, 100, 200), None, "core/settings.py"),
    Rule("fusion method", "fusion", ("zscore", "minmax", "rrf"), None, "core/fusion.py"),
)


def _adapted(c: Candidates, weight: float, slope: float, fusion: str) -> float:
    if fusion == "rrf" or slope == 0.0 or c.rows.size == 0:
        return weight
    share = float((c.lexical_rank > 0).mean())
    return float(np.clip(weight + slope * (0.5 - share), 0.0, 1.0))


def rank(data: SetData, i: int, plan: Plan) -> np.ndarray:
    """The top ``LIMIT`` rows of request ``i`` under ``plan``, best first."""
    lex_rows, lex_scores = data.lex["pruned" if plan.pruning else "all"][i]
    lex_rows, lex_scores = lex_rows[: plan.depth], lex_scores[: plan.depth]
    sem_all = data.sem["sentences" if plan.sentences else "whole"][i]
    sem_rows = top_k(sem_all, plan.depth)
    unlisted = plan.unlisted * float(lex_scores.min()) if lex_scores.size >= plan.depth else 0.0
    c = candidates(lex_rows, lex_scores, sem_rows, sem_all)
    if unlisted:
        c = c._replace(lexical=np.where(c.lexical_rank > 0, c.lexical, np.float32(unlisted)).astype(np.float32))
    fused = fuse(c, plan.fusion, _adapted(c, plan.weight, plan.slope, plan.fusion))
    if plan.exact_name:
        fused = exact_name_first(c.rows, fused, data.named[i])
    order = np.argsort(-fused, kind="stable")[:LIMIT]
    return np.asarray(c.rows[order])


def _metric(rows: np.ndarray, relevant: Mapping[int, int], metric: str) -> float:
    if metric == "hit@5":
        return float(any(int(r) in relevant for r in rows[:5]))
    gains = np.asarray([relevant.get(int(r), 0) for r in rows[:10]], np.float64)
    discounts = 1.0 / np.log2(np.arange(2, gains.size + 2))
    ideal = np.sort(np.asarray(list(relevant.values()), np.float64))[::-1][:10]
    idcg = float((ideal * (1.0 / np.log2(np.arange(2, ideal.size + 2)))).sum())
    return float((gains * discounts).sum()) / idcg if idcg > 0 else 0.0


def score_rows(data: SetData, ranked: Sequence[np.ndarray]) -> float:
    """The set's metric over its positive requests."""
    values = [_metric(r, rel, data.metric) for r, rel in zip(ranked, data.relevant, strict=True) if rel]
    return float(np.mean(values)) if values else 0.0


def score_plan(data: SetData, plan: Plan) -> float:
    return score_rows(data, [rank(data, i, plan) if rel else np.zeros(0, np.int64)
                             for i, rel in enumerate(data.relevant)])


def _mean_on(table: Mapping[Any, Mapping[str, float]], v: Any, others: Sequence[str], reference: Any,
             ) -> tuple[float, bool]:
    return round(float(np.mean([table[v][n] for n in others])), 6), v == reference


def lodo_table(sets: Sequence[SetData], base: Plan = SHIPPED, rules: Sequence[Rule] = RULES,
               log: Callable[[str], None] = lambda _s: None) -> dict[str, Any]:
    """Every rule's left-out effect on every set, and whether it stays (see the module docstring)."""
    names = [s.name for s in sets]
    memo: dict[tuple[str, Plan], float] = {}

    def score(s: SetData, plan: Plan) -> float:
        key = (s.name, plan)
        if key not in memo:
            memo[key] = score_plan(s, plan)
        return memo[key]

    rows = []
    for rule in rules:
        log(f"ablating {rule.name}")
        plans = {v: dataclasses.replace(base, **{rule.field: v}) for v in rule.values}
        table = {v: {s.name: score(s, p) for s, p in zip(sets, [plans[v]] * len(sets), strict=True)} for v in rule.values}
        reference = rule.off if rule.off is not None else getattr(base, rule.field)
        per_set: dict[str, Any] = {}
        for s in names:
            others = [n for n in names if n != s]
            # Best mean on the other sets; a tie goes to the reference (off, or the shipped value).
            chosen = max(rule.values, key=functools.partial(_mean_on, table, others=others, reference=reference))
            per_set[s] = {"chosen": chosen, "effect": round(table[chosen][s] - table[reference][s], 4)}
        effects = [per_set[s]["effect"] for s in names]
        helps = float(np.mean(effects)) > 0 and min(effects) >= -MAX_LOSS
        rows.append({
            "rule": rule.name, "setting": rule.field, "where": rule.where, "shipped": getattr(base, rule.field),
            "reference": reference, "constant": rule.off is None,
            "values": {str(v): {n: round(table[v][n], 4) for n in names} for v in rule.values},
            "left_out": per_set, "mean_effect": round(float(np.mean(effects)), 4), "worst": round(min(effects), 4),
            "verdict": ("keep" if helps else "remove") if rule.off is not None else
                       ("keep shipped" if min(effects) >= -MAX_LOSS else "retune"),
        })
    return {"sets": names, "metrics": {s.name: s.metric for s in sets}, "max_loss": MAX_LOSS, "rules": rows}


def bm25s_scores(sets: Sequence[SetData]) -> dict[str, float]:
    return {s.name: round(score_rows(s, s.bm25s), 4) for s in sets}
