"""The MCP Skills extension (SEP-2640) on the sample catalog, through real SDK client sessions in memory:
declaration, listing, verified reads, directory reads, errors, and search leading to the same URIs."""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_support import DATA_TEAM, STARTER, ok
from skills_support import EXTENSION_ID, call, digest, list_all, read_bytes, verify_entry

from skillsearch.catalog.frontmatter import split_front_matter
from skillsearch.catalog.sample import sample_catalog_dir
from skillsearch.core.domain import Principal
from skillsearch.core.settings import Settings
from skillsearch.mcp.server import build_mcp_server
from skillsearch.retrieval.hashing_encoder import HashingEncoder
from skillsearch.service import Catalog
from skillsearch.usecases.skill_files import SKILL_MD_KEPT, CursorError, entries_page, legacy_skill_md_note

pytestmark = pytest.mark.anyio

SAMPLE = sample_catalog_dir()


async def invalid_params(client: Client, method: str, params: dict[str, Any]) -> str:
    """The message of the ``-32602`` error the call must give."""
    with pytest.raises(MCPError) as caught:
        if method == "resources/read":
            await client.read_resource(params["uri"])
        else:
            await call(client, method, params)
    assert caught.value.error.code == -32602, caught.value.error
    return caught.value.error.message


async def test_discover_declares_the_extension_and_resources(operator: Client) -> None:
    capabilities = operator.server_capabilities
    assert operator.protocol_version == "2026-07-28"
    assert capabilities.extensions == {EXTENSION_ID: {"directoryRead": True}}
    assert capabilities.resources is not None


async def test_the_older_initialize_handshake_drops_the_extension_map(sample: Catalog) -> None:
    """What we found in mcp 2.3: the map only reaches clients on server/discover (2026-07-28); an older
    initialize result is sieved through its revision's schema, which has no capabilities.extensions. The
    methods still answer there."""
    async with Client(build_mcp_server(sample, Principal.operator()), mode="legacy") as client:
        assert client.protocol_version < "2026-07-28"
        assert client.server_capabilities.extensions is None
        assert client.server_capabilities.resources is not None
        entries, _ = await list_all(client)
        assert len(entries) == sample.store.count("active")


async def test_every_sample_skill_lists_once_and_verifies(operator: Client, sample: Catalog) -> None:
    entries, _ = await list_all(operator)
    assert len(entries) == sample.store.count("active")
    assert len({e["uri"] for e in entries}) == len(entries)
    for entry in entries:
        files = await verify_entry(operator, entry)
        assert entry["resources"][0]["uri"] == entry["uri"]
        assert all(r["digest"].startswith("sha256:") and len(r["digest"]) == 71 for r in entry["resources"])
        assert len(files) == len(entry["resources"])
        got = await call(operator, "skills/get", {"uri": entry["uri"]})
        assert got["skill"] == entry and got["ttlMs"] >= 0 and got["cacheScope"] == "public"
        assert "nextCursor" not in got


async def test_authored_skill_md_is_served_byte_for_byte(operator: Client) -> None:
    folder = SAMPLE / "starter" / "git-bisect-regressions"
    uri = "skill://sub/starter-pack/git-bisect-regressions/SKILL.md"
    data, media, as_text = await read_bytes(operator, uri)
    assert data == (folder / "SKILL.md").read_bytes()
    assert media == "text/markdown" and as_text
    entry = (await call(operator, "skills/get", {"uri": uri}))["skill"]
    assert entry["frontmatter"] == split_front_matter((folder / "SKILL.md").read_text("utf-8"))[0]
    on_disk = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    listed = sorted(r["uri"].removeprefix(uri.removesuffix("SKILL.md")) for r in entry["resources"])
    assert listed == on_disk


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))


