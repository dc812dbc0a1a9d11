"""Query encoding under concurrency: torch intra-op threads, workers, batch size and OpenMP waiting policy.

Each configuration runs in a fresh child process (OpenMP reads ``OMP_WAIT_POLICY`` and the thread count when
its runtime starts). In the child, ``workers`` threads each loop for ``--seconds`` encoding batches of
``batch`` real requests (the dev requests of the skills catalog and the first words of skill descriptions)
through ``MiniLMEncoder.encode_query_batch``; it reports queries per second and the per-batch latency. Every
configuration runs quiet and then with a CPU-busy neighbour (one process spinning on one core, started and
stopped by this script), so each row holds its own quiet/busy ratio. Machine load is recorded per row.

Usage: ``python benchmarks/encoder_threads.py [--seconds 4] [--out benchmarks/results/encoder-threads]``.
Not collected by pytest.
Output: an experiment record behind a past choice, not a current result; the last run is in git at 5e1fbbc.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CONFIGS = [  # (intra-op threads, workers, OMP_WAIT_POLICY)
    (2, 1, ""), (2, 1, "PASSIVE"), (1, 1, ""), (1, 2, ""), (1, 2, "PASSIVE"),
]
BATCHES = (1, 16)


def _phase(enc: Any, pool: list[str], workers: int, batch: int, seconds: float) -> dict[str, Any]:
    import numpy as np

    lat: list[float] = []
    done = [0]
    lock = threading.Lock()
    stop = time.perf_counter() + seconds

    def loop(i: int) -> None:
        k = i * 97
        while time.perf_counter() < stop:
            items = [(pool[(k + j) % len(pool)], ()) for j in range(batch)]
            k += batch * workers
            t = time.perf_counter()
            enc.encode_query_batch(items)
            with lock:
                lat.append((time.perf_counter() - t) * 1000)
                done[0] += batch

    cpu, started = time.process_time(), time.perf_counter()
    ts = [threading.Thread(target=loop, args=(i,)) for i in range(workers)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    a = np.asarray(lat)
    return {"queries_per_s": round(done[0] / wall, 1), "cpu_ms_per_query": round(cpu * 1000 / done[0], 2),
            "batch_ms_p50": round(float(np.percentile(a, 50)), 2), "batch_ms_p95": round(float(np.percentile(a, 95)), 2),
            "loadavg": os.getloadavg()[0]}


def child(threads: int, workers: int, seconds: float) -> None:
    from benchmarks.load_http import request_pool
    from skillsearch.retrieval.minilm import MiniLMEncoder
    from skillsearch.retrieval.torch_ops import set_intra_op_threads

    set_intra_op_threads(threads)
    enc = MiniLMEncoder()
    pool = request_pool(ROOT.parent / "shared" / "data" / "skills-catalog", 2000)
    enc.encode_query_batch([(q, ()) for q in pool[:32]])  # warm up
    out: dict[str, Any] = {}
    for phase in ("quiet", "busy"):
        if phase == "busy":
            print("READY", flush=True)
            sys.stdin.readline()  # the parent started the neighbour
        for batch in BATCHES:
            out[f"{phase}/b{batch}"] = _phase(enc, pool, workers, batch, seconds)
    print("RESULT " + json.dumps(out), flush=True)


def run_config(threads: int, workers: int, policy: str, seconds: float) -> dict[str, Any]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    env.pop("OMP_WAIT_POLICY", None)
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    proc = subprocess.Popen([sys.executable, __file__, "--child", str(threads), str(workers), str(seconds)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdin and proc.stdout
    neighbour = None
    try:
        for line in proc.stdout:
            if line.startswith("READY"):
                neighbour = subprocess.Popen([sys.executable, "-c", "while True: pass"])
                time.sleep(0.5)
                proc.stdin.write("go\n")
                proc.stdin.flush()
            elif line.startswith("RESULT "):
                return dict(json.loads(line[7:]))
    finally:
        if neighbour is not None:
            neighbour.kill()
            neighbour.wait()
        proc.wait(timeout=60)
    raise RuntimeError("child gave no result")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "encoder-threads")
    parser.add_argument("--child", nargs=3, default=None)
    args = parser.parse_args()
    if args.child:
        child(int(args.child[0]), int(args.child[1]), float(args.child[2]))
        return
    rows = []
    # Forward, then backward: the machine's load drifts, and each configuration gets an early and a late turn.
    for rnd, order in enumerate((CONFIGS, CONFIGS[::-1]), start=1):
        for threads, workers, policy in order:
            res = run_config(threads, workers, policy, args.seconds)
            rows.append({"round": rnd, "threads": threads, "workers": workers,
                         "omp_wait_policy": policy or "default", **res})
            print(json.dumps(rows[-1]), file=sys.stderr)
    meta = {"command": "python benchmarks/encoder_threads.py " + " ".join(sys.argv[1:]), "nproc": os.cpu_count(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "seconds": args.seconds,
            "loadavg_at_end": os.getloadavg()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    lines = [
        "# Query encoding: intra-op threads, workers, batch size, OMP_WAIT_POLICY",
        "",
        f"`{meta['command']}` on {meta['date']}, nproc {meta['nproc']}; load average at the end "
        f"{', '.join(f'{x:.2f}' for x in meta['loadavg_at_end'])}. **The machine was shared with other agents'"
        " jobs**: compare rows within this file (each has its quiet and busy-neighbour numbers from one child"
        " process), not with other files.",
        "",
        "q/s = queries encoded per second by all workers together; ms = one batch's encode, p50 / p95;"
        " CPU ms/q = process CPU time per query (threads spinning or waiting in OpenMP count here, so it shows"
        " waste even when the machine's load hides the wall time); busy = one other process spinning on one"
        " of the cores; load = 1-min load average at the end of the phase.",
        "",
        "| round | threads x workers | wait policy | batch | quiet q/s | quiet CPU ms/q | quiet ms p50 / p95 |"
        " busy q/s | busy CPU ms/q | busy ms p50 / p95 | busy p95 / quiet p95 | load quiet / busy |",
        "| ---: | --- | --- | ---: | ---: | ---: | --- | ---: | ---: | --- | ---: | --- |",
    ]
    for r in rows:
        for b in BATCHES:
            q, s = r[f"quiet/b{b}"], r[f"busy/b{b}"]
            lines.append(f"| {r['round']} | {r['threads']} x {r['workers']} | {r['omp_wait_policy']} | {b} |"
                         f" {q['queries_per_s']} | {q['cpu_ms_per_query']} | {q['batch_ms_p50']} / {q['batch_ms_p95']} |"
                         f" {s['queries_per_s']} | {s['cpu_ms_per_query']} | {s['batch_ms_p50']} / {s['batch_ms_p95']} |"
                         f" {s['batch_ms_p95'] / q['batch_ms_p95']:.2f} | {q['loadavg']:.2f} / {s['loadavg']:.2f} |")
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
