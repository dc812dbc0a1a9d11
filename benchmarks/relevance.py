"""Relevance on the evaluation sets (what ``make bench`` runs; ``skillsearch bench relevance`` is the same
harness, ``skillsearch.bench.relevance``, one dataset at a time).

Knobs: DATA (folder holding metatool/ and sealtools/), SPLIT (report on test; tune on dev only),
MAX_QUERIES per dataset (MetaTool: the first 3,000 test queries by id, as the anchors in
``../shared/data/README.md``; None = all). Results land in benchmarks/results/relevance-<dataset>-<split>.*

    python benchmarks/relevance.py [dev|test]
"""

from __future__ import annotations

import sys
from pathlib import Path

from skillsearch.bench.relevance import RelevanceOptions, run_relevance
from skillsearch.bench.report import to_markdown, write_results

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SPLIT = sys.argv[1] if len(sys.argv) > 1 else "test"
MAX_QUERIES: dict[str, int | None] = {"metatool": 3000, "sealtools": None}
RESULTS = Path("benchmarks/results")

if __name__ == "__main__":
    for name, limit in MAX_QUERIES.items():
        options = RelevanceOptions(dataset=DATA / name, split=SPLIT, max_queries=limit,
                                   command=f"python benchmarks/relevance.py {SPLIT}")
        report = run_relevance(options)
        report["files"] = [str(p) for p in write_results(report, RESULTS, f"relevance-{name}-{SPLIT}")]
        print(to_markdown(report))
