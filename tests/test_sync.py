"""Sync against the reference upstream over real HTTP on 127.0.0.1, with the real model, SQLite and Tantivy."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from syncsupport import (
    SECRET,
    TOKEN,
    catalog_content,
    config_for,
    index_matches_store,
    serve,
    upstream_content,
    upstream_with_starter,
)

from skillsearch import cli
from skillsearch.cli import build_serve_app
from skillsearch.core.domain import Principal
from skillsearch.core.errors import SkillNotFoundError, ValidationError
from skillsearch.core.hashing import stable_id
from skillsearch.http.app import create_app
from skillsearch.http.auth import PrincipalRegistry, add_principal
from skillsearch.http.sync_routes import make_sync_router
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.service import Catalog
from skillsearch.sync.config import load_subscriptions
from skillsearch.sync.contract import SIGNATURE_HEADER, TIMESTAMP_HEADER, ErrorBody, sign_webhook
from skillsearch.upstream.app import contract_openapi, create_upstream_app
from skillsearch.upstream.platform import ReferenceUpstream, WebhookTarget

SUB = "starter-pack"
SOURCE = f"upstream:{SUB}"
MEMBER = Principal(name="member", grants=frozenset({f"sub:{SUB}"}))
OUTSIDER = Principal(name="outsider", grants=frozenset({"sub:other"}))
BISECT = stable_id("sk", f"sub:{SUB}", "git-bisect-regressions")
PROFILING = stable_id("sk", f"sub:{SUB}", "python-profiling")
REGEX = stable_id("sk", f"sub:{SUB}", "regex-debugging")


@pytest.fixture
def upstream() -> ReferenceUpstream:
    return upstream_with_starter(SUB)


@pytest.fixture
def catalog(empty_catalog: Catalog) -> Catalog:
    return empty_catalog


def hit_ids(catalog: Catalog, principal: Principal, query: str) -> list[str]:
    return [h.skill_id for h in catalog.search_view(principal, SearchRequest(query=query, limit=10)).hits]


def test_first_full_sync_brings_exactly_the_upstream_content(catalog: Catalog, upstream: ReferenceUpstream,
                                                             upstream_url: str) -> None:
    [report] = catalog.subscriptions.sync_once(config_for(upstream_url, SUB))
    assert report.error is None and report.full
    assert len(report.outcome.created) == len(upstream.feed(SUB).live()) == 18
    assert catalog_content(catalog, SOURCE) == upstream_content(upstream, SUB)
    index_matches_store(catalog)
    assert catalog.store.skill(BISECT).grant == f"sub:{SUB}"  # type: ignore[union-attr]
    assert hit_ids(catalog, MEMBER, "find the commit that introduced a regression")[0] == BISECT
    assert BISECT not in hit_ids(catalog, OUTSIDER, "find the commit that introduced a regression")
    flows = [s for s in catalog.store.skills(catalog.store.skill_ids_of_source(SOURCE)).values()
             if s.kind == "flow_template"]
    assert flows, "the bundle's flow templates arrive with their steps"
    assert catalog.get_skill(MEMBER, flows[0].skill_id).steps


def test_incremental_sync_reembeds_only_the_changed_skill(catalog: Catalog, upstream: ReferenceUpstream,
                                                          upstream_url: str) -> None:
    config = config_for(upstream_url, SUB)
    catalog.subscriptions.sync_once(config)
    old_revision = catalog.store.skill(PROFILING).current_revision_id  # type: ignore[union-attr]
    before = catalog.index().embed_count
    upstream.edit(SUB, PROFILING, description="Profile CPU hot spots and flamegraph zebra allocations in Python.")

    [report] = catalog.subscriptions.sync_once(config)

    assert not report.full and report.outcome.updated == [PROFILING] and report.pages == 1
    assert catalog.index().embed_count - before == 1
    assert hit_ids(catalog, MEMBER, "flamegraph zebra")[0] == PROFILING
    assert catalog.store.skill(PROFILING).current_revision_id != old_revision  # type: ignore[union-attr]
    assert catalog.store.revision(old_revision) is not None, "the old revision stays readable for pinned reads"
    assert catalog_content(catalog, SOURCE) == upstream_content(upstream, SUB)
    index_matches_store(catalog)
    [again] = catalog.subscriptions.sync_once(config)
    assert again.outcome.changed == [] and catalog.index().embed_count - before == 1


def test_delete_removes_the_skill_and_its_revisions(catalog: Catalog, upstream: ReferenceUpstream,
                                                    upstream_url: str) -> None:
    config = config_for(upstream_url, SUB)
    catalog.subscriptions.sync_once(config)
    revision = catalog.store.skill(REGEX).current_revision_id  # type: ignore[union-attr]
    upstream.delete(SUB, REGEX)

    [report] = catalog.subscriptions.sync_once(config)

    assert report.outcome.deleted == [REGEX]
    assert catalog.store.skill(REGEX) is None and catalog.store.revision(revision) is None
    assert REGEX not in hit_ids(catalog, MEMBER, "debug a regular expression")
    assert catalog_content(catalog, SOURCE) == upstream_content(upstream, SUB)
    index_matches_store(catalog)


def test_archive_leaves_search_but_keeps_revisions(catalog: Catalog, upstream: ReferenceUpstream,
                                                   upstream_url: str) -> None:
    config = config_for(upstream_url, SUB)
    catalog.subscriptions.sync_once(config)
    assert hit_ids(catalog, MEMBER, "find the commit that introduced a regression")[0] == BISECT
    revision = catalog.store.skill(BISECT).current_revision_id  # type: ignore[union-attr]
    upstream.archive(SUB, BISECT)

    [report] = catalog.subscriptions.sync_once(config)

    assert report.outcome.archived == [BISECT]
    assert BISECT not in hit_ids(catalog, MEMBER, "find the commit that introduced a regression")
    with pytest.raises(SkillNotFoundError):
        catalog.get_skill(MEMBER, BISECT)
    assert catalog.store.revision(revision) is not None and catalog.store.resources(revision)
    assert catalog_content(catalog, SOURCE) == upstream_content(upstream, SUB)
    index_matches_store(catalog)


def test_expired_cursor_resyncs_fully_and_drops_what_was_missed(catalog: Catalog, upstream: ReferenceUpstream,
                                                                 upstream_url: str) -> None:
    config = config_for(upstream_url, SUB, page_limit=4)
    catalog.subscriptions.sync_once(config)
    upstream.delete(SUB, REGEX)
    upstream.edit(SUB, PROFILING, description="Measure where Python spends time with sampling profilers.")
    upstream.expire_cursors(SUB)  # the delete's tombstone is compacted away: only a full listing can tell
    before = catalog.index().embed_count

    [report] = catalog.subscriptions.sync_once(config)

    assert report.full and report.error is None
    assert REGEX in report.outcome.deleted and report.outcome.updated == [PROFILING]
    assert catalog.index().embed_count - before == 1, "unchanged skills are not re-embedded by a resync"
    assert catalog_content(catalog, SOURCE) == upstream_content(upstream, SUB)
    index_matches_store(catalog)


def test_one_skill_id_in_two_subscriptions_is_refused_saying_ids_are_catalog_wide(
        catalog: Catalog, upstream: ReferenceUpstream, upstream_url: str) -> None:
    """A platform offering one skill in two plans under one id got "the skill id belongs to source
    'upstream:starter-pack'" for the second, and the contract never said ids are catalog-wide. Now the
    rejection names the subscription that holds the id and the rule (docs/upstream-api.md, "Identity")."""
    upstream.feed("pro-pack", create=True)
    upstream.publish("pro-pack", upstream.feed(SUB).live()[BISECT])
    config = config_for(upstream_url, SUB, "pro-pack")
    first, second = catalog.subscriptions.sync_once(config)
    assert first.error is None and second.error is None
    [rejected] = second.outcome.rejected
    assert rejected.skill_id == BISECT
    assert "already synced from subscription 'starter-pack'" in rejected.reason, rejected.reason
    assert "unique across every subscription" in rejected.reason
    assert catalog.store.skill(BISECT).source == SOURCE  # type: ignore[union-attr]


def test_pagination_across_many_pages(catalog: Catalog, upstream: ReferenceUpstream, upstream_url: str) -> None:
    config = config_for(upstream_url, SUB, page_limit=3)
    [report] = catalog.subscriptions.sync_once(config)
    assert report.pages >= 6
    state = catalog.store.sync.state(SOURCE)
    assert state is not None and state.cursor == report.cursor and state.counts["pages"] == report.pages
    for sid in list(upstream.feed(SUB).live())[:7]:
        upstream.edit(SUB, sid, version="2.0.0")
    [report] = catalog.subscriptions.sync_once(config)
    assert report.pages == 3 and len(report.outcome.updated) == 7
    assert catalog_content(catalog, SOURCE) == upstream_content(upstream, SUB)
    index_matches_store(catalog)


# -- push: the webhook receiver on our HTTP app ---------------------------------------------------------


def _app(catalog: Catalog, url: str, poller: object = None) -> FastAPI:
    app = FastAPI()
    app.include_router(make_sync_router(catalog, config_for(url, SUB), poller))  # type: ignore[arg-type]
    return app


def _post(url: str, body: bytes, timestamp: int | None = None, secret: str = SECRET,
          signature: str | None = None, content_type: str | None = "application/json") -> httpx.Response:
    ts = int(time.time()) if timestamp is None else timestamp
    headers = {TIMESTAMP_HEADER: str(ts), SIGNATURE_HEADER: signature or sign_webhook(secret, ts, body)}
    if content_type is not None:
        headers["Content-Type"] = content_type
    return httpx.post(f"{url}/v1/sync/webhook", content=body, headers=headers)


def _event(event_id: str, kind: str = "subscription.revoked", sub: str = SUB) -> bytes:
    return json.dumps({"id": event_id, "type": kind, "subscription_id": sub}).encode()


def test_revoke_by_webhook_hides_at_once_then_the_pull_confirms(catalog: Catalog, upstream: ReferenceUpstream,
                                                                upstream_url: str) -> None:
    config = config_for(upstream_url, SUB)
    catalog.subscriptions.sync_once(config)
    with serve(_app(catalog, upstream_url)) as app_url:
        upstream.webhook = WebhookTarget(f"{app_url}/v1/sync/webhook", SECRET)
        upstream.set_revoked(SUB, True)
        assert upstream.notify("subscription.revoked", SUB) == 202

        # no pull has run: the store still holds the skills, yet no read shows them
        assert catalog.store.skill(BISECT) is not None
        assert hit_ids(catalog, MEMBER, "find the commit that introduced a regression") == []
        assert catalog.list_skills(MEMBER).items == []
        with pytest.raises(SkillNotFoundError):
            catalog.get_skill(MEMBER, BISECT)

        [report] = catalog.subscriptions.sync_once(config)
        assert report.revoked and catalog.store.skill(BISECT) is None
        status = httpx.get(f"{app_url}/v1/sync/status").json()["subscriptions"][0]
        assert status["revoked"] and status["skills_active"] == 0 and status["cursor"] is None
        index_matches_store(catalog)

        # Reinstated upstream, announced: the webhook is sent, and the pull it calls for lifts it.
        reinstated = httpx.post(f"{upstream_url}/admin/subscriptions/{SUB}/reinstate", params={"notify": "true"},
                                headers={"Authorization": f"Bearer {TOKEN}"})
        assert reinstated.json() == {"revoked": False, "seq": 0, "webhook_status": 202}, reinstated.text
        [report] = catalog.subscriptions.sync_once(config)
        assert report.full and not catalog.store.revoked_at(SUB)
        assert catalog_content(catalog, SOURCE) == upstream_content(upstream, SUB)
        assert hit_ids(catalog, MEMBER, "find the commit that introduced a regression")[0] == BISECT


def test_skills_changed_webhook_pulls_now_through_the_poller(catalog: Catalog, upstream: ReferenceUpstream,
                                                             upstream_url: str) -> None:
    config = config_for(upstream_url, SUB, interval_s=3600)
    poller = catalog.subscriptions.make_poller(config)
    poller.start()
    try:
        assert poller.wait_for_runs(SUB, 1, timeout=60), "the first run starts at once"
        upstream.edit(SUB, PROFILING, description="Find slow code with py-spy and a walrus flamegraph.")
        with serve(_app(catalog, upstream_url, poller)) as app_url:
            response = _post(app_url, _event("evt-changed-1", "skills.changed"))
            assert response.status_code == 202 and response.json()["action"] == "pull_scheduled"
            assert poller.wait_for_runs(SUB, 2, timeout=60), "the webhook moved the next pull to now"
            assert hit_ids(catalog, MEMBER, "walrus flamegraph")[0] == PROFILING
            assert httpx.get(f"{app_url}/v1/sync/status").json()["subscriptions"][0]["poller"]["runs"] == 2
    finally:
        poller.stop()


def test_bad_stale_unsigned_and_replayed_webhooks_are_refused(catalog: Catalog, upstream_url: str) -> None:
    catalog.subscriptions.sync_once(config_for(upstream_url, SUB))
    body = _event("evt-1")
    with serve(_app(catalog, upstream_url)) as url:
        refused = [
            _post(url, body, secret="not-the-secret"),
            _post(url, body, timestamp=int(time.time()) - 3600),
            _post(url, body, signature="v1=" + "0" * 64),
            httpx.post(f"{url}/v1/sync/webhook", content=body),
            _post(url, body + b" ", signature=sign_webhook(SECRET, int(time.time()), body)),
        ]
        for response in refused:
            assert response.status_code == 401, response.text
            assert response.json()["error"]["code"] == "UNAUTHENTICATED"
        assert catalog.store.revoked_subscriptions() == frozenset(), "nothing changed"

        ts = int(time.time())
        first = _post(url, body, timestamp=ts)
        assert first.status_code == 202 and catalog.store.revoked_subscriptions() == {SUB}
        catalog.store.set_revoked(SUB, False)  # reinstated since; a replay must not revoke again
        replay = _post(url, body, timestamp=ts)
        assert replay.status_code == 401 and "replayed" in replay.json()["error"]["message"]
        assert catalog.store.revoked_subscriptions() == frozenset()

        malformed = b'{"id": "evt-2", "type": "skills.changed"}'
        response = _post(url, malformed)
        assert response.status_code == 400 and response.json()["error"]["code"] == "VALIDATION_ERROR"



def test_a_signature_in_another_scheme_is_told_what_the_scheme_is(catalog: Catalog, upstream_url: str) -> None:
    """A platform that sent the bare hex digest, or GitHub's ``sha256=`` prefix, or uppercase hex, got "webhook
    signature does not match", the same as a wrong secret: nothing said the header needs ``v1=`` and what is
    signed. Now a header with no ``v1=`` value says so, and a mismatch names the scheme (never the expected
    value)."""
    body = _event("evt-scheme", "skills.changed")
    ts = int(time.time())
    digest = sign_webhook(SECRET, ts, body).removeprefix("v1=")
    with serve(_app(catalog, upstream_url)) as url:
        for signature in (digest, f"sha256={digest}"):
            response = _post(url, body, timestamp=ts, signature=signature)
            assert response.status_code == 401, response.text
            message = response.json()["error"]["message"]
            assert "no v1= signature" in message and "HMAC-SHA256" in message and digest not in message
        upper = _post(url, body, timestamp=ts, signature=f"v1={digest.upper()}")
        assert upper.status_code == 401
        message = upper.json()["error"]["message"]
        assert "does not match" in message and "lowercase hex" in message and "<timestamp>." in message
        assert _post(url, body, timestamp=ts).status_code == 202, "nothing was spent by the refusals"


def test_a_webhook_url_with_a_query_is_still_taken(catalog: Catalog, upstream_url: str) -> None:
    """The /v1 routes refuse a query parameter they do not take; the webhook does not: its query is outside its
    signature, and a marker in the URL an operator gave the platform must not make every delivery a 400."""
    catalog.subscriptions.sync_once(config_for(upstream_url, SUB))
    body, ts = _event("evt-query"), int(time.time())
    with serve(_app(catalog, upstream_url)) as url:
        response = httpx.post(f"{url}/v1/sync/webhook?from=platform&limt=5", content=body, headers={
            TIMESTAMP_HEADER: str(ts), SIGNATURE_HEADER: sign_webhook(SECRET, ts, body),
            "Content-Type": "application/json"})
        assert response.status_code == 202, response.text
        assert catalog.store.revoked_subscriptions() == {SUB}


def test_a_webhook_whose_timestamp_or_signature_is_not_ascii_is_401_not_500(catalog: Catalog, upstream_url: str) -> None:
    """Header values arrive as Latin-1: a timestamp of superscript digits (``"²".isdigit()`` is true, ``int``
    refuses it) and a signature with a non-ASCII byte (``compare_digest`` refuses to compare it) were 500s."""
    body = _event("evt-latin1")
    ts = str(int(time.time())).encode()
    with serve(_app(catalog, upstream_url)) as url:
        for timestamp, signature in [("\u00b2\u00b3".encode("latin-1"), b"v1=" + b"0" * 64),
                                     (ts, b"v1=\xe9" + b"0" * 63),
                                     (ts, sign_webhook(SECRET, ts.decode(), body).encode() + b",v1=\xff")]:
            response = httpx.post(f"{url}/v1/sync/webhook", content=body, headers={
                "Content-Type": "application/json", TIMESTAMP_HEADER: timestamp, SIGNATURE_HEADER: signature})
            if signature.startswith(b"v1=\xe9") or timestamp != ts:
                assert response.status_code == 401, response.text
                assert response.json()["error"]["code"] == "UNAUTHENTICATED"
            else:  # the right signature still counts beside a non-ASCII one (a key roll lists several)
                assert response.status_code == 202, response.text


def _metric(text: str, name: str, **labels: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return 0.0


def test_a_webhook_not_sent_as_json_is_415_after_its_signature_and_pulls_nothing(
        catalog: Catalog, upstream: ReferenceUpstream, upstream_url: str) -> None:
    """The README's body rule holds for the webhook too: a signed event sent as text/plain, or with no
    Content-Type, is 415 with a problem on ``header.content-type``, changes nothing (its id is not spent,
    no pull is scheduled) and is counted under the webhook's route. The signature is still checked first."""
    config = config_for(upstream_url, SUB, interval_s=3600)
    poller = catalog.subscriptions.make_poller(config)
    poller.start()
    try:
        assert poller.wait_for_runs(SUB, 1, timeout=60), "the first run starts at once"
        app = create_app(catalog, routers=[make_sync_router(catalog, config, poller)])
        body = _event("evt-ctype", "skills.changed")
        with serve(app) as url:
            for content_type in ("text/plain", None):
                response = _post(url, body, content_type=content_type)
                assert response.status_code == 415, response.text
                error = response.json()["error"]
                assert error["code"] == "VALIDATION_ERROR"
                assert [p["field"] for p in error["details"]["problems"]] == ["header.content-type"]
            unsigned = httpx.post(f"{url}/v1/sync/webhook", content=body, headers={"Content-Type": "text/plain"})
            assert unsigned.status_code == 401 and unsigned.json()["error"]["code"] == "UNAUTHENTICATED"
            state = poller.status()[SUB]
            # A pull scheduled by either would have moved the next run to now (or run it already).
            assert state["runs"] == 1 and not state["running"] and state["next_run_in_s"] > 60, state

            metrics = httpx.get(f"{url}/metrics").text
            assert _metric(metrics, "skillsearch_http_requests_total", route="/v1/sync/webhook", status="415") == 2
            assert _metric(metrics, "skillsearch_http_requests_total", route="/v1/sync/webhook", status="401") == 1

            accepted = _post(url, body)  # the same event id, sent right: it was never recorded
            assert accepted.status_code == 202 and accepted.json()["action"] == "pull_scheduled", accepted.text
            assert poller.wait_for_runs(SUB, 2, timeout=60), "the accepted webhook moved the next pull to now"
    finally:
        poller.stop()


