"""HTTP load run: distinct requests from N concurrent clients against ``skillsearch serve`` on the real skills.

What one run does (every row of the result comes from the same run, so ratios between rows hold even on a
shared machine whose absolute speed moves):
1. imports the real skills (``../shared/data/skills-catalog``, 883 Agent Skills) into a data directory with
   ``skillsearch import`` (a no-op when already imported) and adds a principal with ``skillsearch token add``;
2. builds a pool of ``--queries`` distinct requests (the dev requests of ``queries.dev.jsonl`` plus
   paraphrases generated deterministically from the skills' descriptions), larger than every cache; all
   clients draw from one shared walk through the pool, so a request repeats only after the pool is used up;
3. for each scenario starts ``skillsearch serve`` (its own process, the product as shipped) with that
   scenario's environment, runs ``--clients`` asyncio clients (one keep-alive HTTP/1.1 connection each,
   ``lean_http.py``: httpx cost 3.6 ms of client CPU per request on the same two cores) for
   ``--duration`` seconds after ``--warmup``, and reads the server's ``/metrics`` before and after to get the
   query encoder's batch sizes;
   - ``uncached``: ``SKILLSEARCH_RESULT_CACHE_SIZE=0 SKILLSEARCH_QUERY_CACHE_SIZE=0``, batching on (default);
   - ``uncached, busy neighbour``: the same while another process keeps one core busy (a spin loop that
     this script starts before the scenario and kills after it; it also stops itself after a bound);
   - ``uncached, no batching``: ``SKILLSEARCH_QUERY_BATCHING=0`` and torch's own thread count, i.e. every
     request calls the model itself (the behaviour before the batching service), quiet and busy;
   - ``cached``: the default caches on, same distinct pool;
   - ``workers-1`` / ``workers-2``: uncached, ``serve --workers 1`` / ``--workers 2`` (several processes on
     one port); name them more than once (``workers-1,workers-2,workers-1,workers-2``) to interleave them,
     and the ratio is taken between their mean req/s; server CPU counts every worker process;
4. in process, one request at a time (caches off): the encoder alone and a whole hybrid search over the
   same texts, for the single-request ratio;
5. writes ``benchmarks/results/<name>.md`` and ``.json`` with the command, ``nproc``, load averages and
   numbers.

Knobs (command line):
    --catalog PATH      folder of Agent Skills (default ../shared/data/skills-catalog)
    --data-dir PATH     data directory (default benchmarks/.cache/http-load; reused between runs)
    --clients N         concurrent clients (default 32)
    --duration S        seconds of measured load per scenario (default 20)
    --warmup S          seconds of unmeasured load first (default 3)
    --queries N         distinct requests in the pool (default 4000; query cache 1,024, result cache 512)
    --scenarios LIST    comma-separated, repeats allowed: uncached, uncached-busy, unbatched, unbatched-busy,
                        cached, workers-1, workers-2
    --mode M            hybrid | lexical | semantic (default hybrid)
    --limit K           hits per search (default 10)
    --out DIR / --name  results folder and file name (default benchmarks/results, http-load)

Run: ``HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/load_http.py``. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import platform
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
import numpy as np
from lean_http import LeanConnection, process_cpu_seconds

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CATALOG = ROOT.parent / "shared" / "data" / "skills-catalog"
SOURCE, GRANT, PRINCIPAL = "skills-catalog", "sub:skills-catalog", "load"
UNCACHED = {"SKILLSEARCH_RESULT_CACHE_SIZE": "0", "SKILLSEARCH_QUERY_CACHE_SIZE": "0"}
SCENARIOS: dict[str, tuple[str, dict[str, str], bool]] = {  # name: (label, server environment, busy neighbour)
    "uncached": ("uncached, batching (default)", UNCACHED, False),
    "uncached-busy": ("uncached, batching, busy neighbour", UNCACHED, True),
    "unbatched": ("uncached, no batching (before)", {**UNCACHED, "SKILLSEARCH_QUERY_BATCHING": "0"}, False),
    "unbatched-busy": ("uncached, no batching, busy neighbour", {**UNCACHED, "SKILLSEARCH_QUERY_BATCHING": "0"},
                       True),
    "cached": ("caches on (defaults), batching", {}, False),
    "workers-1": ("uncached, serve --workers 1", UNCACHED, False),
    "workers-2": ("uncached, serve --workers 2", UNCACHED, False),
}
SERVE_ARGS = {"workers-1": ["--workers", "1"], "workers-2": ["--workers", "2"]}
ENCODER_METRICS = ("batches", "requests", "failed_batches", "largest_batch")


def cli(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data_dir), "-q", *args]
    return subprocess.run(cmd, env=env, text=True, capture_output=True, check=False)


def machine() -> dict[str, Any]:
    model = ""
    with contextlib.suppress(OSError):
        model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), "")
    return {"cpu": model, "cpus": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform(), "loadavg_at_start": list(os.getloadavg())}


TEMPLATES = ("{}", "how do I {}", "I need to {}", "help me {}", "find a skill to {}", "{} please",
             "looking for something that can {}", "tool for {}")


def request_pool(catalog: Path, n: int, seed: int = 7) -> list[str]:
    """``n`` distinct requests: the dev requests of ``queries.dev.jsonl``, then paraphrases generated from
    the skills' descriptions (a window of 4-10 words at a varying offset, in a varying phrasing), shuffled
    with a fixed seed so that every run draws the same pool. Far larger than the query and result caches."""
    rng = random.Random(seed)
    pool: dict[str, None] = {}
    dev = catalog / "queries.dev.jsonl"
    if dev.exists():
        for line in dev.read_text(encoding="utf-8").splitlines():
            if line.strip():
                pool[json.loads(line)["q"].strip()] = None
    descriptions = []
    for skill_md in sorted(catalog.glob("*/SKILL.md")):
        m = re.search(r"^description:\s*(.+)$", skill_md.read_text(encoding="utf-8", errors="replace"), re.MULTILINE)
        if m:
            words = re.sub(r"[\"'>|]", " ", m.group(1)).split()
            if len(words) >= 4:
                descriptions.append(words)
    for _ in range(50):  # rounds over all descriptions until the pool is full
        for words in descriptions:
            if len(pool) >= n:
                break
            size = rng.randint(4, min(10, len(words)))
            start = rng.randint(0, len(words) - size)
            text = rng.choice(TEMPLATES).format(" ".join(words[start : start + size]).rstrip(".,;:").lower())
            pool.setdefault(text, None)
    texts = list(pool)[:n]
    rng.shuffle(texts)
    return texts


def percentiles(ms: list[float]) -> dict[str, float]:
    a = np.asarray(ms, dtype=np.float64)
    if not a.size:
        return {"p50": float("nan"), "p95": float("nan"), "p99": float("nan"), "mean": float("nan"), "max": float("nan")}
    return {"p50": round(float(np.percentile(a, 50)), 2), "p95": round(float(np.percentile(a, 95)), 2),
            "p99": round(float(np.percentile(a, 99)), 2), "mean": round(float(a.mean()), 2),
            "max": round(float(a.max()), 2)}


async def load(url: str, server_pid: int, token: str, walk: list[str], clients: int, duration: float, warmup: float,
               mode: str, limit: int) -> dict[str, Any]:
    """``clients`` clients sending distinct requests (one shared walk through the pool) for warmup + duration."""
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    errors: list[str] = []
    measuring = False
    stop_at = time.monotonic() + warmup + duration
    position = [0]

    def next_query() -> str:
        q = walk[position[0] % len(walk)]
        position[0] += 1
        return q

    target = urlsplit(url)
    host, port = target.hostname or "127.0.0.1", target.port or 80
    head = f"Host: {host}:{port}\r\nAuthorization: Bearer {token}\r\nAccept: application/json\r\n\r\n"

    async def client() -> None:
        connection = LeanConnection(host, port)
        try:
            while time.monotonic() < stop_at:
                q = next_query()
                path = "/v1/search?" + urlencode({"q": q, "mode": mode, "limit": limit})
                t = time.perf_counter()
                try:
                    code, body = await connection.get(path, head)
                    status, ok = str(code), code == 200 and b'"hits"' in body
                except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
                    status, ok = type(exc).__name__, False
                    connection.close()
                elapsed = (time.perf_counter() - t) * 1000
                if measuring:
                    latencies.append(elapsed)
                    statuses[status] = statuses.get(status, 0) + 1
                    if not ok and len(errors) < 20:
                        errors.append(f"{status} for {q!r}")
        finally:
            connection.close()

    tasks = [asyncio.create_task(client()) for _ in range(clients)]
    await asyncio.sleep(warmup)
    measuring = True
    before = await encoder_metrics(url)
    started, client_cpu, server_cpu = time.monotonic(), time.process_time(), tree_cpu_seconds(server_pid)
    await asyncio.gather(*tasks)
    wall = time.monotonic() - started
    client_cpu, server_cpu = time.process_time() - client_cpu, tree_cpu_seconds(server_pid) - server_cpu
    after = await encoder_metrics(url)
    n = len(latencies)
    batches = after["batches"] - before["batches"]
    requests = after["requests"] - before["requests"]
    return {"requests": n, "seconds": round(wall, 2), "rps": round(n / wall, 1), "latency_ms": percentiles(latencies),
            "statuses": statuses, "errors": sum(v for k, v in statuses.items() if k != "200"), "error_samples": errors,
            "distinct_requests_sent": min(position[0], len(walk)), "requests_sent": position[0],
            "encoder": {"batches": batches, "requests": requests, "failed_batches": after["failed_batches"],
                        "mean_batch": round(requests / batches, 2) if batches else None,
                        "largest_batch": after["largest_batch"]},
            # CPU per answered request (the measured part; the clients run in this process on the same cores).
            "cpu_ms_per_request": {"server": round(server_cpu * 1000 / max(n, 1), 2),
                                   "clients": round(client_cpu * 1000 / max(n, 1), 2)}}


async def encoder_metrics(url: str) -> dict[str, float]:
    async with httpx.AsyncClient(base_url=url, timeout=30) as c:
        text = (await c.get("/metrics")).text
    out = {}
    for key in ENCODER_METRICS:
        suffix = "" if key == "largest_batch" else "_total"
        m = re.search(rf"^skillsearch_query_encoder_{key}{suffix} (\S+)$", text, re.MULTILINE)
        out[key] = float(m.group(1)) if m else 0.0
    return out


def neighbour(bound_s: float) -> subprocess.Popen[bytes]:
    """Another process keeping one core busy: a pure-Python spin loop that also ends itself after ``bound_s``."""
    code = f"import time\nend = time.monotonic() + {bound_s}\nwhile time.monotonic() < end:\n    pass\n"
    return subprocess.Popen([sys.executable, "-c", code])


def in_process(data_dir: Path, queries: list[str], mode: str, limit: int, n: int = 200) -> dict[str, Any]:
    """One request at a time, caches off: the model alone on each request's texts, then a whole search."""
    sys.path.insert(0, str(ROOT))
    from skillsearch.core.domain import Principal
    from skillsearch.core.settings import Settings
    from skillsearch.retrieval.search import QUERY_SENTENCES, query_texts
    from skillsearch.retrieval.search_types import SearchRequest
    from skillsearch.service import Catalog

    settings = Settings.from_env(data_dir=data_dir, seed_sample=False, result_cache_size=0, query_cache_size=0)
    catalog = Catalog.open(settings)
    principal = Principal(PRINCIPAL, frozenset({GRANT}))
    sample = queries[:n]
    catalog.search_view(principal, SearchRequest(query="warm up the model", mode=mode, limit=limit))
    from skillsearch.retrieval.query_cache import CachedQueryEncoder

    routing = catalog.index().snapshot().routing
    encode, search = [], []
    for q in sample:  # interleaved, so that both see the same machine
        texts = query_texts(q, QUERY_SENTENCES)
        # The model search embeds this request with (its route's, for a routed index), without the route's
        # query cache: through the cache the search that follows found the vectors already made (2 ms).
        model = routing.route(q).encoder
        while isinstance(model, CachedQueryEncoder):
            model = model.inner
        t = time.perf_counter()
        model.encode_query_parts(texts[0], texts[1:])
        encode.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        catalog.search_view(principal, SearchRequest(query=q, mode=mode, limit=limit))
        search.append((time.perf_counter() - t) * 1000)
    catalog.close()
    e, s = percentiles(encode), percentiles(search)
    return {"queries": len(sample), "encode_ms": e, "search_ms": s, "p50_ratio": round(s["p50"] / e["p50"], 2),
            "loadavg": list(os.getloadavg())}


