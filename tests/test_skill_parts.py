"""``get_skill``'s instructions a part at a time (``core/text_parts``): the real skill of the shared catalog
whose instructions are 160,000 characters, and a short real one, over a real MCP client session, real HTTP
(uvicorn on 127.0.0.1) and the CLI. The MCP tool is bounded by default; HTTP and the CLI only when asked.

The two skills are imported from their real folders with the deterministic hashing encoder: nothing here
searches."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from clisupport import run
from conftest import SHARED
from mcp import Client
from mcp_support import error, ok

from skillsearch.core.domain import Principal
from skillsearch.core.settings import Settings
from skillsearch.core.text_parts import text_part
from skillsearch.http.app import create_app
from skillsearch.http.auth import PrincipalRegistry, add_principal
from skillsearch.http.server import ServerThread
from skillsearch.mcp.server import build_mcp_server
from skillsearch.mcp.tools_catalog import GET_SKILL_MAX_CHARS
from skillsearch.retrieval.hashing_encoder import HashingEncoder
from skillsearch.service import Catalog

SKILLS = SHARED / "data" / "skills-catalog"
LONG, SHORT = "distributed-training-pytorch-fsdp", "cc-skill-strategic-compact"
GRANT = "team:skills-catalog"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("two-skills")
    for slug in (LONG, SHORT):
        shutil.copytree(SKILLS / slug, folder / slug)
    data = tmp_path_factory.mktemp("parts-data")
    catalog = Catalog.open(Settings(data_dir=data, seed_sample=False), encoder=HashingEncoder())
    report = catalog.import_path(folder, "skills-catalog", GRANT)
    assert len(report.created) == 2
    catalog.close()
    return data


@pytest.fixture(scope="module")
def catalog(data_dir: Path) -> Iterator[Catalog]:
    opened = Catalog.open(Settings(data_dir=data_dir, seed_sample=False), encoder=HashingEncoder())
    yield opened
    opened.close()


def whole(catalog: Catalog, slug: str) -> str:
    """The instructions as the store holds them, straight from the current revision."""
    skill = catalog.store.skills_by_slug(slug)[0]
    revision = catalog.store.revision(skill.current_revision_id)
    assert revision is not None
    return revision.instructions


def test_the_long_skill_is_long_and_the_short_one_short(catalog: Catalog) -> None:
    assert len(whole(catalog, LONG)) > 150_000 > 6 * GET_SKILL_MAX_CHARS
    assert 0 < len(whole(catalog, SHORT)) < 1_000


def test_parts_join_to_the_text_and_end_at_line_ends_spaces_or_before_combining_marks() -> None:
    text = "".join(f"line {i} é\u0301 👍🏽 \u200d\r\n" for i in range(500))
    parts, offset = [], 0
    while True:
        part, following = text_part(text, offset, 97)
        assert 0 < len(part) <= 97
        assert part.endswith("\n")
        parts.append(part)
        if following is None:
            break
        offset = following
    assert "".join(parts) == text
    words = "word " * 100  # one long line: cut between words
    assert text_part(words, 0, 23)[0] == "word word word word "
    marked = "e\u0301" * 10
    part, following = text_part(marked, 0, 5)  # the 6th character is a combining accent: it stays with its e
    assert part == "e\u0301e\u0301" and following == 4


@pytest.mark.anyio
async def test_mcp_get_skill_cuts_a_long_skill_and_reads_on_to_the_whole(catalog: Catalog) -> None:
    full = whole(catalog, LONG)
    async with Client(build_mcp_server(catalog, Principal.operator())) as client:
        first = ok(await client.call_tool("get_skill", {"skill_id": LONG}))
        assert first["instructions_truncated"] is True
        assert first["instructions_chars"] == len(full) and first["instructions_offset"] == 0
        assert GET_SKILL_MAX_CHARS // 2 < len(first["instructions"]) <= GET_SKILL_MAX_CHARS
        assert first["instructions"][-1].isspace()  # a line end, or a space of its 129,733-character line
        assert first["next_offset"] == len(first["instructions"])
        parts, answer = [first["instructions"]], first
        while answer["next_offset"] is not None:
            answer = ok(await client.call_tool("get_skill", {"skill_id": LONG, "offset": answer["next_offset"]}))
            assert answer["instructions_truncated"] is True and answer["instructions_chars"] == len(full)
            assert len(answer["instructions"]) <= GET_SKILL_MAX_CHARS
            parts.append(answer["instructions"])
        assert len(parts) >= 7
        assert "".join(parts) == full
        assert answer["revision_id"] == first["revision_id"] and answer["resources"] == first["resources"]
        smaller = ok(await client.call_tool("get_skill", {"skill_id": LONG, "offset": 100, "max_chars": 1000}))
        assert full[100:].startswith(smaller["instructions"]) and len(smaller["instructions"]) <= 1000
        assert smaller["next_offset"] == 100 + len(smaller["instructions"])


@pytest.mark.anyio
async def test_mcp_get_skill_answers_a_short_skill_whole(catalog: Catalog) -> None:
    async with Client(build_mcp_server(catalog, Principal.operator())) as client:
        short = ok(await client.call_tool("get_skill", {"skill_id": SHORT}))
    assert short["instructions"] == whole(catalog, SHORT)
    assert short["instructions_truncated"] is False and short["next_offset"] is None
    assert short["instructions_chars"] == len(short["instructions"]) and short["instructions_offset"] == 0


@pytest.mark.anyio
@pytest.mark.parametrize(("arguments", "field"), [
    ({"offset": -1}, "offset"),
    ({"offset": 10_000_000}, "offset"),
    ({"max_chars": 0}, "max_chars"),
    ({"max_chars": -5}, "max_chars"),
    ({"max_chars": "100"}, "max_chars"),
])
async def test_mcp_get_skill_refuses_a_bad_part(catalog: Catalog, arguments: dict[str, Any], field: str) -> None:
    async with Client(build_mcp_server(catalog, Principal.operator())) as client:
        problem = error(await client.call_tool("get_skill", {"skill_id": LONG, **arguments}))
    assert problem["code"] == "VALIDATION_ERROR"
    assert field in problem["message"] or field in str(problem["details"])


@pytest.fixture(scope="module")
def http_url(catalog: Catalog, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    path = tmp_path_factory.mktemp("principals") / "principals.toml"
    token = add_principal(path, "reader", [GRANT], ["skills:read"])
    with ServerThread(create_app(catalog, principals=PrincipalRegistry(path))) as url:
        yield url, {"Authorization": f"Bearer {token}"}


def test_http_get_skill_is_whole_unless_asked_and_reads_on_in_parts(
    catalog: Catalog, http_url: tuple[str, dict[str, str]]
) -> None:
    url, headers = http_url
    full = whole(catalog, LONG)
    with httpx.Client(base_url=url, headers=headers, timeout=60) as c:
        everything = c.get(f"/v1/skills/{LONG}").json()
        assert everything["instructions"] == full and everything["instructions_truncated"] is False
        assert everything["instructions_chars"] == len(full) and everything["next_offset"] is None
        parts: list[str] = []
        offset: int | None = 0
        while offset is not None:
            answer = c.get(f"/v1/skills/{LONG}", params={"offset": offset, "max_chars": 40_000})
            assert answer.status_code == 200, answer.text
            body = answer.json()
            assert body["instructions_truncated"] is True and len(body["instructions"]) <= 40_000
            parts.append(body["instructions"])
            offset = body["next_offset"]
        assert len(parts) >= 4 and "".join(parts) == full
        short = c.get(f"/v1/skills/{SHORT}", params={"max_chars": 40_000}).json()
        assert short["instructions"] == whole(catalog, SHORT) and short["instructions_truncated"] is False


@pytest.mark.parametrize(("params", "field"), [
    ({"offset": -1}, "query.offset"),
    ({"offset": 10_000_000}, "query.offset"),
    ({"max_chars": 0}, "query.max_chars"),
    ({"max_chars": "many"}, "query.max_chars"),
])
def test_http_get_skill_refuses_a_bad_part(http_url: tuple[str, dict[str, str]], params: dict[str, Any],
                                           field: str) -> None:
    url, headers = http_url
    with httpx.Client(base_url=url, headers=headers, timeout=60) as c:
        resp = c.get(f"/v1/skills/{LONG}", params=params)
    assert resp.status_code == 400, resp.text
    assert resp.headers["content-type"].startswith("application/json")
    body = resp.json()["error"]
    assert body["code"] == "VALIDATION_ERROR"
    assert [p["field"] for p in body["details"]["problems"]] == [field]


def test_http_openapi_documents_the_part_and_its_fields(http_url: tuple[str, dict[str, str]]) -> None:
    url, headers = http_url
    with httpx.Client(base_url=url, headers=headers, timeout=60) as c:
        schema = c.get("/openapi.json").json()
    operation = schema["paths"]["/v1/skills/{skill_id}"]["get"]
    assert {p["name"] for p in operation["parameters"] if p["in"] == "query"} == {"offset", "max_chars"}
    fields = schema["components"]["schemas"]["SkillDetail"]["properties"]
    assert {"instructions_truncated", "instructions_chars", "instructions_offset", "next_offset"} <= set(fields)


def test_cli_get_prints_a_part_and_reads_on_to_the_whole(catalog: Catalog, data_dir: Path) -> None:
    full = whole(catalog, LONG)
    code, everything = run(data_dir, "get", LONG, "--json")
    assert code == 0 and everything["instructions"] == full and everything["next_offset"] is None
    parts: list[str] = []
    offset: int | None = 0
    while offset is not None:
        code, body = run(data_dir, "get", LONG, "--json", "--offset", str(offset), "--max-chars", "50000")
        assert code == 0 and body["instructions_truncated"] is True
        parts.append(body["instructions"])
        offset = body["next_offset"]
    assert "".join(parts) == full
    code, text = run(data_dir, "get", LONG, "--max-chars", "1000")
    first = text_part(full, 0, 1000)
    assert code == 0 and first[1] is not None
    assert f"(instructions: characters 0 to {first[1]} of {len(full)}; the rest: --offset {first[1]})" in text
    code, short = run(data_dir, "get", SHORT, "--json", "--max-chars", "50000")
    assert code == 0 and short["instructions"] == whole(catalog, SHORT) and short["instructions_truncated"] is False


def test_cli_get_refuses_an_offset_past_the_end(data_dir: Path) -> None:
    code, body = run(data_dir, "get", SHORT, "--json", "--offset", "10000000")
    assert code != 0
    assert body["error"]["code"] == "VALIDATION_ERROR" and "offset" in body["error"]["message"]


def test_cli_get_refuses_a_part_of_a_resource(data_dir: Path) -> None:
    code, body = run(data_dir, "get", LONG, "--json", "--resource", "SKILL.md", "--max-chars", "10")
    assert code == 2
    assert body["error"]["code"] == "VALIDATION_ERROR" and "--max-chars" in body["error"]["message"]
