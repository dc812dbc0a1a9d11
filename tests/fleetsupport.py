"""Helpers of the process tests of ``serve --workers`` and of the fleet: real ``skillsearch serve`` processes
on data directories synced from a reference upstream, signed webhooks, and searches over real HTTP."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from skillsearch.http.auth import add_principal
from skillsearch.sync.client import send_webhook
from skillsearch.sync.contract import WebhookEvent

REPO = Path(__file__).resolve().parents[1]
TOKEN = "test-token"  # the upstream's
SECRET = "test-webhook-secret"
SUB = "starter-pack"


def prepare_data_dir(data_dir: Path, upstream_url: str, interval_s: float = 3600) -> str:
    """A data directory that syncs ``SUB`` from ``upstream_url`` (webhooks on); returns a reader's token."""
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "sync.toml").write_text(
        f'[upstream]\nurl = "{upstream_url}"\ntoken = "{TOKEN}"\nwebhook_secret = "{SECRET}"\n'
        'timeout_s = 5.0\nretries = 1\nbackoff_base_s = 0.05\nbackoff_max_s = 0.5\n\n'
        f'[[subscriptions]]\nid = "{SUB}"\ninterval_s = {interval_s}\n', encoding="utf-8")
    return add_principal(data_dir / "principals.toml", "reader", [f"sub:{SUB}"], ["skills:read"])


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


class ServeProcess:
    """``skillsearch serve`` as a child process (the hashing encoder: what is under test is the processes,
    the locks and the sync, not the model); ``url`` once its banner says it serves."""

    def __init__(self, data_dir: Path, *args: str, port: int = 0, timeout: float = 120, wait: bool = True) -> None:
        self.data_dir = data_dir
        self.timeout = timeout
        cmd = [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data_dir), "--encoder", "hashing", "-q",
               "serve", "--port", str(port), *args]
        self.log = (data_dir.parent / f"{data_dir.name}.stderr").open("w")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.log, text=True, env=env(),
                                     cwd=REPO)
        self.url = ""
        if wait:
            self.wait()

    def wait(self) -> str:
        """The URL, once the banner says it serves."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            match = re.search(r"serving on (http://[\d.]+:\d+)", line)
            if match:
                self.url = match.group(1)
                break
        assert self.url, f"serve did not start: {self.stderr()}"
        return self.url

    def stderr(self) -> str:
        self.log.flush()
        return (self.data_dir.parent / f"{self.data_dir.name}.stderr").read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.log.close()


def fire_webhook(url: str, event_type: str = "skills.changed") -> int:
    event = WebhookEvent(id=f"evt_{uuid.uuid4().hex}", type=event_type, subscription_id=SUB, created_at="")
    return send_webhook(url + "/v1/sync/webhook", SECRET, event)


def search_slugs(url: str, token: str, query: str, client: httpx.Client | None = None) -> list[str]:
    http = client or httpx.Client(timeout=30)
    try:
        resp = http.get(url + "/v1/search", params={"q": query, "mode": "lexical", "limit": 5},
                        headers={"Authorization": f"Bearer {token}"})
        resp.raise_for_status()
        return [h["slug"] for h in resp.json()["hits"]]
    finally:
        if client is None:
            http.close()


def wait_for(check: Callable[[], Any], timeout: float, step: float = 0.1) -> Any:
    """Polls ``check`` until it returns something truthy; the last value otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
        except (httpx.HTTPError, OSError):
            value = None
        if value or time.monotonic() > deadline:
            return value
        time.sleep(step)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
