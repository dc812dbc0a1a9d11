"""Leaving a long request's most common terms out of its lexical query, on the dev splits only.

``skillsearch.retrieval.lexical`` drops the terms of a request of more than ``SHORT_REQUEST_TERMS`` terms
found in more than ``COMMON_TERM_SHARE`` of the documents (a speed rule: their posting lists are the longest
to walk). This replays the dev queries through ``Catalog.search`` (limit 50) with the rule off and at
several shares, and prints lexical and hybrid nDCG@10 / Recall@50, and how many requests lost a term.

    PYTHONPATH=. python benchmarks/tuning/common_terms.py [metatool sealtools] [--data-root ../shared/data]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from skillsearch.bench.dev import common_term_rule, dev_split, requests_losing_a_term, score_modes
from skillsearch.bench.script import run_script

# (label, share, short-request terms); share 1.0 never drops a term.
RULES = [("off", 1.0, 8), ("share 0.5, >8 terms", 0.5, 8), ("share 0.5, any length", 0.5, 0),
         ("share 0.25, >8 terms", 0.25, 8)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="*", default=["metatool", "sealtools"])
    parser.add_argument("--data-root", type=Path, default=Path(__file__).resolve().parents[3] / "shared" / "data")
    args = parser.parse_args()
    for name in args.datasets:
        with dev_split(name, args.data_root) as split:
            for label, share, short in RULES:
                with common_term_rule(share, short):
                    dropped = requests_losing_a_term(split)
                    for mode, m in score_modes(split, ("lexical", "hybrid")).items():
                        print(f"{name:10s} {label:22s} {mode:8s} ndcg@10={m['ndcg@10']:.4f} "
                              f"recall@50={m['recall@50']:.4f}  requests with a term left out: "
                              f"{dropped}/{len(split.texts)}", flush=True)


if __name__ == "__main__":
    run_script(main)
