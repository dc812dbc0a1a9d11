"""recall_cloud_skill through real in-memory MCP sessions: the three levels, the envelope, revision
pinning, truncation and every error code of its reference."""

from __future__ import annotations

import base64
import hashlib
import shutil
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_support import NO_SCOPE, STARTER, error, ok

from skillsearch.catalog.sample import sample_catalog_dir
from skillsearch.core.domain import Principal
from skillsearch.core.settings import Settings
from skillsearch.mcp.server import ServerState, build_mcp_server
from skillsearch.retrieval.encoder import Encoder
from skillsearch.service import Catalog
from skillsearch.usecases.recall import DEFAULT_MAX_CONTENT_BYTES

pytestmark = pytest.mark.anyio

RECALL = "recall_cloud_skill"
PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452") + bytes(range(256)) * 4


@dataclass(frozen=True)
class Revised:
    """A copy of the sample catalog where tls-certificate-renewal has a second revision (with a binary
    and a large text resource) and linux-disk-full is archived."""

    catalog: Catalog
    skill_id: str
    old_revision: str
    new_revision: str
    big: bytes
    archived_id: str


@pytest.fixture(scope="module")
def revised(sample_dir: Path, tmp_path_factory: pytest.TempPathFactory, encoder: Encoder) -> Iterator[Revised]:
    root = tmp_path_factory.mktemp("revised")
    shutil.copytree(sample_dir, root / "data")
    catalog = Catalog.open(Settings(data_dir=root / "data"), encoder=encoder)
    (skill,) = catalog.store.skills_by_slug("tls-certificate-renewal")
    folder = root / "tls-certificate-renewal"
    shutil.copytree(sample_catalog_dir() / "ops" / "tls-certificate-renewal", folder)
    skill_md = folder / "SKILL.md"
    skill_md.write_text(skill_md.read_text(encoding="utf-8") + "\n## 5. Revision two\nAlso check OCSP stapling.\n",
                        encoding="utf-8")
    (folder / "assets").mkdir()
    (folder / "assets" / "logo.png").write_bytes(PNG)
    big = "".join(f"ligne {i}: certificats é漢字 renouvelés\n" for i in range(12000)).encode("utf-8")
    (folder / "references").mkdir()
    (folder / "references" / "big.md").write_bytes(big)
    report = catalog.import_path(folder, skill.source, skill.grant)
    assert report.updated == [skill.skill_id], report.to_dict()
    now = catalog.store.skill(skill.skill_id)
    assert now is not None and now.current_revision_id != skill.current_revision_id
    (archived,) = catalog.store.skills_by_slug("linux-disk-full")
    catalog.store.archive(archived.skill_id)
    yield Revised(catalog, skill.skill_id, skill.current_revision_id, now.current_revision_id, big, archived.skill_id)
    catalog.close()


@pytest.fixture
async def client(revised: Revised) -> AsyncIterator[Client]:
    async with Client(build(revised.catalog, Principal.operator())) as c:
        yield c


def build(catalog: Catalog, principal: Principal, **kwargs: int) -> MCPServer[ServerState]:
    return build_mcp_server(catalog, principal, **kwargs)  # type: ignore[arg-type]


def envelope(answer: dict[str, object], kind: str) -> dict[str, object]:
    assert answer["object"] == "cloud_skill" and answer["schema_version"] == "xmemo.cloud_skill.v1"
    assert answer["kind"] == kind
    return answer


# -- Level 0 --------------------------------------------------------------------------------------


async def test_level0_descriptors_come_from_the_same_search(client: Client) -> None:
    answer = envelope(ok(await client.call_tool(RECALL, {"query": "renew an expiring TLS certificate"})), "descriptor")
    searched = ok(await client.call_tool("search_skills", {"query": "renew an expiring TLS certificate"}))
    descriptors = answer["data"]["descriptors"]  # type: ignore[index]
    assert [d["skill_id"] for d in descriptors] == [h["skill_id"] for h in searched["hits"]]
    assert descriptors[0]["slug"] == "tls-certificate-renewal"
    assert set(descriptors[0]) == {"skill_id", "slug", "name", "description", "kind", "tags", "score", "confidence",
                                   "skill_uri"}
    assert [d["confidence"] for d in descriptors] == [h["confidence"] for h in searched["hits"]]
    assert descriptors[0]["skill_uri"].endswith(f"/{descriptors[0]['slug']}/SKILL.md")
    assert answer["render_status"] == "complete" and answer["warnings"] == []


