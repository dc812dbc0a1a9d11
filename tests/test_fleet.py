"""A fleet: three replicas behind HAProxy, each its own data directory bootstrapped from one snapshot, all
syncing from the reference upstream.

Under a bounded load through the balancer, a change is published upstream and the signed webhook is fired
at every replica, and one replica is killed with SIGKILL. Checked: no request failed at the balancer
(``deploy/haproxy.cfg``, the file docs/deploy.md gives, retries a dead replica's requests elsewhere), and
every live replica serves the change within 5 s of the webhook.

HAProxy is Debian's package (``make test`` installs it when missing, as root); without it the test fails.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from fleetsupport import (
    REPO,
    SUB,
    ServeProcess,
    env,
    fire_webhook,
    prepare_data_dir,
    search_slugs,
    wait_for,
)
from syncsupport import serve, upstream_with_starter

from skillsearch.upstream.app import create_upstream_app

HAPROXY_CFG = REPO / "deploy" / "haproxy.cfg"
HAPROXY = shutil.which("haproxy") or next((p for p in ("/usr/sbin/haproxy",) if os.access(p, os.X_OK)), None)
CHANGE_WITHIN_S = 5.0
LOAD_THREADS = 6



def _cli(*commands: list[str]) -> None:
    """Runs these ``skillsearch`` commands side by side; each must succeed."""
    procs = [subprocess.Popen([sys.executable, "-m", "skillsearch.cli", "--encoder", "hashing", "-q", *args],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(), cwd=REPO)
             for args in commands]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _bootstrap(seed: Path, replicas: list[Path], tmp_path: Path) -> None:
    """Each replica from one snapshot of the synced seed; its own sync.toml and principals.toml are kept."""
    if importlib.util.find_spec("skillsearch.cli.snapshot") is not None:
        snap = tmp_path / "snapshot"
        _cli(["--data-dir", str(seed), "snapshot", "create", str(snap)])
        _cli(*(["snapshot", "restore", str(snap), "--data-dir", str(target)] for target in replicas))
        return
    # Without `skillsearch snapshot` (before it lands): a copy of the seed, which nothing writes now.
    for target in replicas:
        for item in seed.iterdir():
            if item.name in ("sync.toml", "principals.toml") or item.name.endswith(".lock"):
                continue
            (shutil.copytree if item.is_dir() else shutil.copy2)(item, target / item.name)


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:] if path.exists() else ""


def _serves(url: str, token: str, slug: str, word: str) -> bool:
    return slug in search_slugs(url, token, word)


def test_fleet_behind_haproxy_loses_no_request_and_serves_a_change_everywhere(tmp_path: Path) -> None:
    assert HAPROXY is not None, "haproxy is not installed: `make test` installs it as root (apt-get install haproxy)"
    upstream = upstream_with_starter(SUB)
    with serve(create_upstream_app(upstream)) as upstream_url:
        seed = tmp_path / "seed"
        token = prepare_data_dir(seed, upstream_url)
        _cli(["--data-dir", str(seed), "sync"])  # one full sync, then the seed is quiescent
        replicas = [tmp_path / f"r{i}" for i in (1, 2, 3)]
        for r in replicas:
            prepare_data_dir(r, upstream_url)
            shutil.copy2(seed / "principals.toml", r / "principals.toml")  # one token for the whole fleet
        _bootstrap(seed, replicas, tmp_path)

        servers: list[ServeProcess] = []
        haproxy: subprocess.Popen[bytes] | None = None
        haproxy_log = (tmp_path / "haproxy.log").open("wb")
        try:
            servers = [ServeProcess(r, wait=False) for r in replicas]  # started together
            for s in servers:
                s.wait()
            lb_port = _free_port()
            lb = f"http://127.0.0.1:{lb_port}"
            haproxy = subprocess.Popen(
                [HAPROXY, "-f", str(HAPROXY_CFG), "-db"], stdout=subprocess.DEVNULL, stderr=haproxy_log,
                env={**os.environ, "SKILLSEARCH_LB_BIND": f"127.0.0.1:{lb_port}",
                     **{f"SKILLSEARCH_R{i}": s.url.removeprefix("http://") for i, s in enumerate(servers, 1)}})
            # Each replica serves the snapshot's catalog at once: nothing to embed before the first answer.
            assert wait_for(lambda: search_slugs(lb, token, "python profiling"), 30)
            for s in servers:
                assert wait_for(lambda s=s: httpx.get(s.url + "/readyz", timeout=10).status_code == 200, 60)
                # A first hybrid search of its own: with the model-free test encoder, it is what imports torch
                # (for the batching service's thread count), a GIL-holding stall of seconds on a busy host that
                # MiniLM's background load takes before /readyz says ready.
                with httpx.Client(timeout=60, headers={"Authorization": f"Bearer {token}"}) as http:
                    assert http.get(s.url + "/v1/search", params={"q": "warm up"}).status_code == 200

            stop = threading.Event()
            outcomes: list[tuple[int, str]] = []
            lock = threading.Lock()

            def load(worker: int) -> None:
                with httpx.Client(timeout=30, headers={"Authorization": f"Bearer {token}"}) as http:
                    n = 0
                    while not stop.is_set() and n < 2000:
                        n += 1
                        try:
                            resp = http.get(lb + "/v1/search", params={"q": f"profile python code {worker} {n}"})
                            outcome = (resp.status_code, "" if resp.status_code == 200 else resp.text[:200])
                        except httpx.HTTPError as exc:
                            outcome = (0, f"{type(exc).__name__}: {exc}")
                        with lock:
                            outcomes.append(outcome)

            with ThreadPoolExecutor(LOAD_THREADS) as pool:
                futures = [pool.submit(load, i) for i in range(LOAD_THREADS)]
                time.sleep(1.0)
                skill_id, item = sorted(upstream.feed(SUB).live().items())[0]
                slug, word = str(item["skill"]["slug"]), "quokkafleetchange"
                upstream.edit(SUB, skill_id, description=f"{item['revision']['description']} {word}")
                fired = time.monotonic()
                assert [fire_webhook(s.url) for s in servers] == [202, 202, 202]
                time.sleep(0.3)
                victim = servers[2]
                victim.proc.send_signal(signal.SIGKILL)  # mid-load, maybe mid-pull
                live = servers[:2]
                for s in live:
                    left = CHANGE_WITHIN_S - (time.monotonic() - fired)
                    assert wait_for(lambda s=s: _serves(s.url, token, slug, word), left), \
                        f"{s.url} did not serve the change within {CHANGE_WITHIN_S}s of the webhook: {s.stderr()}"
                time.sleep(3.0)  # keep the load on while HAProxy notices the dead replica
                stop.set()
                for f in futures:
                    f.result()
            assert victim.proc.wait(10) == -signal.SIGKILL
            failed = [o for o in outcomes if o[0] != 200]
            assert len(outcomes) > 50 and not failed, \
                f"{len(failed)} of {len(outcomes)} failed: {failed[:3]}; haproxy: {_tail(tmp_path / 'haproxy.log')}"
            assert _serves(lb, token, slug, word)
            # The replica's log names the client, not the balancer (option forwardfor; uvicorn trusts the
            # header from 127.0.0.1, FORWARDED_ALLOW_IPS elsewhere): a client on another loopback address.
            with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=30) as http:
                assert http.get(lb + "/v1/skills", params={"limit": 1}, headers={
                    "Authorization": f"Bearer {token}", "X-Request-ID": "fleet-client-127-0-0-2"}).status_code == 200
            def logged() -> list[dict[str, Any]]:  # the access line is written once the answer has gone out
                return [json.loads(line) for s in live for line in (s.data_dir.parent / f"{s.data_dir.name}.stderr")
                        .read_text(errors="replace").splitlines() if "fleet-client-127-0-0-2" in line]

            lines = wait_for(logged, 10)
            assert [entry["client"] for entry in lines] == ["127.0.0.2"], lines
            for s in live:  # both took part in the load
                metrics = httpx.get(s.url + "/metrics", timeout=10).text
                assert any(line.startswith("skillsearch_http_requests_total{") and 'route="/v1/search"' in line
                           and 'status="200"' in line and float(line.split()[-1]) > 10 for line in metrics.splitlines())
        finally:
            if haproxy is not None:
                haproxy.terminate()
                haproxy.wait(10)
            haproxy_log.close()
            for s in servers:
                s.stop()
