"""The vector stage's first scan of a search, out of the caches: our kernel as built in this checkout against
the same file as it was at another commit (``--against``), paired in one run.

A search scans the int8 or int4 copy of a large index right after the model's forward pass has read some
90 MB of weights, so the copy is no longer in the caches; ``scan_kernels.py`` times the kernels with their
rows cached (each call repeats the last). Here each timed scan follows a read of ``--evict-mb`` of other
memory (numpy summing a buffer), and the same scan repeated at once is timed beside it ("cached"). Both
builds are timed in turn on the same rows: ``--against`` names a commit whose ``skillsearch/retrieval/_int8dots.c``
is compiled here with the package's flags (``pyproject.toml``: ``-O3 -ffp-contract=off``) and loaded beside
this checkout's (installed) module.

Rows: random int8 codes of 384 dimensions and their int4 tiles (``to_int4``), scanned on two threads as the
stage does (``vector_scan._in_runs``): the int8 scan keeps each row's best product and their sum
(``best``), the int4 scan each row's finished score (``best4`` with scales, as ``vector_scan.int4_scan``).

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/cold_scan.py --against 6a2a5d4`` (writes
``benchmarks/results/cold-scan.{md,json}``). Not collected by pytest.
Output: an experiment record behind a past choice, not a current result; the last run is in git at 3c97427.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from skillsearch.bench.report import machine, write_script_report  # noqa: E402
from skillsearch.retrieval import _int8dots  # noqa: E402
from skillsearch.retrieval.vector_scan import SCAN_THREADS, _in_runs  # noqa: E402

DIM = 384
SOURCE = "skillsearch/retrieval/_int8dots.c"
FLAGS = ["-O3", "-ffp-contract=off"]  # pyproject.toml's extra-compile-args


def built_at(commit: str, folder: Path) -> ModuleType:
    """``_int8dots`` compiled from ``commit``'s source with the package's flags, loaded under its own name
    (the module object is not put in ``sys.modules``, so this checkout's stays the one imported)."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{SOURCE}"], check=True,
                            capture_output=True, text=True).stdout
    c_file, so_file = folder / "_int8dots.c", folder / f"_int8dots{sysconfig.get_config_var('EXT_SUFFIX')}"
    c_file.write_text(source, encoding="utf-8")
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    subprocess.run([compiler, *FLAGS, "-shared", "-fPIC", f"-I{sysconfig.get_paths()['include']}", "-o",
                    str(so_file), str(c_file)], check=True)
    loader = importlib.machinery.ExtensionFileLoader("_int8dots", str(so_file))
    spec = importlib.util.spec_from_file_location("_int8dots", so_file, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def scans(module: ModuleType, codes: np.ndarray, tiles: np.ndarray, q: np.ndarray) -> dict[str, Callable[[], None]]:
    """The int8 and the int4 scan of every row with ``module``'s kernel, on the stage's threads."""
    n = len(codes)
    best, total = np.empty(n, np.float32), np.empty(n, np.float32)
    scales = np.full(n, 1 / 127, np.float32)

    def int8(first: int, last: int) -> None:
        module.best(codes[first:last], q, best[first:last], total[first:last])

    def int4(first: int, last: int) -> None:
        module.best4(tiles[first // 16: -(-last // 16)], q, best[first:last], scales=scales[first:last], factor=1.0)

    return {"int8": lambda: _in_runs(n, SCAN_THREADS, int8), "int4": lambda: _in_runs(n, SCAN_THREADS, int4)}


def measure(builds: dict[str, ModuleType], sizes: list[int], vectors: list[int], rounds: int,
            evict_mb: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    other = np.ones(evict_mb << 17, np.uint64)  # evict_mb MiB of 8-byte words
    rows = []
    for n in sizes:
        codes = rng.integers(-127, 128, (n, DIM), dtype=np.int8)
        tiles = np.empty(_int8dots.tile_shape(n, DIM), np.uint8)
        _int8dots.to_int4(codes, tiles)
        for count in vectors:
            q = rng.integers(-127, 128, (count, DIM), dtype=np.int8)
            runs = {name: scans(module, codes, tiles, q) for name, module in builds.items()}
            times: dict[tuple[str, str, str], list[float]] = {}
            for _ in range(rounds):
                for kind in ("int8", "int4"):
                    for name, scan in runs.items():
                        other.sum()  # the caches filled with other memory, as by the model's forward pass
                        for state in ("out of the caches", "cached"):
                            t = time.perf_counter()
                            scan[kind]()
                            times.setdefault((kind, name, state), []).append((time.perf_counter() - t) * 1000)
            for kind in ("int8", "int4"):
                row: dict[str, Any] = {"scan": kind, "rows": n, "query_vectors": count}
                for state in ("out of the caches", "cached"):
                    ms = {name: float(np.median(times[(kind, name, state)])) for name in builds}
                    for name in builds:
                        row[f"{name}, {state} (ms)"] = round(ms[name], 3)
                    if len(builds) == 2:
                        this, against = builds
                        row[f"ratio, {state}"] = round(ms[this] / ms[against], 3)
                rows.append(row)
                print(row, flush=True)
    return rows


def main() -> None:
    from skillsearch.bench.report import run_started

    run_started()  # the commit its report names: HEAD as the run starts, not when it writes
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--against", metavar="COMMIT", help="a commit whose kernel is timed beside this checkout's")
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--vectors", type=int, nargs="+", default=[1, 3])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--evict-mb", type=int, default=512)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = ap.parse_args()
    command = "PYTHONPATH=. .venv/bin/python benchmarks/cold_scan.py " + " ".join(sys.argv[1:])
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=7", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="skillsearch-cold-scan-") as tmp:
        builds = {f"this checkout ({head})": _int8dots}
        if args.against:
            builds[f"at {args.against}"] = built_at(args.against, Path(tmp))
        rows = measure(builds, args.sizes, args.vectors, args.rounds, args.evict_mb)
    print(write_script_report(
        args.out, "cold-scan", "The first scan of a search, out of the caches and cached (ms, median)", command,
        f"random int8 codes of {DIM} dimensions and their int4 tiles", rows, text_columns=1,
        notes=(f"Each timed scan of every row on {SCAN_THREADS} threads follows numpy summing {args.evict_mb} MiB "
               "of other memory (\"out of the caches\"), then the same scan is timed again at once (\"cached\"); "
               "the builds take turns on the same rows, each state's median of the rounds.",
               f"Our kernel's path: {_int8dots.kernel()}. `ratio`: this checkout's time over the other build's.",),
        extra={"machine": machine(), "int8dots_path": _int8dots.kernel(), "builds": list(builds)}))


if __name__ == "__main__":
    main()
