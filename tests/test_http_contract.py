"""The HTTP API as a client written from its contract sees it, over real HTTP on 127.0.0.1.

What the OpenAPI document and the README promise a client library: each status a route can answer is one the
document declares for it, with the error body it sends and the token it needs; 405s name only methods that
are taken (``/mcp`` included); a trailing slash is the documented redirect; the root's JSON links every surface
served; a resource's ``If-None-Match`` is compared as RFC 9110 says (weakly, across field lines).
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from test_http_api import assert_error

from skillsearch.cli import build_serve_app
from skillsearch.core.domain import Principal
from skillsearch.core.settings import Settings
from skillsearch.http.app import create_app
from skillsearch.http.auth import DEMO_TOKEN, PrincipalRegistry
from skillsearch.http.server import ServerThread
from skillsearch.http.sync_routes import make_sync_router
from skillsearch.retrieval.encoder import Encoder
from skillsearch.service import Catalog

DEMO = {"Authorization": f"Bearer {DEMO_TOKEN}"}


def test_every_v1_status_while_the_index_cannot_serve_is_declared_for_its_route(
    tmp_path: Path, fake_encoder: Encoder, encoder: Encoder
) -> None:
    """While the index cannot serve (built for another model here) a route answers what it can, or 503
    ``INDEX_NOT_READY``; whichever status, the route's OpenAPI operation declares it. Recall's Level 0 is a
    search: its 503 was undeclared, though search declares the same refusal."""
    data = tmp_path / "data"
    Catalog.open(Settings(data_dir=data, seed_sample=True), encoder=fake_encoder).close()
    catalog = Catalog(Settings(data_dir=data), encoder=encoder)  # index opened lazily, on first use
    try:
        app = create_app(catalog, principals=PrincipalRegistry(None, demo=True))
        with ServerThread(app) as url, httpx.Client(base_url=url) as c:
            paths = c.get("/openapi.json").json()["paths"]
            calls = [("get", "/v1/skills", "/v1/skills", None),
                     ("get", "/v1/search", "/v1/search?q=python", None),
                     ("get", "/v1/skills/{skill_id}", "/v1/skills/python-profiling", None),
                     ("get", "/v1/skills/{skill_id}/resources/{path}",
                      "/v1/skills/python-profiling/resources/SKILL.md", None),
                     ("post", "/v1/skills/{skill_id}/resolve", "/v1/skills/bootstrap-python-project/resolve",
                      {"parameters": {"project_dir": "x", "package": "y"}}),
                     ("post", "/v1/recall", "/v1/recall", {"query": "profile python code"}),
                     ("post", "/v1/recall", "/v1/recall", {"slug": "python-profiling"})]
            seen = {}
            for method, template, target, body in calls:
                resp = c.request(method.upper(), target, json=body, headers=DEMO)
                seen[target, str(body)] = resp.status_code
                assert str(resp.status_code) in paths[template][method]["responses"], (target, resp.text)
                if resp.status_code >= 400:
                    assert resp.json()["error"]["code"]
            assert seen["/v1/recall", str({"query": "profile python code"})] == 503, seen
            assert seen["/v1/search?q=python", "None"] == 503, seen
    finally:
        catalog.close()


def test_a_weak_if_none_match_naming_the_resources_etag_answers_304(sample: Catalog) -> None:
    """``If-None-Match`` compares weakly (RFC 9110 13.1.2): ``W/"<sha256>"`` names the resource as its strong
    ETag does. A proxy that compresses (nginx's gzip) hands its client the ETag weakened; that client's
    revalidation was a 200 with the whole file each time."""
    skill_id = sample.get_skill(Principal.operator(), "git-bisect-regressions").skill_id
    app = create_app(sample, principals=PrincipalRegistry(None, demo=True))
    with ServerThread(app) as url, httpx.Client(base_url=url, headers=DEMO) as c:
        target = f"/v1/skills/{skill_id}/resources/scripts/bisect_run.sh"
        etag = c.get(target).headers["etag"]
        for sent in (f"W/{etag}", f'"other", W/{etag}', f'"other",W/{etag}'):
            resp = c.get(target, headers={"If-None-Match": sent})
            assert resp.status_code == 304 and resp.content == b"" and resp.headers["etag"] == etag, sent
        assert c.get(target, headers={"If-None-Match": 'W/"other"'}).status_code == 200
        # Two If-None-Match lines are one list (RFC 9110 5.3): the second line's tag counts as the first's does.
        assert c.get(target, headers=[("If-None-Match", '"other"'), ("If-None-Match", etag)]).status_code == 304
        assert c.get(target, headers=[("If-None-Match", '"other"'), ("If-None-Match", '"more"')]).status_code == 200


@pytest.mark.parametrize("method", ["GET", "HEAD", "DELETE", "PUT", "PATCH", "OPTIONS"])
def test_every_method_but_post_at_mcp_is_405_allowing_post_only(sample: Catalog, method: str) -> None:
    """``/mcp`` takes only ``POST``: every other method is 405 with ``Allow: POST``. The route the app mounted it
    on took GET and DELETE (for the transport to refuse them) and answered PUT, PATCH and OPTIONS itself with
    ``Allow: HEAD, POST, GET, DELETE``: three methods that are 405 too, which a client that trusts Allow retries."""
    app = build_serve_app(sample, PrincipalRegistry(None, demo=True))
    with ServerThread(app) as url, httpx.Client(base_url=url, headers=DEMO) as c:
        resp = c.request(method, "/mcp")
        assert resp.status_code == 405 and resp.headers["allow"] == "POST", (resp.headers, resp.text)
        assert resp.headers["content-type"] == "application/json"
        assert c.request(method, "/mcp", headers={"Authorization": ""}).status_code == 401
        ping = c.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                      headers={"Accept": "application/json, text/event-stream"})
        assert ping.json() == {"jsonrpc": "2.0", "id": 1, "result": {}}


def test_the_root_links_a_json_client_to_the_mcp_endpoint_serve_mounts(sample: Catalog) -> None:
    """``GET /`` asking for JSON lists where the surfaces are; on ``skillsearch serve`` that includes ``/mcp``. It
    said ``"mcp": null`` there, since it looked for a Starlette ``Mount`` and serve mounts MCP on an exact route."""
    app = build_serve_app(sample, PrincipalRegistry(None, demo=True))
    with ServerThread(app) as url, httpx.Client(base_url=url) as c:
        links = c.get("/", headers={"Accept": "application/json"}).json()
        assert links["mcp"] == "/mcp"
        ping = c.post(links["mcp"], json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                      headers={**DEMO, "Accept": "application/json, text/event-stream"})
        assert ping.json() == {"jsonrpc": "2.0", "id": 1, "result": {}}


@pytest.mark.parametrize(("method", "path", "to"), [
    ("GET", "/v1/skills/", "/v1/skills"), ("GET", "/v1/search/?q=python", "/v1/search?q=python"),
    ("GET", "/v1/skills/python-profiling/", "/v1/skills/python-profiling"), ("POST", "/v1/recall/", "/v1/recall"),
])
def test_a_trailing_slash_is_the_documented_redirect_to_the_route(sample: Catalog, method: str, path: str,
                                                                  to: str) -> None:
    """The README said every path no route serves is 404 ``NOT_FOUND``, but ``/v1/skills/`` is a 307 to
    ``/v1/skills`` (FastAPI's redirect_slashes, which ``/mcp/`` hosts rely on): it says so now, and the redirect
    stays on this origin, keeps the query, and a client following it with the method and body gets the route."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert re.search(r"without its trailing slash, `/v1/skills/`, is a 307 to that path", readme)
    app = create_app(sample, principals=PrincipalRegistry(None, demo=True))
    body = {"query": "python"} if method == "POST" else None
    with ServerThread(app) as url, httpx.Client(base_url=url, headers=DEMO) as c:
        resp = c.request(method, path, json=body)
        assert resp.status_code == 307 and resp.headers["location"] == url + to
        followed = c.request(method, path, json=body, follow_redirects=True)
        assert followed.status_code == 200 and followed.history[0].status_code == 307


def test_the_sync_status_routes_401_is_declared_with_the_error_body_it_answers(sample: Catalog) -> None:
    """``GET /v1/sync/status`` answers a missing token with the app's ``{"error": ...}`` body; its OpenAPI 401 had
    a description and no content, so a generated client had no schema to read that body with."""
    registry = PrincipalRegistry(None, demo=True)
    app = create_app(sample, principals=registry,
                     routers=[make_sync_router(sample, None, authenticate=registry.authenticate_header)])
    with ServerThread(app) as url, httpx.Client(base_url=url) as c:
        assert_error(c.get("/v1/sync/status"), 401, "UNAUTHENTICATED")
        assert c.get("/v1/sync/status", headers=DEMO).status_code == 200
        operation = c.get("/openapi.json").json()["paths"]["/v1/sync/status"]["get"]
        assert operation["responses"]["401"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")


def test_the_sync_status_route_declares_the_bearer_token_it_needs(sample: Catalog) -> None:
    """The status route checks the token itself (not through a FastAPI security dependency), so its OpenAPI
    operation had no ``security``: a client generated from the document called it without the token, a 401."""
    registry = PrincipalRegistry(None, demo=True)
    app = create_app(sample, principals=registry,
                     routers=[make_sync_router(sample, None, authenticate=registry.authenticate_header)])
    with ServerThread(app) as url, httpx.Client(base_url=url) as c:
        doc = c.get("/openapi.json").json()
        security = doc["paths"]["/v1/sync/status"]["get"]["security"]
        assert security == doc["paths"]["/v1/skills"]["get"]["security"] == [{"HTTPBearer": []}]
        assert set(security[0]) <= set(doc["components"]["securitySchemes"])
        assert c.get("/v1/sync/status").status_code == 401


def test_the_sync_status_route_needs_the_skills_read_scope(sample: Catalog, tmp_path: Path) -> None:
    """The status names the caller's subscriptions and sources, their folders or repositories, cursors and
    errors: where the skills ``skills:read`` reads come from. It needed a token and no scope, so a token minted
    for recall alone (``memory:read``), or with no scope at all, read it, though every other ``/v1`` route is
    refused to a token without its scope. Now such a token gets 403 ``ACCESS_DENIED`` with the error body the
    other routes send (``details.required_scope``), declared in the OpenAPI document; ``skills:read`` reads it."""
    from skillsearch.http.auth import add_principal
    from skillsearch.sync.sources import SourceConfig

    path = tmp_path / "principals.toml"
    reader = add_principal(path, "reader", ["sub:starter-pack"], ["skills:read"])
    recall_only = add_principal(path, "recall-only", ["sub:starter-pack"], ["memory:read"])
    nothing = add_principal(path, "nothing", ["sub:starter-pack"], [])
    registry = PrincipalRegistry(path)
    source = SourceConfig(name="starter-folder", grant="sub:starter-pack", path=tmp_path / "private" / "skills")
    app = create_app(sample, principals=registry, routers=[
        make_sync_router(sample, None, authenticate=registry.authenticate_header, sources=[source])])
    with ServerThread(app) as url, httpx.Client(base_url=url) as c:
        read = c.get("/v1/sync/status", headers={"Authorization": f"Bearer {reader}"})
        assert read.status_code == 200 and [s["name"] for s in read.json()["sources"]] == ["starter-folder"], read.text
        for name, token in (("recall-only", recall_only), ("nothing", nothing)):
            refused = c.get("/v1/sync/status", headers={"Authorization": f"Bearer {token}"})
            error = assert_error(refused, 403, "ACCESS_DENIED")
            assert error["details"] == {"required_scope": "skills:read"} and name in error["message"], error
            assert "starter-folder" not in refused.text and "private" not in refused.text
            # the same refusal a catalog route gives the same token
            assert_error(c.get("/v1/skills", headers={"Authorization": f"Bearer {token}"}), 403, "ACCESS_DENIED")
        operation = c.get("/openapi.json").json()["paths"]["/v1/sync/status"]["get"]
        assert operation["responses"]["403"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")
