"""Hostile requests and a careless operator at the surfaces, over real HTTP on 127.0.0.1.

Each test states the promise it checks: bad input is a 4xx with a JSON body (never a 500), an operator's
broken file is explained to the operator and not to bearer clients, an unsigned-for-us revocation cannot
hide local skills, and recall does not leak which ids exist in other grants.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from syncsupport import SECRET, config_for, serve

from skillsearch.core.domain import Principal
from skillsearch.core.settings import Settings
from skillsearch.http.app import create_app
from skillsearch.http.auth import PrincipalRegistry, add_principal
from skillsearch.http.sync_routes import make_sync_router
from skillsearch.retrieval.encoder import Encoder
from skillsearch.service import Catalog
from skillsearch.sync.contract import SIGNATURE_HEADER, TIMESTAMP_HEADER, sign_webhook

FLOW = {"slug": "thresholded-alert", "name": "thresholded alert", "description": "Alert above a threshold.",
        "kind": "flow_template", "parameters": [{"name": "threshold", "type": "number", "required": True},
                                                {"name": "label", "type": "string"}],
        "steps": [{"tool": "alert", "args": {"above": "{threshold}", "label": "{label}"}}]}


@pytest.fixture
def catalog(tmp_path: Path, fake_encoder: Encoder) -> Iterator[Catalog]:
    c = Catalog.open(Settings(data_dir=tmp_path / "data", seed_sample=False, encoder="hashing"), encoder=fake_encoder)
    bundle = tmp_path / "flows.json"
    bundle.write_text(json.dumps([FLOW]), encoding="utf-8")
    assert c.import_path(bundle, "local", "team:a").ok
    yield c
    c.close()


def _serve(catalog: Catalog, principals: Path) -> tuple[serve, str]:  # type: ignore[valid-type]
    token = add_principal(principals, "bot", ["team:a"], ["skills:read", "memory:read"])
    return serve(create_app(catalog, principals=PrincipalRegistry(principals))), token


def test_resolve_refuses_surrogates_and_non_finite_numbers(catalog: Catalog, tmp_path: Path) -> None:
    """POST /resolve with a lone surrogate as a parameter name or value is a 400 VALIDATION_ERROR (once a
    500); NaN and Infinity for a number parameter are 400 instead of silently resolving to null."""
    server, token = _serve(catalog, tmp_path / "principals.toml")
    (skill_id,) = catalog.store.skill_ids_of_source("local")
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    bodies = ['{"parameters": {"threshold": 1, "label": "\\ud800"}}', '{"parameters": {"\\udfff": 1, "threshold": 1}}',
              '{"parameters": {"threshold": NaN}}', '{"parameters": {"threshold": Infinity}}',
              '{"parameters": {"threshold": -Infinity}}']
    with server as url:
        for body in bodies:
            resp = httpx.post(f"{url}/v1/skills/{skill_id}/resolve", content=body.encode(), headers=headers)
            assert resp.status_code == 400, (body, resp.text)
            assert resp.json()["error"]["code"] == "VALIDATION_ERROR"
            # Coded as resolve's other problems are (missing, invalid, unknown): a bad value is ``invalid``.
            assert [p["code"] for p in resp.json()["error"]["details"]["problems"]] == ["invalid"], resp.text
        # Said with the call's other problems (one error naming each) and the names the template takes.
        both = httpx.post(f"{url}/v1/skills/{skill_id}/resolve", content=b'{"parameters": {"label": NaN}}',
                          headers=headers).json()["error"]
        assert both["details"]["problems"] == [
            {"field": "body.parameters.threshold", "code": "missing", "message": "missing required parameter 'threshold'"},
            {"field": "body.parameters.label", "code": "invalid",
             "message": "label: not a finite number (NaN and Infinity are not JSON)"}]
        assert both["details"]["parameters"] == ["threshold", "label"]
        ok = httpx.post(f"{url}/v1/skills/{skill_id}/resolve", json={"parameters": {"threshold": 0.5}}, headers=headers)
        assert ok.status_code == 200 and ok.json()["steps"][0]["args"]["above"] == 0.5



def test_a_forged_list_cursor_is_400_never_500(catalog: Catalog, tmp_path: Path) -> None:
    """``GET /v1/skills?cursor=`` decodes base64 JSON: a lone surrogate (JSON escapes it, SQLite cannot bind
    it), a two-key object (unpacked into its keys) and a list of another length were 500s or were taken."""
    import base64

    server, token = _serve(catalog, tmp_path / "principals.toml")
    headers = {"Authorization": f"Bearer {token}"}
    forged = [b'["\\ud800", "sk_x"]', b'{"skill_id": [""], "\\uda46": null}', b'{"a": 1, "b": 2}', b'["a", "b", "c"]',
              b'["a", 1]']
    with server as url:
        for raw in forged:
            cursor = base64.urlsafe_b64encode(raw).decode()
            resp = httpx.get(f"{url}/v1/skills", params={"cursor": cursor}, headers=headers)
            assert resp.status_code == 400, (raw, resp.text)
            error = resp.json()["error"]
            assert error["code"] == "VALIDATION_ERROR" and error["details"]["problems"][0]["field"] == "query.cursor"
        page = httpx.get(f"{url}/v1/skills", params={"limit": 1}, headers=headers).json()
        assert page["items"] and httpx.get(f"{url}/v1/skills", params={"cursor": base64.urlsafe_b64encode(
            b'["", ""]').decode()}, headers=headers).json()["items"] == page["items"], "a well-formed position still pages"


def test_a_broken_principals_file_is_told_to_the_operator_only(
    catalog: Catalog, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A principals.toml broken while serving refuses every bearer request with 401 UNAUTHENTICATED whose
    body names neither the file nor the TOML error (once a 400 showing both); the operator's log has both;
    fixing the file restores access."""
    principals = tmp_path / "secret-place" / "principals.toml"
    principals.parent.mkdir()
    server, token = _serve(catalog, principals)
    good = principals.read_text(encoding="utf-8")
    headers = {"Authorization": f"Bearer {token}"}
    with server as url, caplog.at_level(logging.ERROR, logger="skillsearch"):
        assert httpx.get(f"{url}/v1/skills", headers=headers).status_code == 200
        principals.write_text(good + "\n[principals.broken\n", encoding="utf-8")
        # Past the write grace (http/auth.WRITE_GRACE_S: a file this new that does not parse may be one still
        # being copied in place): a broken file, not a half-written one.
        os.utime(principals, (time.time() - 60, time.time() - 60))
        resp = httpx.get(f"{url}/v1/skills", headers=headers)
        assert resp.status_code == 401 and resp.json()["error"]["code"] == "UNAUTHENTICATED"
        assert "secret-place" not in resp.text and "principals.toml" not in resp.text and "line" not in resp.text
        assert any("secret-place" in r.getMessage() for r in caplog.records)
        principals.write_text(good, encoding="utf-8")
        assert httpx.get(f"{url}/v1/skills", headers=headers).status_code == 200


