"""The MCP tools through real in-memory client sessions of the ``mcp`` SDK, on the sample catalog."""

from __future__ import annotations

import base64
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_support import DATA_TEAM, STARTER, error, ok

import skillsearch
from skillsearch.core.domain import Principal
from skillsearch.core.errors import UnauthenticatedError
from skillsearch.core.settings import Settings
from skillsearch.mcp.server import TOOL_NAMES, build_mcp_server
from skillsearch.retrieval.encoder import Encoder
from skillsearch.service import Catalog

pytestmark = pytest.mark.anyio


def skill_id_of(catalog: Catalog, slug: str) -> str:
    (skill,) = catalog.store.skills_by_slug(slug)
    return skill.skill_id


# -- tools/list -------------------------------------------------------------------------------------


async def test_exactly_five_read_only_tools_with_schemas(operator: Client) -> None:
    tools = (await operator.list_tools()).tools
    assert sorted(t.name for t in tools) == sorted(TOOL_NAMES)
    for tool in tools:
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is True and tool.annotations.idempotent_hint is True
        assert tool.annotations.destructive_hint is False
        assert tool.description and len(tool.description) > 150
        assert not tool.description.startswith(" ")
        for prop in tool.input_schema["properties"].values():
            assert prop.get("description"), (tool.name, prop)
    names = " ".join(t.name for t in tools)
    for verb in ("execute", "run", "write", "save", "create", "update", "delete"):
        assert verb not in names


async def test_descriptions_say_what_an_agent_does_with_a_null_confidence_and_a_resource(operator: Client) -> None:
    """A request in French gets hits with confidence null; get_skill lists files its instructions name. The
    descriptions say what to do with each, in the words of the fields."""
    described = {t.name: " ".join((t.description or "").split()) for t in (await operator.list_tools()).tools}
    assert "confidence is null for a request in another language than English" in described["search_skills"]
    assert "resources/read of its uri" in described["get_skill"]
    assert "this answer's revision_id" in described["get_skill"]
    # An empty answer's next step is in a field the description names (remove a filter, rephrase...).
    assert "no_match_message says why and what to do" in described["search_skills"]
    filtered = ok(await operator.call_tool("search_skills", {"query": "renew a TLS certificate", "tags": ["nope"]}))
    assert filtered["no_match"] and "Remove a filter" in filtered["no_match_message"]


async def test_min_confidence_is_described_as_it_acts_on_a_null_confidence(default_sample: Catalog) -> None:
    """A French request (answered by the multilingual route) and a lexical search get hits whose confidence is
    null; min_confidence keeps them, so an agent that passes it as a routine filter must be told so, or it
    reads every hit left as one at or above its threshold."""
    async with Client(build_mcp_server(default_sample, Principal.operator())) as client:
        tool = next(t for t in (await client.list_tools()).tools if t.name == "search_skills")
        said = " ".join(tool.input_schema["properties"]["min_confidence"]["description"].split())
        assert "null are kept" in said
        assert "min_confidence does not cut them" in " ".join((tool.description or "").split())
        for args in ({"query": "comment renouveler un certificat TLS expiré"},
                     {"query": "renew an expiring TLS certificate", "mode": "lexical"}):
            answer = ok(await client.call_tool("search_skills", {**args, "min_confidence": 0.99}))
            assert answer["hits"] and not answer["no_match"], args
            assert all(h["confidence"] is None for h in answer["hits"]), args


async def test_list_skills_description_names_every_field_of_an_item(operator: Client) -> None:
    described = {t.name: " ".join((t.description or "").split()) for t in (await operator.list_tools()).tools}
    (item, *_) = ok(await operator.call_tool("list_skills", {"limit": 1}))["items"]
    shown = described["list_skills"].split(" Use it")[0]
    assert all(name.removeprefix("skill_") in shown for name in item), (shown, list(item))
    assert "skill_uri" in shown


async def test_resolve_skill_says_its_answer_has_no_instructions_to_read_first(operator: Client) -> None:
    """The resolved flow is steps and parameters only; a template's instructions (its checks, when to stop)
    come from get_skill, which an agent that goes straight from search to resolve would never read."""
    tools = {t.name: t for t in (await operator.list_tools()).tools}
    assert "instructions" not in (tools["resolve_skill"].output_schema or {}).get("properties", {})
    said = " ".join((tools["resolve_skill"].description or "").split())
    assert "The answer has no instructions: read them with get_skill first" in said
    # get_skill gives a template's instructions beside its steps, and says to keep to them.
    detail = ok(await operator.call_tool("get_skill", {"skill_id": "deploy-service-canary"}))
    assert detail["kind"] == "flow_template" and "rollback" in detail["instructions"]
    assert "keep to its instructions and call resolve_skill" in " ".join((tools["get_skill"].description or "").split())
    # recall_cloud_skill's root of a template has its steps unfilled ({{ escapes too): resolve_skill fills them.
    root = ok(await operator.call_tool("recall_cloud_skill", {"slug": "deploy-service-canary"}))["data"]
    assert "{service}" in json.dumps(root["steps"]) and "{{" in json.dumps(root["steps"])
    recall_said = " ".join((tools["recall_cloud_skill"].description or "").split())
    assert "steps keep their {param} placeholders: fill them with resolve_skill" in recall_said


