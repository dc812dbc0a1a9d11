"""First numbers for the core (issue 2): index build time and p50 search latency by mode, with the
query-embedding time alone measured in the same run, on the bundled sample catalog and on the 883 real
Agent Skills of ../shared/data/skills-catalog.

Knobs (environment):
    SKILLS_CATALOG   folder of real skills (default ../shared/data/skills-catalog)
    REPEATS          timed passes over the query list per mode (default 5)

Run:  .venv/bin/python benchmarks/core_numbers.py
Writes benchmarks/results/core-numbers.md and .json.
Output: an experiment record behind a past choice, not a current result; the last run is in git at 789a3b3.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from skillsearch.core.domain import Principal
from skillsearch.core.settings import Settings
from skillsearch.retrieval.minilm import MiniLMEncoder
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.service import Catalog

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[2]
CATALOG = Path(os.environ.get("SKILLS_CATALOG", ROOT.parent / "shared" / "data" / "skills-catalog"))
REPEATS = int(os.environ.get("REPEATS", "5"))
QUERIES = [
    "audit a web page for accessibility problems", "write unit tests for a python module",
    "deploy a service to kubernetes", "design a REST API", "find the commit that broke the build",
    "clean up a messy CSV with pandas", "set up continuous integration", "write a changelog for a release",
    "debug a slow SQL query", "create a 2D platformer game", "summarise a scientific paper",
    "rotate TLS certificates before they expire", "analyse an A/B test", "refactor a React component",
    "on-call incident triage", "generate a marketing email", "profile python code", "docker multi-stage build",
    "translate documentation to French", "review a pull request",
]


def p50(xs: list[float]) -> float:
    return round(statistics.median(xs), 3)


def measure(name: str, setup: Callable[[Path, MiniLMEncoder], Catalog]) -> dict[str, object]:
    encoder = MiniLMEncoder()
    encoder.loading.get()  # read on first use: else the build time below includes the model load
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        catalog = setup(Path(tmp), encoder)
        build_s = time.perf_counter() - started
        op = Principal.operator()
        docs = catalog.store.count("active")
        embed = []
        for _ in range(REPEATS):
            for q in QUERIES:
                t = time.perf_counter()
                encoder.encode_query(q)
                embed.append((time.perf_counter() - t) * 1000)
        result: dict[str, object] = {"catalog": name, "skills": docs, "build_seconds": round(build_s, 2),
                                     "skills_per_second": round(docs / build_s, 1),
                                     "query_embedding_p50_ms": p50(embed)}
        for mode in ("lexical", "semantic", "hybrid"):
            times = []
            for rep in range(REPEATS):
                for q in QUERIES:
                    # A fresh string per pass and mode so the LRU query cache does not hide the encoder's cost.
                    text = f"{q} ({mode} {rep})"
                    t = time.perf_counter()
                    catalog.search(op, SearchRequest(text, mode=mode))
                    times.append((time.perf_counter() - t) * 1000)
            result[f"{mode}_p50_ms"] = p50(times)
        cached = []
        for q in QUERIES:
            catalog.search(op, SearchRequest(q))
            t = time.perf_counter()
            catalog.search(op, SearchRequest(q))
            cached.append((time.perf_counter() - t) * 1000)
        result["hybrid_cached_p50_ms"] = p50(cached)
        catalog.close()
    return result


def sample(tmp: Path, encoder: MiniLMEncoder) -> Catalog:
    return Catalog.open(Settings(data_dir=tmp), encoder=encoder)


def real(tmp: Path, encoder: MiniLMEncoder) -> Catalog:
    catalog = Catalog.open(Settings(data_dir=tmp, seed_sample=False), encoder=encoder)
    catalog.import_path(CATALOG, "skills-catalog", "sub:community")
    return catalog


def main() -> None:
    rows = [measure("bundled sample", sample), measure("skills-catalog (real)", real)]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    meta = {"command": ".venv/bin/python benchmarks/core_numbers.py", "commit": commit,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
            "encoder": "all-MiniLM-L6-v2 (CPU)", "queries": len(QUERIES), "repeats": REPEATS}
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "core-numbers.json").write_text(json.dumps({"meta": meta, "results": rows}, indent=2) + "\n")
    cols = ["catalog", "skills", "build_seconds", "skills_per_second", "query_embedding_p50_ms",
            "lexical_p50_ms", "semantic_p50_ms", "hybrid_p50_ms", "hybrid_cached_p50_ms"]
    lines = ["# Core numbers: build and search latency\n", *(f"- {k}: {v}" for k, v in meta.items()), "",
             "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    (out / "core-numbers.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