async def test_every_kind_of_file_comes_back_with_its_exact_bytes(tmp_path: Path) -> None:
    """Binary as a blob, text as text (CRLF and a BOM kept), odd file names percent-encoded in the URI."""
    folder = tmp_path / "skills" / "odd-files"
    (folder / "assets").mkdir(parents=True)
    (folder / "notes").mkdir()
    skill_md = b"\xef\xbb\xbf---\r\nname: odd-files\r\ndescription: Files of every kind.\r\n" \
               b"compatibility: any host\r\nmetadata:\r\n  owner: qa\r\n---\r\n\r\nBody.\r\n"
    (folder / "SKILL.md").write_bytes(skill_md)
    (folder / "assets" / "logo.png").write_bytes(PNG)
    (folder / "notes" / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (folder / "notes" / "a file #1 ü.md").write_bytes("spaces, a hash and ü\n".encode())
    catalog = Catalog.open(Settings(data_dir=tmp_path / "data", seed_sample=False), encoder=HashingEncoder())
    try:
        assert catalog.import_path(folder.parent, "odd", "user:qa").ok
        async with Client(build_mcp_server(catalog, Principal.operator())) as client:
            [entry], _ = await list_all(client)
            files = await verify_entry(client, entry)
            base = "skill://user/qa/odd-files"
            assert files[f"{base}/SKILL.md"] == skill_md
            assert entry["frontmatter"] == {"name": "odd-files", "description": "Files of every kind.",
                                            "compatibility": "any host", "metadata": {"owner": "qa"}}
            assert files[f"{base}/assets/logo.png"] == PNG
            png = await read_bytes(client, f"{base}/assets/logo.png")
            latin = await read_bytes(client, f"{base}/notes/latin1.txt")
            odd = await read_bytes(client, f"{base}/notes/a%20file%20%231%20%C3%BC.md")
            assert png == (PNG, "image/png", False)
            assert latin[0] == "caf\xe9".encode("latin-1") and latin[2] is False
            assert odd[2] is True and odd[0] == "spaces, a hash and ü\n".encode()
            await invalid_params(client, "resources/read", {"uri": f"{base}/notes/a file #1 ü.md"})
    finally:
        catalog.close()


async def test_a_flow_template_gets_a_rendered_skill_md_and_its_template_json(operator: Client,
                                                                               sample: Catalog) -> None:
    flows = [s for s in sample.store.list_page(sample.store.grants(), limit=500) if s.kind == "flow_template"]
    assert flows
    for skill in flows:
        base = f"skill://{skill.grant.replace(':', '/')}/{skill.slug}"
        entry = (await call(operator, "skills/get", {"uri": f"{base}/SKILL.md"}))["skill"]
        files = await verify_entry(operator, entry)
        detail = ok(await operator.call_tool("get_skill", {"skill_id": skill.skill_id}))
        template = json.loads(files[f"{base}/assets/template.json"])
        assert template["steps"] == detail["steps"]
        assert [p["name"] for p in template["parameters"]] == [p["name"] for p in detail["parameters"]]
        text = files[f"{base}/SKILL.md"].decode()
        assert entry["frontmatter"]["name"] == skill.slug and entry["frontmatter"]["description"] == skill.description
        assert "## Steps" in text and all(f"`{s['tool']}`" in text for s in detail["steps"])
        again, _, _ = await read_bytes(operator, f"{base}/SKILL.md")
        assert again == files[f"{base}/SKILL.md"]  # the same revision renders to the same bytes


async def test_directories_list_their_direct_children(operator: Client) -> None:
    root = "skill://sub/ops-pro/tls-certificate-renewal"
    top = await call(operator, "resources/directory/read", {"uri": root})
    assert {r["name"]: r["mimeType"] for r in top["resources"]} == {"SKILL.md": "text/markdown",
                                                                   "scripts": "inode/directory"}
    scripts = await call(operator, "resources/directory/read", {"uri": f"{root}/scripts"})
    assert [r["uri"] for r in scripts["resources"]] == [f"{root}/scripts/check_cert_expiry.py"]
    message = await invalid_params(operator, "resources/directory/read", {"uri": f"{root}/SKILL.md"})
    assert "not a directory" in message
    await invalid_params(operator, "resources/read", {"uri": root})
    await invalid_params(operator, "resources/read", {"uri": f"{root}/scripts"})


@pytest.mark.parametrize("uri", [
    "skill://sub/starter-pack/no-such-skill/SKILL.md",
    "skill://sub/starter-pack/git-bisect-regressions/no-such-file.md",
    "skill://git-bisect-regressions/SKILL.md",
    "skill://sub/starter-pack/git-bisect-regressions/./SKILL.md",
    "skill://sub/starter-pack/git-bisect-regressions/../SKILL.md",
    "skill://sub/starter%2Dpack/git-bisect-regressions/SKILL.md",
    "skill://root/x/y/SKILL.md",
    "http://example.com/SKILL.md",
    "not a uri",
])
async def test_unknown_and_malformed_uris_are_invalid_params(operator: Client, uri: str) -> None:
    for method in ("resources/read", "skills/get", "resources/directory/read"):
        assert uri in await invalid_params(operator, method, {"uri": uri})


async def test_a_huge_unknown_uri_is_not_echoed_in_full(operator: Client) -> None:
    """A 100,000-character URI gets an error of bounded size: the URI shown back is cut, in the message and
    in the data, and says how much was left out."""
    uri = "skill://sub/starter-pack/" + "a" * 100_000 + "/SKILL.md"
    for method in ("resources/read", "skills/get", "resources/directory/read"):
        with pytest.raises(MCPError) as caught:
            await call(operator, method, {"uri": uri})
        error = caught.value.error
        assert error.code == -32602 and uri[:100] in error.message
        assert len(error.message) < 400 and "more characters" in error.message
        assert len(json.dumps(error.data)) < 400


async def test_skills_get_names_a_skill_md_only(operator: Client) -> None:
    await invalid_params(operator, "skills/get",
                         {"uri": "skill://sub/ops-pro/tls-certificate-renewal/scripts/check_cert_expiry.py"})


async def test_an_invisible_skill_answers_exactly_like_an_unknown_one(starter: Client, sample: Catalog) -> None:
    entries, _ = await list_all(starter)
    assert {e["uri"].split("/")[2] + ":" + e["uri"].split("/")[3] for e in entries} == {"sub:starter-pack"}
    assert len(entries) == len(sample.store.list_page(["sub:starter-pack"], limit=500))
    hidden = "skill://sub/ops-pro/tls-certificate-renewal"
    unknown = "skill://sub/ops-pro/tls-certificate-renewa1"
    for suffix in ("/SKILL.md", "/scripts/check_cert_expiry.py", ""):
        for method in ("resources/read", "skills/get", "resources/directory/read"):
            if method == "resources/read" and not suffix:
                continue
            a = await invalid_params(starter, method, {"uri": hidden + suffix})
            b = await invalid_params(starter, method, {"uri": unknown + suffix})
            assert a.replace(hidden, "U") == b.replace(unknown, "U")


async def test_forged_and_foreign_cursors_are_refused(starter: Client, sample: Catalog) -> None:
    assert "cursor" in await invalid_params(starter, "skills/list", {"cursor": "eyJ4IjoxfQ.deadbeef"})
    await invalid_params(starter, "skills/list", {"cursor": "garbage"})
    with pytest.raises(MCPError) as caught:
        await starter.list_resources(cursor="eyJ4IjoxfQ.deadbeef")
    assert caught.value.error.code == -32602
    key = b"k" * 32
    _, cursor = entries_page(sample.store, Principal.operator(), key, limit=2)
    assert cursor is not None
    entries_page(sample.store, Principal.operator(), key, cursor, limit=2)
    for other in (STARTER, DATA_TEAM):
        with pytest.raises(CursorError):
            entries_page(sample.store, other, key, cursor, limit=2)
    with pytest.raises(CursorError):
        entries_page(sample.store, Principal.operator(), b"x" * 32, cursor, limit=2)


async def test_resources_list_names_every_visible_skill_md(starter: Client, sample: Catalog) -> None:
    listed = await starter.list_resources()
    entries, _ = await list_all(starter)
    assert [r.uri for r in listed.resources] == [e["uri"] for e in entries]
    for resource, entry in zip(listed.resources, entries, strict=True):
        assert resource.name == entry["frontmatter"]["name"] and resource.mime_type == "text/markdown"
        assert resource.description == entry["frontmatter"]["description"]


async def test_search_list_get_and_recall_lead_to_the_same_skill_uri(starter: Client) -> None:
    hit = ok(await starter.call_tool("search_skills", {"query": "git bisect to find a regression"}))["hits"][0]
    uri = hit["skill_uri"]
    assert uri == f"skill://sub/starter-pack/{hit['slug']}/SKILL.md"
    entry = (await call(starter, "skills/get", {"uri": uri}))["skill"]
    await verify_entry(starter, entry)
    detail = ok(await starter.call_tool("get_skill", {"skill_id": hit["skill_id"]}))
    items = ok(await starter.call_tool("list_skills", {"limit": 200}))["items"]
    level0 = ok(await starter.call_tool("recall_cloud_skill", {"query": "git bisect to find a regression"}))
    level1 = ok(await starter.call_tool("recall_cloud_skill", {"skill_id": hit["skill_id"]}))
    assert detail["skill_uri"] == uri
    assert {i["skill_uri"] for i in items if i["skill_id"] == hit["skill_id"]} == {uri}
    assert level0["data"]["descriptors"][0]["skill_uri"] == uri
    assert level1["data"]["skill_uri"] == uri
    assert "skill://" in (starter.instructions or "")


async def test_every_resource_get_skill_lists_carries_the_uri_that_reads_its_bytes(operator: Client,
                                                                                     sample: Catalog) -> None:
    """An agent that read get_skill and wants a file its instructions name (``references/exit_codes.md``)
    gets it in one resources/read of the listed uri, not by composing a skill:// URI by hand."""
    items = ok(await operator.call_tool("list_skills", {"limit": 200}))["items"]
    read = 0
    for item in items:
        detail = ok(await operator.call_tool("get_skill", {"skill_id": item["skill_id"]}))
        level1 = ok(await operator.call_tool("recall_cloud_skill", {"skill_id": item["skill_id"]}))["data"]
        assert [r["uri"] for r in level1["resources"]] == [r["uri"] for r in detail["resources"]]
        for resource in detail["resources"]:
            assert resource["uri"] == detail["skill_uri"].removesuffix("SKILL.md") + resource["path"]
            data, media, _ = await read_bytes(operator, resource["uri"])
            assert digest(data) == f"sha256:{resource['sha256']}" and len(data) == resource["size"]
            assert media == resource["media_type"]
            read += 1
    assert read >= 5


async def test_a_pinned_old_revision_stays_in_recall_while_the_extension_serves_the_new_one(
    fresh_sample: Catalog, tmp_path: Path
) -> None:
    folder = tmp_path / "git-bisect-regressions"
    shutil.copytree(SAMPLE / "starter" / "git-bisect-regressions", folder)
    uri = "skill://sub/starter-pack/git-bisect-regressions/SKILL.md"
    async with Client(build_mcp_server(fresh_sample, STARTER)) as client:
        old = ok(await client.call_tool("recall_cloud_skill", {"slug": "git-bisect-regressions"}))["data"]
        old_entry = (await call(client, "skills/get", {"uri": uri}))["skill"]
        text = (folder / "SKILL.md").read_text("utf-8") + "\nA new closing line.\n"
        (folder / "SKILL.md").write_text(text, "utf-8")
        report = fresh_sample.import_path(folder, "sample-starter", "sub:starter-pack")
        assert report.updated and report.ok
        new_entry = (await call(client, "skills/get", {"uri": uri}))["skill"]
        files = await verify_entry(client, new_entry)
        pinned = ok(await client.call_tool("recall_cloud_skill", {"slug": "git-bisect-regressions",
                                                                  "revision_id": old["revision"]["revision_id"]}))
    assert files[uri] == (folder / "SKILL.md").read_bytes()
    assert new_entry["resources"][0]["digest"] == digest(files[uri]) != old_entry["resources"][0]["digest"]
    assert "A new closing line" not in pinned["data"]["instructions"]
    assert pinned["data"]["revision"]["revision_id"] == old["revision"]["revision_id"]


async def test_a_pinned_old_revisions_resources_have_no_uri_the_extension_would_answer_differently(
    fresh_sample: Catalog, tmp_path: Path
) -> None:
    """The extension serves only the current revision: a uri on an older revision's file would load other
    bytes than its listed sha256, so that revision's resources carry none (recall_cloud_skill reads them)."""
    folder = tmp_path / "postgres-backup-restore"
    shutil.copytree(SAMPLE / "ops" / "postgres-backup-restore", folder)
    async with Client(build_mcp_server(fresh_sample, Principal.operator())) as client:
        old = ok(await client.call_tool("recall_cloud_skill", {"slug": "postgres-backup-restore"}))["data"]
        pitr = folder / "references" / "pitr.md"
        pitr.write_text(pitr.read_text("utf-8") + "\nA new closing line.\n", "utf-8")
        assert fresh_sample.import_path(folder, "sample-ops", "sub:ops-pro").updated
        pinned = ok(await client.call_tool("recall_cloud_skill", {"slug": "postgres-backup-restore",
                                                                  "revision_id": old["revision"]["revision_id"]}))
        current = ok(await client.call_tool("get_skill", {"skill_id": "postgres-backup-restore"}))
        [now] = [r for r in current["resources"] if r["path"] == "references/pitr.md"]
        data, _, _ = await read_bytes(client, now["uri"])
    assert old["resources"] and all(r["uri"] for r in old["resources"])
    assert pinned["data"]["resources"] and all(r["uri"] == "" for r in pinned["data"]["resources"])
    assert data == pitr.read_bytes() and digest(data) == f"sha256:{now['sha256']}"


async def test_a_tampered_file_is_refused_not_served_with_a_wrong_digest(fresh_sample: Catalog) -> None:
    db = fresh_sample.store.path
    base = "skill://sub/ops-pro/tls-certificate-renewal"
    async with Client(build_mcp_server(fresh_sample, Principal.operator())) as client:
        before = (await call(client, "skills/get", {"uri": f"{base}/SKILL.md"}))["skill"]
        await verify_entry(client, before)
        with sqlite3.connect(db) as conn:  # one byte changed on disk, behind the catalog's back
            [(rowid, content)] = conn.execute("SELECT rowid, content FROM resources WHERE path = ?",
                                              ("scripts/check_cert_expiry.py",)).fetchall()
            conn.execute("UPDATE resources SET content = ? WHERE rowid = ?", (b"X" + bytes(content)[1:], rowid))
        with pytest.raises(MCPError) as caught:
            await client.read_resource(f"{base}/scripts/check_cert_expiry.py", cache_mode="bypass")
        assert caught.value.error.code == -32603 and "digest" in caught.value.error.message
        after = (await call(client, "skills/get", {"uri": f"{base}/SKILL.md"}))["skill"]
        assert after == before  # the listing keeps the digest of what was stored; the changed bytes are refused
        await read_bytes(client, f"{base}/SKILL.md")  # the untouched files still verify

        with sqlite3.connect(db) as conn:  # the revision body (SKILL.md is derived from it) changed on disk
            conn.execute("UPDATE revisions SET body = json_set(body, '$.description', 'changed') WHERE revision_id"
                         " = (SELECT current_revision_id FROM skills WHERE slug = 'postgres-failover')")
        with pytest.raises(MCPError) as caught:
            await client.read_resource("skill://sub/ops-pro/postgres-failover/SKILL.md", cache_mode="bypass")
        assert caught.value.error.code == -32603 and "canonical hash" in caught.value.error.message


def test_an_older_catalog_is_served_and_says_what_to_run(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings(data_dir=tmp_path / "data", seed_sample=False)
    catalog = Catalog.open(settings, encoder=HashingEncoder())
    catalog.import_path(SAMPLE / "starter" / "flows.json", "flows", "sub:starter-pack")
    catalog.close()
    db = tmp_path / "data" / "catalog.sqlite3"
    with sqlite3.connect(db) as conn:  # as an earlier version wrote them (it kept no mark of the check)
        assert conn.execute("SELECT value FROM meta WHERE key = ?", (SKILL_MD_KEPT,)).fetchone() == ("1",)
        conn.execute("UPDATE revisions SET body = json_remove(body, '$.skill_md', '$.frontmatter')")
        conn.execute("DELETE FROM meta WHERE key = ?", (SKILL_MD_KEPT,))
    with caplog.at_level(logging.WARNING, logger="skillsearch"):
        catalog = Catalog.open(settings, encoder=HashingEncoder())
    try:
        assert "skillsearch import" in caplog.text and "SKILL.md" in caplog.text
        principal = Principal.operator()
        entries, _ = entries_page(catalog.store, principal, b"k" * 32)
        assert entries and all(e.frontmatter["name"] == e.skill.slug for e in entries)
        assert catalog.store.connection().execute("SELECT 1 FROM meta WHERE key = ?", (SKILL_MD_KEPT,)).fetchone() \
            is None  # still to do: counted again at the next open
        # Once every current revision has its SKILL.md (as importing again writes them), the note goes and the
        # check is marked done, so later opens never read every body again (8.3 s at 1M skills) ...
        conn = catalog.store.connection()
        conn.execute("UPDATE revisions SET body = json_set(body, '$.skill_md', '')")
        conn.execute("PRAGMA query_only = ON")  # ... unless the catalog cannot be written: no error, no mark
        assert legacy_skill_md_note(catalog.store) is None
        assert conn.execute("SELECT 1 FROM meta WHERE key = ?", (SKILL_MD_KEPT,)).fetchone() is None
        conn.execute("PRAGMA query_only = OFF")
        assert legacy_skill_md_note(catalog.store) is None
        assert conn.execute("SELECT value FROM meta WHERE key = ?", (SKILL_MD_KEPT,)).fetchone()[0] == "1"
    finally:
        catalog.close()


async def test_hyphen_runs_in_slugs_become_one_in_the_skill_name(tmp_path: Path) -> None:
    """Slugs allow ``a--b``; Agent Skills names do not. The URI and the served name use ``a-b``; when a slug of
    the same grant already is ``a-b``, that one is served under it and the other is not served at all."""
    bundle = tmp_path / "bundle.json"
    bundle.write_text(json.dumps([
        {"slug": "only--one", "name": "Only one", "description": "A double hyphen, no clash."},
        {"slug": "data-tools", "name": "Data tools", "description": "The exact name."},
        {"slug": "data--tools", "name": "Data tools too", "description": "Would clash with data-tools."},
    ]), "utf-8")
    catalog = Catalog.open(Settings(data_dir=tmp_path / "data", seed_sample=False), encoder=HashingEncoder())
    try:
        assert catalog.import_path(bundle, "b", "user:qa").ok
        async with Client(build_mcp_server(catalog, Principal.operator())) as client:
            entries, _ = await list_all(client)
            by_uri = {e["uri"]: e for e in entries}
            assert sorted(by_uri) == ["skill://user/qa/data-tools/SKILL.md", "skill://user/qa/only-one/SKILL.md"]
            assert by_uri["skill://user/qa/data-tools/SKILL.md"]["frontmatter"]["description"] == "The exact name."
            for entry in entries:
                await verify_entry(client, entry)
            await invalid_params(client, "skills/get", {"uri": "skill://user/qa/only--one/SKILL.md"})
    finally:
        catalog.close()


async def test_an_integer_default_stored_as_5_0_is_shown_as_resolve_uses_it_on_every_read(tmp_path: Path) -> None:
    """A bundle (or upstream) may write an ``integer`` parameter's default and enum as ``5.0``, which JSON
    Schema counts as the integer 5 and resolve substitutes as ``5``. get_skill (MCP and HTTP), recall's root
    and the ``skill://`` SKILL.md and template.json showed ``5.0``, so an agent copying the shown default sent
    a value the template never produces. Every read now shows ``5`` and ``[1, 5, 7]``; the stored revision
    (and its canonical hash) stays byte for byte what the source sent."""
    import httpx

    from skillsearch.core.hashing import canonical_hash
    from skillsearch.http.app import create_app
    from skillsearch.http.auth import DEMO_TOKEN, PrincipalRegistry

    bundle = tmp_path / "bundle.json"
    bundle.write_text(json.dumps([{
        "slug": "batch-window", "name": "Batch window", "description": "Run a batch job in day windows.",
        "kind": "flow_template",
        "parameters": [{"name": "days", "type": "integer", "default": 5.0, "enum": [1.0, 5.0, 7]},
                       {"name": "ratio", "type": "number", "default": 2.0}],
        "steps": [{"tool": "job.run", "args": {"days": "{days}", "ratio": "{ratio}", "text": "every {days} days"}}],
    }]), "utf-8")
    catalog = Catalog.open(Settings(data_dir=tmp_path / "data", seed_sample=False), encoder=HashingEncoder())
    try:
        assert catalog.import_path(bundle, "b", "sub:starter-pack").ok
        shown = {"name": "days", "type": "integer", "required": False, "description": "", "default": 5, "enum": [1, 5, 7]}
        ratio = {"name": "ratio", "type": "number", "required": False, "description": "", "default": 2.0, "enum": None}
        async with Client(build_mcp_server(catalog, STARTER)) as client:
            detail = ok(await client.call_tool("get_skill", {"skill_id": "batch-window"}))
            assert detail["parameters"] == [shown, ratio]
            assert type(detail["parameters"][0]["default"]) is int and type(detail["parameters"][1]["default"]) is float
            root = ok(await client.call_tool("recall_cloud_skill", {"slug": "batch-window"}))
            assert root["data"]["parameters"] == [shown, ratio]
            resolved = ok(await client.call_tool("resolve_skill", {"skill_id": "batch-window", "parameters": {}}))
            assert resolved["steps"][0]["args"] == {"days": 5, "ratio": 2.0, "text": "every 5 days"}
            assert resolved["parameters"]["days"] == detail["parameters"][0]["default"]
            [entry] = (await list_all(client))[0]
            files = await verify_entry(client, entry)
            skill_md = files[entry["uri"]].decode("utf-8")
            assert "| `days` | integer | no | `5` |  One of: 1, 5, 7. |" in skill_md and "5.0" not in skill_md
            assert "| `ratio` | number | no | `2.0` |" in skill_md
            template = json.loads(files[entry["uri"].replace("SKILL.md", "assets/template.json")])
            assert template["parameters"] == [shown, ratio]
        app = create_app(catalog, principals=PrincipalRegistry(tmp_path / "principals.toml", demo=True))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
            got = await http.get(f"/v1/skills/{detail['skill_id']}", headers={"Authorization": f"Bearer {DEMO_TOKEN}"})
            assert got.status_code == 200 and got.json()["parameters"] == [shown, ratio], got.text
            assert '"default":5,' in got.text and '"default":5.0' not in got.text
        stored = catalog.store.revision(detail["revision_id"])
        assert stored is not None and stored.parameters[0].default == 5.0 and type(stored.parameters[0].default) is float
        assert stored.canonical_hash == canonical_hash(stored, []) == detail["canonical_hash"]  # it has no resources
    finally:
        catalog.close()
