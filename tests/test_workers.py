"""``serve --workers N``: one data directory, several processes, exactly one of which syncs.

The leadership itself (``sync/leader.py``) with real files and threads: a pull asked of a non-writer
reaches the writer, and the duties move when the writer lets go. Then real processes: two workers behind
one port, the writer killed with SIGKILL, and the other one takes over sync and serves a change a webhook
announced.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fleetsupport import (
    SUB,
    ServeProcess,
    alive,
    fire_webhook,
    parent_of,
    prepare_data_dir,
    search_slugs,
    wait_for,
)
from syncsupport import serve, upstream_with_starter

from skillsearch.sync.leader import Leadership, leader_pid
from skillsearch.upstream.app import create_upstream_app
from skillsearch.upstream.platform import ReferenceUpstream


class Recording:
    """A duty that records its starts and stops (the real ones are the poller and the sources' runner)."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def start(self) -> None:
        self.events.append("start")

    def stop(self) -> None:
        self.events.append("stop")


def test_only_the_writer_runs_the_duties_and_a_follower_pull_reaches_it(tmp_path: Path) -> None:
    pulls: list[str] = []
    got = threading.Event()

    def on_pull(sid: str) -> None:
        pulls.append(sid)
        got.set()

    first, second = Recording(), Recording()
    a = Leadership(tmp_path, [first], on_pull=on_pull, poll_s=0.05)
    b = Leadership(tmp_path, [second], on_pull=lambda sid: pulls.append(f"b:{sid}"), poll_s=0.05)
    a.start()
    b.start()
    try:
        assert a.is_writer and not b.is_writer
        assert first.events == ["start"] and second.events == []
        assert leader_pid(tmp_path) == os.getpid()
        assert b.request_pull(SUB) == "requested"
        assert b.request_pull(SUB) == "requested"  # idempotent while pending
        assert got.wait(10), "the writer never saw the follower's request"
        time.sleep(0.3)
        assert pulls == [SUB]  # once, by the writer
        assert a.request_pull("other") == "triggered" and pulls[-1] == "other"
        with pytest.raises(ValueError):
            b.request_pull("../escape")
        a.stop()  # the writer goes away: the follower takes over within its poll interval
        assert first.events == ["start", "stop"]
        assert wait_for(lambda: b.is_writer, 10)
        assert second.events == ["start"] and b.terms == 1
    finally:
        a.stop()
        b.stop()
    assert second.events == ["start", "stop"]


@pytest.fixture
def upstream() -> ReferenceUpstream:
    return upstream_with_starter(SUB)


def _edit(up: ReferenceUpstream, word: str) -> str:
    """Publish a new revision of one starter skill whose description holds ``word``; returns its slug."""
    skill_id, item = sorted(up.feed(SUB).live().items())[0]
    up.edit(SUB, skill_id, description=f"{item['revision']['description']} {word}")
    return str(item["skill"]["slug"])


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not in /metrics")


def test_two_workers_when_the_writer_is_killed_the_other_takes_over_sync(
    tmp_path: Path, upstream: ReferenceUpstream
) -> None:
    with serve(create_upstream_app(upstream)) as upstream_url:
        data = tmp_path / "data"
        token = prepare_data_dir(data, upstream_url)
        server = ServeProcess(data, "--workers", "2")
        try:
            # The first sync ran in the writer; every worker serves it.
            assert wait_for(lambda: search_slugs(server.url, token, "python profiling"), 60), server.stderr()
            writer = wait_for(lambda: leader_pid(data), 10)
            assert writer and parent_of(writer) == server.proc.pid  # a worker holds leader.lock
            ready = httpx.get(server.url + "/readyz", timeout=10).json()
            assert ready["status"] == "ready" and ready["generation"] > 0

            os.kill(writer, signal.SIGKILL)
            successor = wait_for(lambda: (p := leader_pid(data)) != writer and p is not None and alive(p) and p, 30)
            assert successor, f"no worker took over after the writer died: {server.stderr()}"
            assert parent_of(successor) == server.proc.pid

            slug = _edit(upstream, "zanzibarquokka")
            assert fire_webhook(server.url) == 202
            assert wait_for(lambda: slug in search_slugs(server.url, token, "zanzibarquokka"), 30), server.stderr()
            # Every worker answers it (each request opens a new connection, which the kernel spreads).
            for _ in range(8):
                assert slug in search_slugs(server.url, token, "zanzibarquokka")
            assert leader_pid(data) == successor  # still one writer, the one that took over
            states: set[Any] = set()
            for _ in range(12):
                states.add(_metric(httpx.get(server.url + "/metrics", timeout=10).text, "skillsearch_sync_writer"))
            assert states <= {0.0, 1.0}
        finally:
            server.stop()
    assert server.proc.returncode in (0, 130)


def test_two_workers_on_a_new_data_directory_say_once_that_it_was_created(tmp_path: Path) -> None:
    """The process preparing the data directory creates and seeds it and says so; the workers and the
    supervisor find it made and say nothing (each of the three said `did not exist: created it` before)."""
    data = tmp_path / "new"
    server = ServeProcess(data, "--workers", "2")
    try:
        assert wait_for(lambda: httpx.get(server.url + "/healthz", timeout=10).status_code == 200, 30)
    finally:
        server.stop()  # the banner came once both workers served: each had composed its app by then
    err = (tmp_path / "new.stderr").read_text(errors="replace")
    notes = [line for line in err.splitlines() if "did not exist" in line]
    assert notes == [f"note: {data} did not exist: created it and seeded it with the bundled sample catalog"
                     " (45 skills)"], err[-4000:]