async def test_level0_without_a_good_match_is_empty_and_says_so(client: Client) -> None:
    answer = envelope(ok(await client.call_tool(RECALL, {"query": "zqxjv wplmk frobnicate"})), "descriptor")
    assert answer["render_status"] == "empty" and answer["data"]["no_match"] is True  # type: ignore[index]
    assert answer["data"]["descriptors"] == [] and answer["warnings"]  # type: ignore[index]
    # The warning says what to do next, as search_skills' no_match_message does for the same reason.
    searched = ok(await client.call_tool("search_skills", {"query": "zqxjv wplmk frobnicate"}))
    assert searched["no_match_message"] and searched["no_match_message"] in answer["warnings"][0]  # type: ignore[index]


async def test_level0_for_another_trade_is_empty_with_the_reason_or_a_weak_list(client: Client) -> None:
    answer = envelope(ok(await client.call_tool(RECALL, {"query": "recipe for a gluten-free chocolate cake"})),
                      "descriptor")
    # The shipped refusal threshold is conservative (docs/rules.md): no_match with its reason, or a weak list.
    if answer["data"]["no_match"]:  # type: ignore[index]
        assert answer["data"]["no_match_reason"] in ("low_confidence", "no_good_match")  # type: ignore[index]
    else:
        assert answer["data"]["descriptors"]  # type: ignore[index]


# -- Level 1 --------------------------------------------------------------------------------------


async def test_level1_root_manifest_of_the_current_revision(client: Client, revised: Revised) -> None:
    by_id = envelope(ok(await client.call_tool(RECALL, {"skill_id": revised.skill_id})), "root")
    by_slug = envelope(ok(await client.call_tool(RECALL, {"slug": "tls-certificate-renewal"})), "root")
    assert by_id == by_slug
    root = by_id["data"]
    assert root["revision"]["revision_id"] == revised.new_revision and root["revision"]["is_current"]  # type: ignore[index]
    assert "OCSP stapling" in root["instructions"]  # type: ignore[index]
    assert root["canonical_hash"] == revised.catalog.store.revision(revised.new_revision).canonical_hash  # type: ignore[index, union-attr]
    paths = {r["path"]: r for r in root["resources"]}  # type: ignore[index]
    assert set(paths) == {"assets/logo.png", "references/big.md", "scripts/check_cert_expiry.py"}
    assert paths["assets/logo.png"]["size"] == len(PNG)
    assert by_id["warnings"] == [] and by_id["render_status"] == "complete"


async def test_level1_flow_template_root_has_steps_and_parameters(client: Client) -> None:
    root = envelope(ok(await client.call_tool(RECALL, {"slug": "backfill-table-partitions"})), "root")["data"]
    assert root["kind"] == "flow_template" and root["steps"][0]["tool"] == "scheduler.pause"  # type: ignore[index]
    assert "end_date" in {p["name"] for p in root["parameters"]}  # type: ignore[index]


async def test_level1_pinned_older_revision_stays_readable_and_warns(client: Client, revised: Revised) -> None:
    answer = envelope(ok(await client.call_tool(
        RECALL, {"skill_id": revised.skill_id, "revision_id": revised.old_revision})), "root")
    root = answer["data"]
    assert root["revision"]["revision_id"] == revised.old_revision and not root["revision"]["is_current"]  # type: ignore[index]
    assert root["current_revision_id"] == revised.new_revision  # type: ignore[index]
    assert "OCSP stapling" not in root["instructions"]  # type: ignore[index]
    assert [r["path"] for r in root["resources"]] == ["scripts/check_cert_expiry.py"]  # type: ignore[index]
    assert any("not the current revision" in w and revised.new_revision in w for w in answer["warnings"])  # type: ignore[union-attr]


async def test_query_beside_an_identity_is_ignored_with_a_warning(client: Client, revised: Revised) -> None:
    answer = envelope(ok(await client.call_tool(RECALL, {"skill_id": revised.skill_id, "query": "x"})), "root")
    assert answer["warnings"] == ["query is ignored when skill_id or slug is given"]


# -- Level 2 --------------------------------------------------------------------------------------


