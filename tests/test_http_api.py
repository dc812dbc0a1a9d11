"""The HTTP API through httpx, in process (ASGI); ``test_http_server.py`` drives it over real HTTP.

Every route, every error code, the 401/403 paths, and the visibility rule on every route: a skill outside
the caller's grants never comes back, whatever the route.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from skillsearch.catalog.store import utc_now
from skillsearch.catalog.sync_state import SyncState
from skillsearch.core.domain import Principal
from skillsearch.core.settings import Settings
from skillsearch.http.app import Limits, create_app
from skillsearch.http.auth import DEMO_TOKEN, PrincipalRegistry, add_principal
from skillsearch.http.middleware import JsonLogFormatter
from skillsearch.retrieval.encoder import Encoder
from skillsearch.service import Catalog

DEMO = {"Authorization": f"Bearer {DEMO_TOKEN}"}
DEMO_GRANTS = {"sub:starter-pack", "team:data-science"}


@pytest.fixture(scope="module")
def tokens(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A principals file with principals of different grants and scopes, and their tokens."""
    path = tmp_path_factory.mktemp("principals") / "principals.toml"
    made = {
        "ops": add_principal(path, "ops", ["sub:ops-pro"], ["skills:read"]),
        "data": add_principal(path, "data", ["team:data-science"], ["skills:read", "memory:read"]),
        "noscope": add_principal(path, "noscope", ["sub:starter-pack"], ["memory:read"]),
        "nobody": add_principal(path, "nobody", ["team:unknown"], ["skills:read"]),
    }
    return {"path": path, **made}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def app(sample: Catalog, tokens: dict[str, Any]) -> FastAPI:
    return create_app(sample, principals=PrincipalRegistry(tokens["path"], demo=True))


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        yield c


@pytest.fixture(scope="module")
def grant_of(sample: Catalog) -> dict[str, str]:
    """skill_id -> grant for every skill of the sample catalog (read as the operator)."""
    items = sample.list_skills(Principal.operator(), limit=200).items
    skills = sample.store.skills([s.skill_id for s in items])
    return {sid: s.grant for sid, s in skills.items()}


def assert_error(resp: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    body = resp.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code
    assert "Traceback" not in resp.text
    return dict(body["error"])


# -- health, readiness, page, OpenAPI ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_health_and_readiness(client: httpx.AsyncClient, sample: Catalog) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = (await client.get("/readyz")).json()
    assert ready == {"status": "ready", "documents": sample.store.count("active"),
                     "generation": sample.store.generation(), "changed_at": sample.readiness().changed_at,
                     "catching_up": False, "degraded": [], "writer": False}
    assert ready["changed_at"]  # the sample's import changed it


@pytest.mark.anyio
async def test_readyz_and_search_are_503_when_the_index_was_built_for_another_model(
    sample_dir: Path, tmp_path: Path, fake_encoder: Encoder, encoder: Encoder
) -> None:
    data = tmp_path / "data"
    Catalog.open(Settings(data_dir=data, seed_sample=True), encoder=fake_encoder).close()
    catalog = Catalog(Settings(data_dir=data), encoder=encoder)  # index opened lazily, on first use
    try:
        app = create_app(catalog, principals=PrincipalRegistry(None, demo=True))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            assert (await c.get("/healthz")).status_code == 200
            err = assert_error(await c.get("/readyz"), 503, "INDEX_NOT_READY")
            assert "reindex" in err["message"]
            assert_error(await c.get("/v1/search", params={"q": "python"}, headers=DEMO), 503, "INDEX_NOT_READY")
    finally:
        catalog.close()


@pytest.mark.anyio
async def test_search_page_and_its_config(client: httpx.AsyncClient, empty_catalog: Catalog) -> None:
    page = await client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "/static/app.js" in page.text and 'id="q"' in page.text
    for asset in ("/static/app.css", "/static/app.js", "/static/api.js", "/static/dom.js", "/static/flow.js",
                  "/static/focus.js", "/static/link.js", "/static/more.js"):
        answer = await client.get(asset)
        assert answer.status_code == 200, asset
        if asset.endswith(".js"):  # a module script of another type is refused by the browser (nosniff too)
            assert answer.headers["content-type"].startswith("text/javascript"), asset
    config = (await client.get("/ui/config")).json()
    assert config["demo_token"] == DEMO_TOKEN and len(config["examples"]) >= 3  # the sample's first screen
    # The bounds of a search the page may ask for ("Show more", a link's limit and tags), the API's own.
    bounds = {"max_limit": 100, "max_tags": 16, "max_tag_chars": 64}
    assert config["search"] == bounds
    other = create_app(empty_catalog, limits=Limits(max_tags=3))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=other), base_url="http://t") as c:
        assert (await c.get("/ui/config")).json() == {"demo_token": None, "examples": [],
                                                      "search": {**bounds, "max_tags": 3}}
        assert_error(await c.get("/v1/skills", headers=DEMO), 401, "UNAUTHENTICATED")


