"""``skillsearch bench lodo``: collect the dev sets once, ablate every rule, fit the decision, one report.

The collected retriever outputs are kept in ``<cache>/lodo-<encoder>.pkl`` (our own file) so that a
rerun with ``--reuse`` only re-scores; a change of the search code needs a fresh collection.
"""

from __future__ import annotations

import pickle
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from skillsearch.bench.cache import BenchEncoder, folder_name
from skillsearch.bench.decision import MAX_FALSE_REFUSAL
from skillsearch.bench.lodo import SHIPPED, TODAY, bm25s_scores, lodo_table, score_plan
from skillsearch.bench.lodo_data import DATASETS, METATOOL_QUERIES, SetData, collect_set
from skillsearch.bench.report import head_commit, run_metadata
from skillsearch.retrieval.encoders import make_encoder
from skillsearch.retrieval.indexer import ProgressFactory
from skillsearch.retrieval.minilm import MiniLMEncoder

__all__ = ["collect_sets", "lodo_markdown", "run_lodo", "saved_set"]

ENCODER = "minilm"  # the dev sets are collected with MiniLM (English requests)


def saved_set(cache_dir: Path, name: str) -> Path:
    """Where a collected set is kept for ``--reuse``."""
    return cache_dir / f"lodo-{name}-{folder_name(MiniLMEncoder.name)}.pkl"


def collect_sets(data_root: Path, cache_dir: Path, names: Sequence[str] = DATASETS, reuse: bool = False,
                 log: Callable[[str], None] = lambda _s: None,
                 progress: ProgressFactory | None = None) -> list[SetData]:
    encoder = BenchEncoder(make_encoder(ENCODER), cache_dir)
    out = []
    for name in names:
        saved = saved_set(cache_dir, name)
        if reuse and saved.is_file():
            out.append(pickle.loads(saved.read_bytes()))  # our own cache file, written below
            continue
        data = collect_set(name, data_root, encoder, cache_dir, log, progress)
        cache_dir.mkdir(parents=True, exist_ok=True)
        saved.write_bytes(pickle.dumps(data))
        out.append(data)
    return out


def run_lodo(data_root: Path, cache_dir: Path, reuse: bool = False, command: str | None = None,
             log: Callable[[str], None] = lambda _s: None, names: Sequence[str] = DATASETS,
             progress: ProgressFactory | None = None) -> dict[str, Any]:
    """``progress`` counts each set's import and the embedding of its requests (as ``bench relevance``)."""
    started, commit = time.time(), head_commit()  # the code that runs: HEAD may move before the report
    sets = collect_sets(data_root, cache_dir, names, reuse=reuse, log=log, progress=progress)
    ablation = lodo_table(sets, log=log)
    hybrid = {"today": {s.name: round(score_plan(s, TODAY), 4) for s in sets},
              "shipped": {s.name: round(score_plan(s, SHIPPED), 4) for s in sets},
              "bm25s": bm25s_scores(sets)}
    from skillsearch.bench.decision import lodo_decision

    decision = lodo_decision(sets, SHIPPED, log=log)
    return {
        **run_metadata(command, commit), "kind": "lodo", "encoder": MiniLMEncoder.name,
        "split": "dev", "requests": {s.name: len(s.qids) for s in sets},
        "positives": {s.name: int(s.positive.sum()) for s in sets},
        "metatool_sample": f"first {METATOOL_QUERIES} dev requests by id", "hybrid": hybrid,
        "ablation": ablation, "decision": decision, "seconds": round(time.time() - started, 1),
    }


def _cell(v: Any) -> str:
    return f"{v:+.4f}" if isinstance(v, float) else str(v)


