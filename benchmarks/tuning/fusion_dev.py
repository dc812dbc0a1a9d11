"""Fusion method and semantic weight through the product's own search path, on the dev splits only.

Every (fusion, weight) runs through ``Catalog.search`` (``skillsearch.bench.dev``); prints nDCG@10 per
setting next to the lexical and semantic modes, and each setting's margin over the better single mode.

    PYTHONPATH=. python benchmarks/tuning/fusion_dev.py [metatool sealtools] [--data-root ../shared/data]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from skillsearch.bench.dev import dev_split, score_requests
from skillsearch.bench.script import run_script
from skillsearch.retrieval.search_types import SearchRequest

SETTINGS = [("lexical", None, None), ("semantic", None, None)] + [
    ("hybrid", fusion, w) for fusion in ("zscore", "minmax") for w in (0.55, 0.6, 0.65, 0.7, 0.75)
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="*", default=["metatool", "sealtools"])
    parser.add_argument("--data-root", type=Path, default=Path(__file__).resolve().parents[3] / "shared" / "data")
    args = parser.parse_args()
    out: dict[str, dict[str, float]] = {}
    for name in args.datasets:
        with dev_split(name, args.data_root) as split:
            for mode, fusion, weight in SETTINGS:
                def request(text: str, mode: str = mode, fusion: str | None = fusion,
                            weight: float | None = weight) -> SearchRequest:
                    return SearchRequest(text, limit=50, mode=mode, fusion=fusion, semantic_weight=weight)

                key = mode if fusion is None else f"{fusion} w={weight}"
                out.setdefault(key, {})[name] = score_requests(split, request)["ndcg@10"]
                print(f"{name:10s} {key:16s} ndcg@10={out[key][name]:.4f}", flush=True)
    best_single = {n: max(out["lexical"][n], out["semantic"][n]) for n in args.datasets}
    for key, scores in out.items():
        margins = {n: round(scores[n] - best_single[n], 4) for n in args.datasets}
        print(f"{key:16s} {json.dumps({n: round(v, 4) for n, v in scores.items()})} margin {margins}")


if __name__ == "__main__":
    run_script(main)