@pytest.mark.anyio
async def test_openapi_documents_auth_errors_and_examples(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/openapi.json")).json()
    assert doc["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    ops = {op["operationId"]: (path, method, op) for path, item in doc["paths"].items() for method, op in item.items()}
    assert {"list_skills", "search_skills", "get_skill", "resolve_skill", "recall_cloud_skill", "healthz", "readyz",
            "metrics"} <= set(ops)
    for name in ("list_skills", "search_skills", "get_skill", "resolve_skill"):
        path, _, op = ops[name]
        assert path.startswith("/v1/")
        assert {"200", "400", "401", "403"} <= set(op["responses"])
        assert op["responses"]["401"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")
        assert "422" not in op["responses"] or name == "resolve_skill"
    assert "HTTPValidationError" not in json.dumps(doc)
    # Every route under /v1/skills/{skill_id} takes a slug too (as the CLI and get_skill do): the document says so.
    for path, item in doc["paths"].items():
        for op in item.values():
            for param in op.get("parameters", []):
                if param["name"] == "skill_id" and param["in"] == "path":
                    assert "slug" in param["description"], path
    q = next(p for p in ops["search_skills"][2]["parameters"] if p["name"] == "q")
    assert q["examples"] and q["schema"]["maxLength"] == 2000
    assert "example" in json.dumps(doc["components"]["schemas"]["ResolveBody"])


# -- auth: 401 and 403 -------------------------------------------------------------------------------------


V1_ROUTES = [
    ("GET", "/v1/skills", None),
    ("GET", "/v1/search?q=python", None),
    ("GET", "/v1/skills/sk_x", None),
    ("POST", "/v1/skills/sk_x/resolve", {"parameters": {}}),
    ("POST", "/v1/recall", {"query": "python"}),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("method", "url", "body"), V1_ROUTES)
@pytest.mark.parametrize("auth", [None, "Basic abc", "Bearer", "Bearer wrong-token", f"Token {DEMO_TOKEN}",
                                  f"Bearer {DEMO_TOKEN}x"])
async def test_every_v1_route_needs_a_valid_bearer_token(
    client: httpx.AsyncClient, method: str, url: str, body: Any, auth: str | None
) -> None:
    headers = {"Authorization": auth} if auth is not None else {}
    resp = await client.request(method, url, json=body, headers=headers)
    assert_error(resp, 401, "UNAUTHENTICATED")
    assert resp.headers["www-authenticate"] == "Bearer"


@pytest.mark.anyio
@pytest.mark.parametrize(("method", "url", "body"), V1_ROUTES)
async def test_missing_scope_is_403(client: httpx.AsyncClient, tokens: dict[str, Any], method: str, url: str,
                                    body: Any) -> None:
    recall = url == "/v1/recall"
    who = "ops" if recall else "noscope"  # ops lacks memory:read, noscope lacks skills:read
    err = assert_error(await client.request(method, url, json=body, headers=bearer(tokens[who])),
                       403, "ACCESS_DENIED")
    assert err["details"] == {"required_scope": "memory:read" if recall else "skills:read"}


@pytest.mark.anyio
async def test_auth_is_checked_before_input_validation(client: httpx.AsyncClient) -> None:
    assert_error(await client.get("/v1/search", params={"q": "", "limit": 0}), 401, "UNAUTHENTICATED")
    assert_error(await client.get("/v1/search", params=[("q", "x"), ("q", "y")]), 401, "UNAUTHENTICATED")


@pytest.mark.anyio
async def test_a_token_added_while_serving_works_at_once(client: httpx.AsyncClient, tokens: dict[str, Any]) -> None:
    fresh = add_principal(tokens["path"], "late", ["team:data-science"], ["skills:read"])
    assert (await client.get("/v1/skills", headers=bearer(fresh))).status_code == 200


# -- visibility on every route ------------------------------------------------------------------------------


async def _list_all(client: httpx.AsyncClient, headers: dict[str, str], limit: int = 7) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": limit}
        if cursor:
            params["cursor"] = cursor
        page = (await client.get("/v1/skills", params=params, headers=headers)).json()
        items += page["items"]
        cursor = page["next_cursor"]
        if not cursor:
            return items


@pytest.mark.anyio
@pytest.mark.parametrize(("who", "grants"), [
    ("demo", DEMO_GRANTS), ("ops", {"sub:ops-pro"}), ("data", {"team:data-science"}), ("nobody", set()),
])
async def test_no_route_returns_a_skill_outside_the_callers_grants(
    client: httpx.AsyncClient, tokens: dict[str, Any], grant_of: dict[str, str], who: str, grants: set[str]
) -> None:
    headers = DEMO if who == "demo" else bearer(tokens[who])
    visible = {sid for sid, g in grant_of.items() if g in grants}

    listed = await _list_all(client, headers)
    assert {s["skill_id"] for s in listed} == visible
    assert len(listed) == len(visible)

    for sid in grant_of:
        detail = await client.get(f"/v1/skills/{sid}", headers=headers)
        if sid in visible:
            assert detail.status_code == 200 and detail.json()["skill_id"] == sid
        else:
            err = assert_error(detail, 404, "SKILL_NOT_FOUND")
            assert err["details"] == {"skill_id": sid}
        resolved = await client.post(f"/v1/skills/{sid}/resolve", json={"parameters": {}}, headers=headers)
        if sid not in visible:
            assert_error(resolved, 404, "SKILL_NOT_FOUND")
        else:
            assert resolved.status_code in (200, 400, 422)

    if who in ("demo", "data"):  # the principals holding memory:read
        for sid in grant_of:
            recalled = await client.post("/v1/recall", json={"skill_id": sid}, headers=headers)
            if sid in visible:
                assert recalled.status_code == 200 and recalled.json()["data"]["skill_id"] == sid
            else:
                assert_error(recalled, 404, "SKILL_NOT_FOUND")  # outside your grants answers as missing
        for query in ("postgres failover", "python", "clean data"):
            found = (await client.post("/v1/recall", json={"query": query}, headers=headers)).json()
            assert {d["skill_id"] for d in found["data"]["descriptors"]} <= visible

    names = {s["name"] for s in (await _list_all(client, bearer(tokens["ops"])))}
    names |= {s["name"] for s in (await _list_all(client, DEMO))}
    for query in [*sorted(names)[:20], "postgres failover", "database backup", "python", "*", "AND"]:
        for mode in ("hybrid", "lexical", "semantic"):
            resp = await client.get("/v1/search", params={"q": query, "mode": mode, "limit": 50}, headers=headers)
            assert resp.status_code == 200, resp.text
            assert {h["skill_id"] for h in resp.json()["hits"]} <= visible


@pytest.mark.anyio
async def test_revoked_subscriptions_and_archived_skills_vanish_at_query_time(
    fresh_sample: Catalog, tokens: dict[str, Any]
) -> None:
    app = create_app(fresh_sample, principals=PrincipalRegistry(tokens["path"], demo=True))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        before = await _list_all(c, DEMO)
        starter = [s for s in before if fresh_sample.store.skill(s["skill_id"]).grant == "sub:starter-pack"]
        assert starter
        fresh_sample.store.set_revoked("starter-pack", True)
        after = await _list_all(c, DEMO)
        assert {s["skill_id"] for s in after} == {s["skill_id"] for s in before} - {s["skill_id"] for s in starter}
        assert_error(await c.get(f"/v1/skills/{starter[0]['skill_id']}", headers=DEMO), 404, "SKILL_NOT_FOUND")
        hits = (await c.get("/v1/search", params={"q": starter[0]["name"]}, headers=DEMO)).json()["hits"]
        assert starter[0]["skill_id"] not in {h["skill_id"] for h in hits}

        data_skill = next(s for s in after if fresh_sample.store.skill(s["skill_id"]).grant == "team:data-science")
        assert fresh_sample.store.archive(data_skill["skill_id"])
        assert_error(await c.get(f"/v1/skills/{data_skill['skill_id']}", headers=DEMO), 404, "SKILL_NOT_FOUND")
        assert_error(await c.post("/v1/recall", json={"skill_id": data_skill["skill_id"]}, headers=DEMO),
                     410, "SKILL_ARCHIVED")
        assert data_skill["skill_id"] not in {s["skill_id"] for s in await _list_all(c, DEMO)}


# -- the routes themselves ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_search_explains_each_hit(client: httpx.AsyncClient) -> None:
    resp = await client.get("/v1/search", params={"q": "profile slow python code", "limit": 3}, headers=DEMO)
    body = resp.json()
    assert resp.status_code == 200 and body["mode"] == "hybrid" and body["fusion"] == "zscore"
    top = body["hits"][0]
    assert top["slug"] == "python-profiling"
    assert set(top["explanation"]) >= {"lexical_rank", "semantic_rank", "fused_score", "semantic_score"}
    assert len(body["hits"]) == 3 and body["no_match"] is False


@pytest.mark.anyio
async def test_search_filters_and_modes(client: httpx.AsyncClient) -> None:
    flows = (await client.get("/v1/search", params={"q": "release", "kind": "flow_template", "mode": "lexical"},
                              headers=DEMO)).json()
    assert flows["hits"] and all(h["kind"] == "flow_template" for h in flows["hits"]) and flows["fusion"] is None
    tagged = (await client.get("/v1/search", params=[("q", "python"), ("tag", "python"), ("tag", "performance")],
                               headers=DEMO)).json()
    assert tagged["hits"] and all({"python", "performance"} <= set(h["tags"]) for h in tagged["hits"])
    rrf = (await client.get("/v1/search", params={"q": "clean a dataframe", "fusion": "rrf", "semantic_weight": 0.3},
                            headers=DEMO)).json()
    assert rrf["fusion"] == "rrf" and rrf["hits"][0]["explanation"]["semantic_weight"] == 0.3
    nothing = (await client.get("/v1/search", params={"q": "zqxv wplk", "mode": "lexical"}, headers=DEMO)).json()
    assert nothing == {**nothing, "hits": [], "no_match": True}


@pytest.mark.anyio
async def test_search_gives_confidences_min_confidence_and_the_language_notice(client: httpx.AsyncClient) -> None:
    body = (await client.get("/v1/search", params={"q": "profile slow python code"}, headers=DEMO)).json()
    conf = [h["confidence"] for h in body["hits"]]
    assert all(0.0 <= c <= 1.0 for c in conf) and body["notice"] is None and body["no_match_reason"] is None
    cut = (await client.get("/v1/search", params={"q": "profile slow python code", "min_confidence": max(conf)},
                            headers=DEMO)).json()
    assert cut["hits"] and len(cut["hits"]) < len(body["hits"])
    bad = await client.get("/v1/search", params={"q": "python", "min_confidence": 2}, headers=DEMO)
    assert bad.status_code in (400, 422) and "min_confidence" in bad.text
    nothing = (await client.get("/v1/search", params={"q": "recipe for a gluten-free chocolate cake"},
                                headers=DEMO)).json()
    # The shipped threshold is conservative (docs/rules.md): no_match, or no confident hit.
    assert (nothing["no_match_reason"] in ("low_confidence", "no_good_match") if nothing["no_match"]
            else all(h["confidence"] < 0.5 for h in nothing["hits"]))
    ja = (await client.get("/v1/search", params={"q": "来月の京都旅行で泊まる旅館を予約して"}, headers=DEMO)).json()
    assert ja["no_match"] is False and "SKILLSEARCH_ENCODER=minilm+e5" in ja["notice"]


@pytest.mark.anyio
async def test_get_returns_kind_specific_content(client: httpx.AsyncClient, grant_of: dict[str, str]) -> None:
    listed = await _list_all(client, DEMO)
    knowledge = next(s for s in listed if s["kind"] == "knowledge")
    flow = next(s for s in listed if s["kind"] == "flow_template")
    k = (await client.get(f"/v1/skills/{knowledge['skill_id']}", headers=DEMO)).json()
    assert k["instructions"] and k["steps"] is None and k["parameters"] is None
    f = (await client.get(f"/v1/skills/{flow['skill_id']}", headers=DEMO)).json()
    assert f["steps"] and isinstance(f["parameters"], list)


@pytest.mark.anyio
async def test_resolve_flow_and_its_errors(client: httpx.AsyncClient) -> None:
    hits = (await client.get("/v1/search", params={"q": "cut a tagged release", "kind": "flow_template"},
                             headers=DEMO)).json()["hits"]
    sid = hits[0]["skill_id"]
    ok = await client.post(f"/v1/skills/{sid}/resolve", headers=DEMO,
                           json={"parameters": {"version": "1.4.0", "repo": "acme/tool"}})
    assert ok.status_code == 200, ok.text
    flow = ok.json()
    assert flow["parameters"]["branch"] == "main"
    assert all("{version}" not in json.dumps(s["args"]) for s in flow["steps"])
    missing = assert_error(await client.post(f"/v1/skills/{sid}/resolve", headers=DEMO, json={"parameters": {
        "version": 14, "nope": 1}}), 400, "VALIDATION_ERROR")
    assert len(missing["details"]["problems"]) >= 3  # wrong type, unknown name, missing repo

    knowledge = (await client.get("/v1/search", params={"q": "python", "kind": "knowledge"}, headers=DEMO)).json()
    assert_error(await client.post(f"/v1/skills/{knowledge['hits'][0]['skill_id']}/resolve", headers=DEMO,
                                   json={}), 422, "SKILL_INVALID")


@pytest.mark.anyio
async def test_an_integer_written_with_a_zero_fraction_is_that_integer_on_every_input(client: httpx.AsyncClient) -> None:
    """JSON Schema's ``integer`` takes 5.0 as 5, as the MCP tools now do: resolve refused ``batch_days: 5.0``
    ("expected integer, got number"), and a step's ``{batch_days}`` is 5, never 5.0. What is no integer stays
    refused on the field, saying what was expected. recall's body ``offset`` took ``"0"`` and ``true`` (as 1),
    which the MCP tool refuses; now both refuse them alike and take ``0.0``."""
    url = "/v1/skills/backfill-table-partitions/resolve"
    base = {"table": "t", "job": "j", "start_date": "2024-01-01", "end_date": "2024-02-01"}
    resolved = await client.post(url, headers=DEMO, json={"parameters": {**base, "batch_days": 5.0}})
    assert resolved.status_code == 200, resolved.text
    assert resolved.json()["parameters"]["batch_days"] == 5 and '"batch_days":5,' in resolved.text
    assert '"batch_days":5.0' not in resolved.text
    for sent, said in ((5.5, "expected integer, got a number with a fractional part"),
                       ("5", "expected integer, got string"), (True, "expected integer, got boolean")):
        refused = assert_error(await client.post(url, headers=DEMO, json={"parameters": {**base, "batch_days": sent}}),
                               400, "VALIDATION_ERROR")
        assert refused["details"]["problems"] == [{"field": "body.parameters.batch_days", "code": "invalid",
                                                   "message": f"batch_days: {said}"}], refused
    root = {"slug": "python-profiling"}
    assert (await client.post("/v1/recall", json={**root, "offset": 0.0}, headers=DEMO)).json()["kind"] == "root"
    for sent in ("0", True, 0.5):
        refused = assert_error(await client.post("/v1/recall", json={**root, "offset": sent}, headers=DEMO),
                               400, "VALIDATION_ERROR")
        assert [p["field"] for p in refused["details"]["problems"]] == ["body.offset"], refused
        assert "integer" in refused["message"], refused
    listed = await client.get("/v1/skills", params={"limit": "3.0"}, headers=DEMO)
    assert listed.status_code == 200 and len(listed.json()["items"]) == 3
    refused = assert_error(await client.get("/v1/skills", params={"limit": "3.5"}, headers=DEMO), 400,
                           "VALIDATION_ERROR")
    assert [p["field"] for p in refused["details"]["problems"]] == ["query.limit"]


@pytest.mark.anyio
async def test_recall_levels_and_errors(client: httpx.AsyncClient) -> None:
    found = await client.post("/v1/recall", json={"query": "profile slow python code"}, headers=DEMO)
    env = found.json()
    assert found.status_code == 200
    assert env["object"] == "cloud_skill" and env["schema_version"] == "xmemo.cloud_skill.v1"
    assert env["kind"] == "descriptor" and env["data"]["descriptors"][0]["slug"] == "python-profiling"
    root = (await client.post("/v1/recall", json={"slug": "python-profiling"}, headers=DEMO)).json()
    assert root["kind"] == "root" and root["data"]["instructions"]
    revision = root["data"]["revision"]["revision_id"]
    resources = root["data"]["resources"]
    if resources:
        path = resources[0]["path"]
        one = (await client.post("/v1/recall", json={"skill_id": root["data"]["skill_id"], "revision_id": revision,
                                                      "resource": path}, headers=DEMO)).json()
        assert one["kind"] == "resource" and one["data"]["path"] == path
    assert_error(await client.post("/v1/recall", json={"slug": "python-profiling", "resource": "x"}, headers=DEMO),
                 400, "REVISION_PINNING_VIOLATION")
    # A root's instructions read on from an offset, pinned to the revision (the way on past the size cap).
    whole = root["data"]["instructions"]
    half = len(whole) // 2
    rest = (await client.post("/v1/recall", json={"slug": "python-profiling", "revision_id": revision,
                                                   "offset": half}, headers=DEMO)).json()
    assert rest["data"]["instructions"] == whole[half:] and rest["data"]["instructions_offset"] == half
    assert rest["data"]["next_offset"] is None and rest["data"]["instructions_chars"] == len(whole)
    assert_error(await client.post("/v1/recall", json={"slug": "python-profiling", "offset": half}, headers=DEMO),
                 400, "REVISION_PINNING_VIOLATION")
    assert_error(await client.post("/v1/recall", json={"slug": "python-profiling", "revision_id": revision,
                                                       "offset": -1}, headers=DEMO), 400, "VALIDATION_ERROR")
    assert_error(await client.post("/v1/recall", json={"skill_id": "sk_nope"}, headers=DEMO), 404, "SKILL_NOT_FOUND")
    assert_error(await client.post("/v1/recall", json={"query": "x", "extra": 1}, headers=DEMO), 400,
                 "VALIDATION_ERROR")


@pytest.mark.anyio
@pytest.mark.parametrize(("method", "url", "kwargs"), [
    ("GET", "/v1/search", {"params": {"q": ""}}),
    ("GET", "/v1/search", {"params": {"q": "   "}}),
    ("GET", "/v1/search", {"params": {"q": "x" * 2001}}),
    ("GET", "/v1/search", {"params": {"q": "x", "mode": "fuzzy"}}),
    ("GET", "/v1/search", {"params": {"q": "x", "limit": 0}}),
    ("GET", "/v1/search", {"params": {"q": "x", "limit": 101}}),
    ("GET", "/v1/search", {"params": {"q": "x", "limit": "ten"}}),
    ("GET", "/v1/search", {"params": {"q": "x", "semantic_weight": 1.5}}),
    ("GET", "/v1/search", {"params": {"q": "x", "fusion": "max"}}),
    ("GET", "/v1/search", {"params": [("q", "x")] + [("tag", f"t{i}") for i in range(17)]}),
    ("GET", "/v1/search", {}),
    ("GET", "/v1/skills", {"params": {"limit": 201}}),
    ("GET", "/v1/skills", {"params": {"cursor": "not-a-cursor"}}),
    ("GET", "/v1/skills", {"params": {"kind": "recipe"}}),
    ("GET", "/v1/skills/" + "x" * 201, {}),
    ("POST", "/v1/skills/sk_x/resolve", {"content": b"{not json", "headers": {"Content-Type": "application/json"}}),
    ("POST", "/v1/skills/sk_x/resolve", {"json": {"parameters": [1, 2]}}),
    ("POST", "/v1/skills/sk_x/resolve", {"json": {"parameters": {}, "extra": 1}}),
])
async def test_bad_input_is_400_validation_error(client: httpx.AsyncClient, method: str, url: str,
                                                 kwargs: dict[str, Any]) -> None:
    headers = {**DEMO, **kwargs.pop("headers", {})}
    err = assert_error(await client.request(method, url, headers=headers, **kwargs), 400, "VALIDATION_ERROR")
    assert err["message"]


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["semantic_weight", "min_confidence"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
async def test_a_weight_that_is_not_a_finite_number_is_refused_as_that(client: httpx.AsyncClient, name: str,
                                                                       value: str) -> None:
    """NaN compares false with both bounds: it was refused as "should be less than or equal to 1"."""
    err = assert_error(await client.get("/v1/search", params={"q": "x", name: value}, headers=DEMO), 400,
                       "VALIDATION_ERROR")
    assert [p["field"] for p in err["details"]["problems"]] == [f"query.{name}"]
    assert "finite number" in err["details"]["problems"][0]["message"], err


@pytest.mark.anyio
async def test_validation_problems_have_the_mcp_shape(client: httpx.AsyncClient) -> None:
    # One shape for HTTP and MCP: {"field", "message"}, field names only, never the rejected values.
    resp = await client.get("/v1/search", params={"q": "x", "limit": 1000, "mode": "secret-value"}, headers=DEMO)
    err = assert_error(resp, 400, "VALIDATION_ERROR")
    problems = err["details"]["problems"]
    assert {p["field"] for p in problems} == {"query.limit", "query.mode"}
    assert all(set(p) == {"field", "message"} for p in problems)
    assert "secret-value" not in resp.text


@pytest.fixture(scope="module")
def release_flow(sample: Catalog) -> str:
    """The skill_id of the sample's "cut a tagged release" flow (parameters version, repo, branch)."""
    demo = PrincipalRegistry(None, demo=True).authenticate(DEMO_TOKEN)
    return next(s.skill_id for s in sample.list_skills(demo, kind="flow_template", limit=200).items
                if s.name == "Cut a tagged release")


JSON = {"Content-Type": "application/json"}
SECRET = "my-secret-value"  # a rejected value no answer may echo


@pytest.mark.anyio
@pytest.mark.parametrize(("method", "url", "kwargs", "fields"), [
    ("GET", "/v1/skills", {"params": {"cursor": SECRET}}, {"query.cursor"}),
    ("GET", "/v1/search", {"params": {"q": ""}}, {"query.q"}),
    ("GET", "/v1/search", {"params": {"q": "   "}}, {"query.q"}),
    ("GET", "/v1/search", {"params": {"q": "x", "mode": SECRET}}, {"query.mode"}),
    ("GET", "/v1/search", {"params": [("q", "x"), ("limit", "1"), ("limit", "50"), ("tag", "a"), ("tag", "b")]},
     {"query.limit"}),
    ("GET", "/v1/skills", {"params": [("cursor", SECRET), ("cursor", SECRET), ("kind", "flow_template"),
                                      ("kind", "knowledge")]}, {"query.cursor", "query.kind"}),
    ("POST", "/v1/recall", {"json": {"query": 5}}, {"body.query"}),
    ("POST", "/v1/recall", {"json": {}}, {"body.query"}),
    ("POST", "/v1/recall", {"json": {"slug": "Bad Slug"}}, {"body.slug"}),
    ("POST", "/v1/recall", {"json": {"revision_id": "rev_1"}}, {"body.skill_id"}),
    ("POST", "/v1/recall", {"content": b'{"query": "x",', "headers": JSON}, {"body"}),
    ("POST", "/v1/recall", {"content": b'{"query": "\xff"}', "headers": JSON}, {"body"}),
    ("POST", "/v1/recall", {"content": b"[" * 5000 + b"]" * 5000, "headers": JSON}, {"body"}),
    ("POST", "/v1/skills/{flow}/resolve", {"content": b'{"parameters": {"version": "\\ud800", "repo": "a/b"}}',
                                           "headers": JSON}, {"body.parameters.version"}),
    ("POST", "/v1/skills/{flow}/resolve", {"json": {"parameters": {"version": "1.0", "nope": SECRET}}},
     {"body.parameters.repo", "body.parameters.nope"}),
])
async def test_every_validation_error_has_problems_located_in_the_request(
    client: httpx.AsyncClient, release_flow: str, method: str, url: str, kwargs: dict[str, Any], fields: set[str]
) -> None:
    """The README's one shape: ``details.problems`` of ``{field, message}`` (``code`` where resolve gives
    one), each field the input's location in the HTTP request joined by dots, the same location whether
    FastAPI or the catalog refused it, and never the rejected value."""
    headers = {**DEMO, **kwargs.pop("headers", {})}
    resp = await client.request(method, url.format(flow=release_flow), headers=headers, **kwargs)
    err = assert_error(resp, 400, "VALIDATION_ERROR")
    problems = err["details"]["problems"]
    assert all({"field", "message"} <= set(p) <= {"field", "message", "code"} and p["message"] for p in problems)
    assert {p["field"] for p in problems} == fields
    assert SECRET not in resp.text


@pytest.mark.anyio
@pytest.mark.parametrize("content_type", ["text/plain", None])
async def test_json_without_a_json_content_type_is_415_naming_the_header(
    client: httpx.AsyncClient, content_type: str | None
) -> None:
    headers = {**DEMO, **({"Content-Type": content_type} if content_type else {})}
    resp = await client.post("/v1/recall", content=b'{"query": "profile python"}', headers=headers)
    err = assert_error(resp, 415, "VALIDATION_ERROR")
    assert err["details"]["problems"] == [{"field": "header.content-type", "message": "must be application/json"}]
    assert "application/json" in err["message"]


@pytest.mark.anyio
@pytest.mark.parametrize(("url", "auth"), [("/", False), ("/healthz", False), ("/readyz", False),
                                           ("/metrics", False), ("/ui/config", False), ("/openapi.json", False),
                                           ("/v1/skills", True), ("/v1/search?q=python", True)])
async def test_head_answers_as_get_without_the_body(client: httpx.AsyncClient, url: str, auth: bool) -> None:
    """Uptime checkers probe with HEAD: the GET's status and header fields, no body."""
    headers = DEMO if auth else {}
    got, head = await client.get(url, headers=headers), await client.head(url, headers=headers)
    assert got.status_code == head.status_code == 200
    assert head.content == b"" and got.content
    assert head.headers["content-type"] == got.headers["content-type"]
    # A scrape counts the one before it, and a search's answer carries its own timings: their lengths move.
    if url != "/metrics" and not url.startswith("/v1/search"):
        assert head.headers["content-length"] == got.headers["content-length"]
    assert head.headers["x-request-id"]


@pytest.mark.anyio
async def test_head_keeps_the_routes_auth_and_methods(client: httpx.AsyncClient) -> None:
    refused = await client.head("/v1/skills")
    assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer" and refused.content == b""
    assert (await client.head("/v1/recall", headers=DEMO)).status_code == 405  # a POST route: no GET to mirror


@pytest.mark.anyio
async def test_unknown_routes_and_methods(client: httpx.AsyncClient) -> None:
    assert_error(await client.get("/v2/nothing", headers=DEMO), 404, "NOT_FOUND")
    resp = await client.delete("/v1/skills", headers=DEMO)
    assert_error(resp, 405, "METHOD_NOT_ALLOWED")
    assert resp.headers["allow"] == "GET, HEAD"  # HEAD is answered on every GET route (http/head.py)
    posted = await client.get("/v1/recall", headers=DEMO)
    assert_error(posted, 405, "METHOD_NOT_ALLOWED")
    assert posted.headers["allow"] == "POST"


@pytest.mark.anyio
async def test_body_size_limit(sample: Catalog) -> None:
    app = create_app(sample, principals=PrincipalRegistry(None, demo=True), limits=Limits(max_body_bytes=1024))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        big = {"parameters": {"text": "x" * 2000}}
        err = assert_error(await c.post("/v1/skills/sk_x/resolve", json=big, headers=DEMO), 413, "VALIDATION_ERROR")
        assert err["details"] == {"problems": [{"field": "body", "message": "larger than 1024 bytes"}],
                                  "max_body_bytes": 1024}

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: the limit counts streamed bytes
            yield b'{"parameters": {"text": "'
            for _ in range(20):
                yield b"y" * 100
            yield b'"}}'

        streamed = await c.post("/v1/skills/sk_x/resolve", content=chunks(),
                                headers={**DEMO, "Content-Type": "application/json"})
        assert_error(streamed, 413, "VALIDATION_ERROR")
        small = await c.post("/v1/skills/sk_x/resolve", json={"parameters": {}}, headers=DEMO)
        assert_error(small, 404, "SKILL_NOT_FOUND")


# -- request ids, logs, metrics ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_request_ids_and_json_logs_never_hold_the_token(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="skillsearch.http")
    mine = await client.get("/v1/search", params={"q": "python"}, headers={**DEMO, "X-Request-ID": "abc-123"})
    assert mine.headers["x-request-id"] == "abc-123"
    generated = await client.get("/v1/skills/nope", headers={**DEMO, "X-Request-ID": "bad id\twith tab"})
    rid = generated.headers["x-request-id"]
    assert rid != "bad id\twith tab" and len(rid) == 32
    lines = [JsonLogFormatter().format(r) for r in caplog.records if r.name == "skillsearch.http"]
    records = [json.loads(line) for line in lines]
    by_id = {r["request_id"]: r for r in records}
    assert by_id["abc-123"] | {"route": "/v1/search", "status": 200, "principal": "demo", "method": "GET"} == \
        by_id["abc-123"]
    assert by_id[rid]["status"] == 404 and by_id[rid]["route"] == "/v1/skills/{skill_id}"
    assert all(DEMO_TOKEN not in line and "python" not in line for line in lines)


@pytest.mark.anyio
async def test_probes_that_answer_200_are_logged_at_debug_and_a_failing_one_at_info(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    """A balancer checks /readyz every second per replica: at info, those lines buried the requests."""
    caplog.set_level("DEBUG", logger="skillsearch.http")
    for path in ("/healthz", "/readyz", "/metrics"):
        assert (await client.get(path)).status_code == 200
    await client.get("/v1/search", params={"q": "python"}, headers=DEMO)
    levels = {r.route: r.levelname for r in caplog.records if r.name == "skillsearch.http"}  # type: ignore[attr-defined]
    assert levels == {"/healthz": "DEBUG", "/readyz": "DEBUG", "/metrics": "DEBUG", "/v1/search": "INFO"}, levels


def _metric(text: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    raise AssertionError(f"no sample {name} {labels}")


@pytest.mark.anyio
async def test_metrics(fresh_sample: Catalog) -> None:
    async def mounted(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    app = create_app(fresh_sample, principals=PrincipalRegistry(None, demo=True), mounts=[("/mcp", mounted)])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        await c.head("/v1/skills", headers=DEMO)
        for headers in (DEMO, DEMO, {}):
            await c.post("/mcp", headers=headers)
        text = (await c.get("/metrics")).text
        assert math.isnan(_metric(text, "skillsearch_last_sync_age_seconds"))
        for mode in ("hybrid", "lexical", "lexical"):
            await c.get("/v1/search", params={"q": "python", "mode": mode}, headers=DEMO)
        await c.get("/v1/skills/nope", headers=DEMO)
        await c.get("/v1/skills")
        await c.get("/no/such/path/1")
        await c.get("/no/such/path/2")
        fresh_sample.store.sync.save(SyncState("upstream", "c1", utc_now(), None, {}))
        resp = await c.get("/metrics")
        assert resp.headers["content-type"].startswith("text/plain")
        text = resp.text
    assert _metric(text, "skillsearch_http_requests_total", route="/v1/search", status="200") == 3
    assert _metric(text, "skillsearch_http_requests_total", route="/v1/skills/{skill_id}", status="404") == 1
    assert _metric(text, "skillsearch_http_requests_total", route="/v1/skills", status="401") == 1
    assert _metric(text, "skillsearch_http_requests_total", route="unmatched", status="404") == 2
    assert _metric(text, "skillsearch_http_requests_total", route="/v1/skills", method="HEAD", status="200") == 1
    assert _metric(text, "skillsearch_http_requests_total", route="/mcp", method="POST", status="200") == 2
    assert _metric(text, "skillsearch_http_requests_total", route="/mcp", method="POST", status="401") == 1
    assert _metric(text, "skillsearch_http_request_duration_seconds_count", route="/v1/search", status="200") == 3
    assert _metric(text, "skillsearch_search_duration_seconds_count", mode="lexical") == 2
    assert _metric(text, "skillsearch_search_duration_seconds_count", mode="hybrid") == 1
    assert _metric(text, "skillsearch_index_documents") == fresh_sample.store.count("active")
    assert 0 <= _metric(text, "skillsearch_last_sync_age_seconds") < 3600


@pytest.mark.anyio
async def test_metrics_count_the_batching_query_encoder(fresh_sample: Catalog) -> None:
    app = create_app(fresh_sample, principals=PrincipalRegistry(None, demo=True))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        assert _metric((await c.get("/metrics")).text, "skillsearch_query_encoder_requests_total") == 0
        for q in ("metrics test: rotate the keys of a vault", "metrics test: plan the next sprint"):
            assert (await c.get("/v1/search", params={"q": q, "mode": "semantic"}, headers=DEMO)).status_code == 200
        text = (await c.get("/metrics")).text
    assert _metric(text, "skillsearch_query_encoder_requests_total") == 2
    assert 1 <= _metric(text, "skillsearch_query_encoder_batches_total") <= 2
    assert _metric(text, "skillsearch_query_encoder_failed_batches_total") == 0
    assert _metric(text, "skillsearch_query_encoder_largest_batch") >= 1
    assert "/no/such/path" not in text


def test_the_readme_route_table_is_the_apps_api(app: FastAPI) -> None:
    """README, "HTTP API and search page": each API row of the route table (method, path and query
    parameters) is a route of the app's OpenAPI document, and each route there has its row (the table's
    search row left out ``min_confidence``)."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    documented = {}
    for row in readme.split("| route | what | needs |", 1)[1].split("\n\n", 1)[0].splitlines()[2:]:
        first = row.replace("\\|", "/").split("|")[1]
        for method, path, query in re.findall(r"`(GET|POST) (/[^`?\s]*)\??([^`\s]*)`", first):
            documented[(method, path)] = set(re.findall(r"(\w+)=", query))
    served = {(method.upper(), path): {p["name"] for p in op.get("parameters", []) if p["in"] == "query"}
              for path, item in app.openapi()["paths"].items() for method, op in item.items()}
    api = {key: query for key, query in documented.items() if key[1].startswith(("/v1/", "/healthz", "/readyz", "/metrics"))}
    assert api == served


@pytest.mark.anyio
async def test_every_metric_served_is_in_the_deploy_guides_table(client: httpx.AsyncClient) -> None:
    """docs/deploy.md, "What to watch": an operator finds every metric family ``/metrics`` serves there
    (``skillsearch_last_sync_age_seconds`` was served but named nowhere)."""
    await client.get("/v1/search", params={"q": "python", "mode": "lexical"}, headers=DEMO)
    text = (await client.get("/metrics")).text
    served = {re.sub(r"_total$", "", name) for name in re.findall(r"^# TYPE (skillsearch_\w+) ", text, re.M)
              if not name.endswith("_created")}  # a counter's or histogram's creation time, not a family
    guide = (Path(__file__).resolve().parents[1] / "docs" / "deploy.md").read_text(encoding="utf-8")
    table = guide.split("| metric | watch for |", 1)[1].split("\n\n", 1)[0]
    named = {re.sub(r"_total$", "", n) for n in re.findall(r"`(skillsearch_\w+\*?)", table)}
    prefixes = tuple(n.rstrip("*") for n in named if n.endswith("*"))
    missing = {m for m in served if m not in named and not m.startswith(prefixes)}
    assert {"skillsearch_http_requests", "skillsearch_index_documents"} <= served and not missing, sorted(missing)


@pytest.mark.anyio
async def test_a_resource_is_served_byte_for_byte_and_never_as_a_page(client: httpx.AsyncClient,
                                                                      sample: Catalog) -> None:
    """``GET /v1/skills/{id}/resources/{path}``: REST had no read of a skill's file (recall cuts content at
    256 KiB and wraps it in JSON). The bytes are the stored ones, the ETag is their sha256 and answers 304,
    and the file is an unsniffed, sandboxed attachment: an author's HTML never runs on the search page's
    origin. Invisible skills stay SKILL_NOT_FOUND; an unknown path names the paths there are."""
    skill_id = sample.get_skill(Principal.operator(), "git-bisect-regressions").skill_id
    _, revision_id, stored = sample.get_resource(Principal.operator(), skill_id, "scripts/bisect_run.sh")
    url = f"/v1/skills/{skill_id}/resources/scripts/bisect_run.sh"
    resp = await client.get(url, headers=DEMO)
    assert resp.status_code == 200 and resp.content == stored.content and len(stored.content) > 100
    assert resp.headers["etag"] == f'"{stored.sha256}"' and resp.headers["x-skill-revision"] == revision_id
    assert resp.headers["content-type"] == "text/x-sh; charset=utf-8"
    assert resp.headers["x-content-type-options"] == "nosniff"
    assert resp.headers["content-security-policy"] == "sandbox"
    assert resp.headers["content-disposition"] == "attachment; filename*=UTF-8''bisect_run.sh"
    by_slug = await client.get("/v1/skills/git-bisect-regressions/resources/scripts/bisect_run.sh", headers=DEMO)
    assert by_slug.content == stored.content
    cached = await client.get(url, headers={**DEMO, "If-None-Match": f'W/"x", "{stored.sha256}"'})
    assert cached.status_code == 304 and cached.content == b""
    assert (await client.get(url, headers={**DEMO, "If-None-Match": '"other"'})).status_code == 200
    assert (await client.get(url, headers={**DEMO, "If-None-Match": "*"})).status_code == 304  # RFC 9110 13.1.2
    missing = assert_error(await client.get(f"/v1/skills/{skill_id}/resources/scripts/nope.sh", headers=DEMO),
                           404, "RESOURCE_NOT_FOUND")
    assert missing["details"]["resources"] == ["scripts/bisect_run.sh"]
    hidden = sample.get_skill(Principal.operator(), "tls-certificate-renewal").skill_id  # sub:ops-pro
    assert_error(await client.get(f"/v1/skills/{hidden}/resources/scripts/check_cert_expiry.py", headers=DEMO),
                 404, "SKILL_NOT_FOUND")
    assert_error(await client.get(url), 401, "UNAUTHENTICATED")


@pytest.mark.anyio
async def test_a_resource_whose_authored_media_type_no_header_can_carry_is_octet_stream(
    tmp_path: Path, fake_encoder: Encoder, tokens: dict[str, Any]
) -> None:
    """A bundle's author sets a resource's ``media_type``; one with a character outside Latin-1 failed the
    response (Starlette encodes headers as Latin-1): a 500 INTERNAL. It is sent as application/octet-stream.
    A textual type that is not ``text/*`` (JSON) gets ``charset=utf-8`` too when its bytes are UTF-8."""
    bundle = tmp_path / "bundle.jsonl"
    bundle.write_text(json.dumps({"slug": "odd-media", "name": "Odd", "description": "an odd media type",
                                  "instructions": "x", "resources": [
                                      {"path": "a.txt", "media_type": "text/plain; name=\u20ac", "text": "hello"},
                                      {"path": "schema.json", "text": '{"\u00e9": 1}'}]}))
    catalog = Catalog.open(Settings(data_dir=tmp_path / "data"), encoder=fake_encoder)
    try:
        assert catalog.import_path(bundle, "local", "sub:starter-pack").ok
        skill_id = catalog.get_skill(Principal.operator(), "odd-media").skill_id
        app = create_app(catalog, principals=PrincipalRegistry(tokens["path"], demo=True))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
                                     base_url="http://test") as c:
            resp = await c.get(f"/v1/skills/{skill_id}/resources/a.txt", headers=DEMO)
            json_file = await c.get(f"/v1/skills/{skill_id}/resources/schema.json", headers=DEMO)
        assert resp.status_code == 200, resp.text
        assert resp.content == b"hello" and resp.headers["content-type"] == "application/octet-stream"
        # UTF-8 JSON says so: the search page shows a file in place by its charset (it downloaded this one)
        assert json_file.headers["content-type"] == "application/json; charset=utf-8"
        assert json_file.content == '{"\u00e9": 1}'.encode()
    finally:
        catalog.close()
