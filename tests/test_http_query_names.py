"""A query parameter a ``/v1`` route does not take is refused, not ignored, over real HTTP on 127.0.0.1.

``GET /v1/search?q=tls&limt=5`` (a typo) was answered with the default limit and no hint, while an unknown
body field or MCP argument is refused: now it is 400 ``VALIDATION_ERROR`` naming ``query.limt`` and the
parameters the route takes. The routes outside ``/v1`` (the page, the probes, the documents) stay lenient.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from test_http_api import assert_error

from skillsearch.core.domain import Principal
from skillsearch.http.app import create_app
from skillsearch.http.auth import DEMO_TOKEN, PrincipalRegistry
from skillsearch.http.server import ServerThread
from skillsearch.http.sync_routes import make_sync_router
from skillsearch.service import Catalog

DEMO = {"Authorization": f"Bearer {DEMO_TOKEN}"}
STARTER = Principal("demo", frozenset({"sub:starter-pack", "team:data-science"}))


@pytest.fixture(scope="module")
def app(sample: Catalog) -> FastAPI:
    registry = PrincipalRegistry(None, demo=True)
    return create_app(sample, principals=registry,
                      routers=[make_sync_router(sample, None, authenticate=registry.authenticate_header)])


@pytest.fixture(scope="module")
def url(app: FastAPI) -> Any:
    with ServerThread(app) as served:
        yield served


@pytest.fixture(scope="module")
def flow_id(sample: Catalog) -> str:
    return next(s.skill_id for s in sample.list_skills(STARTER, limit=200).items if s.kind == "flow_template")


# Each /v1 GET route, a request it answers 200, and the parameters it takes.
GETS: dict[str, tuple[str, tuple[str, ...]]] = {
    "/v1/skills": ("/v1/skills?limit=2", ("kind", "tag", "cursor", "limit")),
    "/v1/search": ("/v1/search?q=profile+python&limit=2",
                   ("q", "mode", "kind", "tag", "limit", "fusion", "semantic_weight", "min_confidence")),
    "/v1/skills/{skill_id}": ("/v1/skills/git-bisect-regressions?max_chars=100", ("offset", "max_chars")),
    "/v1/skills/{skill_id}/resources/{path}": ("/v1/skills/git-bisect-regressions/resources/scripts/bisect_run.sh", ()),
    "/v1/sync/status": ("/v1/sync/status", ()),
}


def test_every_v1_get_route_refuses_a_query_parameter_it_does_not_take(app: FastAPI, url: str) -> None:
    """Each ``/v1`` GET route (every one the app serves is in :data:`GETS`) answers its request as before,
    and the same request with ``limt=5`` added is 400 naming ``query.limt`` and the parameters it takes."""
    served = {path for path, item in app.openapi()["paths"].items() if path.startswith("/v1/") and "get" in item}
    assert served == set(GETS)
    with httpx.Client(base_url=url, headers=DEMO, timeout=60) as c:
        for route, (target, takes) in GETS.items():
            assert c.get(target).status_code == 200, target
            joined = target + ("&" if "?" in target else "?") + "limt=5"
            error = assert_error(c.get(joined), 400, "VALIDATION_ERROR")
            assert error["details"]["problems"] == [{"field": "query.limt", "message": "not a parameter of this route"}]
            assert error["details"]["query_parameters"] == list(takes), route
            said = f"GET {route} takes "
            assert said + (", ".join(takes) if takes else "no query parameters") in error["message"], error
            assert "'limt'" in error["message"]
            head = c.head(joined)  # HEAD is answered as GET: the same refusal
            assert head.status_code == 400 and head.content == b""


def test_the_post_routes_refuse_a_query_parameter_too(url: str, flow_id: str) -> None:
    """Resolve and recall take their input in the body: any query parameter is one they do not take."""
    with httpx.Client(base_url=url, headers=DEMO, timeout=60) as c:
        for path, body in ((f"/v1/skills/{flow_id}/resolve", {"parameters": {}}),
                           ("/v1/recall", {"query": "profile python"})):
            error = assert_error(c.post(path + "?dry_run=1", json=body), 400, "VALIDATION_ERROR")
            assert error["details"]["problems"] == [{"field": "query.dry_run",
                                                     "message": "not a parameter of this route"}]
            assert "takes no query parameters" in error["message"]


def test_known_and_repeated_parameters_behave_as_before(url: str) -> None:
    """Declared parameters are read as before (``limit`` counts), ``tag`` may repeat, another parameter given
    twice is refused as before, a bare ``=`` says nothing; a typo beside a known parameter is refused and a
    mistyped value of a known one is still a problem of that one."""
    with httpx.Client(base_url=url, headers=DEMO, timeout=60) as c:
        two = c.get("/v1/search", params={"q": "python", "limit": 2, "mode": "lexical"})
        assert two.status_code == 200 and len(two.json()["hits"]) <= 2
        assert c.get("/v1/skills?tag=python&tag=cli").status_code == 200
        assert c.get("/v1/search?q=python&=&limit=2").status_code == 200
        twice = assert_error(c.get("/v1/skills?limit=1&limit=500"), 400, "VALIDATION_ERROR")
        assert twice["details"]["problems"] == [{"field": "query.limit",
                                                 "message": "takes one value and was given more than once"}]
        both = assert_error(c.get("/v1/skills?limit=1&limit=2&limt=3"), 400, "VALIDATION_ERROR")
        assert [p["field"] for p in both["details"]["problems"]] == ["query.limt", "query.limit"]
        bad = assert_error(c.get("/v1/search?q=x&kind=flow"), 400, "VALIDATION_ERROR")
        assert [p["field"] for p in bad["details"]["problems"]] == ["query.kind"]
        nameless = assert_error(c.get("/v1/skills?=5"), 400, "VALIDATION_ERROR")
        assert nameless["details"]["problems"] == [{"field": "query", "message": "a parameter without a name"}]


def test_a_long_or_many_unknown_names_are_echoed_cut_and_bounded(url: str) -> None:
    """A name is shown back cut as every echoed name (``core.errors.echo``), each once, the first ten."""
    with httpx.Client(base_url=url, headers=DEMO, timeout=60) as c:
        error = assert_error(c.get("/v1/skills?" + "x" * 5000 + "=1"), 400, "VALIDATION_ERROR")
        (found,) = error["details"]["problems"]
        assert found["field"].startswith("query.xxx") and "more characters" in found["field"]
        assert len(found["field"]) < 200 and len(error["message"]) < 1000
        many = c.get("/v1/skills?" + "&".join(f"p{i}=1&p{i}=2" for i in range(500)))
        problems = assert_error(many, 400, "VALIDATION_ERROR")["details"]["problems"]
        assert [p["field"] for p in problems] == [f"query.p{i}" for i in range(10)]
        assert len(many.content) < 8192


def test_the_token_is_checked_before_the_query_names(url: str) -> None:
    """A caller without a token learns nothing of the route's parameters: 401, as for every other input error."""
    with httpx.Client(base_url=url, timeout=60) as c:
        assert_error(c.get("/v1/skills?limt=5"), 401, "UNAUTHENTICATED")
        assert_error(c.get("/v1/sync/status?limt=5"), 401, "UNAUTHENTICATED")


def test_the_routes_outside_v1_ignore_query_parameters(url: str) -> None:
    """The page (a shared link's ``utm_source``), the probes and the documents keep answering a decorated URL."""
    with httpx.Client(base_url=url, timeout=60) as c:
        for path in ("/", "/healthz", "/metrics", "/openapi.json", "/docs", "/ui/config"):
            assert c.get(path + "?utm_source=x&limt=5").status_code == 200, path
        assert c.get("/readyz?x=1").status_code in (200, 503)
        assert c.get("/readyz?x=1").status_code != 400


def test_every_v1_operation_declares_its_400(url: str) -> None:
    """Every /v1 operation can answer 400 (an unknown query parameter), also those without parameters."""
    with httpx.Client(base_url=url, timeout=60) as c:
        paths = c.get("/openapi.json").json()["paths"]
    for path, item in paths.items():
        for method, op in item.items():
            if path.startswith("/v1/"):
                schema = op["responses"]["400"]["content"]["application/json"]["schema"]
                assert schema["$ref"].endswith("/ErrorBody"), (method, path)