def test_webhook_refusals_have_the_one_error_shape_and_are_counted_under_its_route(
        catalog: Catalog, upstream_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """Malformed events and an undeclared length are 400 with ``details.problems`` located in the request
    (never the value sent); a body over 64 KiB is 413 on ``body``; each is counted and logged under
    ``/v1/sync/webhook``, not ``other``."""
    import logging

    caplog.set_level(logging.INFO, logger="skillsearch.http")
    app = create_app(catalog, routers=[make_sync_router(catalog, config_for(upstream_url, SUB))])
    with serve(app) as url:
        def problems(response: httpx.Response, status: int) -> list[str]:
            assert response.status_code == status, response.text
            error = response.json()["error"]
            assert error["code"] == "VALIDATION_ERROR"
            return [p["field"] for p in error["details"]["problems"]]

        assert problems(_post(url, b"{not json"), 400) == ["body"]
        wrong = json.dumps({"id": "evt-3", "type": "skills.changed", "subscription_id": "no spaces SEEKRIT"}).encode()
        response = _post(url, wrong)
        assert problems(response, 400) == ["body.subscription_id"] and "SEEKRIT" not in response.text
        assert problems(_post(url, b'{"type": "skills.changed", "subscription_id": "x"}'), 400) == ["body.id"]

        chunked = httpx.post(f"{url}/v1/sync/webhook", content=iter([_event("evt-4")]),
                             headers={"Content-Type": "application/json"})
        assert problems(chunked, 400) == ["header.content-length"]

        big = json.dumps({"id": "evt-5", "type": "skills.changed", "subscription_id": SUB,
                          "data": {"pad": "x" * 70_000}}).encode()
        response = _post(url, big)
        assert problems(response, 413) == ["body"]
        assert response.json()["error"]["details"]["max_body_bytes"] == 64 * 1024
        assert response.content.startswith(b'{"error":{"code":"VALIDATION_ERROR"')  # spaced as every other error

        metrics = httpx.get(f"{url}/metrics").text
    assert _metric(metrics, "skillsearch_http_requests_total", route="/v1/sync/webhook", status="400") == 4
    assert _metric(metrics, "skillsearch_http_requests_total", route="/v1/sync/webhook", status="413") == 1
    assert _metric(metrics, "skillsearch_http_requests_total", route="other", status="413") == 0
    logged = [(getattr(r, "route", None), getattr(r, "status", None)) for r in caplog.records
              if r.name == "skillsearch.http" and getattr(r, "path", "") == "/v1/sync/webhook"]
    assert ("/v1/sync/webhook", 413) in logged and all(route == "/v1/sync/webhook" for route, _ in logged)


def test_cli_status_of_a_revoked_subscription_is_not_failing(catalog: Catalog, upstream: ReferenceUpstream,
                                                             upstream_url: str, tmp_path: Path) -> None:
    """After the platform's 403 confirmed a revocation, ``sync --status`` printed "last error (failing now):
    ... subscription revoked upstream" while ``GET /v1/sync/status`` (the same view, the README says) said
    ``failing: false``. Now the text says it is revoked, not failing, as the JSON does."""
    config_file = tmp_path / "sync.toml"
    config_file.write_text(f'[upstream]\nurl = "{upstream_url}"\ntoken = "{TOKEN}"\n\n'
                           f'[[subscriptions]]\nid = "{SUB}"\n', encoding="utf-8")
    catalog.subscriptions.sync_once(config_for(upstream_url, SUB))
    upstream.set_revoked(SUB, True)
    [report] = catalog.subscriptions.sync_once(config_for(upstream_url, SUB))
    assert report.revoked
    data_dir = str(catalog.data_dir)
    catalog.close()
    text, as_json = io.StringIO(), io.StringIO()
    assert cli.main(["--data-dir", data_dir, "sync", "--config", str(config_file), "--status"], text) == 0
    assert cli.main(["--data-dir", data_dir, "sync", "--config", str(config_file), "--status", "--json"],
                    as_json) == 0
    [status] = json.loads(as_json.getvalue())["subscriptions"]
    assert status["revoked"] and not status["failing"]
    assert "REVOKED" in text.getvalue() and "failing now" not in text.getvalue(), text.getvalue()
    assert "last error (revoked, so not failing): " in text.getvalue()


def test_cli_sync_and_status(catalog: Catalog, upstream: ReferenceUpstream, upstream_url: str,
                             tmp_path: Path) -> None:
    config_file = tmp_path / "sync.toml"
    config_file.write_text(
        f'[upstream]\nurl = "{upstream_url}"\ntoken_env = "TEST_UPSTREAM_TOKEN"\npage_limit = 5\n\n'
        f'[[subscriptions]]\nid = "{SUB}"\ninterval_s = 30\n',
        encoding="utf-8",
    )
    data_dir = str(catalog.data_dir)
    catalog.close()
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TEST_UPSTREAM_TOKEN", TOKEN)
        code = cli.main(["--data-dir", data_dir, "-q", "sync", "--config", str(config_file), "--json"], out)
        assert code == 0, out.getvalue()
        [run] = json.loads(out.getvalue())["subscriptions"]
        assert run["created"] == 18 and run["pages"] == 4 and run["error"] is None
        out = io.StringIO()
        assert cli.main(["--data-dir", data_dir, "sync", "--config", str(config_file), "--status", "--json"], out) == 0
    [status] = json.loads(out.getvalue())["subscriptions"]
    assert status["cursor"] == run["cursor"] and status["skills_active"] == 18 and status["last_success"]
    out = io.StringIO()
    assert cli.main(["--data-dir", data_dir, "sync", "--config", str(config_file), "--json"], out) == 1
    assert json.loads(out.getvalue())["error"]["code"] == "VALIDATION_ERROR"  # token_env is not set now


@pytest.mark.parametrize("url", ["http://skills.example.com", "http://10.0.0.7:8765", "http://localhost@evil.example",
                                 "http://127.0.0.1.nip.io", "HTTP://skills.example.com"])
def test_plain_http_to_another_host_is_refused_unless_allowed(tmp_path: Path, url: str) -> None:
    """``url = "http://platform.example.com"`` was accepted, so the subscription's bearer token went over
    the network in clear text with every pull. Plain http is now refused at config time unless the host is
    this machine, with a VALIDATION_ERROR that names the setting and the opt-in; loopback http (the demo,
    the tests) and ``allow_insecure_http = true`` are accepted; the opt-in must be a boolean."""
    def sync_config(text: str) -> dict[str, Any]:
        config_file = tmp_path / "sync.toml"
        config_file.write_text(f'[upstream]\n{text}token = "t"\nretries = 0\ntimeout_s = 0.5\n\n'
                               '[[subscriptions]]\nid = "a"\n', encoding="utf-8")
        out = io.StringIO()
        cli.main(["--data-dir", str(tmp_path / "d"), "-q", "sync", "--config", str(config_file), "--status", "--json"],
                 out)
        return dict(json.loads(out.getvalue()))

    refused = sync_config(f'url = "{url}"\n')["error"]
    assert refused["code"] == "VALIDATION_ERROR"
    [message] = [p["message"] for p in refused["details"]["problems"]]
    assert message.startswith("upstream.url is plain http:// to ") and "clear text" in message, message
    assert "allow_insecure_http = true" in message and "https://" in message
    allowed = sync_config(f'url = "{url}"\nallow_insecure_http = true\n')
    assert allowed["upstream_url"] == url and allowed["subscriptions"][0]["subscription_id"] == "a"
    for local in ("http://127.0.0.1:9", "http://127.8.9.10:9", "http://[::1]:9", "http://localhost:9",
                  "https://skills.example.com", "HTTPS://skills.example.com", "Http://LOCALHOST:9"):
        assert sync_config(f'url = "{local}"\n')["upstream_url"] == local
    wrong = sync_config(f'url = "{url}"\nallow_insecure_http = "yes"\n')["error"]["details"]["problems"]
    assert "upstream.allow_insecure_http must be true or false" in [p["message"] for p in wrong]


def test_a_misspelt_setting_in_sync_toml_is_refused_with_the_closest_name(tmp_path: Path) -> None:
    """``intervl_s`` or a stray key was ignored and its setting silently left at the default (audit)."""
    config_file = tmp_path / "sync.toml"
    config_file.write_text(
        '[upstream]\nurl = "http://127.0.0.1:9"\ntoken = "t"\npage_limt = 5\n\n'
        '[[subscriptions]]\nid = "a"\nintervl_s = 30\n\n[bogus]\nx = 1\n', encoding="utf-8")
    out = io.StringIO()
    assert cli.main(["--data-dir", str(tmp_path / "d"), "-q", "sync", "--config", str(config_file), "--json"], out) == 1
    error = json.loads(out.getvalue())["error"]
    assert error["code"] == "VALIDATION_ERROR"
    assert [p["message"] for p in error["details"]["problems"]] == [
        "bogus is not a setting",
        "upstream.page_limt is not a setting (did you mean page_limit?)",
        "subscriptions[0].intervl_s is not a setting (did you mean interval_s?)",
    ]
    # A file of sources alone is checked too.
    data = tmp_path / "d"
    data.mkdir()
    (data / "sync.toml").write_text('[[sources]]\nname = "x"\ngrant = "team:a"\npath = "."\n\n[sourcse]\n',
                                    encoding="utf-8")
    out = io.StringIO()
    assert cli.main(["--data-dir", str(data), "-q", "sources", "list", "--json"], out) == 1
    problems = json.loads(out.getvalue())["error"]["details"]["problems"]
    assert [p["message"] for p in problems] == ["sourcse is not a setting (did you mean sources?)"]


def test_sync_asks_only_for_the_secrets_it_uses(catalog: Catalog, upstream_url: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Secrets named by variables that only the server's environment sets: a one-shot `sync` (cron, a shell)
    pulls with the token and needs no webhook secret, `sync --status` needs neither; both were refused
    ("webhook_secret_env names ..., which is not set"). A server, which takes webhooks, still needs both."""
    data = tmp_path / "d"
    data.mkdir()
    (data / "sync.toml").write_text(
        f'[upstream]\nurl = "{upstream_url}"\ntoken_env = "OPS_TEST_TOKEN"\nwebhook_secret_env = "OPS_TEST_SECRET"\n'
        f'retries = 0\n\n[[subscriptions]]\nid = "{SUB}"\n', encoding="utf-8")
    monkeypatch.delenv("OPS_TEST_TOKEN", raising=False)
    monkeypatch.delenv("OPS_TEST_SECRET", raising=False)
    base = ["--data-dir", str(data), "--encoder", "hashing", "-q", "sync"]
    out = io.StringIO()
    assert cli.main([*base, "--status", "--json"], out) == 0, out.getvalue()
    assert [s["subscription_id"] for s in json.loads(out.getvalue())["subscriptions"]] == [SUB]
    out = io.StringIO()
    assert cli.main([*base, "--json"], out) == 1  # the pull sends the token: that one is needed
    assert [p["message"] for p in json.loads(out.getvalue())["error"]["details"]["problems"]] == [
        "upstream.token_env names OPS_TEST_TOKEN, which is not set"]
    monkeypatch.setenv("OPS_TEST_TOKEN", TOKEN)
    out = io.StringIO()
    assert cli.main([*base, "--json"], out) == 0, out.getvalue()
    assert json.loads(out.getvalue())["subscriptions"][0]["created"] > 0
    with pytest.raises(ValidationError, match="webhook_secret_env names OPS_TEST_SECRET"):
        load_subscriptions(data / "sync.toml")  # what a server reads


def test_openapi_file_is_the_reference_upstreams_contract() -> None:
    committed = json.loads((Path(__file__).parents[1] / "docs" / "upstream-openapi.json").read_text("utf-8"))
    assert committed == contract_openapi(), "regenerate: python -m skillsearch.upstream.app > docs/upstream-openapi.json"
    assert set(committed["webhooks"]) == {"skills.changed", "subscription.revoked"}



def test_the_reference_upstream_refuses_non_ascii_tokens_and_cursors_with_its_error_body(
        upstream: ReferenceUpstream, upstream_url: str) -> None:
    """A bearer token with a non-ASCII byte (``compare_digest`` refuses such a str) and a cursor whose
    sequence is superscript digits (``"²".isdigit()`` is true, ``int`` refuses it) were plain-text 500s."""
    feed = f"{upstream_url}/v1/subscriptions/{SUB}/skills"
    wrong = httpx.get(feed, headers={"Authorization": b"Bearer \xe9t\xe9"})
    assert wrong.status_code == 401 and ErrorBody.model_validate_json(wrong.content).error.code == "UNAUTHENTICATED"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    epoch = httpx.get(feed, headers=auth, params={"limit": 1}).json()["next_cursor"].rpartition(".")[0]
    stale = httpx.get(feed, headers=auth, params={"since": f"{epoch}.\u00b2"})
    assert stale.status_code == 410, stale.text
    assert ErrorBody.model_validate_json(stale.content).error.code == "CURSOR_EXPIRED"


def test_the_contract_file_declares_the_errors_each_side_sends(catalog: Catalog, upstream: ReferenceUpstream,
                                                               upstream_url: str) -> None:
    """``docs/upstream-openapi.json`` declares what the feed and the webhook receiver answer: every error
    status either sends is declared there with the one error body, and nothing they never send (FastAPI's
    422 ``HTTPValidationError``) is."""
    committed = json.loads((Path(__file__).parents[1] / "docs" / "upstream-openapi.json").read_text("utf-8"))
    assert "HTTPValidationError" not in json.dumps(committed)

    def declared(operation: dict[str, Any]) -> set[int]:
        errors = {int(code): spec for code, spec in operation["responses"].items() if int(code) >= 400}
        for spec in errors.values():
            assert spec["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/ErrorBody"}
        return set(errors)

    def sent(response: httpx.Response) -> int:
        assert response.status_code >= 400, response.text
        ErrorBody.model_validate_json(response.content)
        return response.status_code

    feed = f"{upstream_url}/v1/subscriptions/{SUB}/skills"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    bad_limit = httpx.get(feed, headers=auth, params={"limit": 0})
    assert [p["field"] for p in bad_limit.json()["error"]["details"]["problems"]] == ["query.limit"]
    feed_sent = {sent(bad_limit), sent(httpx.get(feed)),
                 sent(httpx.get(f"{upstream_url}/v1/subscriptions/nope/skills", headers=auth)),
                 sent(httpx.get(feed, headers=auth, params={"since": "stale.1"}))}
    upstream.set_revoked(SUB, True)
    feed_sent.add(sent(httpx.get(feed, headers=auth)))
    feed_declared = declared(committed["paths"]["/v1/subscriptions/{subscription_id}/skills"]["get"])
    # 429 and 503 are a platform's to send (the catalog honours them); the reference upstream never does.
    assert feed_sent == feed_declared - {429, 503} == {400, 401, 403, 404, 410}

    with serve(create_app(catalog, routers=[make_sync_router(catalog, config_for(upstream_url, SUB))])) as url:
        webhook_sent = {
            sent(_post(url, b"{not json")),
            sent(httpx.post(f"{url}/v1/sync/webhook", content=_event("evt-unsigned"),
                            headers={"Content-Type": "application/json"})),
            sent(_post(url, b"{" + b" " * 70_000 + b"}")),
            sent(_post(url, _event("evt-plain"), content_type="text/plain")),
        }
    for event_type in ("skills.changed", "subscription.revoked"):
        assert declared(committed["webhooks"][event_type]["post"]) == webhook_sent == {400, 401, 413, 415}


def test_reference_upstream_contract_errors_and_admin_routes(catalog: Catalog, upstream: ReferenceUpstream,
                                                            upstream_url: str) -> None:
    feed = f"{upstream_url}/v1/subscriptions/{SUB}/skills"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert httpx.get(feed).status_code == 401
    assert httpx.get(feed, headers={"Authorization": "Bearer nope"}).json()["error"]["code"] == "UNAUTHENTICATED"
    assert httpx.get(f"{upstream_url}/v1/subscriptions/nope/skills", headers=auth).status_code == 404
    assert httpx.get(feed, headers=auth, params={"since": "stale.1"}).json()["error"]["code"] == "CURSOR_EXPIRED"
    assert httpx.get(feed, headers=auth, params={"limit": 0}).json()["error"]["code"] == "VALIDATION_ERROR"
    first = httpx.get(feed, headers=auth, params={"limit": 5}).json()
    assert len(first["items"]) == 5 and first["has_more"]

    config = config_for(upstream_url, SUB)
    catalog.subscriptions.sync_once(config)
    admin = f"{upstream_url}/admin/subscriptions/{SUB}"
    assert httpx.post(f"{admin}/skills/{PROFILING}/archive").status_code == 401
    assert httpx.post(f"{admin}/skills/{PROFILING}/edit", headers=auth,
                      json={"description": "Profiling with a capybara sampler."}).status_code == 200
    assert httpx.post(f"{admin}/skills/{BISECT}/archive", headers=auth).status_code == 200
    assert httpx.delete(f"{admin}/skills/{REGEX}", headers=auth).status_code == 200
    item = httpx.get(f"{admin}/skills", headers=auth).json()["items"][0]
    item["skill"] = {"skill_id": "sk_brand_new", "slug": "brand-new"}
    item["revision"]["name"] = "Brand new skill"
    assert httpx.put(f"{admin}/skills", headers=auth, json=item).status_code == 200
    [report] = catalog.subscriptions.sync_once(config)
    assert (report.outcome.created, report.outcome.updated) == (["sk_brand_new"], [PROFILING])
    assert (report.outcome.archived, report.outcome.deleted) == ([BISECT], [REGEX])
    assert catalog_content(catalog, SOURCE) == upstream_content(upstream, SUB)

    assert httpx.post(f"{admin}/expire-cursors", headers=auth).status_code == 200
    assert httpx.post(f"{admin}/revoke", headers=auth).status_code == 200
    assert httpx.get(feed, headers=auth).json()["error"]["code"] == "SUBSCRIPTION_REVOKED"
    assert httpx.post(f"{admin}/reinstate", headers=auth).status_code == 200
    [report] = catalog.subscriptions.sync_once(config)
    assert report.full and report.error is None


def test_serve_polls_in_the_background_and_serves_webhook_and_status(catalog: Catalog, upstream: ReferenceUpstream,
                                                                    upstream_url: str, tmp_path: Path) -> None:
    principals = tmp_path / "principals.toml"
    token = add_principal(principals, "ops", [f"sub:{SUB}"], ["skills:read"])
    other = add_principal(principals, "other", ["team:other"], ["skills:read"])
    registry = PrincipalRegistry.for_catalog(catalog, principals)
    app = build_serve_app(catalog, registry, sync=config_for(upstream_url, SUB, interval_s=3600))
    with serve(app, lifespan="on") as url:
        auth = {"Authorization": f"Bearer {token}"}
        deadline = time.monotonic() + 60
        while not httpx.get(f"{url}/v1/sync/status", headers=auth).json()["subscriptions"][0]["last_success"]:
            assert time.monotonic() < deadline, "the poller started with the app and ran a first sync"
            time.sleep(0.1)
        assert httpx.get(f"{url}/v1/sync/status").status_code == 401
        # A caller of another grant reads nothing of this subscription (its id, errors, skill counts).
        assert httpx.get(f"{url}/v1/sync/status", headers={"Authorization": f"Bearer {other}"}).json()[
            "subscriptions"] == []
        assert httpx.get(f"{url}/v1/sync/status", headers=auth).json()["subscriptions"][0]["grant"] == f"sub:{SUB}"
        assert httpx.get(f"{url}/v1/skills/{BISECT}", headers=auth).status_code == 200

        upstream.set_revoked(SUB, True)
        response = _post(url, _event("evt-serve-1"))
        assert response.status_code == 202 and response.json()["action"] == "revoked"
        assert httpx.get(f"{url}/v1/skills/{BISECT}", headers=auth).json()["error"]["code"] == "SKILL_NOT_FOUND"


def test_an_admin_change_whose_webhook_fails_says_it_was_made_and_one_with_no_receiver_is_not_made() -> None:
    """``?notify=true``: a webhook the receiver does not take (nothing listens) is a 502 that says the change
    was made, since it was (a bare WEBHOOK_FAILED read as a failed revoke, and a retried publish made
    another revision); an upstream with no receiver refuses the notify before making the change."""
    import socket

    with socket.socket() as probe:  # a port where nothing listens
        probe.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{probe.getsockname()[1]}/v1/sync/webhook"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with serve(create_upstream_app(upstream_with_starter(SUB, webhook_url=dead))) as url:
        revoked = httpx.post(f"{url}/admin/subscriptions/{SUB}/revoke", params={"notify": "true"}, headers=auth)
        assert revoked.status_code == 502, revoked.text
        error = revoked.json()["error"]
        assert error["code"] == "WEBHOOK_FAILED" and error["details"]["changed"] is True, error
        assert "the change was made" in error["message"] and f"/admin/webhooks/subscription.revoked/{SUB}" \
            in error["message"], error
        feed = httpx.get(f"{url}/v1/subscriptions/{SUB}/skills", headers=auth)
        assert feed.json()["error"]["code"] == "SUBSCRIPTION_REVOKED"

    up = upstream_with_starter(SUB)
    with serve(create_upstream_app(up)) as url:
        before = httpx.get(f"{url}/admin/subscriptions/{SUB}/skills", headers=auth).json()
        edited = httpx.post(f"{url}/admin/subscriptions/{SUB}/skills/{PROFILING}/edit", params={"notify": "true"},
                            headers=auth, json={"description": "Never published."})
        assert edited.status_code == 409 and edited.json()["error"]["code"] == "WEBHOOK_NOT_CONFIGURED", edited.text
        revoked = httpx.post(f"{url}/admin/subscriptions/{SUB}/revoke", params={"notify": "true"}, headers=auth)
        assert revoked.status_code == 409, revoked.text
        assert httpx.get(f"{url}/admin/subscriptions/{SUB}/skills", headers=auth).json() == before
        assert httpx.get(f"{url}/v1/subscriptions/{SUB}/skills", headers=auth).status_code == 200