async def test_level2_text_resource_by_path_and_by_id(client: Client, revised: Revised) -> None:
    args = {"slug": "tls-certificate-renewal", "revision_id": revised.new_revision,
            "resource": "scripts/check_cert_expiry.py"}
    by_path = envelope(ok(await client.call_tool(RECALL, args)), "resource")
    data = by_path["data"]
    stored = revised.catalog.store.resource(revised.new_revision, "scripts/check_cert_expiry.py")
    assert stored is not None
    assert data["encoding"] == "text" and data["content"] == stored.content.decode("utf-8")  # type: ignore[index]
    assert data["sha256"] == hashlib.sha256(stored.content).hexdigest() and not data["truncated"]  # type: ignore[index]
    by_id = envelope(ok(await client.call_tool(RECALL, args | {"resource": stored.resource_id})), "resource")
    assert by_id == by_path and by_path["render_status"] == "complete"


async def test_level2_binary_resource_is_base64(client: Client, revised: Revised) -> None:
    data = envelope(ok(await client.call_tool(RECALL, {
        "skill_id": revised.skill_id, "revision_id": revised.new_revision, "resource": "assets/logo.png"})), "resource")["data"]
    assert data["encoding"] == "base64" and base64.b64decode(data["content"]) == PNG  # type: ignore[index]
    assert data["media_type"] == "image/png" and data["size"] == len(PNG)  # type: ignore[index]


async def test_level2_large_text_is_truncated_at_the_cap_with_a_warning(client: Client, revised: Revised) -> None:
    answer = envelope(ok(await client.call_tool(RECALL, {
        "skill_id": revised.skill_id, "revision_id": revised.new_revision, "resource": "references/big.md"})), "resource")
    data = answer["data"]
    assert len(revised.big) > 256 * 1024
    assert answer["render_status"] == "truncated" and data["truncated"] is True  # type: ignore[index]
    assert data["returned_bytes"] <= 256 * 1024 < data["size"] == len(revised.big)  # type: ignore[index, operator]
    assert revised.big.startswith(data["content"].encode("utf-8"))  # type: ignore[index]
    assert data["returned_bytes"] == len(data["content"].encode("utf-8"))  # type: ignore[index]
    assert data["sha256"] == hashlib.sha256(revised.big).hexdigest()  # type: ignore[index]
    assert any("truncated" in w for w in answer["warnings"])  # type: ignore[union-attr]


async def test_a_smaller_cap_truncates_binary_and_instructions_too(revised: Revised) -> None:
    async with Client(build(revised.catalog, Principal.operator(), max_content_bytes=100)) as small:
        binary = envelope(ok(await small.call_tool(RECALL, {
            "skill_id": revised.skill_id, "revision_id": revised.new_revision, "resource": "assets/logo.png"})), "resource")
        root = envelope(ok(await small.call_tool(RECALL, {"skill_id": revised.skill_id})), "root")
    assert binary["render_status"] == "truncated" and base64.b64decode(binary["data"]["content"]) == PNG[:100]  # type: ignore[index]
    assert root["render_status"] == "truncated" and root["data"]["instructions_truncated"] is True  # type: ignore[index]
    assert len(root["data"]["instructions"].encode()) <= 100 and root["warnings"]  # type: ignore[index]


async def _read_resource_whole(client: Client, revised: Revised, path: str) -> tuple[bytes, list[dict[str, Any]]]:
    """Follow next_offset from 0 to the end; the parts' bytes joined, and each part's data."""
    pin = {"skill_id": revised.skill_id, "revision_id": revised.new_revision, "resource": path}
    joined, parts, offset = b"", [], 0
    while True:
        answer = envelope(ok(await client.call_tool(RECALL, pin | {"offset": offset})), "resource")
        data: dict[str, Any] = answer["data"]  # type: ignore[assignment]
        parts.append(data)
        assert data["offset"] == offset == len(joined)
        chunk = data["content"].encode("utf-8") if data["encoding"] == "text" else base64.b64decode(data["content"])
        assert len(chunk) == data["returned_bytes"] > 0
        joined += chunk
        if data["next_offset"] is None:
            return joined, parts
        assert answer["render_status"] == "truncated" and data["truncated"] is True
        assert data["next_offset"] == len(joined)
        assert any(f"offset={data['next_offset']}" in w and revised.new_revision in w
                   for w in answer["warnings"])  # type: ignore[union-attr]
        offset = data["next_offset"]


async def test_level2_a_resource_past_the_cap_is_read_whole_by_following_next_offset(
    client: Client, revised: Revised
) -> None:
    """A memory:read caller has no other read of a resource: past the 256 KiB cap it comes a part at a time."""
    joined, parts = await _read_resource_whole(client, revised, "references/big.md")
    assert joined == revised.big and len(parts) >= 2
    assert all(0 < p["returned_bytes"] <= DEFAULT_MAX_CONTENT_BYTES for p in parts)
    assert {p["size"] for p in parts} == {len(revised.big)}
    assert {p["sha256"] for p in parts} == {hashlib.sha256(revised.big).hexdigest()}


