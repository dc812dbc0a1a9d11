"""Multilingual benchmark (``skillsearch.bench.multilingual``: what each part measures). From the repository root:

    PYTHONPATH=. python benchmarks/multilingual.py all --out benchmarks/results/multilingual.json
    PYTHONPATH=. python benchmarks/multilingual.py devset --encoders minilm,e5,minilm+e5
    PYTHONPATH=. python benchmarks/multilingual.py beir --datasets metatool --max-queries 1000
    PYTHONPATH=. python benchmarks/multilingual.py speed --encoders minilm     # one encoder per process
    PYTHONPATH=. python benchmarks/multilingual.py routing | matrix
    PYTHONPATH=. python benchmarks/multilingual.py report --merge a.json b.json --out merged.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from skillsearch.bench import multilingual as ml
from skillsearch.bench.report import run_metadata
from skillsearch.bench.script import run_script

ROOT = Path(__file__).resolve().parents[1]
PARTS = {"devset": ml.part_devset, "beir": ml.part_beir, "speed": ml.part_speed, "routing": ml.part_routing,
         "matrix": ml.part_matrix}


def main(argv: Sequence[str] | None = None) -> int:
    from skillsearch.bench.report import run_started

    run_started()  # the commit its report names: HEAD as the run starts, not when it writes
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("part", choices=[*PARTS, "all", "report"])
    p.add_argument("--merge", nargs="*", default=[], help="(report) JSON result files to merge and render")
    p.add_argument("--encoders", default=",".join(ml.ENCODERS))
    p.add_argument("--datasets", default="metatool,sealtools")
    p.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "data")
    p.add_argument("--devset", type=Path, default=ROOT / "benchmarks" / "data" / "multilingual.jsonl")
    p.add_argument("--cache-dir", type=Path, default=ROOT / "benchmarks" / ".cache")
    p.add_argument("--max-queries", type=int, default=None, help="first N judged queries by id (default: all)")
    p.add_argument("--weights", action="store_true", help="sweep the semantic weight (dev qrels / dev set)")
    p.add_argument("--french-modes", action="store_true", help="compare the French field's modes")
    p.add_argument("--speed-queries", type=int, default=200)
    p.add_argument("--speed-full", action="store_true", help="time the build on sample + 883 real skills")
    p.add_argument("--out", type=Path, default=None, help="write JSON (and a .md beside it) here")
    args = p.parse_args(argv)
    options = ml.Options(
        devset=args.devset, data_root=args.data_root, cache_dir=args.cache_dir,
        encoders=[e for e in args.encoders.split(",") if e], datasets=[d for d in args.datasets.split(",") if d],
        max_queries=args.max_queries, weights=args.weights, french_modes=args.french_modes,
        speed_queries=args.speed_queries, speed_full=args.speed_full,
        log=lambda s: print(s, file=sys.stderr, flush=True))
    results: dict[str, Any] = run_metadata("python benchmarks/multilingual.py " + " ".join(argv or sys.argv[1:]))
    for name, part in PARTS.items():
        if args.part in (name, "all"):
            results[name] = part(options)
    for f in args.merge if args.part == "report" else []:
        merged = json.loads(Path(f).read_text(encoding="utf-8"))
        for k in PARTS:
            results.setdefault(k, {}).update(merged.get(k, {}))
        results.setdefault("sources", []).append({"file": f, "command": merged.get("command"), "date": merged.get("date")})
    text = json.dumps(results, indent=2, ensure_ascii=False)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
        args.out.with_suffix(".md").write_text(ml.render(results) + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    run_script(main)
