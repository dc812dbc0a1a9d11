"""Fit the "does anything fit?" decision on the dev sets and ship it (``skillsearch/retrieval/decisions.json``).

    PYTHONPATH=. python benchmarks/fit_decision.py [--encoder minilm|e5] [--data-root ../shared/data]
        [--features cos,lex_top,...] [--request-features cos,cos_bg,...] [--reuse] [--dry-run]

Searches every dev request of the skills dev set, MetaTool dev (first 2,000) and Seal-Tools dev through
``Catalog.search`` with abstention off, fits the logistic model (``skillsearch/bench/decision.py``), and
writes the fitted numbers for the encoder into ``skillsearch/retrieval/decisions.json`` plus the report
``benchmarks/results/decision-fit-dev.{json,md}`` (fitted and cross-validated numbers). ``--dry-run`` only
prints the report. Indexes built before a refit are recalibrated when they are next opened.

``--encoder e5`` fits the decision of multilingual-e5-small, which answers ``--encoder e5`` indexes and the
non-English requests of ``minilm+e5`` ones (its route is calibrated as a single e5 index is): every dev request
is searched through a single e5 index, English ones included, so the fit sees the e5 model's scores on all three
sets (report ``decision-fit-dev-e5.{json,md}``). ``--confidence-only`` ships the hit model with a request
threshold of 0 (the fitted one stays in the report): its hits get confidences, and only the floor rule says
``no_match`` (e5 is shipped so, ``docs/benchmarks.md`` § Languages says why).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from skillsearch.bench.decision import run_fit
from skillsearch.retrieval.confidence import HIT_FEATURES, REQUEST_FEATURES
from skillsearch.retrieval.encoder import make_encoder

ROOT = Path(__file__).resolve().parents[1]
DECISIONS = ROOT / "skillsearch" / "retrieval" / "decisions.json"
KEEP = ("version", "features", "mean", "scale", "coef", "intercept", "request", "fitted_on")


def _md(report: dict) -> str:  # type: ignore[type-arg]
    d = report["decision"]
    lines = [f"## decision fit: {report['encoder']}", "", f"- command: `{report['command']}`",
             f"- commit {report['commit']}, {report['date']}, {report['machine']} (1-min load"
             f" {report['load_average_1m']}; the machine was shared)",
             f"- requests: {json.dumps(d['fitted_on'])}; features {', '.join(d['features'])}",
             f"- hit model (standardised features): {json.dumps(dict(zip(d['features'], d['coef'], strict=True)))},"
             f" intercept {d['intercept']}",
             f"- request model: {json.dumps(dict(zip(d['request']['features'], d['request']['coef'], strict=True)))},"
             f" intercept {d['request']['intercept']}; no_match below {d['request']['no_match_below']}"
             + (f" (shipped: {report['shipped_no_match_below']}, confidence only)"
                if "shipped_no_match_below" in report else ""), "",
             "| evaluation | set | positives | false abstention | negatives | abstention |",
             "| --- | --- | --- | --- | --- | --- |"]
    def rows(label: str, block: dict) -> None:  # type: ignore[type-arg]
        for name, v in block.items():
            if isinstance(v, dict) and "positives" in v:
                lines.append(f"| {label} | {name} | {v['positives']} | {v['false_abstention']} | {v['negatives']}"
                             f" | {v['abstention']} |")
    rows("fitted on all (in-sample)", d["dev"])
    rows("skills 5-fold CV", d["cv_skills_5fold"])
    for name, block in d["leave_one_dataset_out"].items():
        rows(f"fitted without {name}", block)
    lines += ["", "| evaluation | hits with confidence >= 0.8 | share right |", "| --- | --- | --- |"]
    lines += [f"| in-sample, {k.removeprefix('confidence>=0.8').strip() or 'all sets'} | {v['hits']} | {v['right']} |"
              for k, v in d["dev"].items() if k.startswith("confidence>=0.8")]
    lines += [
              f"| skills 5-fold CV | {d['cv_skills_5fold']['confidence>=0.8']['hits']} |"
              f" {d['cv_skills_5fold']['confidence>=0.8']['right']} |"]
    for name, block in d["leave_one_dataset_out"].items():
        lines.append(f"| fitted without {name} | {block['confidence>=0.8']['hits']} | {block['confidence>=0.8']['right']} |")
    return "\n".join([*lines, ""])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--encoder", choices=("minilm", "e5"), default="minilm", help="the model to fit for")
    parser.add_argument("--data-root", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--cache-dir", default=str(ROOT / "benchmarks" / ".cache"))
    parser.add_argument("--features", default=",".join(HIT_FEATURES), help="the hit model's features")
    parser.add_argument("--request-features", default=",".join(REQUEST_FEATURES), help="the request model's")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--confidence-only", action="store_true", help="ship a request threshold of 0")
    parser.add_argument("--reuse", action="store_true", help="refit on the hits the last run collected")
    args = parser.parse_args()
    features = [f for f in args.features.split(",") if f]
    request_features = [f for f in args.request_features.split(",") if f]
    report = run_fit(Path(args.data_root), Path(args.cache_dir), make_encoder(args.encoder), features=features,
                     request_features=request_features,
                     log=lambda s: print(s, file=sys.stderr, flush=True),
                     command="python " + shlex.join(["benchmarks/fit_decision.py", *sys.argv[1:]]), reuse=args.reuse)
    print(_md(report))
    if args.dry_run:
        return 0
    shipped = json.loads(DECISIONS.read_text(encoding="utf-8"))
    shipped[report["encoder"]] = {k: report["decision"][k] for k in KEEP}
    if args.confidence_only:
        shipped[report["encoder"]]["request"] = {**report["decision"]["request"], "no_match_below": 0.0}
        report["shipped_no_match_below"] = 0.0
    DECISIONS.write_text(json.dumps(shipped, indent=2) + "\n", encoding="utf-8")
    out = ROOT / "benchmarks" / "results"
    stem = "decision-fit-dev" if args.encoder == "minilm" else f"decision-fit-dev-{args.encoder}"
    (out / f"{stem}.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (out / f"{stem}.md").write_text(_md(report), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