def test_a_revocation_for_an_unconfigured_subscription_is_ignored(catalog: Catalog, tmp_path: Path) -> None:
    """A correctly signed ``subscription.revoked`` for a subscription this catalog does not sync is
    ignored: it cannot hide that sub: grant (and skills imported locally into it) for good."""
    bundle = tmp_path / "local.json"
    bundle.write_text(json.dumps([{"slug": "local-one", "name": "local one", "description": "Imported here."}]),
                      encoding="utf-8")
    assert catalog.import_path(bundle, "mine", "sub:other").ok
    app = FastAPI()
    app.include_router(make_sync_router(catalog, config_for("http://127.0.0.1:9", "configured")))
    body = json.dumps({"id": "ev-1", "type": "subscription.revoked", "subscription_id": "other"}).encode()
    ts = int(time.time())
    with serve(app) as url:
        resp = httpx.post(f"{url}/v1/sync/webhook", content=body, headers={
            "Content-Type": "application/json", TIMESTAMP_HEADER: str(ts),
            SIGNATURE_HEADER: sign_webhook(SECRET, ts, body)})
    assert resp.status_code < 300, resp.text
    assert "other" not in catalog.store.revoked_subscriptions()
    assert [s.name for s in catalog.list_skills(Principal("p", frozenset({"sub:other"}))).items] == ["local one"]


def test_recall_answers_alike_for_missing_and_out_of_scope_ids(catalog: Catalog) -> None:
    """recall with an id of another grant gets the same code and message as a made-up id, so a
    ``memory:read`` caller cannot confirm what another grant contains."""
    from skillsearch.core.errors import SkillNotFoundError

    (skill_id,) = catalog.store.skill_ids_of_source("local")
    outsider = Principal("p", frozenset({"team:b"}))
    answers = []
    for sid in (skill_id, "sk_ffffffffffffffffffff"):
        with pytest.raises(SkillNotFoundError) as caught:
            catalog.recall(outsider, skill_id=sid)
        answers.append((caught.value.code, caught.value.message.replace(sid, "ID")))
    assert answers[0] == answers[1]
