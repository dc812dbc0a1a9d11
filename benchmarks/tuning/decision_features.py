"""Which features should the "does anything fit?" request model read? (dev splits only)

    PYTHONPATH=. .venv/bin/python benchmarks/tuning/decision_features.py [--reuse]

Collects every dev hit once (``skillsearch.bench.decision.load_or_collect``: the skills dev set, MetaTool dev
first 2,000, Seal-Tools dev, searched through ``Catalog.search`` with abstention off; ``--reuse`` reads the
hits the last collection saved), then fits the request model (and its threshold: at most 1 % of each set's
positives abstain) over each feature set below and prints, per set: the skills negatives abstaining and the
positives abstaining in-sample, in 5-fold CV on the skills set, and MetaTool's positives abstaining when
the model and threshold are fitted without MetaTool.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from skillsearch.bench.cache import BenchEncoder
from skillsearch.bench.decision import fit_decision, load_or_collect
from skillsearch.retrieval.confidence import HIT_FEATURES
from skillsearch.retrieval.encoder import make_encoder

ROOT = Path(__file__).resolve().parents[2]
# The request model shipped before the catalog-relative features (cos_bg is the one kept).
BASE: tuple[str, ...] = ("cos", "cos_margin", "lex", "lex_top", "coverage", "agree")
SETS: dict[str, tuple[str, ...]] = {
    "shipped (6)": BASE,
    "+ cos_z": (*BASE, "cos_z"),
    "+ cos_tail": (*BASE, "cos_tail"),
    "+ cos_bg": (*BASE, "cos_bg"),
    "+ cos_z, cos_tail": (*BASE, "cos_z", "cos_tail"),
    "+ cos_z, cos_bg": (*BASE, "cos_z", "cos_bg"),
    "+ cos_z, cos_tail, cos_bg": (*BASE, "cos_z", "cos_tail", "cos_bg"),
    "cos_z instead of cos": ("cos_z", *BASE[1:]),
    "cos_z, cos_tail instead of cos, margin": ("cos_z", "cos_tail", *BASE[2:]),
    "+ cos_tail, cos_bg": (*BASE, "cos_tail", "cos_bg"),
    "semantic only: cos, cos_tail, cos_bg": ("cos", "cos_tail", "cos_bg"),
    "cos, cos_tail, cos_bg, cos_margin": ("cos", "cos_tail", "cos_bg", "cos_margin"),
    "cos, cos_tail, cos_bg, coverage": ("cos", "cos_tail", "cos_bg", "coverage"),
    "cos, cos_tail, cos_bg, lex": ("cos", "cos_tail", "cos_bg", "lex"),
    "cos, cos_tail, cos_bg, lex, coverage": ("cos", "cos_tail", "cos_bg", "lex", "coverage"),
    "+ cos_z, cos_tail, without agree": (*BASE[:-1], "cos_z", "cos_tail"),
    "+ cos_z, cos_tail, without agree, margin": ("cos", "lex", "lex_top", "coverage", "cos_z", "cos_tail"),
}


def _row(label: str, d: dict) -> str:  # type: ignore[type-arg]
    dev, cv, lodo = d["dev"], d["cv_skills_5fold"]["skills"], d["leave_one_dataset_out"]
    return (f"| {label} | {dev['skills']['abstention']:.3f} | {dev['skills']['false_abstention']:.4f} |"
            f" {dev['metatool']['false_abstention']:.4f} | {dev['sealtools']['false_abstention']:.4f} |"
            f" {cv['abstention']:.3f} | {cv['false_abstention']:.4f} |"
            f" {lodo['metatool']['metatool']['false_abstention']:.3f} |"
            f" {lodo['sealtools']['sealtools']['false_abstention']:.3f} | {d['request']['no_match_below']} |")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-root", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--cache-dir", default=str(ROOT / "benchmarks" / ".cache"))
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument("--only", default="", help="semicolon-separated labels of the sets to fit (default: all)")
    args = parser.parse_args()
    cache = Path(args.cache_dir)
    hits = load_or_collect(Path(args.data_root), cache, BenchEncoder(make_encoder("minilm"), cache), args.reuse,
                           lambda s: print(s, file=sys.stderr, flush=True))
    print("| request features | skills neg. abstain | skills pos. abstain | MetaTool pos. | Seal-Tools pos. |"
          " CV neg. | CV pos. | MetaTool pos., fitted without it | Seal-Tools pos., fitted without it |"
          " no_match_below |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    only = set(args.only.split(";")) if args.only else None
    for label, features in SETS.items():
        if only is not None and label not in only:
            continue
        print(_row(label, fit_decision(hits, HIT_FEATURES, features)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
