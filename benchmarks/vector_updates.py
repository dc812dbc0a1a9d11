"""Updating and opening a large vector store: what one replaced skill, one added skill and a reopen cost at
1M rows, in time and memory, for this checkout and (with ``--compare``) another one, side by side.

Per checkout, in fresh child processes that import ``skillsearch`` from that checkout: build a store of
ROWS random unit vectors (MiniLM's 384 dimensions, ids and sha256-like hashes as the index writes them)
and save it once into WORK (kept between runs: delete it to rebuild); then, in another process, open it,
replace one skill, add three new ones (each ``VectorSnapshot.apply`` then ``save_changes``, and the new
vector found first by ``nearest``), drop everything, open it again with its change log, and remove one (as the
indexer's writer does, giving the store's folder, where the checkout's ``apply`` takes one). The child
reports each step and its RSS (``VmRSS``) and peak (``VmHWM``); it works on a copy of the saved store,
whose files are then in the page cache (warm opens). The vectors are random: this measures
the store's copies and files, not relevance.

    python benchmarks/vector_updates.py [--rows 1000000] [--compare PATH_OF_ANOTHER_CHECKOUT]

Writes ``benchmarks/results/vector-updates.{md,json}``. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "benchmarks" / ".cache" / "vector-updates"
DIM = 384


def status_mb(field: str) -> int:
    """A size from /proc/self/status, in MB: ``VmRSS`` now, ``VmHWM`` its peak (which, unlike ``ru_maxrss``,
    restarts at exec, so the parent's peak never counts as the child's)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) // 1024
    return 0


def store_io() -> tuple[Any, Any, Any]:
    """The checkout's ``save``, ``load`` and ``save_changes`` (its ``vector_saves`` module, or the snapshot's
    methods in a checkout from before that module), called as ``save(snapshot, folder)``, ``load(folder)``
    and ``save_changes(snapshot, folder, upserts, deletes)``."""
    try:
        from skillsearch.retrieval import vector_saves
    except ImportError:
        from skillsearch.retrieval.vectors import VectorSnapshot
        return VectorSnapshot.save, VectorSnapshot.load, VectorSnapshot.save_changes  # type: ignore[attr-defined]
    return vector_saves.save, vector_saves.load, vector_saves.save_changes