async def test_the_server_names_its_version_and_lists_no_prompts(operator: Client) -> None:
    assert operator.server_info is not None and operator.server_info.version == skillsearch.__version__
    prompts = await operator.list_prompts()  # served (the conformance suite's caching scenario needs it), empty
    assert prompts.prompts == [] and prompts.ttl_ms is not None and prompts.ttl_ms > 0


async def test_output_schemas_name_the_contract_fields(operator: Client) -> None:
    schemas = {t.name: t.output_schema for t in (await operator.list_tools()).tools}
    assert {"hits", "no_match"} <= set(schemas["search_skills"]["properties"])  # type: ignore[index]
    assert {"items", "next_cursor"} <= set(schemas["list_skills"]["properties"])  # type: ignore[index]
    assert {"instructions", "steps", "parameters", "resources"} <= set(schemas["get_skill"]["properties"])  # type: ignore[index]
    assert {"steps", "parameters"} <= set(schemas["resolve_skill"]["properties"])  # type: ignore[index]
    assert "uri" in schemas["get_skill"]["$defs"]["ResourceInfo"]["properties"]  # type: ignore[index]
    assert {"object", "schema_version", "kind", "render_status", "warnings", "data"} <= set(
        schemas["recall_cloud_skill"]["properties"]  # type: ignore[index]
    )


# -- happy paths ----------------------------------------------------------------------------------


async def test_search_finds_the_right_skill_and_explains_it(operator: Client) -> None:
    answer = ok(await operator.call_tool("search_skills", {"query": "renew an expiring TLS certificate", "limit": 3}))
    assert answer["no_match"] is False
    top = answer["hits"][0]
    assert top["slug"] == "tls-certificate-renewal"
    assert {"skill_id", "name", "description", "kind", "tags", "score", "explanation"} <= set(top)
    assert top["explanation"]["lexical_rank"] == 1 and top["explanation"]["fused_score"] == pytest.approx(top["score"], abs=1e-3)
    assert len(answer["hits"]) <= 3


async def test_search_filters_by_kind_tags_and_mode(operator: Client) -> None:
    flows = ok(await operator.call_tool("search_skills", {"query": "deploy", "kind": "flow_template"}))
    assert flows["hits"] and {h["kind"] for h in flows["hits"]} == {"flow_template"}
    tagged = ok(await operator.call_tool("search_skills", {"query": "database", "tags": ["security"]}))
    assert tagged["hits"] and all("security" in h["tags"] for h in tagged["hits"])
    lexical = ok(await operator.call_tool("search_skills", {"query": "postgres failover", "mode": "lexical"}))
    assert lexical["mode"] == "lexical" and lexical["hits"][0]["slug"] == "postgres-failover"
    assert lexical["hits"][0]["explanation"]["semantic_score"] is None


async def test_search_says_no_match_rather_than_padding(operator: Client) -> None:
    answer = ok(await operator.call_tool("search_skills", {"query": "zqxjv wplmk frobnicate"}))
    assert answer["no_match"] is True and answer["hits"] == []


async def test_search_says_no_match_for_another_trade_and_cuts_by_confidence(operator: Client) -> None:
    other = ok(await operator.call_tool("search_skills", {"query": "recipe for a gluten-free chocolate cake"}))
    # The shipped threshold is conservative (docs/rules.md): no_match, or no confident hit.
    assert (other["no_match_reason"] in ("low_confidence", "no_good_match") if other["no_match"]
            else all(h["confidence"] < 0.5 for h in other["hits"]))
    full = ok(await operator.call_tool("search_skills", {"query": "renew an expiring TLS certificate"}))
    conf = [h["confidence"] for h in full["hits"]]
    assert max(conf) > 0.5
    cut = ok(await operator.call_tool("search_skills", {"query": "renew an expiring TLS certificate",
                                                        "min_confidence": max(conf)}))
    assert [h["slug"] for h in cut["hits"]] == [h["slug"] for h in full["hits"] if h["confidence"] >= max(conf)]
    ja = ok(await operator.call_tool("search_skills", {"query": "来月の京都旅行で泊まる旅館を予約して"}))
    assert ja["no_match"] is False and "minilm+e5" in ja["notice"]


