"""What an operator watches and meets at start-up: ``/metrics`` (the index generation, whether this process is
the writer, each sync's age), ``/readyz`` (degraded when a sync has failed for longer than the bound), and
the start-up lines of ``serve`` and ``mcp --http`` (their URL, or one line and exit code 3)."""

from __future__ import annotations

import json
import math
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from fleetsupport import REPO, SUB, env, fire_webhook
from syncsupport import config_for, serve, upstream_with_starter

from skillsearch.cli import build_serve_app
from skillsearch.http.auth import PrincipalRegistry
from skillsearch.http.server import ServerThread
from skillsearch.service import Catalog
from skillsearch.sync.health import degraded_reasons
from skillsearch.upstream.app import create_upstream_app


def _metric(text: str, metric: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pattern = re.compile(rf"^{re.escape(metric)}\{{{re.escape(want)}\}} (\S+)$" if want else
                         rf"^{re.escape(metric)} (\S+)$", re.M)
    match = pattern.search(text)
    assert match, f"{metric}{{{want}}} not in /metrics"
    return float(match.group(1))


def _synced(url: str) -> bool:
    text = httpx.get(url + "/metrics", timeout=10).text
    return not math.isnan(_metric(text, "skillsearch_sync_last_success_age_seconds", kind="subscription", name=SUB))


def _wait(check, timeout: float = 60) -> bool:  # type: ignore[no-untyped-def]
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return False


def test_metrics_and_readyz_follow_the_sync_and_say_degraded_when_it_keeps_failing(
    empty_catalog: Catalog, tmp_path: Path
) -> None:
    upstream = upstream_with_starter(SUB)
    upstream_server = serve(create_upstream_app(upstream))
    upstream_url = upstream_server.__enter__()
    try:
        app = build_serve_app(empty_catalog, PrincipalRegistry(tmp_path / "principals.toml"),
                              sync=config_for(upstream_url, SUB, interval_s=3600), degraded_after_s=0.5)
        with ServerThread(app) as url:
            # The store records the success a moment before the index reflects it (503 meanwhile).
            assert _wait(lambda: _synced(url) and httpx.get(url + "/readyz", timeout=10).status_code == 200)
            ready = httpx.get(url + "/readyz", timeout=10).json()
            assert ready["status"] == "ready" and ready["degraded"] == [] and ready["writer"] is True
            text = httpx.get(url + "/metrics", timeout=10).text
            assert _metric(text, "skillsearch_index_generation") == ready["generation"] > 0
            assert _metric(text, "skillsearch_sync_writer") == 1
            assert _metric(text, "skillsearch_sync_failing_seconds", kind="subscription", name=SUB) == 0
            assert 0 <= _metric(text, "skillsearch_sync_last_success_age_seconds", kind="subscription", name=SUB) < 60

            upstream_server.stop()  # the platform goes away; the next pull fails
            assert fire_webhook(url) == 202
            assert _wait(lambda: httpx.get(url + "/readyz", timeout=10).json()["status"] == "degraded", 30)
            resp = httpx.get(url + "/readyz", timeout=10)
            assert resp.status_code == 200  # still serving its last good state: kept in rotation
            body = resp.json()
            assert body["generation"] == ready["generation"]
            assert len(body["degraded"]) == 1 and f"subscription {SUB}: sync failing for" in body["degraded"][0]
            text = httpx.get(url + "/metrics", timeout=10).text
            assert _metric(text, "skillsearch_sync_failing_seconds", kind="subscription", name=SUB) > 0.5
    finally:
        upstream_server.stop()


def test_failing_time_counts_from_the_first_failure_since_the_last_success_not_from_that_success(
    empty_catalog: Catalog, tmp_path: Path
) -> None:
    """A replica that last synced an hour ago (an hourly poll) and whose next poll fails is not failing for
    an hour: the failing time starts at the first failure after the last success, is kept across the next
    failures, and a success clears it. The data's age is still reported as is."""
    from datetime import UTC, datetime, timedelta

    from skillsearch.catalog.sync_state import SyncState

    source = f"upstream:{SUB}"
    an_hour_ago = (datetime.now(UTC) - timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    empty_catalog.store.sync.save(SyncState(source, None, an_hour_ago, None, {}))
    down = "http://127.0.0.1:9"  # the platform is unreachable
    app = build_serve_app(empty_catalog, PrincipalRegistry(tmp_path / "principals.toml"),
                          sync=config_for(down, SUB, interval_s=3600), degraded_after_s=600)
    with ServerThread(app) as url:
        assert _wait(lambda: (s := empty_catalog.store.sync.state(source)) is not None and s.last_error, 60)
        first = empty_catalog.store.sync.state(source)  # the poller retries failures: maybe not the first one
        assert first is not None and first.last_error and first.failing_since
        assert an_hour_ago < first.failing_since <= first.last_error.split(" ")[0]
        ready = httpx.get(url + "/readyz", timeout=10).json()
        assert ready["status"] == "ready" and ready["degraded"] == [], ready  # not "failing for 3600s"
        text = httpx.get(url + "/metrics", timeout=10).text
        assert 0 < _metric(text, "skillsearch_sync_failing_seconds", kind="subscription", name=SUB) < 600
        assert _metric(text, "skillsearch_sync_last_success_age_seconds", kind="subscription", name=SUB) >= 3600

        assert fire_webhook(url) == 202  # another pull, another failure: the failing time still starts at the first
        assert _wait(lambda: (s := empty_catalog.store.sync.state(source)) is not None
                     and s.last_error != first.last_error, 60)
        again = empty_catalog.store.sync.state(source)
        assert again is not None and again.failing_since == first.failing_since and again.last_success == an_hour_ago

    upstream = upstream_with_starter(SUB)
    with serve(create_upstream_app(upstream)) as upstream_url:  # the platform is back: one success clears it
        [report] = empty_catalog.subscriptions.sync_once(config_for(upstream_url, SUB))
    assert report.error is None
    healed = empty_catalog.store.sync.state(source)
    assert healed is not None and healed.failing_since is None
    [health] = empty_catalog.subscriptions.sync_health(config_for(upstream_url, SUB), (), 0.0)
    assert health.failing_for_s is None


def test_a_revoked_subscription_is_not_a_failing_sync(empty_catalog: Catalog, tmp_path: Path) -> None:
    """The platform revoked the subscription: every pull answers 403 and records why, but the replica shows
    what it must (none of its skills), so /readyz does not turn degraded and the status does not say failing."""
    upstream = upstream_with_starter(SUB)
    with serve(create_upstream_app(upstream)) as upstream_url:
        config = config_for(upstream_url, SUB)
        assert empty_catalog.subscriptions.sync_once(config)[0].error is None
        upstream.set_revoked(SUB, True)
        for _ in range(2):  # revoked, then the next poll's 403 again
            [report] = empty_catalog.subscriptions.sync_once(config)
            assert report.revoked
        [health] = empty_catalog.subscriptions.sync_health(config, (), 0.0)
        assert health.failing_for_s is None and degraded_reasons([health], 0.0) == []
        [status] = empty_catalog.subscriptions.sync_status(config).subscriptions
        assert status.revoked and not status.failing and "revoked" in (status.last_error or "")
        app = build_serve_app(empty_catalog, PrincipalRegistry(tmp_path / "principals.toml"),
                              sync=config_for(upstream_url, SUB, interval_s=3600), degraded_after_s=0.0)
        with ServerThread(app) as url:
            assert _wait(lambda: httpx.get(url + "/readyz", timeout=10).status_code == 200)
            ready = httpx.get(url + "/readyz", timeout=10).json()
        assert ready["status"] == "ready" and ready["degraded"] == []


def test_a_new_replica_whose_first_sync_fails_is_not_ready_until_a_sync_succeeds(
    empty_catalog: Catalog, tmp_path: Path
) -> None:
    """docs/deploy.md: a replica whose index is still empty, such as a new one on its first full sync, is 503.
    One whose platform is unreachable from the start answered 200 `ready` with 0 documents, so a balancer
    sent it requests it answered with nothing; it is 503 `INDEX_NOT_READY` (naming the syncs) until a sync
    succeeds, then ready."""
    down = "http://127.0.0.1:9"  # the platform is unreachable
    app = build_serve_app(empty_catalog, PrincipalRegistry(tmp_path / "principals.toml"),
                          sync=config_for(down, SUB, interval_s=3600), degraded_after_s=600)
    with ServerThread(app) as url:
        assert _wait(lambda: (s := empty_catalog.store.sync.state(f"upstream:{SUB}")) is not None and s.last_error)
        resp = httpx.get(url + "/readyz", timeout=10)
        assert resp.status_code == 503, resp.text
        error = resp.json()["error"]
        assert error["code"] == "INDEX_NOT_READY" and error["details"]["first_sync"] == [f"subscription {SUB}"], error
        assert "no sync has succeeded" in error["message"]

        with serve(create_upstream_app(upstream_with_starter(SUB))) as upstream_url:  # the platform is back
            [report] = empty_catalog.subscriptions.sync_once(config_for(upstream_url, SUB))
        assert report.error is None
        ready = httpx.get(url + "/readyz", timeout=10)
        assert ready.status_code == 200 and ready.json()["documents"] > 0, ready.text


class HeldPulls:
    """ASGI middleware in front of the reference upstream (the process boundary we do not own): a request
    for a subscription's skills waits until ``released`` is set (at most a minute)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.released = threading.Event()
        self.asked = threading.Event()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        import anyio

        if scope["type"] == "http" and scope["path"].endswith(f"/subscriptions/{SUB}/skills"):
            self.asked.set()
            await anyio.to_thread.run_sync(self.released.wait, 60)
        await self.app(scope, receive, send)


def test_a_restarted_replica_is_not_ready_until_a_pull_has_applied_the_revocation_it_missed(
    empty_catalog: Catalog, tmp_path: Path
) -> None:
    """A replica down (or restored from an older snapshot) when the platform revoked a subscription missed
    the webhook: its catalog still holds the revoked skills. It answered /readyz 200 at once, so the balancer
    sent it requests it answered with those skills until its first pull. It is 503 `INDEX_NOT_READY`
    (``details.first_pull`` naming the subscription) until a pull has finished since its writer started."""
    upstream = upstream_with_starter(SUB)
    held = HeldPulls(create_upstream_app(upstream))
    held.released.set()
    with serve(held) as upstream_url:
        [report] = empty_catalog.subscriptions.sync_once(config_for(upstream_url, SUB))
        assert report.error is None and report.outcome.changed  # the replica's earlier life
        upstream.set_revoked(SUB, True)  # while it is down: the webhook never reaches it
        held.released.clear()
        held.asked.clear()
        app = build_serve_app(empty_catalog, PrincipalRegistry(tmp_path / "principals.toml"),
                              sync=config_for(upstream_url, SUB, interval_s=3600), degraded_after_s=600)
        with ServerThread(app) as url:
            assert held.asked.wait(60), "the restarted replica's poller never pulled"

            def held_back() -> bool:
                resp = httpx.get(url + "/readyz", timeout=10)
                return resp.status_code == 503 and "first_pull" in resp.json()["error"]["details"]

            try:
                assert _wait(held_back, 30), httpx.get(url + "/readyz", timeout=10).text
                error = httpx.get(url + "/readyz", timeout=10).json()["error"]
                assert error["code"] == "INDEX_NOT_READY" and error["details"]["first_pull"] == [f"subscription {SUB}"]
                assert empty_catalog.store.revoked_at(SUB) is None  # what it would have served meanwhile
            finally:
                held.released.set()
            assert _wait(lambda: httpx.get(url + "/readyz", timeout=10).status_code == 200)
            assert empty_catalog.store.revoked_at(SUB) is not None
            assert httpx.get(url + "/readyz", timeout=10).json()["status"] == "ready"


def test_a_process_that_is_not_the_writer_says_so(empty_catalog: Catalog, tmp_path: Path) -> None:
    from skillsearch.catalog.store import utc_now
    from skillsearch.catalog.sync_state import SyncState
    from skillsearch.sync.leader import Leadership

    # Skills imported here: a catalog with nothing in it, never synced, is not ready (nothing to serve).
    assert empty_catalog.import_path(REPO / "skillsearch" / "sample" / "ops", "local", "team:ops").created
    holder = Leadership(empty_catalog.data_dir, [])
    holder.start()  # another process's writer, as far as this app can tell (its own open of leader.lock)
    try:
        app = build_serve_app(empty_catalog, PrincipalRegistry(tmp_path / "principals.toml"),
                              sync=config_for("http://127.0.0.1:9", SUB, interval_s=3600))
        with ServerThread(app) as url:
            text = httpx.get(url + "/metrics", timeout=10).text
            assert _metric(text, "skillsearch_sync_writer") == 0
            # Its poller never ran: the subscription was not pulled here.
            assert math.isnan(_metric(text, "skillsearch_sync_last_success_age_seconds", kind="subscription",
                                      name=SUB))
            assert _metric(text, "skillsearch_sync_failing_seconds", kind="subscription", name=SUB) == 0
            # Nor by the writer since it took the lead: held back, whichever process is asked.
            held = httpx.get(url + "/readyz", timeout=10)
            assert held.status_code == 503 and held.json()["error"]["details"]["first_pull"] == [f"subscription {SUB}"]
            # The writer's pull (here: recorded as a writer records it) lets every process in.
            empty_catalog.store.sync.save(SyncState(f"upstream:{SUB}", "c1", utc_now(), None, {}))
            assert httpx.get(url + "/readyz", timeout=10).json()["writer"] is False
    finally:
        holder.stop()


# -- start-up lines ---------------------------------------------------------------------------------------------


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "skillsearch.cli", *args], capture_output=True, text=True,
                          env=env(), cwd=REPO, timeout=timeout)


@pytest.fixture
def busy_port() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    yield sock  # type: ignore[misc]
    sock.close()


@pytest.mark.parametrize("command", [["serve"], ["serve", "--workers", "2"], ["mcp", "--http"]])
def test_a_busy_port_is_one_line_and_exit_code_3(command: list[str], busy_port: socket.socket,
                                                 tmp_path: Path) -> None:
    port = str(busy_port.getsockname()[1])
    done = _run("--data-dir", str(tmp_path / "data"), "--encoder", "hashing", "-q", *command, "--port", port)
    assert done.returncode == 3, done.stderr
    assert done.stderr.strip() == f"error: cannot listen on 127.0.0.1:{port}: Address already in use (another server" \
                                  " is listening there: stop it, or pick another --port; 0 picks a free one)"
    assert not (tmp_path / "data").exists()  # refused before the data directory was touched


def test_the_reference_upstream_on_a_busy_port_ends_with_one_line_and_exit_code_3(busy_port: socket.socket) -> None:
    """README, exit code 3: `upstream` is a server too (it loads its folders, then cannot listen)."""
    port = str(busy_port.getsockname()[1])
    done = _run("upstream", "--from", f"starter-pack={REPO / 'skillsearch' / 'sample' / 'starter'}", "--port", port)
    assert done.returncode == 3, done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"error: cannot listen on 127.0.0.1:{port}: Address already in" \
        " use (another server is listening there: stop it, or pick another --port; 0 picks a free one)", done.stderr


@pytest.mark.parametrize("command", [["serve"], ["mcp", "--http"], ["mcp"]])
def test_a_data_dir_that_is_a_file_is_one_line_and_exit_code_3_of_every_server(command: list[str], tmp_path: Path) -> None:
    """A server's data directory that cannot be one is a server that cannot start (README: exit code 3, one
    ``error:`` line), not a usage error with argparse's banner as for the other commands."""
    data = tmp_path / "data"
    data.write_text("not a folder")
    done = _run("--data-dir", str(data), "--encoder", "hashing", "-q", *command, "--port", "0")
    assert done.returncode == 3, done.stderr
    assert done.stderr.strip() == f"error: data directory {data} is not a directory"
    done = _run("--data-dir", str(tmp_path / "missing" / "data"), "-q", *command, "--port", "0")
    assert done.returncode == 3, done.stderr
    assert done.stderr.strip() == (f"error: data directory {tmp_path / 'missing' / 'data'} does not exist and cannot be"
                                   f" created in {tmp_path / 'missing'}")


@pytest.mark.parametrize("command", [["serve"], ["mcp", "--http"], ["mcp"]])
def test_a_data_dir_that_is_a_link_to_nothing_says_so_with_exit_code_3(command: list[str], tmp_path: Path) -> None:
    """A symbolic link to a folder that does not exist: the servers said `cannot be created: File exists`,
    where the other commands name the link and its target."""
    data = tmp_path / "data"
    data.symlink_to(tmp_path / "gone")
    done = _run("--data-dir", str(data), "--encoder", "hashing", "-q", *command, "--port", "0")
    assert done.returncode == 3, done.stderr
    assert done.stderr.strip() == (f"error: data directory {data} is a symbolic link to {tmp_path / 'gone'}, which"
                                   " does not exist; create that folder first, or check the path")
    assert not (tmp_path / "gone").exists()


@pytest.mark.parametrize("command", [["serve"], ["serve", "--workers", "2"], ["mcp", "--http"]])
def test_an_unreadable_data_dir_is_one_line_and_exit_code_3(command: list[str]) -> None:
    """A data directory this user may not read and write (``chmod 000``; run unprivileged: root reads
    everything) stops a server before it opens anything, in one line."""
    unprivileged = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
    base = Path(tempfile.mkdtemp(prefix="fleet-"))  # outside pytest's root-only folder
    data = base / "data"
    try:
        data.mkdir()
        if unprivileged:
            os.chown(base, 65534, 65534)
        data.chmod(0)
        done = subprocess.run([*unprivileged, sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data),
                               "--encoder", "hashing", "-q", *command, "--port", "0"], capture_output=True, text=True,
                              env={**env(), "HOME": str(base)}, cwd=REPO, timeout=120)
        assert done.returncode == 3, done.stderr
        assert done.stderr.strip() == f"error: data directory {data} is not readable and writable by this user"
    finally:
        data.chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


