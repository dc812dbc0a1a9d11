"""Start-up: how long whole ``skillsearch`` processes take, as ratios to ``skillsearch --help`` in one run.

Issue 33's targets: ``skillsearch list`` and ``search --mode lexical`` on the sample catalog take at most
1.5 x ``skillsearch --help`` (nothing they do needs the embedding model, so they must not import it), and
``skillsearch mcp`` over stdio answers ``tools/list`` within 1.5 s on a warm machine (the model loads in the
background after the server answers).

What is timed: wall time of each command as its own process (``python -m skillsearch.cli``, the console
script's entry), started from a temporary directory on a copy of the sample catalog that is indexed first.
Rounds are paired: each round runs every command once, in a shuffled order, and a command's ratio is the
median over rounds of its time divided by ``--help``'s time in the same round. ``mcp: tools/list`` is the
time from starting ``skillsearch mcp`` to the answer of ``tools/list`` (initialize, initialized, then
tools/list over raw JSON-RPC lines); the process is then closed; it is timed again with the background
model load held back (``SKILLSEARCH_MODEL_LOAD_DELAY_S``), which shows what the concurrent load costs the
answer. ``mcp: first search_skills`` sends a ``search_skills`` call right after ``tools/list`` and times its
answer, which waits for the background load: what an MCP host waits for its first search. ``search (hybrid)`` loads the model: the
cost every command paid before (issue 33 measured about 5 s on 2 cores); it reads MiniLM's forward saved
by an earlier process (``retrieval/forward_cache.py``), and ``search (hybrid), no saved forward`` runs in an
empty cache folder, as the first process on a machine does (it imports sentence-transformers and traces
the model). Every command runs with the run's own cache folder (``XDG_CACHE_HOME``), not this machine's.

Run: ``HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/startup.py [--rounds 7] [--data-dir DIR]`` (writes
``benchmarks/results/startup.{md,json}``). Not collected by pytest.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
QUERY = "profile python code"


def _env() -> dict[str, str]:
    return dict(os.environ) | {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one ``skillsearch ARGS`` process."""
    cpu, started = _cpu(), time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "skillsearch.cli", *args], cwd=cwd, env=_env() | (env or {}),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"skillsearch {' '.join(args)} failed: {proc.stderr[-2000:]}")
    return elapsed, _cpu() - cpu


def _process_cpu(pid: int) -> float:
    """CPU seconds (user + system, all threads) a running process has used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _mcp_answer(data_dir: Path, cwd: Path, env: dict[str, str] | None = None,
                    search: bool = False) -> tuple[float, float]:
    """Wall seconds from starting ``skillsearch mcp`` (stdio) to its answer to ``tools/list`` (with
    ``search``: to its answer to a ``search_skills`` call sent right after, which waits for the model's
    background load), and the CPU seconds the process had used by then (every thread: with the background
    load, the model's import too)."""
    from mcp_types import LATEST_PROTOCOL_VERSION

    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": LATEST_PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "startup-bench", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    if search:
        messages.append({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                         "params": {"name": "search_skills", "arguments": {"query": QUERY, "limit": 3}}})
    last = messages[-1]["id"]
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "skillsearch.cli", "-q", "mcp", "--data-dir", str(data_dir)],
                            cwd=cwd, env=_env() | (env or {}), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
        proc.stdin.flush()
        for line in proc.stdout:
            answer = json.loads(line)
            if answer.get("id") == last:
                elapsed, used = time.perf_counter() - started, _process_cpu(proc.pid)
                result = answer.get("result", {})
                if not (result.get("structuredContent", {}).get("hits") if search else result.get("tools")) \
                        or result.get("isError"):
                    raise SystemExit(f"{'search_skills' if search else 'tools/list'} failed: {answer}")
                return elapsed, used
        raise SystemExit("skillsearch mcp closed before its answer")
    finally:
        proc.stdin.close()
        proc.terminate()
        proc.wait(60)


