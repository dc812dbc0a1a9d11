"""Latency at catalog scale (``skillsearch.bench.latency``; ``skillsearch bench latency`` is the same harness).

Knobs: SIZES (synthetic catalog sizes, plus "real" for the 883 Agent Skills), DATA (text pool, queries and
the real catalog), STAND_IN_ABOVE (above this size, texts missing from the embedding cache get stand-in
vectors instead of an hour of encoding; see skillsearch/bench/latency.py).

    python benchmarks/latency.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from skillsearch.bench.latency import run_latency
from skillsearch.bench.report import to_markdown, write_results

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SIZES = ["1000", "real", "10000", "100000"]
STAND_IN_ABOVE = 20_000

if __name__ == "__main__":
    report = run_latency(SIZES, data_root=DATA, cache_dir=Path("benchmarks/.cache"),
                         stand_in_above=STAND_IN_ABOVE, command="python benchmarks/latency.py",
                         log=lambda s: print(s, file=sys.stderr, flush=True))
    report["files"] = [str(p) for p in write_results(report, Path("benchmarks/results"), "latency")]
    print(to_markdown(report))
