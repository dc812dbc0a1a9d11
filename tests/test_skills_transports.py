"""The Skills extension over its real transports and with sync: ``skillsearch mcp`` as a stdio subprocess,
``/mcp`` of ``skillsearch serve`` with bearer tokens (each token sees its principal's skills and no others,
``cacheScope`` private, another caller's cursor refused), and an upstream change arriving through sync."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_support import ok, stdio_params
from mcp_types import INVALID_REQUEST
from skills_support import EXTENSION_ID, call, list_all, verify_entry
from syncsupport import config_for, upstream_with_starter

from skillsearch.catalog.store import CatalogStore
from skillsearch.cli import build_serve_app
from skillsearch.core.domain import SCOPE_MEMORY_READ, Principal
from skillsearch.core.settings import Settings
from skillsearch.http.auth import PrincipalRegistry, add_principal
from skillsearch.http.server import ServerThread
from skillsearch.mcp.server import build_mcp_server
from skillsearch.mcp.skills_extension import ACCESS_DENIED_CODE, SkillsExtension
from skillsearch.retrieval.encoder import Encoder
from skillsearch.service import Catalog
from skillsearch.upstream.platform import ReferenceUpstream
from skillsearch.usecases.skill_files import entries_page

pytestmark = pytest.mark.anyio


async def test_stdio_subprocess_serves_the_extension(sample_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(sample_dir, data)
    params = stdio_params(data)
    with (tmp_path / "stderr.txt").open("w") as stderr:
        async with Client(stdio_client(params, errlog=stderr), read_timeout_seconds=120) as client:
            assert client.server_capabilities.extensions == {EXTENSION_ID: {"directoryRead": True}}
            entries, _ = await list_all(client)
            for entry in entries:
                await verify_entry(client, entry)
    assert len(entries) == CatalogStore.in_dir(data).count("active")


@pytest.fixture
def serve_url(sample: Catalog, tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    path = tmp_path / "principals.toml"
    tokens = {
        "ops": add_principal(path, "ops", ["sub:ops-pro"], ["skills:read", "memory:read"]),
        "data": add_principal(path, "data", ["team:data-science"], ["skills:read", "memory:read"]),
        "recall-only": add_principal(path, "recall-only", ["sub:ops-pro"], ["memory:read"]),
    }
    with ServerThread(build_serve_app(sample, PrincipalRegistry(path, demo=False))) as url:
        yield url + "/mcp", tokens


@asynccontextmanager
async def _as(url: str, token: str) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client


async def test_serve_mcp_answers_each_token_with_its_principals_skills_only(
    serve_url: tuple[str, dict[str, str]], sample: Catalog
) -> None:
    url, tokens = serve_url
    for name, grant in (("ops", "sub:ops-pro"), ("data", "team:data-science")):
        async with _as(url, tokens[name]) as client:
            assert client.server_capabilities.extensions == {EXTENSION_ID: {"directoryRead": True}}
            page = await call(client, "skills/list")
            assert page["cacheScope"] == "private"
            entries, _ = await list_all(client)
            prefix = "skill://" + grant.replace(":", "/") + "/"
            assert entries and all(e["uri"].startswith(prefix) for e in entries)
            assert len(entries) == len(sample.store.list_page([grant], limit=500))
            for entry in entries:
                await verify_entry(client, entry)
            read = await client.read_resource(entries[0]["uri"], cache_mode="bypass")
            assert read.cache_scope == "private"
    async with _as(url, tokens["ops"]) as ops:
        with pytest.raises(MCPError) as hidden:
            await call(ops, "skills/get", {"uri": "skill://team/data-science/ab-test-analysis/SKILL.md"})
        assert hidden.value.error.code == -32602


async def test_serve_mcp_refuses_a_token_without_skills_read_with_a_stable_code(
    serve_url: tuple[str, dict[str, str]]
) -> None:
    """Not -32603 "Internal error": a refusal of this caller, ACCESS_DENIED_CODE with data.code ACCESS_DENIED
    (the tools' code) and the scope it needs."""
    url, tokens = serve_url
    uri = "skill://sub/ops-pro/postgres-failover/SKILL.md"
    async with _as(url, tokens["recall-only"]) as recall_only:
        for method, params in (("skills/list", {}), ("resources/list", {}), ("resources/read", {"uri": uri}),
                               ("skills/get", {"uri": uri})):
            with pytest.raises(MCPError) as denied:
                await call(recall_only, method, params)
            assert denied.value.error.code == ACCESS_DENIED_CODE, method
            assert denied.value.error.message == f"{method} needs the skills:read scope"
            assert denied.value.error.data == {"code": "ACCESS_DENIED", "message": denied.value.error.message,
                                               "details": {"required_scope": "skills:read"}}
        recalled = ok(await recall_only.call_tool("recall_cloud_skill", {"slug": "postgres-failover"}))
    assert recalled["kind"] == "root"  # memory:read alone still recalls
    async with _as(url, tokens["ops"]) as ops:
        assert (await call(ops, "resources/read", {"uri": uri}))["contents"]


async def test_serve_mcp_is_stateless_and_says_so(serve_url: tuple[str, dict[str, str]]) -> None:
    """GET /mcp would open an SSE stream on which nothing ever comes: 405 with Allow: POST; and no change
    notifications are advertised."""
    url, tokens = serve_url
    auth = {"Authorization": f"Bearer {tokens['ops']}"}
    answer = httpx.get(url, headers={**auth, "Accept": "text/event-stream"}, timeout=30)
    assert answer.status_code == 405 and answer.headers["allow"] == "POST"
    assert answer.json()["error"]["code"] == INVALID_REQUEST
    assert httpx.get(url, timeout=30).status_code == 401  # the token is still checked first
    async with _as(url, tokens["ops"]) as client:
        caps = client.server_capabilities
    assert caps.resources is not None and (caps.resources.list_changed, caps.resources.subscribe) == (False, False)
    assert caps.prompts is not None and caps.prompts.list_changed is False


async def test_another_callers_cursor_is_refused(sample: Catalog) -> None:
    """Two callers of one server (one extension, one cursor key): a cursor only works for whom it was made."""
    who: dict[str, Principal] = {"current": Principal.operator()}
    server = build_mcp_server(sample, lambda _headers: who["current"])
    [extension] = server._extensions
    assert isinstance(extension, SkillsExtension)
    _, cursor = entries_page(sample.store, who["current"], extension.cursor_key, limit=5)
    assert cursor is not None
    async with Client(server) as client:
        assert (await call(client, "skills/list", {"cursor": cursor}))["skills"]
        who["current"] = Principal("other", frozenset({"sub:ops-pro"}), frozenset({SCOPE_MEMORY_READ}))
        with pytest.raises(MCPError) as refused:
            await call(client, "skills/list", {"cursor": cursor})
    assert refused.value.error.code == -32602 and "cursor" in refused.value.error.message


@pytest.fixture
def upstream() -> ReferenceUpstream:
    return upstream_with_starter()


async def test_an_upstream_change_reaches_the_listing_and_the_bytes_in_one_batch(
    tmp_path: Path, encoder: Encoder, upstream: ReferenceUpstream, upstream_url: str
) -> None:
    catalog = Catalog.open(Settings(data_dir=tmp_path / "data", seed_sample=False), encoder=encoder)
    try:
        config = config_for(upstream_url, "starter-pack")
        catalog.subscriptions.sync_once(config)
        uri = "skill://sub/starter-pack/git-bisect-regressions/SKILL.md"
        async with Client(build_mcp_server(catalog, Principal.operator())) as client:
            before = (await call(client, "skills/get", {"uri": uri}))["skill"]
            old_bytes = (await verify_entry(client, before))[uri]
            assert before["frontmatter"]["name"] == "git-bisect-regressions"
            skill_id = catalog.store.skill_by_slug("sub:starter-pack", "git-bisect-regressions").skill_id  # type: ignore[union-attr]
            old_revision = catalog.store.skill(skill_id).current_revision_id  # type: ignore[union-attr]
            upstream.edit("starter-pack", skill_id, description="Bisect with a script that decides good or bad.")
            [report] = catalog.subscriptions.sync_once(config)
            assert report.outcome.updated == [skill_id]
            after = (await call(client, "skills/get", {"uri": uri}))["skill"]
            new_bytes = (await verify_entry(client, after))[uri]
            listed = [e for e in (await list_all(client))[0] if e["uri"] == uri]
            pinned = ok(await client.call_tool("recall_cloud_skill", {"skill_id": skill_id,
                                                                      "revision_id": old_revision}))
        assert after["frontmatter"]["description"] == "Bisect with a script that decides good or bad."
        assert after["resources"][0]["digest"] != before["resources"][0]["digest"] and new_bytes != old_bytes
        assert listed == [after]
        assert pinned["data"]["revision"]["revision_id"] == old_revision
        assert pinned["data"]["description"] != after["frontmatter"]["description"]
    finally:
        catalog.close()
