"""Issue 32, "errors and input a newcomer meets": each mistake a new user makes first gets one clear answer,
the same on every command and surface (the real CLI, the HTTP app, a real MCP client session)."""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from clisupport import run, sample_copy
from mcp import Client
from mcp_support import error

from skillsearch.cli import main
from skillsearch.core.domain import Principal
from skillsearch.core.errors import ValidationError
from skillsearch.core.settings import Settings
from skillsearch.core.views import NO_MATCH_MESSAGES
from skillsearch.http.app import create_app
from skillsearch.http.auth import DEMO_TOKEN, PrincipalRegistry, add_principal
from skillsearch.mcp.server import build_mcp_server
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.service import Catalog

DEMO = {"Authorization": f"Bearer {DEMO_TOKEN}"}
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def data_dir(sample_dir: Path, tmp_path: Path) -> Path:
    return sample_copy(sample_dir, tmp_path)


def usage_error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run the CLI expecting a usage error: exit 2, one ``error:`` line on stderr; return that line."""
    out = io.StringIO()
    assert main(list(argv), out=out) == 2
    err = capsys.readouterr().err
    assert out.getvalue() == ""
    assert "Traceback" not in err
    return next(line for line in err.splitlines() if "error:" in line)


@pytest.fixture
async def http(sample: Catalog) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(sample, principals=PrincipalRegistry(Path("/nonexistent/principals.toml"), demo=True))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        yield c


# -- 1. a grant is checked the same way on every command and surface ------------------------------


@pytest.mark.parametrize("argv", [
    ("search", "python", "--grant", "starter-pack"),
    ("list", "--grant", "starter-pack"),
    ("get", "sk_0123456789abcdef0123", "--grant", "starter-pack"),
    ("resolve", "sk_0123456789abcdef0123", "--grant", "starter-pack"),
    ("import", "somewhere", "--source", "s", "--grant", "starter-pack"),
    ("mcp", "--grant", "starter-pack"),
    ("sources", "add", "mine", "--path", ".", "--grant", "starter-pack"),
    ("token", "add", "bot", "--grant", "starter-pack"),
])
def test_a_grant_without_its_kind_is_the_same_usage_error_on_every_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: tuple[str, ...]
) -> None:
    line = usage_error(capsys, "--data-dir", str(tmp_path / "d"), *argv)
    assert "invalid grant 'starter-pack': use sub:<id>, team:<id>" in line
    assert "did you mean sub:starter-pack?" in line
    assert not (tmp_path / "d").exists()  # refused before anything is opened or written


def test_token_add_still_takes_every_grant(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, made = run(tmp_path / "d", "token", "add", "admin", "--grant", "*", "--json")
    assert code == 0 and made["grants"] == ["*"]
    line = usage_error(capsys, "--data-dir", str(tmp_path / "d"), "token", "add", "x", "--grant", "team")
    assert "invalid grant 'team': use sub:<id>, team:<id>, user:<id> or * (every grant)" in line


def test_the_library_and_the_principals_file_refuse_it_in_the_same_words(tmp_path: Path, encoder: Any) -> None:
    catalog = Catalog(Settings(data_dir=tmp_path / "d"), encoder=encoder)
    try:
        with pytest.raises(ValidationError) as refused:
            catalog.import_path(tmp_path, "s", "starter-pack")
    finally:
        catalog.close()
    assert refused.value.details["problems"] == [{
        "field": "grant",
        "message": "invalid grant 'starter-pack': use sub:<id>, team:<id> or user:<id> (did you mean sub:starter-pack?)",
    }]
    with pytest.raises(ValidationError) as in_file:
        add_principal(tmp_path / "principals.toml", "bot", ["starter-pack"], ["skills:read"])
    assert "invalid grant 'starter-pack'" in in_file.value.message and "sub:starter-pack" in in_file.value.message


# -- 3. details.problems has one shape everywhere -----------------------------------------------------


def assert_problems(details: dict[str, Any], fields: set[str]) -> list[dict[str, Any]]:
    problems = details["problems"]
    assert problems and all(isinstance(p, dict) for p in problems), problems
    for p in problems:
        assert {"field", "message"} <= set(p) <= {"field", "message", "code"}, p
        assert isinstance(p["field"], str) and isinstance(p["message"], str) and p["message"]
    assert {p["field"] for p in problems} == fields
    return list(problems)


def resolve_codes(problems: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(p["field"], p["code"]) for p in problems}


FLOW_QUERY = "recompute missing daily partitions of a warehouse table"
RESOLVE_VALUES = {"table": "t", "job": "j", "start_date": "2024-05-01", "batch_days": "seven", "colour": 1}
RESOLVE_PROBLEMS = {("parameters.end_date", "missing"), ("parameters.batch_days", "invalid"),
                    ("parameters.colour", "unknown")}


def flow_id(catalog: Catalog) -> str:
    request = SearchRequest(query=FLOW_QUERY, kind="flow_template", limit=1)
    return catalog.search_view(Principal.operator(), request).hits[0].skill_id


@pytest.mark.anyio
async def test_problems_have_one_shape_over_http(http: httpx.AsyncClient, sample: Catalog) -> None:
    blank = await http.get("/v1/search", params={"q": "   "}, headers=DEMO)
    assert blank.status_code == 400
    assert_problems(blank.json()["error"]["details"], {"query.q"})  # over HTTP, fields are request locations
    recall = await http.post("/v1/recall", json={"revision_id": "rev_1"}, headers=DEMO)
    assert recall.status_code == 400
    assert_problems(recall.json()["error"]["details"], {"body.skill_id"})
    resolve = await http.post(f"/v1/skills/{flow_id(sample)}/resolve", headers=DEMO,
                              json={"parameters": RESOLVE_VALUES})
    assert resolve.status_code == 400
    in_body = {(f"body.{field}", code) for field, code in RESOLVE_PROBLEMS}
    assert resolve_codes(assert_problems(resolve.json()["error"]["details"], {f for f, _ in in_body})) == in_body


@pytest.mark.anyio
async def test_problems_have_one_shape_over_mcp(sample: Catalog) -> None:
    async with Client(build_mcp_server(sample, Principal.operator())) as client:
        blank = error(await client.call_tool("search_skills", {"query": "   "}))
        assert_problems(blank["details"], {"query"})
        recall = error(await client.call_tool("recall_cloud_skill", {"resource": "SKILL.md"}))
        assert_problems(recall["details"], {"skill_id"})
        resolve = error(await client.call_tool("resolve_skill", {"skill_id": flow_id(sample),
                                                                 "parameters": RESOLVE_VALUES}))
        assert resolve_codes(assert_problems(resolve["details"], {f for f, _ in RESOLVE_PROBLEMS})) == RESOLVE_PROBLEMS
        schema = error(await client.call_tool("search_skills", {"query": "x", "limit": 0}))
        assert_problems(schema["details"], {"limit"})


def test_problems_have_one_shape_in_the_cli(data_dir: Path, sample: Catalog) -> None:
    code, blank = run(data_dir, "search", "   ", "--json")
    assert code == 1 and blank["error"]["code"] == "VALIDATION_ERROR"
    assert_problems(blank["error"]["details"], {"query"})
    params = [f"--param={k}={v}" for k, v in RESOLVE_VALUES.items() if k != "colour"] + ["--param=colour=red"]
    code, resolve = run(data_dir, "resolve", flow_id(sample), *params, "--json")
    assert code == 1
    assert resolve_codes(assert_problems(resolve["error"]["details"],
                                         {f for f, _ in RESOLVE_PROBLEMS})) == RESOLVE_PROBLEMS


# -- 4. serve on a busy port, a data directory that cannot be one, a mistyped one -------------------


def test_a_data_dir_that_cannot_be_one_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    line = usage_error(capsys, "--data-dir", str(tmp_path / "file"), "list")
    assert line.endswith("not a folder (a data directory is a folder)")
    line = usage_error(capsys, "--data-dir", str(tmp_path / "missing" / "data"), "search", "python")
    assert f"the folder {tmp_path / 'missing'} does not exist; create it first" in line
    assert not (tmp_path / "missing").exists()


def test_a_new_data_dir_is_said_on_stderr(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = io.StringIO()
    assert main(["--data-dir", str(tmp_path / "typo"), "--encoder", "hashing", "-q", "list", "--json"], out=out) == 0
    assert len(json.loads(out.getvalue())["items"]) == 45
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"note: {tmp_path / 'typo'} did not exist: created it and seeded it with the bundled sample"
                   " catalog (45 skills)"]
    assert main(["--data-dir", str(tmp_path / "typo"), "--encoder", "hashing", "-q", "list"], out=io.StringIO()) == 0
    assert capsys.readouterr().err == ""  # said once, when it was created
    assert main(["--data-dir", str(tmp_path / "tokens"), "token", "add", "bot", "--grant", "user:me"],
                out=io.StringIO()) == 0
    assert capsys.readouterr().err.strip() == f"note: {tmp_path / 'tokens'} did not exist: created it"


# -- 5. an unknown encoder, bench without its extra -----------------------------------------------------


def test_an_unknown_encoder_is_a_usage_error_listing_the_encoders(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    line = usage_error(capsys, "--data-dir", str(tmp_path / "d"), "--encoder", "bert", "search", "x")
    assert "invalid choice: 'bert'" in line and "'e5', 'hashing', 'minilm', 'minilm+e5'" in line
    monkeypatch.setenv("SKILLSEARCH_ENCODER", "bert")
    line = usage_error(capsys, "--data-dir", str(tmp_path / "d"), "list")
    assert line.endswith("SKILLSEARCH_ENCODER=bert: unknown encoder; choose one of e5, hashing, minilm, minilm+e5")
    assert not (tmp_path / "d").exists()


def test_a_setting_in_the_environment_that_is_not_a_number_is_a_usage_error_naming_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It was ``INTERNAL: ValueError: invalid literal for int()`` on every command (audit)."""
    monkeypatch.setenv("SKILLSEARCH_MAX_LIMIT", "abc")
    line = usage_error(capsys, "--data-dir", str(tmp_path / "d"), "list")
    assert line.endswith("SKILLSEARCH_MAX_LIMIT='abc': not an integer")
    monkeypatch.delenv("SKILLSEARCH_MAX_LIMIT")
    monkeypatch.setenv("SKILLSEARCH_MODEL_WAIT_S", "soon")
    assert usage_error(capsys, "--data-dir", str(tmp_path / "d"), "search", "x").endswith(
        "SKILLSEARCH_MODEL_WAIT_S='soon': not a number")
    assert not (tmp_path / "d").exists()


