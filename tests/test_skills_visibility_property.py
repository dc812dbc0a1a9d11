"""Property: over random grants, revocations and archives, no principal ever lists or reads through the Skills
extension a URI it may not see, and an invisible skill's URIs answer exactly like URIs that never existed.

Every example drives a real in-memory SDK client session against the extension; the catalog (eight skills in
four grants, the same slug in each grant) is imported once, and each example only moves its state."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.shared.exceptions import MCPError
from skills_support import call, list_all, verify_entry

from skillsearch.catalog.importer import parse_path
from skillsearch.core.domain import SCOPE_MEMORY_READ, Principal, SkillContent
from skillsearch.core.settings import Settings
from skillsearch.core.skill_uri import skill_uri
from skillsearch.mcp.server import build_mcp_server
from skillsearch.retrieval.hashing_encoder import HashingEncoder
from skillsearch.service import Catalog

GRANTS = ("sub:alpha", "sub:beta", "team:ops", "user:ana")
SUBSCRIPTIONS = ("alpha", "beta")


def _bundle(grant: str) -> list[dict[str, object]]:
    tag = grant.replace(":", "-")
    return [
        {"slug": "shared-name", "name": f"Shared {tag}", "description": f"The same slug in {grant}.",
         "instructions": f"Only for {grant}.", "resources": [{"path": "notes/readme.md", "text": f"# {grant}\n"}]},
        {"slug": f"own-{tag}", "name": f"Own {tag}", "description": f"A skill of {grant} alone.", "kind":
         "flow_template", "steps": [{"tool": "echo", "args": {"text": "{word}"}}],
         "parameters": [{"name": "word", "required": True}]},
    ]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Catalog, dict[str, SkillContent]]]:
    root = tmp_path_factory.mktemp("visibility")
    catalog = Catalog.open(Settings(data_dir=root / "data", seed_sample=False), encoder=HashingEncoder())
    contents: dict[str, SkillContent] = {}
    for grant in GRANTS:
        bundle = root / f"{grant.replace(':', '-')}.json"
        bundle.write_text(json.dumps(_bundle(grant)), "utf-8")
        assert catalog.import_path(bundle, grant, grant).ok
        contents.update({c.skill_id: c for c in parse_path(Path(bundle), grant, grant).skills})
    yield catalog, contents
    catalog.close()


def _uris(content: SkillContent) -> list[str]:
    files = ["SKILL.md", *(r.path for r in content.resources)]
    if content.revision.kind == "flow_template":
        files.append("assets/template.json")
    return [skill_uri(content.grant, content.slug, f) for f in files] + [skill_uri(content.grant, content.slug, "")]


async def _refused(client: Client, method: str, uri: str) -> str:
    try:
        if method == "resources/read":
            await client.read_resource(uri, cache_mode="bypass")
        else:
            await call(client, method, {"uri": uri})
    except MCPError as exc:
        assert exc.error.code == -32602, exc.error
        return exc.error.message.replace(uri, "<uri>")
    raise AssertionError(f"{method} {uri} answered a caller who may not see it")


async def _check(catalog: Catalog, contents: dict[str, SkillContent], principal: Principal,
                 visible: set[str]) -> None:
    async with Client(build_mcp_server(catalog, principal)) as client:
        entries, _ = await list_all(client)
        listed = [e["uri"] for e in entries]
        assert sorted(listed) == sorted(skill_uri(contents[s].grant, contents[s].slug) for s in visible)
        assert sorted(r.uri for r in (await client.list_resources()).resources) == sorted(listed)
        for entry in entries:
            await verify_entry(client, entry)
        for skill_id, content in contents.items():
            if skill_id in visible:
                continue
            for uri in _uris(content):
                is_dir = not uri.endswith(("SKILL.md", ".md", ".json"))
                ghost = uri.replace(f"/{content.slug}", f"/{content.slug}-x", 1)
                methods = ["resources/directory/read"] if is_dir else ["resources/read"]
                if uri.endswith("/SKILL.md"):
                    methods.append("skills/get")
                for method in methods:
                    assert await _refused(client, method, uri) == await _refused(client, method, ghost)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    revoked=st.sets(st.sampled_from(SUBSCRIPTIONS)),
    archived_picks=st.sets(st.integers(min_value=0, max_value=7)),
    grants=st.none() | st.frozensets(st.sampled_from((*GRANTS, "sub:gamma"))),
)
def test_no_principal_lists_or_reads_what_it_may_not_see(
    world: tuple[Catalog, dict[str, SkillContent]], revoked: set[str], archived_picks: set[int],
    grants: frozenset[str] | None,
) -> None:
    catalog, contents = world
    ids = sorted(contents)
    archived = {ids[i] for i in archived_picks}
    for sub in SUBSCRIPTIONS:
        catalog.store.set_revoked(sub, sub in revoked)
    for skill_id, content in contents.items():
        if skill_id in archived:
            catalog.store.archive(skill_id)
        else:
            catalog.store.upsert(content)  # active again (a no-op when it already is)
    visible = {
        s for s, c in contents.items()
        if s not in archived and (grants is None or c.grant in grants)
        and not (c.grant.startswith("sub:") and c.grant[4:] in revoked)
    }
    principal = Principal(name="p", grants=grants, scopes=frozenset({SCOPE_MEMORY_READ}))
    anyio.run(_check, catalog, contents, principal, visible)