def index_encoder(data_dir: Path) -> str:
    """The encoder the data directory's index was built with (the default one when the import made it)."""
    manifest = json.loads((data_dir / "manifest.json").read_text(encoding="utf-8"))
    return str(manifest["encoder"]["name"])


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid`` and its live descendants (the workers of ``serve --workers N``)."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        with contextlib.suppress(OSError):
            total += process_cpu_seconds(p)
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
    return total


def start_server(data_dir: Path, env_extra: dict[str, str], serve_args: list[str] | None = None,
                 ) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT), **env_extra}
    proc = subprocess.Popen(
        [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data_dir), "-q", "serve", "--port", "0",
         *(serve_args or [])],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.search(r"serving on (http://\S+)", line)
    if not m:
        proc.kill()
        raise SystemExit(f"server did not start: {line!r}")
    return proc, m.group(1)


def wait_ready(url: str, proc: subprocess.Popen[str], timeout: float = 300) -> None:
    """Until ``/readyz`` is 200: ``serve`` answers at once and loads the model in the background (503 until
    then), so the first 503 is no failure; one that outlasts ``timeout`` (or a server that exits) is."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode} before it was ready")
        ready = httpx.get(url + "/readyz", timeout=60)
        if ready.status_code == 200:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"{url}/readyz still {ready.status_code} after {timeout:.0f} s: {ready.text[:300]}")
        time.sleep(0.2)


def run_scenario(name: str, args: argparse.Namespace, token: str, walk: list[str]) -> dict[str, Any]:
    label, env, busy = SCENARIOS[name]
    proc, url = start_server(args.data_dir, env, SERVE_ARGS.get(name))
    spinner = None
    try:
        wait_ready(url, proc)
        if busy:
            spinner = neighbour(args.warmup + args.duration + 60)
        load_start = list(os.getloadavg())
        http = asyncio.run(load(url, proc.pid, token, walk, args.clients, args.duration, args.warmup, args.mode, args.limit))
        load_end = list(os.getloadavg())
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
    return {"scenario": name, "label": label, "env": env, "busy_neighbour": busy, "loadavg_start": load_start,
            "loadavg_end": load_end, **http}


def write_results(out: Path, result: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    name = result["config"]["name"]
    (out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    m, c, ip = result["machine"], result["config"], result["in_process"]
    rows = {r["scenario"]: r for r in result["runs"]}
    lines = [
        "# HTTP load: distinct requests over the real skills catalog",
        "",
        f"- date: {result['date']}; command: `{result['command']}`",
        f"- machine: {m['cpu']}, nproc {m['cpus']}, Python {m['python']}, {m['platform']}",
        ("- the machine was otherwise idle when the run started (1-min load"
         f" {m['loadavg_at_start'][0]:.1f}; each row's load includes this run's own server and clients)"
         if m["loadavg_at_start"][0] < 0.5 else
         "- **the machine was shared with other jobs while this ran** (load averages per row below; 2"
         " cores): absolute req/s and latencies are depressed and noisy; the rows of this one run are meant"
         " to be compared with each other."),
        (f"- catalog: {result['catalog']['skills']} skills (`{result['catalog']['path']}`), encoder"
         f" {result['catalog']['encoder']}"),
        (f"- load: {c['clients']} asyncio clients (one keep-alive HTTP/1.1 connection each, `benchmarks/lean_http.py`,"
         f" in one process on the same machine) for {c['duration']} s after {c['warmup']} s warm-up per scenario,"
         f" `GET /v1/search` mode={c['mode']} limit={c['limit']}; {c['queries']} distinct requests (dev requests + paraphrases of"
         " descriptions) walked in one shared order: a request repeats only once the pool is used up"),
        "",
        ("| scenario | requests (distinct) | req/s | p50 ms | p95 ms | p99 ms | errors | batches: mean / largest |"
         " CPU ms per request: server / clients | load 1-min start / end |"),
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |",
    ]
    for r in result["runs"]:
        lat, enc = r["latency_ms"], r["encoder"]
        batches = f"{enc['mean_batch']} / {int(enc['largest_batch'])}" if enc["batches"] else "– (not batching)"
        if r["scenario"] == "workers-2":  # each /metrics scrape reads whichever worker took the connection
            batches = "– (per worker)"
        lines.append(f"| {r['label']} | {r['requests']} ({r['distinct_requests_sent']}) | {r['rps']} | {lat['p50']} |"
                     f" {lat['p95']} | {lat['p99']} | {r['errors']} | {batches} |"
                     f" {r['cpu_ms_per_request']['server']} / {r['cpu_ms_per_request']['clients']} |"
                     f" {r['loadavg_start'][0]:.1f} / {r['loadavg_end'][0]:.1f} |")
    lines += [
        "",
        (f"One request at a time, in process, caches off ({ip['queries']} requests of the pool, interleaved):"
         f" the model alone on the request's texts p50 {ip['encode_ms']['p50']} ms / p95 {ip['encode_ms']['p95']}"
         f" ms; a whole {c['mode']} search p50 {ip['search_ms']['p50']} ms / p95 {ip['search_ms']['p95']} ms:"
         f" **ratio {ip['p50_ratio']}** (load {ip['loadavg'][0]:.1f})."),
        "",
    ]
    ratios = []
    if "uncached" in rows and "uncached-busy" in rows:
        q, b = rows["uncached"]["latency_ms"]["p95"], rows["uncached-busy"]["latency_ms"]["p95"]
        ratios.append(f"busy-neighbour p95 / quiet p95 with batching: **{b / q:.2f}**")
    if "unbatched" in rows and "unbatched-busy" in rows:
        q, b = rows["unbatched"]["latency_ms"]["p95"], rows["unbatched-busy"]["latency_ms"]["p95"]
        ratios.append(f"the same without batching: {b / q:.2f}")
    if "uncached" in rows and "unbatched" in rows:
        ratios.append(f"uncached req/s with / without batching: **{rows['uncached']['rps'] / rows['unbatched']['rps']:.2f}x**")
    one = [r["rps"] for r in result["runs"] if r["scenario"] == "workers-1"]
    two = [r["rps"] for r in result["runs"] if r["scenario"] == "workers-2"]
    if one and two:
        ratios.append(f"uncached req/s, `serve --workers 2` / `--workers 1` (mean of {len(two)} / {len(one)}"
                      f" interleaved runs): **{(sum(two) / len(two)) / (sum(one) / len(one)):.2f}x**")
        cpu = {k: [r["cpu_ms_per_request"]["server"] for r in result["runs"] if r["scenario"] == k]
               for k in ("workers-1", "workers-2")}
        used = {k: [r["rps"] * r["cpu_ms_per_request"]["server"] / 1000 for r in result["runs"] if r["scenario"] == k]
                for k in ("workers-1", "workers-2")}
        c1, c2 = (sum(v) / len(v) for v in cpu.values())
        u1, u2 = (sum(v) / len(v) for v in used.values())
        ratios.append(f"server CPU per request {c1:.1f} ms (1 worker) vs {c2:.1f} ms (2 workers), {c2 / c1:.2f}x;"
                      f" cores the server kept busy (req/s x CPU per request) {u1:.2f} vs {u2:.2f} of"
                      f" {result['machine']['cpus']}")
    if ratios:
        lines += ["Ratios within this run: " + "; ".join(ratios) + ".", ""]
    lines += [
        (f"Catalog note: {len(result['catalog']['import'].get('problems', []))} folder(s) refused by the importer"
         " (reason in the JSON), so the index holds the rest."),
        "",
    ]
    (out / f"{name}.md").write_text("\n".join(lines), encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalog", type=Path, default=DEFAULT_CATALOG)
    parser.add_argument("--data-dir", type=Path, default=ROOT / "benchmarks" / ".cache" / "http-load")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--queries", type=int, default=4000)
    parser.add_argument("--scenarios", default="uncached,uncached-busy,unbatched,unbatched-busy,cached")
    parser.add_argument("--mode", default="hybrid", choices=["hybrid", "lexical", "semantic"])
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--name", default="http-load")
    args = parser.parse_args()
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]  # repeats interleave runs
    unknown = sorted(set(scenarios) - set(SCENARIOS))
    if unknown:
        raise SystemExit(f"unknown scenarios: {', '.join(unknown)}")

    started = time.time()
    args.data_dir.parent.mkdir(parents=True, exist_ok=True)  # the CLI refuses a data directory in no folder
    imported = cli(args.data_dir, "import", str(args.catalog), "--source", SOURCE, "--grant", GRANT, "--json")
    try:
        report = json.loads(imported.stdout)
    except json.JSONDecodeError:
        report = {}
    if imported.returncode not in (0, 1) or not report or "error" in report:
        raise SystemExit(f"import failed: {(imported.stdout + imported.stderr)[-2000:]}")
    # --replace: the data directory is reused between runs, and with it the token of the last one.
    added = cli(args.data_dir, "token", "add", PRINCIPAL, "--grant", GRANT, "--scope", "skills:read", "--replace",
                "--json")
    if added.returncode != 0:
        raise SystemExit(f"token add failed: {(added.stdout + added.stderr)[-2000:]}")
    token = json.loads(added.stdout)["token"]
    pool = request_pool(args.catalog, args.queries)
    print(f"imported in {time.time() - started:.0f}s; pool of {len(pool)} distinct requests", file=sys.stderr)

    info = machine()
    runs = []
    for i, name in enumerate(scenarios):
        walk = pool[i * 997 % len(pool):] + pool[: i * 997 % len(pool)]  # each scenario starts elsewhere
        runs.append(run_scenario(name, args, token, walk))
        print(json.dumps({k: runs[-1][k] for k in ("scenario", "rps", "latency_ms", "errors", "encoder")}),
              file=sys.stderr)
    floor = in_process(args.data_dir, pool, args.mode, args.limit)
    documents = json.loads((args.data_dir / "manifest.json").read_text(encoding="utf-8"))["documents"]
    result = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python benchmarks/load_http.py " + " ".join(sys.argv[1:]),
        "machine": info,
        "catalog": {"path": str(args.catalog.relative_to(ROOT.parent)) if args.catalog.is_relative_to(ROOT.parent)
                    else str(args.catalog), "skills": documents, "import": report,
                    "encoder": index_encoder(args.data_dir)},
        "config": {"clients": args.clients, "duration": args.duration, "warmup": args.warmup, "mode": args.mode,
                   "limit": args.limit, "queries": len(pool), "name": args.name, "scenarios": scenarios},
        "runs": runs,
        "in_process": floor,
    }
    write_results(args.out, result)
    print((args.out / f"{args.name}.md").read_text(encoding="utf-8"))
    return 0 if all(r["errors"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