def test_bench_without_its_extra_says_what_to_install(tmp_path: Path) -> None:
    """A real process in which the bench extra's pytrec_eval is not importable, as in an install without
    ``[bench]``."""
    script = ("import sys; sys.modules['pytrec_eval'] = None; from skillsearch.cli import main; "
              f"sys.exit(main(['--data-dir', {str(tmp_path)!r}, 'bench', 'relevance', '--dataset', {str(tmp_path)!r},"
              " '--no-save']))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "error: skillsearch bench needs the 'bench' extra (no module 'pytrec_eval'): pip install 'skillsearch[bench]'")
    assert "Traceback" not in done.stderr and "INTERNAL" not in done.stderr


# -- 6. sources add, a failing sources sync, token add/remove, get by slug ----------------------------


def cli(capsys: pytest.CaptureFixture[str], data_dir: Path, *argv: str) -> tuple[int, str, str]:
    out = io.StringIO()
    code = main(["--data-dir", str(data_dir), "--encoder", "hashing", "-q", *argv], out=out)
    return code, out.getvalue(), capsys.readouterr().err


def test_sources_add_refuses_a_missing_folder_unless_asked(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    code, out, err = cli(capsys, data, "sources", "add", "mine", "--path", str(tmp_path / "nonexistent"),
                         "--grant", "user:me")
    assert code == 1 and out == "" and not (data / "sync.toml").exists()
    assert err.strip() == (f"error: VALIDATION_ERROR: --path {tmp_path / 'nonexistent'}: no such folder; check the"
                           " path, or pass --allow-missing to add it anyway (it is read once it exists)")
    code, out, err = cli(capsys, data, "sources", "add", "mine", "--path", str(tmp_path / "nonexistent"),
                         "--grant", "user:me", "--allow-missing")
    assert code == 0 and "added source mine" in out and (data / "sync.toml").is_file()


def test_a_failing_sources_sync_says_each_problem_once(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data, src = tmp_path / "data", tmp_path / "src"
    (src / "bad").mkdir(parents=True)
    (src / "bad" / "SKILL.md").write_text("---\nname: bad\n---\nno description\n")
    data.mkdir()
    assert cli(capsys, data, "sources", "add", "mine", "--path", str(src), "--grant", "user:me")[0] == 0
    code, out, err = cli(capsys, data, "sources", "sync")
    assert code == 1 and out.strip() == "mine: 0 added, 0 changed, 0 removed, 0 unchanged, 1 refused, 0 embedded"
    assert err.strip().splitlines() == [f"refused: mine: {src / 'bad' / 'SKILL.md'}: missing description"]
    shutil.rmtree(src)
    for command in (("sources", "sync"), ("sync",)):
        code, out, err = cli(capsys, data, *command)
        assert code == 1 and out.strip().endswith("mine: failed")
        assert len(err.strip().splitlines()) == 1 and err.count("is not a folder") == 1, err
        assert err.startswith(f"error: mine: {src} is not a folder")


def test_token_add_keeps_an_existing_principal_unless_replace(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "principals.toml"
    code, first, _ = cli(capsys, tmp_path, "token", "add", "bot", "--grant", "team:a")
    registry = PrincipalRegistry(path)
    token = first.splitlines()[0]
    assert code == 0 and registry.authenticate(token).grants == frozenset({"team:a"})
    code, out, err = cli(capsys, tmp_path, "token", "add", "bot", "--grant", "team:b")
    assert code == 1 and out == ""
    assert err.strip() == (f"error: VALIDATION_ERROR: principal 'bot' already exists in {path}: pass --replace to give"
                           " it a new token and these grants and scopes (its old token stops working)")
    assert PrincipalRegistry(path).authenticate(token).grants == frozenset({"team:a"})  # untouched
    code, out, _ = cli(capsys, tmp_path, "token", "add", "bot", "--grant", "team:b", "--replace")
    assert code == 0 and PrincipalRegistry(path).authenticate(out.splitlines()[0]).grants == frozenset({"team:b"})


def test_token_remove_of_an_unknown_name_is_an_error_on_stderr(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = cli(capsys, tmp_path, "token", "remove", "ghost")
    assert code == 1 and out == ""
    assert err.strip() == (f"error: VALIDATION_ERROR: no principal 'ghost' in {tmp_path / 'principals.toml'}"
                           " (skillsearch token list shows them)")
    code, out, _ = cli(capsys, tmp_path, "token", "remove", "ghost", "--json")
    assert code == 1 and json.loads(out)["error"]["code"] == "VALIDATION_ERROR"


@pytest.mark.anyio
async def test_get_takes_a_slug_one_visible_skill_has(data_dir: Path, sample: Catalog, http: httpx.AsyncClient) -> None:
    code, detail = run(data_dir, "get", "python-profiling", "--json")
    assert code == 0 and detail["slug"] == "python-profiling" and detail["skill_id"].startswith("sk_")
    assert (await http.get("/v1/skills/python-profiling", headers=DEMO)).json()["skill_id"] == detail["skill_id"]
    async with Client(build_mcp_server(sample, Principal.operator())) as client:
        got = await client.call_tool("get_skill", {"skill_id": "python-profiling"})
        assert got.structured_content is not None and got.structured_content["skill_id"] == detail["skill_id"]
    # Outside the caller's grants the slug is exactly as unknown as a made-up one.
    for slug in ("python-profiling", "no-such-skill"):
        code, missing = run(data_dir, "get", slug, "--grant", "sub:ops-pro", "--json")
        assert code == 1 and missing["error"]["code"] == "SKILL_NOT_FOUND"
        assert missing["error"]["message"] == (f"no skill {slug!r} is visible to you: pass a skill_id from search"
                                               " or list (sk_...), or the slug of a skill you can see")


@pytest.mark.anyio
@pytest.mark.parametrize("dash", ["\u2010", "\u2013", "\u2212"])
async def test_an_http_route_reads_a_slug_typed_with_any_dash_as_the_hyphen(http: httpx.AsyncClient, dash: str) -> None:
    """``/v1/skills/python\u2010profiling`` (U+2010 HYPHEN, an en dash, a minus) was a 404 for the skill at
    ``python-profiling``; every route under ``/v1/skills/{skill_id}`` and recall's ``slug`` now read a dash as
    the hyphen. A slug outside the caller's grants stays as unknown in any spelling."""
    sid = (await http.get("/v1/skills/python-profiling", headers=DEMO)).json()["skill_id"]
    typed = f"python{dash}profiling"
    assert (await http.get(f"/v1/skills/{typed}", headers=DEMO)).json()["skill_id"] == sid
    assert (await http.post("/v1/recall", headers=DEMO, json={"slug": typed})).json()["data"]["skill_id"] == sid
    hidden = f"postgres{dash}failover"  # sub:ops-pro's, outside the demo principal's grants
    missing = await http.get(f"/v1/skills/{hidden}", headers=DEMO)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "SKILL_NOT_FOUND"
    recalled = await http.post("/v1/recall", headers=DEMO, json={"slug": hidden})
    assert recalled.status_code == 404 and recalled.json()["error"]["code"] == "SKILL_NOT_FOUND"


@pytest.mark.anyio
async def test_a_slug_two_visible_skills_share_is_one_answer_naming_the_ids_the_caller_sees(
    tmp_path: Path, fake_encoder: Any
) -> None:
    """get said SKILL_NOT_FOUND (404) and recall VALIDATION_ERROR (400) to the same ambiguous slug. Both say
    now what is true and what to do: the argument is ambiguous (VALIDATION_ERROR on the field, code
    ``ambiguous``), and here are the ids of the skills the caller can see that share it. An agent told "not
    found" searched again for the skill it had found. A caller who sees one of them gets that one; the
    candidates never name a skill the caller cannot see."""
    for grant in ("team:a", "team:b", "team:c"):
        folder = tmp_path / grant.replace(":", "-") / "deploy"
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(f"---\nname: deploy\ndescription: Deploy for {grant}.\n---\nbody\n")
    catalog = Catalog(Settings(data_dir=tmp_path / "d", seed_sample=False), encoder=fake_encoder)
    try:
        a, b, c = (catalog.import_path(tmp_path / g.replace(":", "-"), g, g).created[0]
                   for g in ("team:a", "team:b", "team:c"))
        catalog.store.archive(c)  # archived: seen by no one, so never a candidate
        two = Principal(name="two", grants=frozenset({"team:a", "team:b", "team:c"}),
                        scopes=frozenset({"skills:read", "memory:read"}))
        said = f"the slug 'deploy' names 2 skills you can see: pass one skill_id of {a} (team:a), {b} (team:b)"
        answers = []
        async with Client(build_mcp_server(catalog, two)) as client:
            for tool, args, field in (("get_skill", {"skill_id": "deploy"}, "skill_id"),
                                      ("resolve_skill", {"skill_id": "deploy"}, "skill_id"),
                                      ("recall_cloud_skill", {"slug": "deploy"}, "slug")):
                answers.append((error(await client.call_tool(tool, args)), field))
        token = add_principal(tmp_path / "principals.toml", "two", sorted(two.grants or ()), sorted(two.scopes))
        app = create_app(catalog, principals=PrincipalRegistry(tmp_path / "principals.toml"))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t",
                                     headers={"Authorization": f"Bearer {token}"}) as http:
            for response, field in ((await http.get("/v1/skills/deploy"), "skill_id"),
                                    (await http.post("/v1/skills/deploy/resolve", json={}), "skill_id"),
                                    (await http.get("/v1/skills/deploy/resources/x"), "skill_id"),
                                    (await http.post("/v1/recall", json={"slug": "deploy"}), "slug")):
                assert response.status_code == 400, response.text
                got = response.json()["error"]
                assert got["details"]["problems"][0]["field"] == f"{'body' if field == 'slug' else 'path'}.{field}"
                answers.append(({**got, "details": {**got["details"], "problems": [
                    {**got["details"]["problems"][0], "field": field}]}}, field))
        for got, field in answers:
            assert got["code"] == "VALIDATION_ERROR" and got["message"] == said, got
            assert got["details"] == {"problems": [{"field": field, "message": said, "code": "ambiguous"}],
                                      "candidates": [a, b]}, got
        one = Principal(name="one", grants=frozenset({"team:a", "team:c"}), scopes=frozenset({"memory:read"}))
        assert catalog.get_skill(one, "deploy").skill_id == a
        assert catalog.recall(one, slug="deploy").data.skill_id == a  # type: ignore[union-attr]
        assert catalog.get_skill(two, a).skill_id == a
    finally:
        catalog.close()


# -- 7. one rule says whether a resource is text ---------------------------------------------------------


@pytest.mark.anyio
async def test_a_script_is_text_in_recall_and_in_resources_read_alike(tmp_path: Path, fake_encoder: Any) -> None:
    """Media types as a bundle or an upstream sends them (the importer's own guesses depend on the machine's
    mime.types): each file comes back the same way through recall and through the Skills extension."""
    files = {  # path: (media type, bytes, text?)
        "scripts/check.sh": ("application/x-sh", b"#!/bin/sh\ndf -h /\n", True),
        "scripts/tool.py": ("application/x-python", b"print('ok')\n", True),
        "scripts/report.js": ("application/javascript", b"console.log('ok')\n", True),
        "assets/config.toml": ("application/toml", b"a = 1\n", True),
        "assets/notes.txt": ("text/plain; charset=utf-8", b"plain\n", True),
        "assets/data.json": ("application/vnd.api+json", b"{}", True),
        "assets/blob.bin": ("application/octet-stream", b"\x00\xff\xfe binary", False),
        "scripts/latin1.sh": ("application/x-sh", b"echo \xe9t\xe9\n", False),  # not UTF-8
    }
    bundle = tmp_path / "bundle.json"
    bundle.write_text(json.dumps([{
        "slug": "disk-check", "name": "disk-check", "description": "Check free disk space.", "kind": "knowledge",
        "instructions": "Run it.", "resources": [
            {"path": rel, "kind": "script" if rel.startswith("scripts/") else "artifact", "media_type": media,
             "base64": base64.b64encode(data).decode("ascii")} for rel, (media, data, _) in files.items()],
    }]))
    catalog = Catalog(Settings(data_dir=tmp_path / "d", seed_sample=False), encoder=fake_encoder)
    try:
        assert catalog.import_path(bundle, "local", "user:me").ok
        async with Client(build_mcp_server(catalog, Principal.operator())) as client:
            root = (await client.call_tool("recall_cloud_skill", {"slug": "disk-check"})).structured_content
            assert root is not None
            revision = root["data"]["revision"]["revision_id"]
            uri = root["data"]["skill_uri"].removesuffix("SKILL.md")
            seen = {}
            for rel in files:
                got = (await client.call_tool("recall_cloud_skill", {
                    "slug": "disk-check", "revision_id": revision, "resource": rel})).structured_content
                assert got is not None
                read = (await client.read_resource(uri + rel, cache_mode="bypass")).contents[0]
                seen[rel] = (got["data"]["encoding"], "text" if hasattr(read, "text") else "base64")
    finally:
        catalog.close()
    assert seen == {rel: ("text", "text") if text else ("base64", "base64") for rel, (_, _, text) in files.items()}


# -- 10. what an empty or thin answer means, said to whoever reads it --------------------------------------


def test_each_no_match_reason_carries_a_sentence_in_the_api_and_the_cli(data_dir: Path, sample: Catalog) -> None:
    # A request no skill shares a word with, far from every skill: the floor's ``no_good_match``.
    cake = sample.search_view(Principal.operator(), SearchRequest(query="zxqv blorf plinth"))
    assert cake.no_match and cake.no_match_message == NO_MATCH_MESSAGES[cake.no_match_reason or ""]
    filtered = sample.search_view(Principal.operator(), SearchRequest(query="cake recipe", tags=("secrets",)))
    assert filtered.no_match and filtered.no_match_message == NO_MATCH_MESSAGES[filtered.no_match_reason or ""]
    assert all(m.endswith(".") and len(m) > 60 for m in NO_MATCH_MESSAGES.values())
    code, text = run(data_dir, "search", "zxqv blorf plinth")
    assert code == 0 and text.strip() == f"no good match: {cake.no_match_message} ({cake.no_match_reason})"
    code, payload = run(data_dir, "search", "zxqv blorf plinth", "--json")
    assert payload["no_match_message"] == cake.no_match_message
    hits = sample.search_view(Principal.operator(), SearchRequest(query="profile slow python code"))
    assert hits.no_match_message is None


def test_the_cli_shows_tiny_confidences_and_explains_a_lone_hit(data_dir: Path, sample: Catalog) -> None:
    request = SearchRequest(query="roll back a bad deploy")
    view = sample.search_view(Principal.operator(), request)
    tiny = [h for h in view.hits if h.confidence is not None and h.confidence < 0.005]
    assert len(tiny) >= 3  # the case the issue saw: ranks 3-10 all read 0.00
    _, text = run(data_dir, "search", "roll back a bad deploy")
    assert "confidence=0.00" not in text and text.count("confidence=<0.01") == len(tiny)
    lone = sample.search_view(Principal.operator(), SearchRequest(query="rotate database credentials",
                                                                  tags=("secrets",)))
    assert len(lone.hits) == 1
    _, text = run(data_dir, "search", "rotate database credentials", "--tag", "secrets")
    assert ("note: the only skill you can see that matched: its score ranks it against no other hit; judge it by"
            " its description") in text
    # One hit because one was asked for, or because min_confidence cut the others, is not a lone match.
    for cut in (["--limit", "1"], ["--min-confidence", "0.5"]):
        _, text = run(data_dir, "search", "profile slow python code", *cut)
        assert text.count("\n 1. ") + text.startswith(" 1. ") == 1 and "only skill you can see" not in text


# -- 11. what the README quotes of the Inspector's run holds ------------------------------------------------


@pytest.mark.anyio
async def test_the_inspector_run_the_readme_quotes(default_sample: Catalog) -> None:
    """On the sample catalog as a new data directory indexes it (``minilm+e5``), as the README's run did;
    the confidence it states is checked to within 0.01."""
    async with Client(build_mcp_server(default_sample, Principal.operator())) as operator:
        await _check_the_inspector_run(operator)


async def _check_the_inspector_run(operator: Client) -> None:
    tools = (await operator.list_tools()).tools
    assert len(tools) == 5 and all(t.output_schema for t in tools)
    for t in tools:
        assert t.annotations is not None
        assert (t.annotations.read_only_hint, t.annotations.idempotent_hint, t.annotations.destructive_hint,
                t.annotations.open_world_hint) == (True, True, False, False)
    result = await operator.call_tool("search_skills", {"query": "rotate tls certificates", "limit": 3})
    found = result.structured_content
    assert not result.is_error and found is not None and found["no_match"] is False
    top, *rest = found["hits"]
    assert all(h["confidence"] < 0.05 for h in rest)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    stated = re.search(r"led by `tls-certificate-renewal` \(score [\d.]+, confidence ([\d.]+)", readme)
    assert stated is not None and "pinned by\n`tests/test_first_contact.py`" in readme
    assert top["slug"] == "tls-certificate-renewal"
    assert top["confidence"] == pytest.approx(float(stated.group(1)), abs=0.01)


# -- 2. an index built with another encoder: the message names the --encoder that reads it -------------------


def test_an_index_of_another_encoder_names_the_encoder_option(data_dir: Path) -> None:
    out = io.StringIO()
    assert main(["--data-dir", str(data_dir), "--encoder", "hashing", "-q", "search", "python", "--json"], out=out) == 1
    error = json.loads(out.getvalue())["error"]
    assert error["code"] == "INDEX_NOT_READY" and error["details"]["index_encoder_option"] == "minilm"
    assert "pass --encoder minilm (or set SKILLSEARCH_ENCODER=minilm) to search it as built" in error["message"]
    assert f"run `skillsearch --data-dir {data_dir} --encoder hashing reindex` to rebuild it for hashing" in error["message"]
    out = io.StringIO()
    assert main(["--data-dir", str(data_dir), "--encoder", "minilm", "-q", "search", "python", "--json"], out=out) == 0
    assert json.loads(out.getvalue())["hits"]


# -- make serve on a fresh machine ----------------------------------------------------------------------------


def _make_dry_run(*args: str) -> list[str]:
    """The recipe lines ``make -n`` would run in the repository (nothing runs), the install's included: the
    stamp is made to look older than its prerequisites with ``-W`` (what if this file were new)."""
    # --no-print-directory: under `make test` this make is nested and would print "make[1]: Leaving directory".
    proc = subprocess.run(["make", "-n", "--no-print-directory", "-W", "pyproject.toml", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_serve_passes_serve_args_so_a_busy_port_can_be_avoided() -> None:
    """A busy port's error says "pick another --port"; ``make serve`` takes one through SERVE_ARGS."""
    lines = _make_dry_run("serve", "SERVE_ARGS=--port 8001")
    assert lines[-1] == ".venv/bin/skillsearch serve --port 8001"


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_the_install_says_what_it_does_and_silences_only_setuptools_notices() -> None:
    """A first ``make serve`` installs for about 2 minutes: a line before each step says what and how long, and
    the two notices setuptools prints on every build of this package (the experimental ext-modules table, the
    editable-install banner) are filtered by their text alone, so any other warning still shows."""
    lines = _make_dry_run("venv")
    assert any(line.startswith("echo \"setting up .venv") for line in lines)
    install = next(line for line in lines if "pip install --quiet -e" in line)
    name, _, value = shlex.split(install)[0].partition("=")
    assert name == "PYTHONWARNINGS"
    code = ("import warnings\n"
            "warnings.warn('`[tool.setuptools.ext-modules]` in `pyproject.toml` is still *experimental* and likely')\n"
            "warnings.warn('Editable installation.\\n!!\\n  Please be careful')\n"
            "warnings.warn('something else')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ) | {"PYTHONWARNINGS": value})
    assert "Invalid -W option" not in proc.stderr
    assert "experimental" not in proc.stderr and "Editable" not in proc.stderr
    assert "something else" in proc.stderr


def _serve_until_ready(data: Path) -> str:
    """``skillsearch serve --port 0`` on ``data`` until its ``/readyz`` is 200, stopped with Ctrl-C: its stdout."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "HF_HUB_OFFLINE": "1",
           "SKILLSEARCH_ENCODER": "hashing"}
    proc = subprocess.Popen([sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data), "-q", "serve",
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        url = re.search(r"serving on (http://127\.0\.0\.1:\d+)", first)
        assert url, first
        for _ in range(600):
            if httpx.get(url.group(1) + "/readyz", timeout=30).status_code == 200:
                break
            time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        rest = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    return first + rest


def test_the_first_serve_says_its_index_is_being_built_and_where_to_see_it_ready(tmp_path: Path) -> None:
    """On a first ``make serve`` the index is built behind the banner (20-30 s): the curl it suggests waits
    meanwhile, so the banner says so and names ``/readyz``; a later start, with its index there, does not."""
    data = tmp_path / "new"
    first = _serve_until_ready(data)
    assert "demo token:" in first
    line = next((x for x in first.splitlines() if x.strip().startswith("index:")), None)
    assert line is not None and "building it in the background" in line and "/readyz" in line, first
    assert (data / "manifest.json").is_file()
    again = _serve_until_ready(data)
    assert "serving on" in again and "index:" not in again


def test_the_multilingual_off_notice_names_a_command_that_turns_it_on(data_dir: Path) -> None:
    """An English-only index answers a Japanese request with a notice saying how to search other languages. Its
    command, pasted as written, must do it: "run with --encoder minilm+e5, then `skillsearch reindex`" led to a
    plain ``reindex``, which keeps the index's own encoder, and the same notice again."""
    request = "証明書の期限が切れたので更新したい"
    assert run(data_dir, "--encoder", "minilm", "reindex")[0] == 0
    code, before = run(data_dir, "search", request, "--json")
    assert code == 0 and "multilingual search is off" in (before.get("notice") or "")
    commands = [c for c in re.findall(r"`(skillsearch [^`]+)`", before["notice"]) if "reindex" in c]
    assert commands, before["notice"]
    assert main(["--data-dir", str(data_dir), "-q", *shlex.split(commands[0])[1:]], out=io.StringIO()) == 0
    code, after = run(data_dir, "search", request, "--json")
    assert code == 0 and not after.get("notice"), after.get("notice")
    assert after["hits"][0]["slug"] == "tls-certificate-renewal"