async def test_level2_parts_under_a_tiny_cap_keep_characters_whole_and_binary_bytes_exact(revised: Revised) -> None:
    """A cap of 3 bytes: a text part is at least one character (4-byte ones included) and never half of one;
    a binary resource's base64 parts decode to its bytes."""
    async with Client(build(revised.catalog, Principal.operator(), max_content_bytes=3)) as tiny:
        pin = {"skill_id": revised.skill_id, "revision_id": revised.new_revision}
        binary, _ = await _read_resource_whole(tiny, revised, "assets/logo.png")
        text = revised.big[:40]
        read, offset = b"", 0
        while len(read) < len(text):
            data = envelope(ok(await tiny.call_tool(RECALL, pin | {"resource": "references/big.md", "offset": offset})),
                            "resource")["data"]
            read += data["content"].encode("utf-8")  # type: ignore[index]
            offset = data["next_offset"]  # type: ignore[index]
    assert binary == PNG
    assert read.startswith(text) and read.decode("utf-8")


async def test_level2_offset_inside_a_character_or_past_the_end_is_a_validation_error(
    client: Client, revised: Revised
) -> None:
    pin = {"skill_id": revised.skill_id, "revision_id": revised.new_revision, "resource": "references/big.md"}
    inside = revised.big.index("é".encode()) + 1
    split = error(await client.call_tool(RECALL, pin | {"offset": inside}))
    past = error(await client.call_tool(RECALL, pin | {"offset": len(revised.big) + 1}))
    end = envelope(ok(await client.call_tool(RECALL, pin | {"offset": len(revised.big)})), "resource")["data"]
    assert split["code"] == past["code"] == "VALIDATION_ERROR"
    assert "inside a UTF-8 character" in split["message"] and "past the end" in past["message"]
    assert end["content"] == "" and end["next_offset"] is None and end["returned_bytes"] == 0  # type: ignore[index]


# -- Level 1: instructions past the cap, read on -------------------------------------------------------------


@pytest.fixture(scope="module")
def long_skill(sample_dir: Path, tmp_path_factory: pytest.TempPathFactory, encoder: Encoder) -> Iterator[Catalog]:
    """A copy of the sample catalog with one skill whose SKILL.md is about 600 KB: lines of accented, CJK,
    combining and emoji-ZWJ text (2 to 4 UTF-8 bytes a character), and one 100,000-character line with no
    space, longer than half the cap, so a part cannot always end at a line end or between words."""
    root = tmp_path_factory.mktemp("long")
    shutil.copytree(sample_dir, root / "data")
    catalog = Catalog.open(Settings(data_dir=root / "data"), encoder=encoder)
    (donor,) = catalog.store.skills_by_slug("tls-certificate-renewal")
    lines = [f"Étape {i}: renouveler 漢字の証明書 e\u0301 \U0001f469\u200d\U0001f4bb " + "·" * (i % 97) for i in range(5000)]
    lines.insert(2500, "ж\u0301" * 50_000)
    folder = root / "long-runbook"
    folder.mkdir()
    (folder / "SKILL.md").write_text("---\nname: long-runbook\ndescription: A very long certificate runbook.\n---\n"
                                     + "\n".join(lines) + "\n", encoding="utf-8")
    assert catalog.import_path(folder, "long", donor.grant).created
    yield catalog
    catalog.close()


