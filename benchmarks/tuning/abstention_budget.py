"""How much false abstention should the "does anything fit?" threshold allow each dev set? (dev splits only)

    PYTHONPATH=. .venv/bin/python benchmarks/tuning/abstention_budget.py [--reuse] [--budgets 0.01,0.02]

The request model is the shipped one (``REQUEST_FEATURES``); only ``no_match_below`` moves: the largest
threshold under which at most the budget of *each* dev set's positive requests fall (``fit_decision``'s
``max_false``). Per budget it prints the skills negatives abstaining (in-sample and in 5-fold CV), the
skills positives abstaining, MetaTool's and Seal-Tools' positives abstaining, and what those abstentions cost
each tool set's dev nDCG@10: an abstained request scores 0, as it does in ``bench relevance``, so the cost is
the mean over the set of the abstained requests' nDCG@10 (binary qrels, from the saved top 10).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from skillsearch.bench.beir import load_beir
from skillsearch.bench.cache import BenchEncoder
from skillsearch.bench.decision import DevHits, fit_decision, load_or_collect, request_scores
from skillsearch.bench.metrics import per_query
from skillsearch.bench.report import write_script_report
from skillsearch.retrieval.encoder import make_encoder

ROOT = Path(__file__).resolve().parents[2]


def ndcg_at_10(hits: DevHits, name: str, relevant: dict[str, int]) -> dict[str, float]:
    """Each request's nDCG@10 from its saved top 10, scored by ``bench.metrics`` (trec_eval) as ``bench
    relevance`` scores it. The saved hits carry labels, not document ids, so each request is judged on
    stand-in ids: its ``n`` relevant documents, and its wanted hits named after them in rank order."""
    judged = {q: {f"relevant-{j}": 1 for j in range(n)} for q, n in relevant.items()}
    run: dict[str, list[str]] = {q: [] for q in relevant}
    sel = np.flatnonzero(hits.dataset == name)
    for i in sel[np.lexsort((hits.rank[sel], hits.qid[sel]))]:
        ranked = run[str(hits.qid[i])]
        wanted = sum(d.startswith("relevant-") for d in ranked)
        ranked.append(f"relevant-{wanted}" if hits.y[i] else f"other-{hits.rank[i]}")
    return {q: v["ndcg@10"] for q, v in per_query(judged, run).items()}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-root", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--cache-dir", default=str(ROOT / "benchmarks" / ".cache"))
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument("--budgets", default="0.005,0.01,0.015,0.02,0.03,0.04,0.05,0.07")
    args = parser.parse_args()
    cache = Path(args.cache_dir)
    hits = load_or_collect(Path(args.data_root), cache, BenchEncoder(make_encoder("minilm"), cache), args.reuse,
                           lambda s: print(s, file=sys.stderr, flush=True))
    per_request: dict[str, dict[str, float]] = {}
    for name in ("metatool", "sealtools"):
        qrels = load_beir(Path(args.data_root) / name, "dev").qrels
        relevant = {q: sum(1 for s in qrels[q].values() if s > 0) for q in hits.requests[name]}
        per_request[name] = ndcg_at_10(hits, name, relevant)
    rows = []
    for budget in (float(b) for b in args.budgets.split(",")):
        d = fit_decision(hits, max_false=budget)
        below = d["request"]["no_match_below"]
        tops = request_scores(d["request"], hits, np.ones(len(hits.y), bool))
        lost = {name: sum(v for q, v in ndcg.items() if tops.get((name, q), 0.0) < below) / len(ndcg)
                for name, ndcg in per_request.items()}
        dev, cv = d["dev"], d["cv_skills_5fold"]["skills"]
        rows.append({
            "budget": f"{budget:.3f}", "no_match_below": below,
            "skills neg. abstain (in-sample / CV)": f"{dev['skills']['abstention']:.3f} / {cv['abstention']:.3f}",
            "skills pos. abstain (in-sample / CV)":
                f"{dev['skills']['false_abstention']:.4f} / {cv['false_abstention']:.4f}",
            "MetaTool pos. abstain": f"{dev['metatool']['false_abstention']:.4f}",
            "MetaTool nDCG@10 lost": f"{lost['metatool']:.4f}",
            "Seal-Tools pos. abstain": f"{dev['sealtools']['false_abstention']:.4f}",
            "Seal-Tools nDCG@10 lost": f"{lost['sealtools']:.4f}",
        })
        print(rows[-1], file=sys.stderr, flush=True)
    command = "PYTHONPATH=. python benchmarks/tuning/abstention_budget.py" + (" --reuse" if args.reuse else "")
    print(write_script_report(
        ROOT / "benchmarks" / "results", "abstention-budget-dev", "abstention budget of the request model (dev)",
        command, f"{len(hits.y)} hits of {sum(len(r) for r in hits.requests.values())} dev requests",
        rows, text_columns=0,
        notes=("request model as shipped (REQUEST_FEATURES); only no_match_below moves: the largest threshold "
               "under which at most the budget of each dev set's positive requests fall",
               "nDCG@10 lost: the mean over the set of the abstained requests' nDCG@10 (an abstained request "
               "scores 0 in bench relevance), from the saved top 10, binary qrels")), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
