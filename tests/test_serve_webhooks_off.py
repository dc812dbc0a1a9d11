"""``serve`` with an ``[upstream]`` that has no webhook secret: every webhook is refused (401), and the banner
says so and how to turn them on, rather than leaving an operator to find out from the platform's failures."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

_UPSTREAM = '[upstream]\nurl = "http://127.0.0.1:9"\nallow_insecure_http = true\ntoken = "t"\n'


def _banner(data: Path) -> tuple[list[str], httpx.Response]:
    """The banner of ``serve`` on ``data`` (its ``sync.toml``), and the answer to one unsigned webhook."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "HF_HUB_OFFLINE": "1",
           "SKILLSEARCH_ENCODER": "hashing"}
    proc = subprocess.Popen([sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data), "-q", "serve", "--port",
                             "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        match = re.search(r"serving on (http://127\.0\.0\.1:\d+)", first)
        assert match, first
        answer = httpx.post(f"{match.group(1)}/v1/sync/webhook", json={}, timeout=30)
        proc.terminate()
        proc.wait(60)
        return [first, *proc.stdout.read().splitlines()], answer
    finally:
        proc.terminate()
        proc.wait(60)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.parametrize("secret", [None, 'webhook_secret = "s3cret"\n'])
def test_the_banner_says_webhooks_are_off_without_a_secret(sample_dir: Path, tmp_path: Path, secret: str | None) -> None:
    data = tmp_path / "data"
    shutil.copytree(sample_dir, data)
    config = data / "sync.toml"
    config.write_text(_UPSTREAM + (secret or ""), encoding="utf-8")
    lines, answer = _banner(data)
    said = [x for x in lines if x.strip().startswith("webhooks:")]
    assert answer.status_code == 401
    if secret is None:
        assert "webhooks are not enabled here" in answer.json()["error"]["message"]
        assert len(said) == 1, lines
        assert said[0].startswith("  webhooks:     off: every POST http://127.0.0.1:"), said
        assert said[0].endswith("/v1/sync/webhook is 401 (the catalog still pulls on its interval); to take them, set"
                                f" webhook_secret (or webhook_secret_env) in [upstream] of {config}"), said
    else:  # on: a webhook without a valid signature is refused for that, and the banner says nothing of them
        assert "not enabled" not in answer.json()["error"]["message"]
        assert said == [], lines
