"""``skillsearch mcp`` keeps the subscriptions of its ``sync.toml`` as ``serve`` does: a developer who ran only
``skillsearch mcp`` in their MCP host, with a subscription configured, got skills that never updated and
revocations that never applied unless they ran ``skillsearch sync`` by hand. Now its poller pulls them while
the server is open (stdio and ``--http``), follows the file, takes turns with other syncs of the data
directory without holding up the protocol, survives a failing upstream, and ``--no-sync`` pulls nothing.
Real ``mcp`` subprocesses driven by the SDK's client, against the reference upstream over real HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client
from mcp_support import ROOT, ok, stdio_params
from syncsupport import TOKEN, serve
from test_sources import TIMEOUT, write_skill
from test_subscriptions_followed import _save

from skillsearch.sync.run_lock import sync_run_lock
from skillsearch.upstream.app import create_upstream_app
from skillsearch.upstream.platform import ReferenceUpstream

TEAM, OTHER = "team-b", "team-c"


def _config(url: str, subscriptions: dict[str, float], token: str = TOKEN) -> str:
    text = (f'[upstream]\nurl = "{url}"\ntoken = "{token}"\ntimeout_s = 5.0\nretries = 0\n'
            'backoff_base_s = 0.05\nbackoff_max_s = 0.5\n')
    for sid, interval in subscriptions.items():
        text += f'\n[[subscriptions]]\nid = "{sid}"\ninterval_s = {interval}\n'
    return text


def _publish(up: ReferenceUpstream, folder: Path, subscription_id: str, slug: str, description: str) -> None:
    write_skill(folder / subscription_id, slug, description)
    assert up.load(subscription_id, folder / subscription_id / slug) == []


def _data(tmp_path: Path, url: str, subscriptions: dict[str, float], token: str = TOKEN) -> Path:
    data = tmp_path / "data"
    data.mkdir()
    _save(data / "sync.toml", _config(url, subscriptions, token))
    return data


async def _names(client: Client) -> set[str]:
    return {s["name"] for s in ok(await client.call_tool("list_skills", {"limit": 200}))["items"]}


async def _until(client: Client, check: Any, stderr: Path) -> set[str]:
    """The names ``list_skills`` shows once ``check(names)`` holds (at most ``TIMEOUT`` s)."""
    with anyio.move_on_after(TIMEOUT):
        while not check(names := await _names(client)):
            await anyio.sleep(0.2)
        return names
    raise AssertionError(f"list_skills still shows {names}\n{stderr.read_text(errors='replace')[-4000:]}")


class Counted:
    """The upstream's ASGI app, with the path of every HTTP request it was sent."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.paths: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.paths.append(scope["path"])
        await self.app(scope, receive, send)


@pytest.mark.anyio
async def test_an_mcp_stdio_server_pulls_its_subscriptions_follows_the_file_and_applies_a_revocation(
    tmp_path: Path,
) -> None:
    up = ReferenceUpstream([TOKEN])
    folder = tmp_path / "upstream"
    _publish(up, folder, TEAM, "wombat-ledger", "Reconcile the wombat ledger at month end.")
    _publish(up, folder, OTHER, "numbat-survey", "Survey the numbats of the woodland.")
    stray: list[BaseException] = []

    async def on_message(message: Any) -> None:  # anything on stdout that is not protocol comes here
        if isinstance(message, BaseException):
            stray.append(message)

    with serve(create_upstream_app(up)) as url:
        data = _data(tmp_path, url, {TEAM: 0.3})
        log = tmp_path / "stderr.txt"
        with log.open("w") as stderr:
            async with Client(stdio_client(stdio_params(data), errlog=stderr), message_handler=on_message,
                              read_timeout_seconds=TIMEOUT) as client:
                assert await _until(client, lambda n: "wombat-ledger" in n, log) == {"wombat-ledger"}  # not seeded

                # Published upstream after the server started: pulled, and the session told.
                async with client.listen(resources_list_changed=True) as events:
                    _publish(up, folder, TEAM, "quokka-census", "Count the quokkas on the island.")
                    with anyio.fail_after(TIMEOUT):
                        event = await events.__anext__()
                assert type(event).__name__ == "ResourcesListChanged"
                await _until(client, lambda n: "quokka-census" in n, log)
                # Searchable once the index has embedded it (the index may lag the store by one batch).
                with anyio.move_on_after(TIMEOUT):
                    while not (found := ok(await client.call_tool(
                            "search_skills", {"query": "count the quokkas on the island"})))["hits"]:
                        await anyio.sleep(0.2)
                assert found["hits"][0]["slug"] == "quokka-census", found

                # A subscription added to sync.toml while the server runs: pulled without a restart.
                _save(data / "sync.toml", _config(url, {TEAM: 0.3, OTHER: 0.3}))
                await _until(client, lambda n: "numbat-survey" in n, log)

                # Revoked upstream: its skills are hidden at the next poll, the other subscription's stay.
                up.set_revoked(TEAM, True)
                names = await _until(client, lambda n: not n & {"wombat-ledger", "quokka-census"}, log)
                assert names == {"numbat-survey"}
    assert stray == []
    text = log.read_text(errors="replace")
    assert f"sync {TEAM}: revoked upstream" in text, text[-4000:]  # the poller's log, on stderr
    assert "Traceback" not in text


