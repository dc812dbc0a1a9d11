"""Hostile skill folders: symbolic links, hard links, special files, deep and wide trees, big files.

Each test states the promise it checks. The imports run in real processes (the CLI) or through the real
``Catalog`` on real files; what is stored is checked in the SQLite files themselves, so a leaked byte
cannot hide behind an API that does not show it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile_support import SECRET, cli, peak_rss_mb_of, stored_bytes, write_skill

from skillsearch.core.domain import Principal
from skillsearch.core.settings import Settings
from skillsearch.retrieval.encoder import Encoder
from skillsearch.service import Catalog


@pytest.fixture
def catalog(tmp_path: Path, fake_encoder: Encoder) -> Iterator[Catalog]:
    c = Catalog.open(Settings(data_dir=tmp_path / "data", seed_sample=False, encoder="hashing"), encoder=fake_encoder)
    yield c
    c.close()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the imported one, holding a secret that must never reach the catalog."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret.txt").write_text(f"password={SECRET}\n", encoding="utf-8")
    (d / "SKILL.md").write_text(f"---\nname: stolen\ndescription: {SECRET}\n---\n{SECRET}\n", encoding="utf-8")
    return d


def _paths(catalog: Catalog, slug: str, grant: str = "team:t") -> list[str]:
    skill = catalog.store.skill_by_slug(grant, slug)
    assert skill is not None, f"{slug} was not stored"
    return [r.path for r in catalog.store.resources(skill.current_revision_id)]


def test_symlinks_to_files_dirs_and_proc_are_never_followed(catalog: Catalog, tmp_path: Path, outside: Path) -> None:
    """A symlinked resource (to a file outside, to /proc/self/environ, to a folder outside, a dangling one,
    a loop) is skipped with a reason; the skill is stored with its real files; no byte from outside is."""
    skill = write_skill(tmp_path / "in" / "linky", "linky")
    (skill / "scripts").mkdir()
    (skill / "scripts" / "real.sh").write_text("echo real\n", encoding="utf-8")
    (skill / "scripts" / "x.sh").symlink_to(outside / "secret.txt")
    (skill / "references").mkdir()
    (skill / "references" / "env.txt").symlink_to("/proc/self/environ")
    (skill / "docs").symlink_to(outside, target_is_directory=True)
    (skill / "dangling.txt").symlink_to(tmp_path / "nope")
    (skill / "loop").symlink_to(skill / "loop")
    (skill / "up").symlink_to(skill, target_is_directory=True)
    os.environ["SKILLSEARCH_TEST_LEAK"] = SECRET  # what /proc/self/environ would carry
    try:
        report = catalog.import_path(tmp_path / "in", "local", "team:t")
    finally:
        del os.environ["SKILLSEARCH_TEST_LEAK"]
    assert report.created and _paths(catalog, "linky") == ["scripts/real.sh"]
    skipped = {Path(p.file).name: p.reason for p in report.problems}
    assert set(skipped) == {"x.sh", "env.txt", "docs", "dangling.txt", "loop", "up"}
    assert all("symbolic link" in r for r in skipped.values())
    assert SECRET.encode() not in stored_bytes(catalog.data_dir)


def test_symlinked_skill_folder_and_skill_md_are_refused(catalog: Catalog, tmp_path: Path, outside: Path) -> None:
    """A skill folder that is a symlink, or whose SKILL.md is one, is not imported; the valid skill beside
    them is."""
    root = tmp_path / "in"
    write_skill(root / "good", "good")
    (root / "evil-dir").symlink_to(outside, target_is_directory=True)
    (root / "evil-md").mkdir()
    (root / "evil-md" / "SKILL.md").symlink_to(outside / "SKILL.md")
    report = catalog.import_path(root, "local", "team:t")
    assert [catalog.store.skill(s).slug for s in report.created] == ["good"]  # type: ignore[union-attr]
    reasons = " | ".join(f"{p.file}: {p.reason}" for p in report.problems)
    assert "evil-dir: skipped: symbolic link" in reasons and "SKILL.md is refused: symbolic link" in reasons
    assert SECRET.encode() not in stored_bytes(catalog.data_dir)


def test_hard_links_fifos_and_undecodable_names_are_skipped(catalog: Catalog, tmp_path: Path, outside: Path) -> None:
    """A hard link (its other name may be outside), a FIFO (would block a reader) and a file name that is
    not UTF-8 are skipped with reasons; the import neither hangs nor leaks."""
    skill = write_skill(tmp_path / "in" / "odd", "odd")
    os.link(outside / "secret.txt", skill / "hard.txt")
    os.mkfifo(skill / "pipe")
    (skill / "ok.md").write_text("fine\n", encoding="utf-8")
    with open(os.fsencode(skill) + b"/bad-\xff.txt", "wb") as f:
        f.write(b"x")
    report = catalog.import_path(tmp_path / "in", "local", "team:t")
    assert _paths(catalog, "odd") == ["ok.md"]
    reasons = {Path(p.file).name: p.reason for p in report.problems}
    assert "hard link" in reasons["hard.txt"] and "not a regular file" in reasons["pipe"]
    assert "not valid UTF-8" in reasons["bad-\\udcff.txt"]
    assert SECRET.encode() not in stored_bytes(catalog.data_dir)


@pytest.fixture
def deep_chain(tmp_path: Path) -> Iterator[Path]:
    """A skill folder holding 1,100 nested folders, removed again without recursion (shutil.rmtree of 3.11,
    and so pytest's own clean-up of old tmp folders, recurses once per level and would overflow)."""
    deep = write_skill(tmp_path / "in" / "deep", "deep")
    try:
        fd = os.open(deep, os.O_RDONLY)
        try:
            for _ in range(1100):  # relative to a descriptor: the full path would pass PATH_MAX
                os.mkdir("d", dir_fd=fd)
                nxt = os.open("d", os.O_RDONLY, dir_fd=fd)
                os.close(fd)
                fd = nxt
        finally:
            os.close(fd)
        yield deep
    finally:
        subprocess.run(["rm", "-rf", str(deep)], check=True)


def test_deep_and_wide_folders_refuse_only_their_skill(
    catalog: Catalog, tmp_path: Path, deep_chain: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1,100 nested folders (once a RecursionError that aborted the import) and a folder of too many files
    refuse only their own skill, with the limit named; the valid skill beside them is stored."""
    root = tmp_path / "in"
    write_skill(root / "fine", "fine")
    wide = write_skill(root / "wide", "wide")
    for i in range(60):
        (wide / f"f{i}.txt").write_text("x", encoding="utf-8")
    monkeypatch.setenv("SKILLSEARCH_MAX_WALK_ENTRIES", "50")
    report = catalog.import_path(root, "local", "team:t")
    assert [catalog.store.skill(s).slug for s in report.created] == ["fine"]  # type: ignore[union-attr]
    reasons = {Path(p.file).parent.name: p.reason for p in report.problems}
    assert "deeper than 16 levels" in reasons["deep"]
    assert "more than 50 entries" in reasons["wide"]


def test_size_limits_of_skill_md_resources_and_count(tmp_path: Path) -> None:
    """SKILL.md over its limit, a resource over its limit and too many resources each refuse their skill
    (the default SKILL.md limit is 1 MiB; a 3 MiB one is refused) in a real CLI process whose --json
    report names the limits; the valid skill is stored."""
    root = tmp_path / "in"
    write_skill(root / "fine", "fine")
    write_skill(root / "huge-md", "huge-md", body="word " * (600 * 1024))
    big = write_skill(root / "big-res", "big-res")
    (big / "blob.bin").write_bytes(b"\0" * 6 * 1024 * 1024)
    many = write_skill(root / "many", "many")
    for i in range(12):
        (many / f"r{i}.txt").write_text("x", encoding="utf-8")
    code, payload, _ = cli(tmp_path / "data", "import", str(root), "--source", "s", "--grant", "team:t", "--json",
                           env={"SKILLSEARCH_MAX_RESOURCES": "10"})
    assert code == 1 and payload["created"] == 1
    reasons = {Path(p["file"]).parent.name: p["reason"] for p in payload["problems"]}
    assert "SKILL.md is 3072065 bytes" in reasons["huge-md"] and "over the limit of 1048576" in reasons["huge-md"]
    assert "resource blob.bin is 6291456 bytes, over the limit of 5242880" in reasons["big-res"]
    assert "more than 10 resources" in reasons["many"]


@pytest.mark.skipif(sys.platform != "linux", reason="RUSAGE_CHILDREN peak RSS is in KiB on Linux")
def test_peak_rss_of_a_hostile_folder_import_stays_under_512_mb(tmp_path: Path) -> None:
    """An import of a folder built to exhaust memory (an alias bomb, a 50 MB SKILL.md, a 100 MB resource,
    a /proc link) stays under 512 MB peak RSS and still stores the valid skill."""
    root = tmp_path / "in"
    write_skill(root / "fine", "fine")
    write_skill(root / "bomb", "bomb", front=_alias_bomb())
    (root / "fat-md").mkdir()
    with open(root / "fat-md" / "SKILL.md", "wb") as f:
        f.write(b"---\nname: fat\ndescription: fat\n---\n")
        f.truncate(50 * 1024 * 1024)
    fat = write_skill(root / "fat-res", "fat-res")
    with open(fat / "r.bin", "wb") as f:
        f.truncate(100 * 1024 * 1024)
    (fat / "env").symlink_to("/proc/self/environ")
    data = tmp_path / "data"
    rss, code, _ = peak_rss_mb_of([sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data), "--encoder",
                                "hashing", "-q", "import", str(root), "--source", "s", "--grant", "team:t"])
    print(f"peak RSS of the hostile folder import: {rss:.0f} MB")
    assert code == 1 and rss < 512, rss
    _, payload, _ = cli(data, "list", "--json")
    assert [h["name"] for h in payload["items"]] == ["fine"]


def _alias_bomb() -> str:
    lines = ["name: bomb", "description: an alias bomb", "metadata:", '  a0: &a0 ["lol","lol","lol","lol","lol",'
             '"lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        refs = ",".join([f"*a{i - 1}"] * 10)
        lines.append(f"  a{i}: &a{i} [{refs}]")
    return "\n".join(lines)


def test_search_still_answers_after_a_hostile_import(catalog: Catalog, tmp_path: Path, outside: Path) -> None:
    """After an import full of hostile entries the catalog and its index are consistent: the valid skill
    is found by search and the index holds exactly the stored skills."""
    root = tmp_path / "in"
    write_skill(root / "kubernetes-rollouts", "kubernetes-rollouts", body="Roll out a deployment with kubectl.")
    write_skill(root / "bomb", "bomb", front=_alias_bomb())
    (root / "evil").symlink_to(outside, target_is_directory=True)
    catalog.import_path(root, "local", "team:t")
    hits = catalog.search_view(Principal.operator(), __import__("skillsearch.retrieval.search", fromlist=["x"])
                               .SearchRequest("kubectl rollout", limit=5)).hits
    assert [h.slug for h in hits] == ["kubernetes-rollouts"]
    assert catalog.index().lexical.num_docs() == catalog.store.count() == 1


def test_the_reference_upstream_loads_folders_through_the_same_walk(tmp_path: Path, outside: Path) -> None:
    """The reference upstream (`skillsearch upstream --from`) reads folders with the importer's walk: a
    symlinked resource is skipped with a reason and nothing from outside the folder reaches its feed."""
    from skillsearch.upstream.platform import ReferenceUpstream

    skill = write_skill(tmp_path / "up" / "served", "served")
    (skill / "leak.txt").symlink_to(outside / "secret.txt")
    (skill / "ok.txt").write_text("fine\n", encoding="utf-8")
    up = ReferenceUpstream(["t"])
    problems = up.load("subs", tmp_path / "up")
    assert any("symbolic link" in str(p) for p in problems)
    feed = json.dumps(up.feed("subs").live())
    assert SECRET not in feed and "ok.txt" in feed and "leak.txt" not in feed


def test_control_characters_refuse_a_skill_md_but_not_its_neighbours(tmp_path: Path) -> None:
    """A SKILL.md whose name holds ESC (YAML's ``"\\e[2J"``, which clears the screen when `list` prints
    it), a tag holding a right-to-left override, or a description holding a NUL was imported and printed
    raw. Now each is refused with a reason naming the field, printed with the control character escaped;
    its neighbours are imported: a literal-block description keeps its line break, and a body holding an
    ESC is stored byte for byte as authored."""
    root = tmp_path / "in"
    write_skill(root / "esc-name", "esc-name", front='name: "a\\e[2Jb"\ndescription: Clears the screen.')
    write_skill(root / "bidi-tag", "bidi-tag",
                front='name: bidi-tag\ndescription: A tag reads backwards.\ntags: [ok, "txt\\u202eexe"]')
    write_skill(root / "nul-description", "nul-description", front='name: nul-description\ndescription: "a\\0b"')
    write_skill(root / "block", "block", front="name: block\ndescription: |\n  First line.\n  Second line.")
    authored = "---\nname: coloured\ndescription: Prints in colour.\n---\nEcho \x1b[31mred\x1b[0m.\n"
    (root / "coloured").mkdir()
    (root / "coloured" / "SKILL.md").write_bytes(authored.encode("utf-8"))
    data = tmp_path / "data"
    code, payload, err = cli(data, "import", str(root), "--source", "local", "--grant", "team:t", "--json")
    assert code == 1 and payload is not None
    assert payload["created"] == 2, payload
    reasons = {Path(p["file"]).parent.name: p["reason"] for p in payload["problems"]}
    assert sorted(reasons) == ["bidi-tag", "esc-name", "nul-description"], reasons
    assert "name holds a control or bidirectional-override character (U+001B)" in reasons["esc-name"]
    assert "tags[1] holds" in reasons["bidi-tag"] and "U+202E" in reasons["bidi-tag"]
    assert "description holds" in reasons["nul-description"] and "U+0000" in reasons["nul-description"]
    assert "\x1b" not in err and "\u202e" not in err and "\x00" not in err, err
    code, got, _ = cli(data, "get", "coloured", "--json")
    assert code == 0 and got["instructions"] == "Echo \x1b[31mred\x1b[0m."
    code, block, _ = cli(data, "get", "block", "--json")
    assert code == 0 and block["description"] == "First line.\nSecond line."
    catalog = Catalog(Settings(data_dir=data, encoder="hashing"))
    try:
        skill = catalog.store.skill_by_slug("team:t", "coloured")
        assert skill is not None
        revision = catalog.store.revision(skill.current_revision_id)
        assert revision is not None and revision.skill_md.encode("utf-8") == authored.encode("utf-8")
    finally:
        catalog.close()