def lodo_markdown(report: Mapping[str, Any]) -> str:
    ab = report["ablation"]
    sets = ab["sets"]
    lines = [
        "# Leave-one-dataset-out ablation (dev splits)", "",
        f"Command: `{report.get('command')}`  ", f"Commit: {report.get('commit')}, {report.get('date')}, "
        f"{report.get('machine')}" + (f" (1-min load average {report['load_average_1m']} when written)"
                                       if report.get("load_average_1m") is not None else "") + ".", "",
        "Metric: " + ", ".join(f"{n} {m}" for n, m in ab["metrics"].items()) + "; requests: "
        + ", ".join(f"{n} {k}" for n, k in report["requests"].items()) + f" ({report['metatool_sample']});"
        f" encoder {report.get('encoder')}.", "",
        "## Hybrid", "", "| | " + " | ".join(sets) + " |", "|---|" + "---|" * len(sets),
    ]
    for label, row in report["hybrid"].items():
        lines.append(f"| {label} | " + " | ".join(f"{row[s]:.4f}" for s in sets) + " |")
    lines += ["", "## Rules", "",
              "Each cell: the value chosen on the *other* sets, and its effect on the set left out against the rule"
              " off (a constant: against the shipped value). A rule stays when the mean effect is positive and"
              f" no set loses more than {ab['max_loss']}.", "",
              "| rule | shipped | " + " | ".join(sets) + " | mean | verdict |", "|---|---|" + "---|" * len(sets) + "---|---|"]
    for r in ab["rules"]:
        cells = " | ".join(f"{r['left_out'][s]['chosen']}: {r['left_out'][s]['effect']:+.4f}" for s in sets)
        lines.append(f"| {r['rule']} | {r['shipped']} | {cells} | {r['mean_effect']:+.4f} | {r['verdict']} |")
    lines += ["", "### Every value on every set", ""]
    for r in ab["rules"]:
        lines.append(f"- {r['rule']} (`{r['setting']}`): " + "; ".join(
            f"{v}: " + ", ".join(f"{s} {x:.4f}" for s, x in row.items()) for v, row in r["values"].items()))
    d = report.get("decision")
    if d:
        lines += ["", "## The decision, each set left out", "", d.get("summary", ""), "",
                  "Refusals: the top hit's fit under the threshold fitted on the other sets, or the floor rule"
                  " (no candidate shares a word and the top cosine is under the encoder's floor).", "",
                  "| left out | answerable | false refusals | of which floor | negatives | no_match | of which floor |"
                  " threshold | hits at confidence >= 0.8: right |", "|---|---|---|---|---|---|---|---|---|"]
        for s, b in d["left_out"].items():
            f = b["floor_only"]
            neg = f"{b['negatives']} | {b['no_match']:.3f} | {f['no_match']:.3f}" if b["negatives"] else "- | - | -"
            right = b["confident"]["right"]
            lines.append(f"| {s} | {b['positives']} | {b['false_refusals']:.4f} | {f['false_refusals']:.4f} | {neg} | "
                         f"{b['no_match_below']} | {'-' if right is None else f'{right:.3f}'} ({b['confident']['hits']}) |")
        lines += ["", f"Shipped (fitted on every set above): threshold {d['model']['no_match_below']}; "
                  + "; ".join(f"{m}: false refusals {v['false_refusals']:.4f}"
                              + (f", negatives no_match {v['no_match']:.3f}" if v["negatives"] else "")
                              for m, v in d["fitted_on_all"].items()) + "."]
        variants = d.get("refusals", {})
        if variants:
            left = list(next(iter(variants.values()))["left_out"])
            negs = [s for s in left if next(iter(variants.values()))["left_out"][s]["negatives"]]
            lines += ["", "Candidate fits for `no_match` (the top hit's features times fixed weights; `confidence`: the"
                      " rule before, the model's probability), each at the largest quantile whose worst left-out false"
                      f" refusals are at most {MAX_FALSE_REFUSAL}; `{d.get('refusal')}` ships.", "",
                      _row(["fit", "quantile", "worst false refusals", *(f"{s} false refusals" for s in left),
                            *(f"{s} negatives no_match" for s in negs)]),
                      "|---|---|---|" + "---|" * (len(left) + len(negs))]
            for label, v in variants.items():
                lines.append(_row([label, str(v["quantile"]), f"{v['worst']:.4f}",
                                   *(f"{v['left_out'][s]['false_refusals']:.4f}" for s in left),
                                   *(f"{v['left_out'][s]['no_match']:.3f}" for s in negs)]))
        curve = d.get("by_quantile", {})
        if curve:
            with_negatives = [s for s, b in d["left_out"].items() if b["negatives"]]
            lines += ["", "Trade-off (each threshold quantile, every set left out in turn): the worst left-out false"
                      " refusals against the left-out negatives answered `no_match`.", "",
                      _row(["quantile", "worst false refusals", *(f"{s} false refusals" for s in curve[next(iter(curve))]),
                            *(f"{s} negatives no_match" for s in with_negatives)]),
                      "|---|---|" + "---|" * (len(curve[next(iter(curve))]) + len(with_negatives))]
            for q, blocks in curve.items():
                worst = max(b["false_refusals"] for b in blocks.values())
                lines.append(_row([str(q), f"{worst:.4f}", *(f"{b['false_refusals']:.4f}" for b in blocks.values()),
                                   *(f"{blocks[s]['no_match']:.3f}" for s in with_negatives)]))
        lines += ["", "Reliability per left-out set (confidence bin: hits, share right):", ""]
        for s, b in d["left_out"].items():
            lines.append(f"- {s}: " + "; ".join(
                f"{row['bin']}: {row['hits']}, {'-' if row['right'] is None else format(row['right'], '.2f')}"
                for row in b["reliability"] if row["hits"]))
    return "\n".join(lines) + "\n"


def _row(cells: list[str]) -> str:
    """One Markdown table row: as many cells as the header's separator counts, whatever sets are in the run
    (a run without the skills set has no negatives' columns, and left an empty one)."""
    return "| " + " | ".join(cells) + " |"