@pytest.mark.anyio
async def test_mcp_no_sync_pulls_nothing(tmp_path: Path) -> None:
    up = ReferenceUpstream([TOKEN])
    _publish(up, tmp_path / "upstream", TEAM, "wombat-ledger", "Reconcile the wombat ledger at month end.")
    upstream = Counted(create_upstream_app(up))
    with serve(upstream) as url:
        data = _data(tmp_path, url, {TEAM: 0.2})
        log = tmp_path / "stderr.txt"
        with log.open("w") as stderr:
            async with Client(stdio_client(stdio_params(data, "--no-sync", "--grant", f"sub:{TEAM}"), errlog=stderr),
                              read_timeout_seconds=TIMEOUT) as client:
                assert await _names(client) == set()
                await anyio.sleep(3)  # fifteen of its intervals: a poller would have pulled by now
                assert await _names(client) == set()
        assert upstream.paths == [], log.read_text(errors="replace")[-4000:]
        # The same data directory and file without --no-sync: pulled (the configuration itself works).
        with log.open("a") as stderr:
            async with Client(stdio_client(stdio_params(data, "--grant", f"sub:{TEAM}"), errlog=stderr),
                              read_timeout_seconds=TIMEOUT) as client:
                await _until(client, lambda n: "wombat-ledger" in n, log)
        assert upstream.paths


@pytest.mark.anyio
async def test_an_mcp_waiting_for_another_sync_run_still_answers_then_pulls(tmp_path: Path) -> None:
    """Several mcp processes on one data directory (a host starts one per session) take turns through
    ``sync.lock``: one waiting for another's run answers its session meanwhile, and pulls once it is over."""
    up = ReferenceUpstream([TOKEN])
    _publish(up, tmp_path / "upstream", TEAM, "wombat-ledger", "Reconcile the wombat ledger at month end.")
    with serve(create_upstream_app(up)) as url:
        data = _data(tmp_path, url, {TEAM: 0.3})
        log = tmp_path / "stderr.txt"
        with log.open("w") as stderr:
            async with Client(stdio_client(stdio_params(data), errlog=stderr), read_timeout_seconds=TIMEOUT) as client:
                with sync_run_lock(data, "another-run"):  # another process's run, as far as the server can tell
                    with anyio.fail_after(TIMEOUT):
                        while "waiting for its run to finish" not in log.read_text(errors="replace"):
                            await anyio.sleep(0.2)
                    assert await _names(client) == set()  # answered while its poller waits
                    ok(await client.call_tool("search_skills", {"query": "wombat ledger"}))
                await _until(client, lambda n: "wombat-ledger" in n, log)
    assert f"sync {TEAM}: process {os.getpid()} is syncing" in log.read_text(errors="replace")


@contextmanager
def _mcp_http(data: Path, stderr: Path) -> Iterator[str]:
    """``skillsearch mcp --http --port 0 --json`` on ``data``; its ``/mcp`` URL."""
    with stderr.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "skillsearch.cli", "-q", "mcp", "--data-dir", str(data), "--http",
                                 "--port", "0", "--json"], stdout=subprocess.PIPE, stderr=err, text=True,
                                env=stdio_params(data).env, cwd=ROOT)
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line, stderr.read_text(errors="replace")
            yield json.loads(line)["mcp"]
        finally:
            proc.terminate()
            proc.wait(timeout=60)
            assert proc.stdout is not None
            proc.stdout.close()


@pytest.mark.anyio
async def test_an_mcp_http_server_outlives_a_failing_upstream_and_pulls_once_the_file_is_fixed(tmp_path: Path) -> None:
    up = ReferenceUpstream([TOKEN])
    _publish(up, tmp_path / "upstream", TEAM, "wombat-ledger", "Reconcile the wombat ledger at month end.")
    with serve(create_upstream_app(up)) as url:
        data = _data(tmp_path, url, {TEAM: 0.3}, token="not-the-token")
        log = tmp_path / "stderr.txt"
        with _mcp_http(data, log) as mcp_url:
            async with Client(mcp_url, read_timeout_seconds=TIMEOUT) as client:
                with anyio.fail_after(TIMEOUT):  # refused upstream: logged, tried again with backoff
                    while f"sync {TEAM} failed (2 in a row), next try in" not in log.read_text(errors="replace"):
                        await anyio.sleep(0.2)
                assert await _names(client) == set()  # the session goes on
                _save(data / "sync.toml", _config(url, {TEAM: 0.3}))
                await _until(client, lambda n: "wombat-ledger" in n, log)
    assert "Traceback" not in log.read_text(errors="replace")