def build(folder: Path, rows: int) -> None:
    """Save a store of ``rows`` random unit vectors into ``folder`` (this process imports the checkout's
    ``skillsearch``)."""
    import numpy as np

    from skillsearch.retrieval.vectors import VectorRow, VectorSnapshot

    save, _, _ = store_io()
    rng = np.random.default_rng(1)
    matrix = rng.standard_normal((rows, DIM), dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    table = [VectorRow(f"sk_{i:020x}", f"team:{i % 7}", "knowledge", (), f"{i:064x}", f"{i * 3:064x}")
             for i in range(rows)]
    save(VectorSnapshot.build(DIM, matrix, table), folder)


def measure(folder: Path) -> dict[str, Any]:
    import numpy as np

    from skillsearch.retrieval.vectors import VectorRow, VectorSnapshot

    _, load, save_changes = store_io()
    out: dict[str, Any] = {}
    t = time.perf_counter()
    snapshot = load(folder)
    out["open_s"], out["open_rss_mb"] = round(time.perf_counter() - t, 2), status_mb("VmRSS")
    rng = np.random.default_rng(2)
    adds = []
    for step in ("replace", "add", "add", "add"):
        vector = rng.standard_normal(DIM).astype(np.float32)
        vector /= np.linalg.norm(vector)
        if step == "replace":
            old = snapshot.rows[123]
            row = VectorRow(old.skill_id, old.grant, old.kind, old.tags, "c" * 64, "d" * 64)
        else:
            row = VectorRow(f"new_{time.time_ns()}", "team:new", "tool", ("x",), "a" * 64, "b" * 64)
        t = time.perf_counter()
        snapshot = save_changes(snapshot.apply([(row, vector)], []), folder, [(row, vector)], [])
        ms = (time.perf_counter() - t) * 1000
        if snapshot.rows[int(snapshot.nearest(vector, 1)[0][0])].skill_id != row.skill_id:
            raise RuntimeError(f"the {step}d row is not found first")
        if step == "replace":
            out["replace_ms"] = round(ms, 1)
        else:
            adds.append(ms)
    out["add_ms_median"] = round(float(np.median(adds)), 1)
    out["rss_after_adds_mb"] = status_mb("VmRSS")
    del snapshot
    t = time.perf_counter()
    snapshot = load(folder)
    out["reopen_with_log_s"] = round(time.perf_counter() - t, 2)
    out["rows_after"] = len(snapshot)
    out["peak_before_remove_mb"] = status_mb("VmHWM")
    gone = snapshot.rows.skill_id(456)
    # The writer's removal (the store's folder given, as the indexer gives it) where this checkout has one.
    writer = "folder" in inspect.signature(VectorSnapshot.apply).parameters
    t = time.perf_counter()
    removed = snapshot.apply([], [gone], folder) if writer else snapshot.apply([], [gone])
    out["remove_apply_ms"] = round((time.perf_counter() - t) * 1000, 1)
    out["peak_after_remove_apply_mb"] = status_mb("VmHWM")
    snapshot = save_changes(removed, folder, [], [gone])
    out["remove_ms"] = round((time.perf_counter() - t) * 1000, 1)
    del removed
    if snapshot.row_of(gone) is not None or snapshot.rows.skill_id(456) == gone:
        raise RuntimeError("the removed row is still there")
    out["peak_mb"] = status_mb("VmHWM")
    return out


def run_child(checkout: Path, folder: Path, rows: int, what: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(checkout), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, __file__, "--child", what, str(folder), str(rows)], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{what} in {checkout} failed: {done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def commit_of(checkout: Path) -> str:
    done = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, check=False)
    return done.stdout.strip() or "?"


def main() -> None:
    from skillsearch.bench.report import run_started

    run_started()  # the commit its report names: HEAD as the run starts, not when it writes
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--compare", type=Path, action="append", default=[],
                        help="another checkout to measure the same way (its own saved store)")
    args = parser.parse_args()
    for checkout in args.compare:  # else the child would import this checkout's skillsearch under that name
        if not (checkout / "skillsearch" / "retrieval" / "vectors.py").is_file():
            parser.error(f"--compare {checkout}: not a checkout of skillsearch")
    from skillsearch.bench.report import machine, run_metadata, write_script_report

    results = []
    for checkout in [ROOT, *args.compare]:
        commit = commit_of(checkout)
        folder = WORK / f"{commit}-{args.rows}"
        if not (folder / "vectors.npy").exists():
            print(f"building {args.rows} rows with {checkout} ({commit})", file=sys.stderr)
            t = time.perf_counter()
            run_child(checkout, folder, args.rows, "build")
            print(f"  {time.perf_counter() - t:.0f} s", file=sys.stderr)
        # On a copy (the steps change the store), in another process: nothing of the build is in its memory.
        run = folder.with_name(folder.name + "-run")
        shutil.rmtree(run, ignore_errors=True)
        shutil.copytree(folder, run)
        os.sync()  # else the first batch's fsync waits for the copy's 2 GB of dirty pages to reach the disk
        try:
            results.append({"checkout": f"{commit} ({'this' if checkout == ROOT else checkout})", "rows": args.rows,
                            **run_child(checkout, run, args.rows, "measure")})
        finally:
            shutil.rmtree(run, ignore_errors=True)
    command = "python benchmarks/vector_updates.py" + (f" --rows {args.rows}" if args.rows != 1_000_000 else "") + \
        "".join(f" --compare {c}" for c in args.compare)
    notes = (
        "open_s: VectorSnapshot.load of the saved store in a fresh process; replace_ms / add_ms_median: one"
        " skill replaced / added (apply, then save_changes appending to the change log); remove_apply_ms: one skill"
        " removed from the opened store (apply: searchable from then on); remove_ms: that and its save (a new base"
        " file); peak_after_remove_apply_mb: the peak up to the removal's apply; reopen_with_log_s: the store opened again with"
        " the four logged batches to replay; RSS"
        " and its peak (VmHWM) from /proc/self/status (peak_before_remove_mb: before the removal's copy)",
        f"machine: {machine()}; each checkout's store built once and kept in {WORK.relative_to(ROOT)}",
    )
    print(write_script_report(ROOT / "benchmarks" / "results", "vector-updates",
                              "Replacing, adding and reopening at 1M rows", command,
                              "each measure in a fresh child process", results, notes=notes,
                              extra=run_metadata(command)))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        what, where, n = sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
        if what == "build":
            build(where, n)
            print(json.dumps({}))
        else:
            print(json.dumps(measure(where)))
    else:
        main()