def test_mcp_http_and_upstream_under_json_print_one_object_with_their_url(sample_dir: Path, tmp_path: Path) -> None:
    """``--json`` promises one JSON object on stdout: ``mcp --http`` and ``upstream`` printed their text banner on
    stderr and nothing on stdout, so a script that asked ``--port 0`` could not learn the port (``serve --json``
    already printed its object)."""
    data = tmp_path / "data"
    shutil.copytree(sample_dir, data)
    folder = tmp_path / "skills" / "demo"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: demo\ndescription: A demo skill.\n---\nHello.\n", encoding="utf-8")
    commands = {
        "mcp": ["--data-dir", str(data), "-q", "mcp", "--http", "--port", "0", "--grant", "sub:starter-pack", "--json"],
        "upstream": ["upstream", "--from", f"s1={tmp_path / 'skills'}", "--port", "0", "--json"],
    }
    for name, argv in commands.items():
        proc = subprocess.Popen([sys.executable, "-m", "skillsearch.cli", *argv], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env(), cwd=REPO)
        try:
            assert proc.stdout is not None
            ready, _, _ = select.select([proc.stdout], [], [], 180)  # the banner alone on stderr: nothing comes
            assert ready, f"{name} --json printed nothing on stdout"
            said = json.loads(proc.stdout.readline())
            assert re.fullmatch(r"http://127\.0\.0\.1:\d+", said["url"]), said
            if name == "mcp":
                assert said["mcp"] == said["url"] + "/mcp" and said["skills"] == 45 and said["visible"] == 18
                assert said["principal"] == {"name": "cli", "grants": ["sub:starter-pack"], "scopes": ["memory:read"]}
                resp = httpx.post(said["mcp"], json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                  headers={"Accept": "application/json, text/event-stream"}, timeout=30)
                assert resp.status_code == 200, resp.text
            else:
                assert said["skills"] == said["url"] + "/v1/subscriptions/{id}/skills"
                resp = httpx.get(said["url"] + "/v1/subscriptions/s1/skills",
                                 headers={"Authorization": "Bearer demo-token"}, timeout=30)
                assert resp.status_code == 200 and resp.json()["items"][0]["skill"]["slug"] == "demo", resp.text
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            assert proc.stdout is not None and proc.stderr is not None
            assert proc.stdout.read() == ""  # the one object, nothing more
            assert "serving on" not in proc.stderr.read()  # the text banner is not printed beside it
            proc.stdout.close()
            proc.stderr.close()


def test_mcp_http_prints_its_url_principal_and_catalog_size(sample_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(sample_dir, data)
    proc = subprocess.Popen(
        [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data), "-q", "mcp", "--http", "--port", "0",
         "--grant", "sub:starter-pack"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(), cwd=REPO)
    try:
        assert proc.stderr is not None
        lines = []
        for _ in range(40):
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("  catalog:"):
                break
        text = "".join(lines)
        url = re.search(r"serving on (http://127\.0\.0\.1:\d+/mcp) \(streamable HTTP", text)
        assert url, text
        assert "  principal:    cli (sub:starter-pack; scopes: memory:read)" in text
        assert re.search(r"  catalog:      45 skills \(18 visible to cli\), 45 searchable, in .*data", text), text
        resp = httpx.post(url.group(1), json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                          headers={"Accept": "application/json, text/event-stream"}, timeout=30)
        assert resp.status_code < 500
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        assert proc.stdout is not None and proc.stdout.read() == ""  # stdout carries nothing
        proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
