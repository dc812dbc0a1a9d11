"""A running ``serve`` follows the subscriptions of its ``sync.toml`` as it follows the local sources: an
operator who added a subscription there had to restart every replica, as ``[upstream]`` and
``[[subscriptions]]`` were read at start only. Now, without a restart, a subscription added is pulled at once
and its webhooks are taken, a changed interval or ``[upstream]`` is used from the next run, one removed is
no longer pulled (its skills stay), and a half-written file changes nothing. Real ``serve`` processes (one,
and two workers of which one leads) against the reference upstream over real HTTP."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from fleetsupport import SECRET, TOKEN, ServeProcess, search_slugs, wait_for
from syncsupport import serve, upstream_with_starter
from test_sources import write_skill

from skillsearch.http.auth import add_principal
from skillsearch.sync.contract import SIGNATURE_HEADER, TIMESTAMP_HEADER, WebhookEvent, sign_webhook
from skillsearch.upstream.app import create_upstream_app
from skillsearch.upstream.platform import ReferenceUpstream

STARTER, TEAM = "starter-pack", "team-b"


def _config(url: str, subscriptions: dict[str, float], token: str = TOKEN) -> str:
    text = (f'[upstream]\nurl = "{url}"\ntoken = "{token}"\nwebhook_secret = "{SECRET}"\ntimeout_s = 5.0\n'
            'retries = 0\nbackoff_base_s = 0.05\nbackoff_max_s = 0.5\n')
    for sid, interval in subscriptions.items():
        text += f'\n[[subscriptions]]\nid = "{sid}"\ninterval_s = {interval}\n'
    return text


def _save(path: Path, text: str) -> None:
    """As an editor saves: a temporary file renamed over the old one (the server never reads half of it)."""
    tmp = path.with_name(".sync.toml.edit")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _publish(up: ReferenceUpstream, folder: Path, slug: str, description: str) -> None:
    write_skill(folder / slug, slug, description)
    assert up.load(TEAM, folder / slug) == []


def _webhook(url: str, subscription_id: str) -> Any:
    """A signed ``skills.changed`` for ``subscription_id``; the action the server took."""
    event = WebhookEvent(id=f"evt_{uuid.uuid4().hex}", type="skills.changed", subscription_id=subscription_id,
                         created_at="")
    body = json.dumps(event.model_dump(), separators=(",", ":")).encode("utf-8")
    ts = int(time.time())
    resp = httpx.post(url + "/v1/sync/webhook", content=body, timeout=30, headers={
        "Content-Type": "application/json", TIMESTAMP_HEADER: str(ts), SIGNATURE_HEADER: sign_webhook(SECRET, ts, body)})
    assert resp.status_code == 202, resp.text
    return resp.json()["action"]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_subscription_added_changed_or_removed_while_serve_runs_is_kept_in_step(tmp_path: Path,
                                                                                   workers: str) -> None:
    up = upstream_with_starter(STARTER)
    team = tmp_path / "team"
    _publish(up, team, "wombat-ledger", "Reconcile the wombat ledger at month end.")
    with serve(create_upstream_app(up)) as upstream_url:
        data = tmp_path / "data"
        data.mkdir()
        config = data / "sync.toml"
        _save(config, _config(upstream_url, {STARTER: 0.5}))
        token = add_principal(data / "principals.toml", "reader", [f"sub:{STARTER}", f"sub:{TEAM}"], ["skills:read"])
        reader = {"Authorization": f"Bearer {token}"}
        server = ServeProcess(data, "--workers", workers)
        log = tmp_path / "data.stderr"  # the whole of it (ServeProcess.stderr is its tail)
        try:
            url = server.url

            def found(query: str) -> list[str]:
                return search_slugs(url, token, query)

            def status() -> dict[str, dict[str, Any]]:
                subs = httpx.get(url + "/v1/sync/status", headers=reader, timeout=30).json()["subscriptions"]
                return {s["subscription_id"]: s for s in subs}

            assert wait_for(lambda: found("python profiling"), 60), server.stderr()
            assert _webhook(url, TEAM) == "ignored"  # not (yet) one of ours

            # Added: pulled at once, shown by the status and the health, its webhooks taken.
            _save(config, _config(upstream_url, {STARTER: 0.5, TEAM: 3600}))
            assert wait_for(lambda: "wombat-ledger" in found("wombat ledger"), 60), server.stderr()
            assert wait_for(lambda: list(status()) == [STARTER, TEAM], 10)
            if workers == "1":  # the writer answers: its poller runs it
                assert status()[TEAM]["poller"]["interval_s"] == 3600
            assert wait_for(lambda: 'name="team-b"' in httpx.get(url + "/metrics", timeout=30).text, 10)
            assert wait_for(lambda: httpx.get(url + "/readyz", timeout=30).status_code == 200, 30)
            _publish(up, team, "quokka-census", "Count the quokkas on the island.")
            assert _webhook(url, TEAM) == "pull_scheduled"
            assert wait_for(lambda: "quokka-census" in found("quokka census"), 30), server.stderr()

            # A changed interval: run at once, then on it (no webhook for this change).
            _publish(up, team, "numbat-survey", "Survey the numbats of the woodland.")
            _save(config, _config(upstream_url, {STARTER: 0.5, TEAM: 0.5}))
            assert wait_for(lambda: "numbat-survey" in found("numbat survey"), 30), server.stderr()

            # A changed [upstream]: the next run uses it (a token the platform refuses), and again once restored.
            _save(config, _config(upstream_url, {STARTER: 0.5, TEAM: 0.5}, token="not-the-token"))
            assert wait_for(lambda: status()[STARTER]["failing"], 30), server.stderr()
            _save(config, _config(upstream_url, {STARTER: 0.5, TEAM: 0.5}))
            assert wait_for(lambda: not status()[STARTER]["failing"], 30), server.stderr()

            # Half written: nothing changes, and it is said.
            config.write_text(config.read_text(encoding="utf-8") + "\n[[subscriptions]\n", encoding="utf-8")
            assert wait_for(lambda: "the subscriptions stay as they were until it reads" in log.read_text(), 30)
            assert list(status()) == [STARTER, TEAM]
            assert _webhook(url, TEAM) == "pull_scheduled"

            # Removed: no longer pulled (nor its webhooks taken), its skills stay as they are.
            _save(config, _config(upstream_url, {STARTER: 0.5}))
            assert wait_for(lambda: list(status()) == [STARTER], 30), server.stderr()
            assert _webhook(url, TEAM) == "ignored"
            _publish(up, team, "platypus-count", "Count the platypuses of the creek.")
            seen = {status()[STARTER]["last_success"]}

            def three_more_runs() -> bool:  # of starter-pack, one at a time with team-b's were it still polled
                seen.add(status()[STARTER]["last_success"])
                return len(seen) >= 4

            assert wait_for(three_more_runs, 60), server.stderr()
            assert "platypus-count" not in found("platypus creek")
            assert "wombat-ledger" in found("wombat ledger")
            assert 'name="team-b"' not in httpx.get(url + "/metrics", timeout=30).text
        finally:
            server.stop()
    text = log.read_text(errors="replace")
    assert "subscriptions: added: team-b" in text and "subscriptions: removed: team-b" in text, text[-4000:]


def test_an_upstream_first_configured_while_serve_runs_is_pulled_and_takes_webhooks(tmp_path: Path) -> None:
    """`make serve` on a data directory of local sources only, then `[upstream]` and a subscription written
    into its sync.toml: pulled without a restart. Before that, a webhook is refused (401, JSON), not lost in
    a 404; and once the upstream is taken out again, refused again."""
    up = upstream_with_starter(STARTER)
    with serve(create_upstream_app(up)) as upstream_url:
        data = tmp_path / "data"
        data.mkdir()
        token = add_principal(data / "principals.toml", "reader", [f"sub:{STARTER}"], ["skills:read"])
        (data / "sync.toml").write_text("", encoding="utf-8")  # not seeded with the sample: a synced catalog
        server = ServeProcess(data)
        try:
            resp = httpx.post(server.url + "/v1/sync/webhook", content=b"{}", timeout=30)
            assert resp.status_code == 401 and resp.json()["error"]["code"] == "UNAUTHENTICATED", resp.text
            _save(data / "sync.toml", _config(upstream_url, {STARTER: 3600}))
            assert wait_for(lambda: search_slugs(server.url, token, "python profiling"), 60), server.stderr()
            assert _webhook(server.url, STARTER) == "pull_scheduled"
            _save(data / "sync.toml", "")
            assert wait_for(lambda: httpx.post(server.url + "/v1/sync/webhook", content=b"{}",
                                               timeout=30).status_code == 401, 30)
            assert search_slugs(server.url, token, "python profiling")  # its skills stay
        finally:
            server.stop()
