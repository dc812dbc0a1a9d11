"""The Skills extension over the 883 real Agent Skills of ``../shared/data/skills-catalog``: every listed skill's
files verify (digest and size of the bytes read back) and its listing front matter equals the front matter of
the SKILL.md read back; authored SKILL.md files come back byte for byte (only a ``name`` that is not the folder
name is set to it).

The catalog is imported once per module with the deterministic hashing encoder: nothing here searches, and
the extension never touches vectors, so embedding 883 documents with the real model would only cost minutes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from conftest import SHARED
from mcp import Client
from skills_support import list_all, verify_entry

from skillsearch.catalog.frontmatter import split_front_matter
from skillsearch.catalog.importer import parse_path
from skillsearch.core.domain import Principal
from skillsearch.core.settings import Settings
from skillsearch.core.skill_uri import NAME_PATTERN, skill_name
from skillsearch.mcp.server import build_mcp_server
from skillsearch.retrieval.hashing_encoder import HashingEncoder
from skillsearch.service import Catalog, ImportReport

SKILLS = SHARED / "data" / "skills-catalog"
GRANT = "team:skills-catalog"


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Catalog, ImportReport]]:
    catalog = Catalog.open(Settings(data_dir=tmp_path_factory.mktemp("real-skills"), seed_sample=False),
                           encoder=HashingEncoder())
    report = catalog.import_path(SKILLS, "skills-catalog", GRANT)
    yield catalog, report
    catalog.close()


@pytest.fixture
async def client(real: tuple[Catalog, ImportReport]) -> AsyncIterator[Client]:
    async with Client(build_mcp_server(real[0], Principal.operator())) as session:
        yield session


def test_the_real_catalog_imports(real: tuple[Catalog, ImportReport]) -> None:
    catalog, report = real
    folders = [p for p in SKILLS.iterdir() if (p / "SKILL.md").is_file()]
    assert len(folders) == 883
    # One skill's description is over the catalog's 1024-character limit and is refused with that reason.
    assert [p.reason for p in report.problems] == ["description: String should have at most 1024 characters"]
    assert len(report.created) == catalog.store.count("active") == 882


@pytest.mark.anyio
async def test_every_real_skill_lists_once_and_verifies_file_by_file(
    client: Client, real: tuple[Catalog, ImportReport]
) -> None:
    entries, pages = await list_all(client)
    assert len(entries) == real[0].store.count("active") and pages > 1
    assert len({e["uri"] for e in entries}) == len(entries)
    parsed = parse_path(SKILLS, "skills-catalog", GRANT)
    folder_of = {skill_name(c.slug): Path(parsed.files[c.skill_id]).parent for c in parsed.skills}
    verbatim = 0
    for entry in entries:
        files = await verify_entry(client, entry)
        slug = entry["uri"].split("/")[-2]  # the skill name: the folder's slug, hyphen runs made one
        assert NAME_PATTERN.match(slug)
        folder = folder_of[slug]
        authored = (folder / "SKILL.md").read_bytes()
        served = files[entry["uri"]]
        authored_front, authored_body = split_front_matter(authored.decode("utf-8"))
        if authored_front.get("name") == slug:
            assert served == authored
            verbatim += 1
        else:  # only the name line differs; every other byte is as authored
            assert entry["frontmatter"] == {**authored_front, "name": slug}
            assert split_front_matter(served.decode("utf-8"))[1] == authored_body
            assert [line for line in served.splitlines() if not line.startswith(b"name:")] == \
                   [line for line in authored.splitlines() if not line.startswith(b"name:")]
        on_disk = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                         if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)
                         and "__pycache__" not in p.parts)
        base = entry["uri"].removesuffix("SKILL.md")
        assert sorted(r["uri"].removeprefix(base) for r in entry["resources"]) == on_disk
        for rel in on_disk:
            if rel != "SKILL.md":
                assert files[base + rel] == (folder / rel).read_bytes()
    assert verbatim > len(entries) // 2
