"""Latency at catalog scale, through ``skillsearch bench latency``.

Knobs: SIZES (synthetic catalog sizes, plus "real" for the 883 Agent Skills), DATA (text pool, queries and
the real catalog), STAND_IN_ABOVE (above this size, texts missing from the embedding cache get stand-in
vectors instead of an hour of encoding; see skillsearch/bench/latency.py).

    python benchmarks/latency.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from skillsearch.cli import main

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SIZES = ["1000", "real", "10000", "100000"]
STAND_IN_ABOVE = 20_000

if __name__ == "__main__":
    sys.exit(main(["bench", "latency", "--data-root", str(DATA), "--stand-in-above", str(STAND_IN_ABOVE),
                   *[a for s in SIZES for a in ("--skills", s)]]))
