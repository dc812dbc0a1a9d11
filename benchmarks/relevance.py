"""Relevance on the evaluation sets (what ``make bench`` runs; ``skillsearch bench relevance`` is the same
harness, ``skillsearch.bench.relevance``, one dataset at a time).

Knobs: --data-root (folder holding metatool/ and sealtools/; default SKILLSEARCH_BENCH_DATA when set, else
``../shared/data`` beside the repository, as ``skillsearch bench``), the split argument (report on test; tune on dev only),
MAX_QUERIES per dataset (MetaTool: the first 3,000 test queries by id, as the anchors in
``../shared/data/README.md``; None = all). Results land in benchmarks/results/relevance-<dataset>-<split>.*

    python benchmarks/relevance.py [dev|test] [--data-root DIR]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from skillsearch.bench.relevance import RelevanceOptions, run_relevance
from skillsearch.bench.report import to_markdown, write_results
from skillsearch.bench.script import run_script
from skillsearch.cli.common import progress_factory

DATA = os.environ.get("SKILLSEARCH_BENCH_DATA") or str(Path(__file__).resolve().parents[2] / "shared" / "data")
MAX_QUERIES: dict[str, int | None] = {"metatool": 3000, "sealtools": None}
RESULTS = Path("benchmarks/results")


def main() -> None:
    parser = argparse.ArgumentParser(description="Relevance on MetaTool (first 3,000 queries) and Seal-Tools.")
    parser.add_argument("split", nargs="?", default="test", choices=["dev", "test", "all"],
                        help="the qrels split (default test; tune on dev)")
    parser.add_argument("--data-root", default=DATA,
                        help="folder with metatool/ and sealtools/ (default: %(default)s, from SKILLSEARCH_BENCH_DATA"
                             " when set)")
    args = parser.parse_args()
    split, root = args.split, Path(args.data_root)
    for name, limit in MAX_QUERIES.items():
        options = RelevanceOptions(dataset=root / name, split=split, max_queries=limit,
                                   command=f"python benchmarks/relevance.py {split} --data-root {root}")
        report = run_relevance(options, progress=progress_factory(True))
        report["files"] = [str(p) for p in write_results(report, RESULTS, f"relevance-{name}-{split}")]
        print(to_markdown(report))


if __name__ == "__main__":
    run_script(main)