def main() -> None:
    from skillsearch.bench.report import run_started

    run_started()  # the commit its report names: HEAD as the run starts, not when it writes
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--data-dir", type=Path, help="an indexed sample catalog (default: one built in a temp dir)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    from skillsearch.bench.report import write_script_report

    with tempfile.TemporaryDirectory(prefix="skillsearch-startup-") as tmp:
        cwd = Path(tmp)
        data_dir = cwd / "data"
        # The run's own cache folder (model digests, the saved forward: retrieval/forward_cache.py), inherited
        # by every command, so what this machine's ~/.cache holds does not change the figures.
        os.environ["XDG_CACHE_HOME"] = str(cwd / "cache")
        if args.data_dir:
            shutil.copytree(args.data_dir, data_dir)
        _run(["--data-dir", str(data_dir), "-q", "list"], cwd)  # seeds and indexes the sample (loads the model)
        commands: dict[str, list[str]] = {
            "--help": ["--help"],
            "list": ["--data-dir", str(data_dir), "list"],
            "search --mode lexical": ["--data-dir", str(data_dir), "search", "--mode", "lexical", QUERY],
            "search (hybrid)": ["--data-dir", str(data_dir), "search", QUERY],
            # The same in an empty cache folder: the first process on these model files (or the first after
            # a torch upgrade) imports sentence-transformers, traces the model and saves the trace.
            "search (hybrid), no saved forward": ["--data-dir", str(data_dir), "search", QUERY],
        }
        # The second holds the background model load back (a setting for tests): what answering costs alone.
        servers = {"mcp: tools/list": {}, "mcp: tools/list, model load held back": {"SKILLSEARCH_MODEL_LOAD_DELAY_S": "600"},
                   # What an MCP host waits for its first search: the answer needs the model's background load.
                   "mcp: first search_skills": {}, "mcp: first search_skills, no saved forward": {}}
        names = [*commands, *servers]
        times: dict[str, list[float]] = {n: [] for n in names}
        cpu: dict[str, list[float]] = {n: [] for n in names}
        _run(["--help"], cwd)  # warm the file cache (and the model files' digest cache)
        _mcp_answer(data_dir, cwd)
        loads = [os.getloadavg()[0]]
        for _ in range(args.rounds):
            order = names[:]
            random.shuffle(order)
            for name in order:
                cold = Path(tempfile.mkdtemp(prefix="cold-cache-", dir=cwd)) if name.endswith("no saved forward") \
                    else None
                env = {"XDG_CACHE_HOME": str(cold)} if cold else {}
                wall, used = _run(commands[name], cwd, env) if name in commands else \
                    _mcp_answer(data_dir, cwd, servers[name] | env, search="search_skills" in name)
                if cold:
                    shutil.rmtree(cold)
                times[name].append(wall)
                cpu[name].append(used)
            loads.append(os.getloadavg()[0])
    rows = [_row(name, times, cpu) for name in names]
    cores = os.cpu_count() or 1
    shared = (f"a shared machine: the 1-min load average was {min(loads):.1f}-{max(loads):.1f} on {cores} cores"
              " during the rounds (other work ran meanwhile), so wall times wait for the cores; CPU time (user +"
              " system of the process) waits less, and its ratio is the steadier one"
              if max(loads) > cores / 2 else
              f"1-min load average {min(loads):.1f}-{max(loads):.1f} on {cores} cores during the rounds")
    text = write_script_report(
        args.out, "startup", "Start-up of whole skillsearch processes (paired with --help)",
        " ".join(["python", "benchmarks/startup.py", *sys.argv[1:]]),
        f"{args.rounds} rounds, shuffled order per round, the sample catalog (indexed before timing)",
        rows, notes=(
            shared,
            "mcp: tools/list: wall time to the answer, and the CPU the process (all its threads) had used by then;"
            " its process is then closed. With the model load held back, the CPU is what answering costs alone;"
            " on an idle machine wall time is about that CPU time (the server opens the store before it answers;"
            " the index opens, and the model loads, in background threads beside the answer)",
        ),
        extra={"wall_seconds": times, "cpu_seconds": cpu, "load_average_1m": loads},
    )
    print(text)


TARGETS = {"list": 1.5, "search --mode lexical": 1.5}


def _row(name: str, times: dict[str, list[float]], cpu: dict[str, list[float]]) -> dict[str, object]:
    def paired(series: dict[str, list[float]]) -> float:
        return statistics.median(t / h for t, h in zip(series[name], series["--help"], strict=True))

    wall = statistics.median(times[name])
    if name.startswith("mcp: tools/list"):
        target, met = "<= 1.5 s wall", wall <= 1.5
    elif name in TARGETS:
        target, met = f"<= {TARGETS[name]} x --help", paired(times) <= TARGETS[name]
    else:
        target, met = "-", None
    return {
        "command": name, "wall median (s)": round(wall, 3), "wall x --help": round(paired(times), 2),
        "CPU median (s)": round(statistics.median(cpu[name]), 3), "CPU x --help": round(paired(cpu), 2),
        "target": target, "met (wall)": "-" if met is None else ("yes" if met else "no"),
    }


if __name__ == "__main__":
    main()