async def test_level1_instructions_past_the_cap_are_read_whole_by_following_the_answer(long_skill: Catalog) -> None:
    (skill,) = long_skill.store.skills_by_slug("long-runbook")
    revision = long_skill.store.revision(skill.current_revision_id)
    assert revision is not None
    whole = revision.instructions
    assert len(whole.encode("utf-8")) > 2 * DEFAULT_MAX_CONTENT_BYTES
    async with Client(build(long_skill, Principal.operator())) as c:
        answer = envelope(ok(await c.call_tool(RECALL, {"slug": "long-runbook"})), "root")
        pinned = answer["data"]["revision"]["revision_id"]  # type: ignore[index]
        parts: list[str] = []
        while True:
            data: dict[str, Any] = answer["data"]  # type: ignore[assignment]
            part = data["instructions"]
            parts.append(part)
            assert data["instructions_offset"] == sum(map(len, parts[:-1])) and data["instructions_chars"] == len(whole)
            assert data["instructions_truncated"] is True and 0 < len(part.encode("utf-8")) <= DEFAULT_MAX_CONTENT_BYTES
            if data["next_offset"] is None:
                assert not any("offset=" in w for w in answer["warnings"])  # type: ignore[union-attr]
                break
            assert answer["render_status"] == "truncated"
            assert data["next_offset"] == data["instructions_offset"] + len(part)
            # The warning says how to read on: this skill, this revision, offset = next_offset.
            assert any(f"revision_id={pinned}" in w and f"offset={data['next_offset']}" in w
                       for w in answer["warnings"])  # type: ignore[union-attr]
            answer = envelope(ok(await c.call_tool(RECALL, {
                "skill_id": skill.skill_id, "revision_id": pinned, "offset": data["next_offset"]})), "root")
    assert "".join(parts) == whole and len(parts) >= 3


async def test_level1_offset_needs_a_pinned_revision_and_a_place_in_the_instructions(long_skill: Catalog) -> None:
    (skill,) = long_skill.store.skills_by_slug("long-runbook")
    chars = len(long_skill.store.revision(skill.current_revision_id).instructions)  # type: ignore[union-attr]
    pin = {"skill_id": skill.skill_id, "revision_id": skill.current_revision_id}
    async with Client(build(long_skill, Principal.operator())) as c:
        unpinned = error(await c.call_tool(RECALL, {"skill_id": skill.skill_id, "offset": 10}))
        past = error(await c.call_tool(RECALL, pin | {"offset": chars + 1}))
        with_resource = error(await c.call_tool(RECALL, pin | {"offset": 10, "resource": "SKILL.md"}))
        level0 = error(await c.call_tool(RECALL, {"query": "certificate runbook", "offset": 10}))
        end = envelope(ok(await c.call_tool(RECALL, pin | {"offset": chars})), "root")
    assert unpinned["code"] == "REVISION_PINNING_VIOLATION"
    assert past["code"] == "VALIDATION_ERROR" and "past the end" in past["message"]
    assert with_resource["code"] == "RESOURCE_NOT_FOUND" and level0["code"] == "VALIDATION_ERROR"
    assert end["data"]["instructions"] == "" and end["data"]["next_offset"] is None  # type: ignore[index]


async def test_level2_of_an_older_revision_reads_that_revisions_bytes(client: Client, revised: Revised) -> None:
    answer = envelope(ok(await client.call_tool(RECALL, {
        "skill_id": revised.skill_id, "revision_id": revised.old_revision, "resource": "scripts/check_cert_expiry.py"})),
        "resource")
    assert answer["data"]["revision_id"] == revised.old_revision  # type: ignore[index]
    assert any("not the current revision" in w for w in answer["warnings"])  # type: ignore[union-attr]
    missing = error(await client.call_tool(RECALL, {
        "skill_id": revised.skill_id, "revision_id": revised.old_revision, "resource": "assets/logo.png"}))
    assert missing["code"] == "RESOURCE_NOT_FOUND"


# -- errors ---------------------------------------------------------------------------------------


async def test_resource_without_revision_is_a_pinning_violation(client: Client, revised: Revised) -> None:
    for identity in ({"skill_id": revised.skill_id}, {"slug": "tls-certificate-renewal"}):
        problem = error(await client.call_tool(RECALL, identity | {"resource": "scripts/check_cert_expiry.py"}))
        assert problem["code"] == "REVISION_PINNING_VIOLATION" and "revision_id" in problem["message"]


async def test_revision_of_another_skill_or_unknown_is_revision_not_found(client: Client, revised: Revised) -> None:
    (other,) = revised.catalog.store.skills_by_slug("postgres-failover")
    for revision_id in (other.current_revision_id, "rev_00000000000000000000"):
        for extra in ({}, {"resource": "scripts/check_cert_expiry.py"}):
            problem = error(await client.call_tool(
                RECALL, {"skill_id": revised.skill_id, "revision_id": revision_id} | extra))
            assert problem["code"] == "REVISION_NOT_FOUND"
            # What to do next: recall without revision_id, or pin the current revision it names.
            current = problem["details"]["current_revision_id"]
            assert current == revised.new_revision and current in problem["message"]
            assert "without revision_id" in problem["message"]


