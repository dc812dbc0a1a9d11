"""Relevance on the evaluation sets, through ``skillsearch bench relevance`` (what ``make bench`` runs).

Knobs: DATA (folder holding metatool/ and sealtools/), SPLIT (report on test; tune on dev only),
MAX_QUERIES per dataset (MetaTool: the first 3,000 test queries by id, as the anchors in
``../shared/data/README.md``; None = all). Results land in benchmarks/results/relevance-<dataset>-<split>.*

    python benchmarks/relevance.py [dev|test]
"""

from __future__ import annotations

import sys
from pathlib import Path

from skillsearch.cli import main

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SPLIT = sys.argv[1] if len(sys.argv) > 1 else "test"
MAX_QUERIES: dict[str, int | None] = {"metatool": 3000, "sealtools": None}

if __name__ == "__main__":
    code = 0
    for name, limit in MAX_QUERIES.items():
        argv = ["bench", "relevance", "--dataset", str(DATA / name), "--split", SPLIT]
        code |= main(argv + (["--max-queries", str(limit)] if limit else []))
    sys.exit(code)