async def test_list_pages_with_a_cursor_and_shows_only_summary_fields(operator: Client, sample: Catalog) -> None:
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        args: dict[str, Any] = {"limit": 7} | ({"cursor": cursor} if cursor else {})
        page = ok(await operator.call_tool("list_skills", args))
        for item in page["items"]:
            assert set(item) == {"skill_id", "slug", "name", "description", "kind", "tags", "skill_uri"}
            assert item["skill_uri"].startswith("skill://") and item["skill_uri"].endswith(f"/{item['slug']}/SKILL.md")
        seen += [i["skill_id"] for i in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == sample.store.count("active")
    assert pages == -(-len(seen) // 7)


async def test_list_filters_by_kind(operator: Client) -> None:
    page = ok(await operator.call_tool("list_skills", {"kind": "flow_template", "limit": 200}))
    assert page["items"] and {i["kind"] for i in page["items"]} == {"flow_template"}


async def test_get_knowledge_skill_returns_instructions_and_resources(operator: Client, sample: Catalog) -> None:
    detail = ok(await operator.call_tool("get_skill", {"skill_id": skill_id_of(sample, "tls-certificate-renewal")}))
    assert detail["kind"] == "knowledge" and "certbot" in detail["instructions"]
    assert detail["steps"] is None and detail["parameters"] is None
    assert [r["path"] for r in detail["resources"]] == ["scripts/check_cert_expiry.py"]


async def test_resolve_a_knowledge_skill_is_skill_invalid(operator: Client, sample: Catalog) -> None:
    sid = skill_id_of(sample, "tls-certificate-renewal")
    assert error(await operator.call_tool("resolve_skill", {"skill_id": sid}))["code"] == "SKILL_INVALID"


async def test_template_naming_a_tool_the_host_lacks_is_skill_invalid(sample: Catalog) -> None:
    server = build_mcp_server(sample, Principal.operator(), known_tools={"scheduler.pause", "scheduler.resume"})
    async with Client(server) as client:
        sid = skill_id_of(sample, "backfill-table-partitions")
        values = {"table": "a.b", "job": "j", "start_date": "2024-01-01", "end_date": "2024-01-02"}
        problem = error(await client.call_tool("resolve_skill", {"skill_id": sid, "parameters": values}))
    assert problem["code"] == "SKILL_INVALID"
    assert "warehouse.run_job_range" in problem["details"]["unknown_tools"]
    assert "search for another skill" in problem["message"]  # what an agent does next


async def test_a_guessed_parameter_name_is_answered_with_the_names_the_template_takes(operator: Client,
                                                                                       sample: Catalog) -> None:
    """An agent that guessed ``revision`` for ``to_revision`` learns every name in the error itself, and its
    next call resolves, without reading the template again."""
    sid = skill_id_of(sample, "rollback-deployment")
    values: dict[str, Any] = {"deployment": "api", "namespace": "prod", "revision": 3}
    problem = error(await operator.call_tool("resolve_skill", {"skill_id": sid, "parameters": values}))
    names = ["deployment", "namespace", "to_revision", "reason", "channel"]
    assert problem["code"] == "VALIDATION_ERROR"
    assert [(p["field"], p["code"]) for p in problem["details"]["problems"]] == [
        ("parameters.revision", "unknown"), ("parameters.reason", "missing")]
    assert problem["details"]["parameters"] == names
    assert problem["message"].endswith(f"(this template takes: {', '.join(names)})")
    flow = ok(await operator.call_tool("resolve_skill", {"skill_id": sid, "parameters": {
        "deployment": "api", "namespace": "prod", "to_revision": 3, "reason": "5xx after deploy"}}))
    assert flow["parameters"]["to_revision"] == 3


# -- the flow-template walk-through ---------------------------------------------------------------


async def test_flow_template_walk_through(sample: Catalog) -> None:
    async with Client(build_mcp_server(sample, DATA_TEAM)) as client:
        found = ok(await client.call_tool(
            "search_skills", {"query": "recompute missing daily partitions of a warehouse table", "kind": "flow_template"}
        ))
        hit = found["hits"][0]
        assert hit["slug"] == "backfill-table-partitions" and hit["kind"] == "flow_template"

        detail = ok(await client.call_tool("get_skill", {"skill_id": hit["skill_id"]}))
        params = {p["name"]: p for p in detail["parameters"]}
        assert {n for n, p in params.items() if p["required"]} == {"table", "job", "start_date", "end_date"}
        assert params["batch_days"]["type"] == "integer" and params["batch_days"]["default"] == 7

        values = {"table": "analytics.daily_orders", "job": "orders_daily", "start_date": "2024-05-01"}
        problem = error(await client.call_tool("resolve_skill", {"skill_id": hit["skill_id"], "parameters": values}))
        assert problem["code"] == "VALIDATION_ERROR"
        assert [(p["field"], p["code"]) for p in problem["details"]["problems"]] == [("parameters.end_date", "missing")]
        assert "end_date" in problem["message"]

        values["end_date"] = "2024-05-31"
        flow = ok(await client.call_tool("resolve_skill", {"skill_id": hit["skill_id"], "parameters": values}))
    assert [s["tool"] for s in flow["steps"]] == [s["tool"] for s in detail["steps"]]
    assert flow["steps"][1]["args"] == {"job": "orders_daily", "start": "2024-05-01", "end": "2024-05-31",
                                        "batch_days": 7, "target_suffix": "__backfill"}
    assert flow["steps"][2]["args"]["right"] == "analytics.daily_orders__backfill"
    assert flow["parameters"]["max_change_percent"] == 20.0
    assert not re.search(r"\{[a-z_]+\}", json.dumps(flow["steps"]))


# -- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "args", "field"),
    [
        ("search_skills", {"query": "x", "limit": 0}, "limit"),
        ("search_skills", {"query": "x", "mode": "fuzzy"}, "mode"),
        ("search_skills", {"query": "x", "kind": "recipe"}, "kind"),
        ("search_skills", {}, "query"),
        ("list_skills", {"limit": 1000}, "limit"),
        ("get_skill", {"skill_id": 42}, "skill_id"),
        ("resolve_skill", {"skill_id": "x", "parameters": "a=b"}, "parameters"),
        ("recall_cloud_skill", {"query": ["list"]}, "query"),
    ],
)
async def test_arguments_outside_the_schema_are_validation_errors(
    operator: Client, tool: str, args: dict[str, Any], field: str
) -> None:
    problem = error(await operator.call_tool(tool, args))
    assert problem["code"] == "VALIDATION_ERROR"
    assert field in [p["field"] for p in problem["details"]["problems"]]
    assert "fuzzy" not in json.dumps(problem) and "a=b" not in json.dumps(problem)


@pytest.mark.parametrize(
    ("tool", "args", "field", "said"),
    [
        ("search_skills", {"query": "x", "limit": "3"}, "limit", "a valid integer, got string"),
        ("search_skills", {"query": "x", "limit": True}, "limit", "a valid integer, got boolean"),
        ("search_skills", {"query": "x", "limit": 2.5}, "limit", "a valid integer, got a number with a fractional"),
        ("search_skills", {"query": "x", "min_confidence": "0.5"}, "min_confidence", "a valid number, got string"),
        ("list_skills", {"limit": "10"}, "limit", "a valid integer, got string"),
        ("list_skills", {"limit": 3.5}, "limit", "a valid integer, got a number with a fractional part"),
        ("list_skills", {"limit": None}, "limit", "a valid integer, got null: leave limit out for its default"),
        ("get_skill", {"skill_id": True}, "skill_id", "a valid string, got boolean"),
        ("get_skill", {"skill_id": None}, "skill_id", "a valid string, got null"),
        ("recall_cloud_skill", {"query": 7}, "query", "a valid string, got integer"),
        ("recall_cloud_skill", {"slug": "x", "offset": "0"}, "offset", "a valid integer, got string"),
    ],
)
async def test_arguments_are_not_coerced_past_their_schema(
    operator: Client, tool: str, args: dict[str, Any], field: str, said: str
) -> None:
    """``type: integer`` means an integer: "3", true and 2.5 are refused, not taken as 3, 1 and 2, and the
    message says what was expected and which JSON type came instead (never the value); a null for an
    optional argument, which its schema does not allow, says to leave the argument out."""
    problem = error(await operator.call_tool(tool, args))
    assert problem["code"] == "VALIDATION_ERROR"
    assert [p["field"] for p in problem["details"]["problems"]] == [field]
    assert said in problem["details"]["problems"][0]["message"], problem
    assert ("leave" in said) == ("leave" in problem["message"]), problem  # a required argument has no default


async def test_an_integer_written_with_a_zero_fraction_is_taken_as_json_schema_says(operator: Client) -> None:
    """JSON Schema's ``integer`` counts 3.0 as 3, hosts send it, and ``GET /v1/search?limit=3.0`` took it: the
    tools refused it ("Input should be a valid integer"). Now each integer argument takes it, as its schema
    says, and answers as for 3."""
    search = {"query": "renew an expiring TLS certificate"}
    hits = ok(await operator.call_tool("search_skills", {**search, "limit": 3.0}))["hits"]
    assert len(hits) == 3 and hits == ok(await operator.call_tool("search_skills", {**search, "limit": 3}))["hits"]
    listed = ok(await operator.call_tool("list_skills", {"limit": 2.0}))
    assert listed == ok(await operator.call_tool("list_skills", {"limit": 2})) and len(listed["items"]) == 2
    part = ok(await operator.call_tool("get_skill", {"skill_id": "tls-certificate-renewal", "offset": 5.0,
                                                     "max_chars": 40.0}))
    assert part["instructions_offset"] == 5 and part["instructions_chars"] > 45
    assert part == ok(await operator.call_tool("get_skill", {"skill_id": "tls-certificate-renewal", "offset": 5,
                                                             "max_chars": 40}))
    root = ok(await operator.call_tool("recall_cloud_skill", {"slug": "tls-certificate-renewal", "offset": 0.0}))
    assert root["kind"] == "root"


async def test_an_argument_the_schema_does_not_name_is_refused(operator: Client) -> None:
    tools = (await operator.list_tools()).tools
    assert all(t.input_schema.get("additionalProperties") is False for t in tools)
    for tool in TOOL_NAMES:
        args: dict[str, Any] = {"query": "x"} if tool in ("search_skills", "recall_cloud_skill") else {}
        if tool in ("get_skill", "resolve_skill"):
            args["skill_id"] = "sk_x"
        problem = error(await operator.call_tool(tool, {**args, "unknown_arg": "secret-value"}))
        assert problem["code"] == "VALIDATION_ERROR", tool
        assert problem["details"]["problems"] == [{"field": "unknown_arg", "message": "Extra inputs are not permitted"}]
        assert "secret-value" not in json.dumps(problem)
    # A guessed name (get_skill's resources have a `path`; recall reads one by `resource`) is answered with
    # the names the tool takes.
    guessed = error(await operator.call_tool("recall_cloud_skill", {"slug": "tls-certificate-renewal", "path": "x"}))
    assert guessed["message"].endswith(
        "(recall_cloud_skill takes: query, skill_id, slug, revision_id, resource, offset)")
    guessed = error(await operator.call_tool("resolve_skill", {"skill_id": "sk_x", "params": {}}))
    assert "(resolve_skill takes: skill_id, parameters)" in guessed["message"]
    wide = error(await operator.call_tool("search_skills", {"query": "x", "k" * 100_000: 1}))
    assert len(json.dumps(wide)) < 2_000


@pytest.mark.parametrize(
    ("tool", "args", "field"),
    [
        ("search_skills", {"query": "   "}, "query"),
        ("search_skills", {"query": "a" * 5000}, "query"),
        ("list_skills", {"cursor": "not-a-cursor!"}, "cursor"),
        ("list_skills", {"cursor": "garbage"}, "cursor"),
        # base64 of JSON nested past json's stack (no body limit over stdio): once an INTERNAL error
        ("list_skills", {"cursor": base64.urlsafe_b64encode(b"[" * 5000 + b"]" * 5000).decode()}, "cursor"),
        ("get_skill", {"skill_id": ""}, "skill_id"),
        ("get_skill", {"skill_id": "s" * 100_000}, "skill_id"),
        ("resolve_skill", {"skill_id": ""}, "skill_id"),
        ("resolve_skill", {"skill_id": "s" * 100_000}, "skill_id"),
    ],
)
async def test_bad_values_are_validation_errors_of_the_one_shape(
    operator: Client, tool: str, args: dict[str, Any], field: str
) -> None:
    """README: every VALIDATION_ERROR has details.problems of {field, message}, never the rejected value."""
    problem = error(await operator.call_tool(tool, args))
    assert problem["code"] == "VALIDATION_ERROR"
    assert [p["field"] for p in problem["details"]["problems"]] == [field]
    assert all(set(p) == {"field", "message"} and p["message"] for p in problem["details"]["problems"])
    rejected = args[field]
    assert rejected.strip() == "" or rejected not in json.dumps(problem)
    assert len(json.dumps(problem)) < 2_000



async def test_list_skills_bounds_its_tags_like_the_http_route(operator: Client) -> None:
    """Each required tag is a clause of list's SQL query: 2,000 of them (the schema sets no bound) passed
    SQLite's expression depth, an INTERNAL error. At most 16, as GET /v1/skills takes; 16 still list."""
    problem = error(await operator.call_tool("list_skills", {"tags": [f"t{i}" for i in range(2000)]}))
    assert problem["code"] == "VALIDATION_ERROR"
    assert [p["field"] for p in problem["details"]["problems"]] == ["tags"]
    assert ok(await operator.call_tool("list_skills", {"tags": ["python"] * 16}))["items"]


async def test_search_skills_bounds_its_tags_like_list_skills_and_the_http_route(operator: Client) -> None:
    """The schema sets no bound: 8,000 tags were searched; at most 16, as list_skills and GET /v1/search take."""
    problem = error(await operator.call_tool("search_skills", {"query": "deploy", "tags": [f"t{i}" for i in range(17)]}))
    assert problem["code"] == "VALIDATION_ERROR"
    assert [p["field"] for p in problem["details"]["problems"]] == ["tags"]
    hits = ok(await operator.call_tool("search_skills", {"query": "profile python code", "tags": ["python"] * 16}))["hits"]
    assert hits and all("python" in h["tags"] for h in hits)


async def test_unknown_skill_is_not_found(operator: Client) -> None:
    for tool in ("get_skill", "resolve_skill"):
        problem = error(await operator.call_tool(tool, {"skill_id": "sk_doesnotexist"}))
        assert problem["code"] == "SKILL_NOT_FOUND" and problem["details"] == {"skill_id": "sk_doesnotexist"}


async def test_a_skill_uri_passed_as_skill_id_says_what_to_pass_instead(starter: Client) -> None:
    """Hits carry skill_id, slug and skill_uri; an agent that passes the URI to get_skill is told which one
    the tool takes and what reads the URI, in the same words whether the skill is visible or not."""
    hit = ok(await starter.call_tool("search_skills", {"query": "git bisect to find a regression"}))["hits"][0]
    hidden = "skill://sub/ops-pro/postgres-backup-restore/SKILL.md"
    for uri in (hit["skill_uri"], hidden):
        for tool in ("get_skill", "resolve_skill"):
            problem = error(await starter.call_tool(tool, {"skill_id": uri}))
            assert problem["code"] == "SKILL_NOT_FOUND" and problem["details"] == {"skill_id": uri}
            assert problem["message"] == (f"{uri!r} is a skill_uri, not a skill_id: pass the hit's skill_id (sk_...)"
                                          " or slug, or load this URI with resources/read")
    assert ok(await starter.call_tool("get_skill", {"skill_id": hit["skill_id"]}))["skill_uri"] == hit["skill_uri"]


async def test_a_skill_name_passed_as_skill_id_names_the_slug_to_pass_instead(starter: Client) -> None:
    """An agent passes the name it read in a list ("Cut a tagged release") where the id belongs: it was told
    only "no skill ... is visible to you", though one is, under that name. The answer now names its slug and
    id. A name the caller cannot see gets the plain answer, as an unknown one does: nothing leaks."""
    for name in ("Cut a tagged release", "cut a  TAGGED release"):
        for tool in ("get_skill", "resolve_skill"):
            problem = error(await starter.call_tool(tool, {"skill_id": name}))
            assert problem["code"] == "SKILL_NOT_FOUND", problem
            assert problem["message"].startswith(f"{name!r} is the name of a skill you can see, not a skill_id:"
                                                 " pass its slug 'cut-release-tag' (skill_id sk_"), problem
            skill = ok(await starter.call_tool("get_skill", {"skill_id": problem["details"]["candidates"][0]}))
            assert skill["name"] == "Cut a tagged release"
    hidden = error(await starter.call_tool("get_skill", {"skill_id": "Deploy a service with a canary"}))
    assert hidden["details"] == {"skill_id": "Deploy a service with a canary"}
    assert hidden["message"] == ("no skill 'Deploy a service with a canary' is visible to you: pass a skill_id from"
                                 " search or list (sk_...), or the slug of a skill you can see")


@pytest.mark.parametrize("typed", ["cut-release-tag ", "cut-release-tag\n", " Cut-Release-Tag",
                                   "\uff43\uff55\uff54-release-tag"])
async def test_a_slug_is_read_as_typed_around_spaces_case_and_full_width(starter: Client, typed: str) -> None:
    """recall dropped the whitespace around a slug and get_skill did not: ``"cut-release-tag "`` (an agent's
    trailing space) was SKILL_NOT_FOUND there. A slug typed in capitals or full-width letters (an input
    method's) was "not visible" to get_skill and malformed to recall. Each tool now reads it as the slug it
    spells, only among the skills the caller can see: one outside its grants stays as unknown as before."""
    sid = ok(await starter.call_tool("get_skill", {"skill_id": "cut-release-tag"}))["skill_id"]
    assert ok(await starter.call_tool("get_skill", {"skill_id": typed}))["skill_id"] == sid
    assert ok(await starter.call_tool("get_skill", {"skill_id": f"{sid} "}))["skill_id"] == sid
    assert ok(await starter.call_tool("resolve_skill", {"skill_id": typed, "parameters": {
        "version": "1.0.0", "repo": "acme/tool"}}))["skill_id"] == sid
    assert ok(await starter.call_tool("recall_cloud_skill", {"slug": typed}))["data"]["skill_id"] == sid
    hidden = typed.replace("cut-release-tag", "postgres-failover").replace(
        "Cut-Release-Tag", "Postgres-Failover").replace("\uff43\uff55\uff54-release-tag", "\uff50ostgres-failover")
    unseen = error(await starter.call_tool("get_skill", {"skill_id": hidden}))
    assert unseen["code"] == "SKILL_NOT_FOUND" and unseen["details"] == {"skill_id": hidden.strip()}, unseen
    assert error(await starter.call_tool("recall_cloud_skill", {"slug": hidden}))["code"] == "SKILL_NOT_FOUND"


@pytest.mark.parametrize("dash", ["\u2010", "\u2011", "\u2012", "\u2013", "\u2014", "\u2212"])
async def test_a_slug_typed_with_any_dash_is_read_with_the_hyphen(starter: Client, dash: str) -> None:
    """``cut\u2010release\u2010tag`` with U+2010 HYPHEN (or a non-breaking hyphen, a figure or en dash, a minus:
    what a word processor or a model's output writes for ``-``) was "not visible" to get_skill and malformed
    to recall; NFKC reads only the small and full-width hyphen-minus as ``-``. Every dash now spells the
    hyphen where a slug is looked up, still only among the skills the caller can see."""
    sid = ok(await starter.call_tool("get_skill", {"skill_id": "cut-release-tag"}))["skill_id"]
    for typed in (f"cut{dash}release{dash}tag", f"cut\uff0drelease{dash}tag "):
        assert ok(await starter.call_tool("get_skill", {"skill_id": typed}))["skill_id"] == sid
        assert ok(await starter.call_tool("resolve_skill", {"skill_id": typed, "parameters": {
            "version": "1.0.0", "repo": "acme/tool"}}))["skill_id"] == sid
        assert ok(await starter.call_tool("recall_cloud_skill", {"slug": typed}))["data"]["skill_id"] == sid
    hidden = f"postgres{dash}failover"
    unseen = error(await starter.call_tool("get_skill", {"skill_id": hidden}))
    assert unseen["code"] == "SKILL_NOT_FOUND" and unseen["details"] == {"skill_id": hidden}, unseen
    assert error(await starter.call_tool("resolve_skill", {"skill_id": hidden}))["code"] == "SKILL_NOT_FOUND"
    assert error(await starter.call_tool("recall_cloud_skill", {"slug": hidden}))["code"] == "SKILL_NOT_FOUND"


async def test_unknown_tool_is_an_error_result(operator: Client) -> None:
    problem = error(await operator.call_tool("execute_skill", {"skill_id": "x"}))
    assert problem["code"] == "VALIDATION_ERROR" and sorted(problem["details"]["tools"]) == sorted(TOOL_NAMES)
    assert problem["details"]["problems"] == [{"field": "name", "message": "no tool of this name"}]
    huge = error(await operator.call_tool("t" * 100_000, {}))
    assert huge["code"] == "VALIDATION_ERROR" and len(json.dumps(huge)) < 2_000


async def test_archived_and_revoked_skills_are_not_found_in_the_catalog_tools(fresh_sample: Catalog) -> None:
    archived = skill_id_of(fresh_sample, "linux-disk-full")
    fresh_sample.store.archive(archived)
    fresh_sample.store.set_revoked("starter-pack", True)
    revoked = skill_id_of(fresh_sample, "git-bisect-regressions")
    async with Client(build_mcp_server(fresh_sample, Principal.operator())) as client:
        for sid in (archived, revoked):
            assert error(await client.call_tool("get_skill", {"skill_id": sid}))["code"] == "SKILL_NOT_FOUND"
        page = ok(await client.call_tool("list_skills", {"limit": 200}))
        hits = ok(await client.call_tool("search_skills", {"query": "git bisect regression", "limit": 50}))
    listed = {i["skill_id"] for i in page["items"]}
    assert archived not in listed and revoked not in listed
    assert revoked not in {h["skill_id"] for h in hits["hits"]}


async def test_failing_principal_provider_gives_unauthenticated(sample: Catalog) -> None:
    def provider(headers: object) -> Principal:
        raise UnauthenticatedError("a bearer token is required")

    args: dict[str, dict[str, Any]] = {"search_skills": {"query": "x"}, "list_skills": {},
                                       "get_skill": {"skill_id": "x"}, "resolve_skill": {"skill_id": "x"},
                                       "recall_cloud_skill": {"query": "x"}}
    async with Client(build_mcp_server(sample, provider)) as client:
        for tool in TOOL_NAMES:
            assert error(await client.call_tool(tool, args[tool]))["code"] == "UNAUTHENTICATED"


async def test_an_index_built_for_another_model_is_index_not_ready_not_a_dead_server(
    sample_dir: Path, tmp_path: Path, fake_encoder: Encoder
) -> None:
    data_dir = tmp_path / "data"
    shutil.copytree(sample_dir, data_dir)
    server = build_mcp_server(lambda: Catalog.open(Settings(data_dir=data_dir), encoder=fake_encoder), Principal.operator())
    async with Client(server) as client:
        answer = await client.call_tool("search_skills", {"query": "tls"})
        recall = await client.call_tool("recall_cloud_skill", {"query": "tls"})
    assert error(answer)["code"] == "INDEX_NOT_READY" and "reindex" in error(answer)["message"]
    assert error(recall)["code"] == "INDEX_NOT_READY"


# -- visibility: nothing outside the grants, anywhere ---------------------------------------------


async def test_no_skill_outside_the_grants_appears_in_any_answer(starter: Client, sample: Catalog) -> None:
    mine = {s.skill_id for s in sample.store.list_page(["sub:starter-pack"], limit=500)}
    others = [s for s in sample.store.list_page(["sub:ops-pro", "team:data-science"], limit=500)]
    assert others and mine
    forbidden = [s.skill_id for s in others] + [s.current_revision_id for s in others]
    answers: list[str] = []

    listed: set[str] = set()
    cursor = None
    while True:
        page = ok(await starter.call_tool("list_skills", {"limit": 5} | ({"cursor": cursor} if cursor else {})))
        answers.append(json.dumps(page))
        listed |= {i["skill_id"] for i in page["items"]}
        if not (cursor := page["next_cursor"]):
            break
    assert listed == mine

    for other in others:
        for mode in ("hybrid", "lexical", "semantic"):
            query = f"{other.name} {other.description}"[:300]
            hits = ok(await starter.call_tool("search_skills", {"query": query, "mode": mode, "limit": 100}))
            assert {h["skill_id"] for h in hits["hits"]} <= mine
            answers.append(json.dumps(hits | {"query": ""}))
        level0 = ok(await starter.call_tool("recall_cloud_skill", {"query": other.name}))
        assert {d["skill_id"] for d in level0["data"]["descriptors"]} <= mine
        answers.append(json.dumps(level0["data"]["descriptors"]))
        for tool in ("get_skill", "resolve_skill"):
            problem = error(await starter.call_tool(tool, {"skill_id": other.skill_id}))
            assert problem["code"] == "SKILL_NOT_FOUND"
        by_id = error(await starter.call_tool("recall_cloud_skill", {"skill_id": other.skill_id}))
        assert by_id["code"] == "SKILL_NOT_FOUND"
        by_slug = error(await starter.call_tool("recall_cloud_skill", {"slug": other.slug}))
        assert by_slug["code"] == "SKILL_NOT_FOUND"
        assert other.skill_id not in json.dumps(by_slug) and other.current_revision_id not in json.dumps(by_slug)
        pinned = error(await starter.call_tool("recall_cloud_skill", {
            "skill_id": other.skill_id, "revision_id": other.current_revision_id, "resource": "SKILL.md"}))
        assert pinned["code"] == "SKILL_NOT_FOUND" and pinned["details"] == {"skill_id": other.skill_id}

    # Answers that do not echo the caller's own arguments name no outside skill at all.
    text = "\n".join(answers)
    assert not [f for f in forbidden if f in text]
    assert not [s.slug for s in others if f'"{s.slug}"' in text]


async def test_a_catalog_scope_guards_the_four_catalog_tools_but_not_recall(sample: Catalog) -> None:
    reader = Principal(name="reader", grants=None, scopes=frozenset({"skills:read"}))
    async with Client(build_mcp_server(sample, STARTER, catalog_scope="skills:read")) as client:
        for tool, args in (("search_skills", {"query": "git"}), ("list_skills", {}), ("get_skill", {"skill_id": "x"}),
                           ("resolve_skill", {"skill_id": "x"})):
            problem = error(await client.call_tool(tool, args))
            assert problem["code"] == "ACCESS_DENIED" and problem["details"] == {"required_scope": "skills:read"}
        assert ok(await client.call_tool("recall_cloud_skill", {"query": "git bisect"}))["kind"] == "descriptor"
    async with Client(build_mcp_server(sample, reader, catalog_scope="skills:read")) as client:
        assert ok(await client.call_tool("search_skills", {"query": "git bisect"}))["hits"]
        assert error(await client.call_tool("recall_cloud_skill", {"query": "git"}))["code"] == "ACCESS_DENIED"


async def test_the_catalog_is_opened_once_per_server_lifespan_not_per_call(
    sample_dir: Path, tmp_path: Path, encoder: Encoder
) -> None:
    data_dir = tmp_path / "data"
    shutil.copytree(sample_dir, data_dir)
    opened: list[Catalog] = []

    def open_catalog() -> Catalog:
        opened.append(Catalog.open(Settings(data_dir=data_dir), encoder=encoder))
        return opened[-1]

    async with Client(build_mcp_server(open_catalog, Principal.operator())) as client:
        assert len(opened) == 1  # at connection, before any call
        for tool, args in (("list_skills", {}), ("search_skills", {"query": "git"}), ("recall_cloud_skill", {"query": "git"})):
            ok(await client.call_tool(tool, args))
    assert len(opened) == 1


async def test_the_readme_tool_table_names_each_tool_and_its_arguments(operator: Client) -> None:
    """README, "MCP server": the table a host author reads lists every tool tools/list serves, and its
    "for" column names exactly the arguments of the tool's inputSchema."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    table = readme.split("| tool | for | answer |", 1)[1].split("\n\n", 1)[0]
    documented = {}
    for row in table.splitlines()[2:]:
        name, purpose, _ = (cell.strip() for cell in row.strip().strip("|").split("|"))
        documented[name.strip("`")] = set(re.findall(r"`(\w+)`", purpose.rsplit("(", 1)[1]))
    served = {t.name: set(t.input_schema["properties"]) for t in (await operator.list_tools()).tools}
    assert documented == served


async def test_resolve_refuses_an_integer_too_long_to_write_with_a_coded_problem(operator: Client,
                                                                                 sample: Catalog) -> None:
    """The MCP request's JSON parser reads an integer of 5,000 digits; writing it into ``id-{n}`` raised
    Python's 4,300-digit ValueError out of the tool. It is one ``invalid`` problem naming the parameter, as
    NaN is, with the code every other resolve problem carries."""
    sid = skill_id_of(sample, "triage-new-issue")
    values = {"repo": "a/b", "issue_number": 10**5000, "issue_type": "bug", "area": "cli"}
    problem = error(await operator.call_tool("resolve_skill", {"skill_id": sid, "parameters": values}))
    assert problem["code"] == "VALIDATION_ERROR"
    assert problem["details"]["problems"] == [{"field": "parameters.issue_number", "code": "invalid",
                                              "message": "issue_number: an integer too long to write as text"
                                                         " (about 4,000 digits or more)"}]
    assert problem["details"]["parameters"][:2] == ["repo", "issue_number"]  # the names it takes, as ever
    fine = ok(await operator.call_tool("resolve_skill", {"skill_id": sid,
                                                         "parameters": {**values, "issue_number": 10**300}}))
    assert 10**300 in [v for s in fine["steps"] for v in s["args"].values()]