async def test_unknown_resource_is_resource_not_found(client: Client, revised: Revised) -> None:
    problem = error(await client.call_tool(RECALL, {
        "skill_id": revised.skill_id, "revision_id": revised.new_revision, "resource": "scripts/nope.py"}))
    assert problem["code"] == "RESOURCE_NOT_FOUND" and problem["details"]["resource"] == "scripts/nope.py"


async def test_unknown_and_archived_skills(client: Client, revised: Revised) -> None:
    for args in ({"skill_id": "sk_nothing"}, {"slug": "no-such-skill"}):
        problem = error(await client.call_tool(RECALL, args))
        assert problem["code"] == "SKILL_NOT_FOUND"
        assert "find the skill with query (Level 0)" in problem["message"]  # what to do next
    assert error(await client.call_tool(RECALL, {"skill_id": revised.archived_id}))["code"] == "SKILL_ARCHIVED"
    assert error(await client.call_tool(RECALL, {"slug": "linux-disk-full"}))["code"] == "SKILL_ARCHIVED"


async def test_without_memory_read_scope_every_level_is_access_denied(revised: Revised) -> None:
    async with Client(build(revised.catalog, NO_SCOPE)) as c:
        for args in ({"query": "git bisect"}, {"slug": "git-bisect-regressions"}, {"skill_id": "sk_x"}):
            problem = error(await c.call_tool(RECALL, args))
            assert problem["code"] == "ACCESS_DENIED" and problem["details"] == {"required_scope": "memory:read"}
        # The four catalog tools do not need the scope.
        assert ok(await c.call_tool("search_skills", {"query": "git bisect"}))["hits"]


async def test_skill_id_outside_the_grants_answers_as_a_missing_one(revised: Revised) -> None:
    """An id outside the caller's grants (current, pinned, archived) gets the very answer of a missing id,
    message included, so recall never confirms what another grant contains (issue 13)."""
    async with Client(build(revised.catalog, STARTER)) as c:
        for args in ({"skill_id": revised.skill_id},
                     {"skill_id": revised.skill_id, "revision_id": revised.new_revision, "resource": "assets/logo.png"},
                     {"skill_id": revised.archived_id}):
            problem = error(await c.call_tool(RECALL, args))
            missing = error(await c.call_tool(RECALL, {**args, "skill_id": "sk_00000000000000000000"}))
            assert problem["code"] == missing["code"] == "SKILL_NOT_FOUND"
            assert problem["message"].replace(args["skill_id"], "X") == missing["message"].replace(
                "sk_00000000000000000000", "X")
        assert error(await c.call_tool(RECALL, {"slug": "tls-certificate-renewal"}))["code"] == "SKILL_NOT_FOUND"


async def test_revoked_subscription_answers_as_missing(fresh_sample: Catalog) -> None:
    (skill,) = fresh_sample.store.skills_by_slug("git-bisect-regressions")
    fresh_sample.store.set_revoked("starter-pack", True)
    async with Client(build(fresh_sample, STARTER)) as c:
        assert error(await c.call_tool(RECALL, {"skill_id": skill.skill_id}))["code"] == "SKILL_NOT_FOUND"
        assert error(await c.call_tool(RECALL, {"slug": skill.slug}))["code"] == "SKILL_NOT_FOUND"
        level0 = ok(await c.call_tool(RECALL, {"query": "git bisect regression"}))
    assert level0["data"]["descriptors"] == []


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"query": "   "},
        {"query": "q" * 1001},
        {"slug": "Not A Slug"},
        {"skill_id": "sk x/../y"},
        {"revision_id": "rev_1"},
        {"resource": "scripts/a.py"},
        {"skill_id": "sk_1", "revision_id": "bad id"},
        {"skill_id": "sk_1", "revision_id": "rev_1", "resource": "a\x00b"},
    ],
)
async def test_bad_identifiers_and_conflicts_are_validation_errors(client: Client, args: dict[str, str]) -> None:
    assert error(await client.call_tool(RECALL, args))["code"] == "VALIDATION_ERROR"


async def test_skill_id_and_slug_of_different_skills_conflict(client: Client, revised: Revised) -> None:
    problem = error(await client.call_tool(RECALL, {"skill_id": revised.skill_id, "slug": "postgres-failover"}))
    assert problem["code"] == "VALIDATION_ERROR" and "different skills" in problem["message"]
    # The one shape of a VALIDATION_ERROR: the field at fault, never the values sent back.
    assert problem["details"] == {"problems": [{"field": "slug", "message": "names another skill than skill_id"}]}
