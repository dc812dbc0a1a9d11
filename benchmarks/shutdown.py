"""Shut-down: how long ``skillsearch serve`` takes from SIGTERM to its exit, idle and under load.

An orchestrator stops a replica with SIGTERM and kills it with SIGKILL after a grace period (Docker and
Kubernetes: 10 and 30 s by default). Past uvicorn's own shut-down, the interpreter's last garbage
collection over the whole heap (torch and the model's objects: about a million tracked objects) took 1-9 s
here; a server now closes its SQLite connections and freezes the heap as it exits (``gc.freeze`` in
``cli/main._freeze_for_exit``), so that last collection skips what was alive then.

What is timed: a real ``serve`` on a copy of the sample catalog (``python -m skillsearch.cli``), ready
(``/readyz`` 200) and warmed by a few hybrid searches, then SIGTERM; the time until the process has exited.
"idle": nothing else in flight; "under load": four client threads searching until the signal (their
requests in flight are answered or refused as the server stops). ``--repo`` times another checkout's code
(``PYTHONPATH``), so two versions compare in one run.

Run: ``HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/shutdown.py [--rounds 5] [--repo DIR ...]`` (writes
``benchmarks/results/shutdown.{md,json}``). Not collected by pytest.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
REQUESTS = ("profile slow python code", "rotate database credentials", "証明書の期限が切れたので更新したい",
            "cut a tagged release", "clean a messy dataset with pandas")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop_time(repo: Path, data_dir: Path, cwd: Path, load: bool) -> float:
    """Seconds from SIGTERM to exit of one ``serve`` (after it is ready and warm)."""
    from skillsearch.http.auth import DEMO_TOKEN

    port = _port()
    env = dict(os.environ) | {"PYTHONPATH": str(repo), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "skillsearch.cli", "-q", "--data-dir", str(data_dir), "serve",
                             "--port", str(port)], cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    url, headers = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {DEMO_TOKEN}"}
    stop = threading.Event()

    def search_until_stopped(n: int) -> None:
        with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
            while not stop.is_set():
                try:
                    client.get("/v1/search", params={"q": REQUESTS[n % len(REQUESTS)]})
                except httpx.HTTPError:
                    return  # the server is stopping
                n += 1

    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                if httpx.get(url + "/readyz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"serve did not become ready (exit {proc.poll()})")
            time.sleep(0.2)
        for q in REQUESTS:
            httpx.get(url + "/v1/search", params={"q": q}, headers=headers, timeout=60).raise_for_status()
        clients = [threading.Thread(target=search_until_stopped, args=(i,)) for i in range(4 if load else 0)]
        for c in clients:
            c.start()
        if load:
            time.sleep(2.0)
        started = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(120)
        elapsed = time.perf_counter() - started
        stop.set()
        for c in clients:
            c.join(60)
        if code != 143:
            raise SystemExit(f"serve exited {code} at SIGTERM, not 143")
        return elapsed
    finally:
        stop.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def main() -> None:
    from skillsearch.bench.report import run_started

    run_started()  # the commit its report names: HEAD as the run starts, not when it writes
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repo", type=Path, action="append", help="a checkout whose code to time (default: this one)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    from skillsearch.bench.report import write_script_report

    repos = [r.resolve() for r in (args.repo or [ROOT])]
    times: dict[str, list[float]] = {}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="skillsearch-shutdown-") as tmp:
        cwd = Path(tmp)
        seeded = cwd / "seeded"
        env = dict(os.environ) | {"PYTHONPATH": str(repos[0]), "HF_HUB_OFFLINE": "1"}
        subprocess.run([sys.executable, "-m", "skillsearch.cli", "-q", "--data-dir", str(seeded), "list"], cwd=cwd,
                       env=env, check=True, stdout=subprocess.DEVNULL)  # seeds and indexes the sample once
        for n in range(args.rounds):
            for repo in repos:
                for load in (False, True):
                    data_dir = cwd / f"data-{n}"
                    shutil.rmtree(data_dir, ignore_errors=True)
                    shutil.copytree(seeded, data_dir)
                    name = f"{repo.name if len(repos) > 1 else 'serve'}, {'under load' if load else 'idle'}"
                    times.setdefault(name, []).append(_stop_time(repo, data_dir, cwd, load))
                    print(f"round {n + 1}: {name}: {times[name][-1]:.2f} s", file=sys.stderr, flush=True)
            loads.append(os.getloadavg()[0])
    rows = [{"run": name, "median_s": round(statistics.median(t), 3), "max_s": round(max(t), 3),
             "rounds": len(t)} for name, t in times.items()]
    text = write_script_report(
        args.out, "shutdown", "Shut-down of skillsearch serve: SIGTERM to exit",
        " ".join(["python", "benchmarks/shutdown.py", *sys.argv[1:]]),
        f"{args.rounds} rounds, the sample catalog, model loaded and warm; 1-min load"
        f" {min(loads):.1f}-{max(loads):.1f} during the rounds",
        rows, extra={"seconds": times, "repos": [str(r) for r in repos], "load_average_1m": loads},
    )
    print(text)


if __name__ == "__main__":
    main()
