"""Hostile entries: YAML bombs, lone surrogates, deep nesting, oversized bundle resources, forged ids.

Each test states the promise it checks. One bad entry is refused with its reason and never costs the
valid entries of the same import; the ``--json`` report of a real CLI process always parses.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hostile_support import cli, write_skill
from hypothesis import given, settings
from hypothesis import strategies as st

from skillsearch.core.confusables import SKELETON_VERSION, _skeleton_of_any, confusable, skeleton
from skillsearch.core.domain import Principal
from skillsearch.core.settings import Settings
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.service import Catalog


@pytest.fixture
def catalog(tmp_path: Path, fake_encoder: Encoder) -> Iterator[Catalog]:
    c = Catalog.open(Settings(data_dir=tmp_path / "data", seed_sample=False, encoder="hashing"), encoder=fake_encoder)
    yield c
    c.close()


def _bomb(levels: int = 9) -> str:
    lines = ["name: bomb", "description: an alias bomb", "metadata:",
             "  a0: &a0 [" + ",".join(['"lol"'] * 10) + "]"]
    lines += [f"  a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels + 1)]
    return "\n".join(lines)


def test_yaml_alias_bombs_and_deep_yaml_are_refused(catalog: Catalog, tmp_path: Path) -> None:
    """A 9-level alias bomb, ``name: *a6`` (a huge string), a lone anchor, a 30,000-deep YAML list, a 60-deep one and
    front matter over its size limit are each refused with a reason; the valid skill is stored."""
    root = tmp_path / "in"
    write_skill(root / "fine", "fine")
    write_skill(root / "bomb", "bomb", front=_bomb())
    write_skill(root / "name-bomb", "x", front=_bomb(6).replace("name: bomb\n", "") + "\nname: *a6")
    write_skill(root / "anchor", "x", front="name: &n anchored\ndescription: d")
    write_skill(root / "deep", "x", front="name: deep\ndescription: d\nmetadata: " + "[" * 30_000 + "]" * 30_000)
    write_skill(root / "nested", "x", front="name: nested\ndescription: d\nmetadata: {m: " + "[" * 60 + "]" * 60 + "}")
    write_skill(root / "big-front", "x", front="name: big\ndescription: d\nnote: " + "x" * 70_000)
    report = catalog.import_path(root, "local", "team:t")
    assert [catalog.store.skill(s).slug for s in report.created] == ["fine"]  # type: ignore[union-attr]
    reasons = {Path(p.file).parent.name: p.reason for p in report.problems}
    assert "aliases (*name) are not allowed" in reasons["bomb"] or "anchors" in reasons["bomb"]
    assert "not allowed" in reasons["name-bomb"] and "anchors (&name) are not allowed" in reasons["anchor"]
    assert "nested too deeply" in reasons["deep"] and "deeper than 32 levels" in reasons["nested"]
    assert "front matter is 70" in reasons["big-front"] and "over the limit of 65536" in reasons["big-front"]


def _entry(slug: str, **over: Any) -> dict[str, Any]:
    e: dict[str, Any] = {"slug": slug, "name": slug, "description": f"The {slug} skill.", "instructions": "Do it."}
    e.update(over)
    return e


def _flow(slug: str, arg: Any) -> dict[str, Any]:
    return _entry(slug, kind="flow_template", steps=[{"tool": "t", "args": {"x": arg}}])


def test_lone_surrogates_and_deep_json_refuse_only_their_entry(tmp_path: Path) -> None:
    """A lone surrogate in instructions, tags, metadata (value or key), version, step args or a resource
    path, and a 100,000-deep JSON metadata line, each refuse their own entry (once INTERNAL and a rollback
    of all); the valid entries are stored and the --json report of the real CLI parses."""
    lines = [
        json.dumps(_entry("ok-one")),
        '{"slug": "s-instr", "name": "n", "description": "d", "instructions": "bad \\ud800 text"}',
        '{"slug": "s-tags", "name": "n", "description": "d", "tags": ["\\udfff"]}',
        '{"slug": "s-meta", "name": "n", "description": "d", "metadata": {"k": ["\\ud800"]}}',
        '{"slug": "s-key", "name": "n", "description": "d", "metadata": {"\\ud800": 1}}',
        '{"slug": "s-version", "name": "n", "description": "d", "version": "1.\\ud800"}',
        '{"slug": "s-step", "name": "n", "description": "d", "kind": "flow_template",'
        ' "steps": [{"tool": "t", "args": {"a": "\\ud800"}}]}',
        '{"slug": "s-path", "name": "n", "description": "d", "resources": [{"path": "a\\ud800.txt", "text": "x"}]}',
        '{"slug": "s-deep", "name": "n", "description": "d", "metadata": {"m": ' + "[" * 100_000 + "]" * 100_000
        + "}}",
        json.dumps(_entry("s-nest", metadata={"m": json.loads("[" * 40 + "]" * 40)})),
        json.dumps(_entry("ok-two")),
    ]
    bundle = tmp_path / "b.jsonl"
    bundle.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, payload, stderr = cli(tmp_path / "data", "import", str(bundle), "--source", "s", "--grant", "team:t",
                                "--json")
    assert code == 1 and payload is not None, stderr
    assert payload["created"] == 2 and "Traceback" not in stderr
    reasons = {int(p["file"].rsplit(":", 1)[1]): p["reason"] for p in payload["problems"]}
    assert sorted(reasons) == list(range(2, 11))
    for line in (2, 3, 4, 5, 6, 7, 8):
        assert "unicode" in reasons[line].lower(), reasons[line]
    assert "nested too deeply" in reasons[9] and "deeper than 32 levels" in reasons[10]
    _, listed, _ = cli(tmp_path / "data", "list", "--json")
    assert sorted(h["name"] for h in listed["items"]) == ["ok-one", "ok-two"]


def test_bundle_resources_obey_the_folder_limits(tmp_path: Path) -> None:
    """A bundle's resources obey the same limits as a folder's: a base64 or text resource over the
    resource limit, too many resources, and too many bytes in all are refused per entry (they once
    imported 40 MB); the valid entry is stored."""
    small = base64.b64encode(b"x" * 100).decode()
    entries = [
        _entry("ok"),
        _entry("b64", resources=[{"path": "a.bin", "base64": base64.b64encode(b"\0" * 3000).decode()}]),
        _entry("text", resources=[{"path": "a.txt", "text": "y" * 3000}]),
        _entry("count", resources=[{"path": f"r{i}.bin", "base64": small} for i in range(11)]),
        _entry("total", resources=[{"path": f"r{i}.txt", "text": "z" * 900} for i in range(6)]),
        _entry("instr", instructions="w" * 5000),
    ]
    bundle = tmp_path / "b.json"
    bundle.write_text(json.dumps(entries), encoding="utf-8")
    env = {"SKILLSEARCH_MAX_RESOURCE_BYTES": "2000", "SKILLSEARCH_MAX_RESOURCES": "10",
           "SKILLSEARCH_MAX_SKILL_BYTES": "4000", "SKILLSEARCH_MAX_SKILL_MD_BYTES": "4096"}
    code, payload, _ = cli(tmp_path / "data", "import", str(bundle), "--source", "s", "--grant", "team:t", "--json",
                           env=env)
    assert code == 1 and payload["created"] == 1
    reasons = {int(p["file"].rsplit("[", 1)[1].rstrip("]")): p["reason"] for p in payload["problems"]}
    assert "over the limit of 2000" in reasons[1] and "over the limit of 2000" in reasons[2]
    assert "11 resources, over the limit of 10" in reasons[3]
    assert "exceed 4000 bytes" in reasons[4] and "over the limit of 4096" in reasons[5]
    code, payload, _ = cli(tmp_path / "data2", "import", str(bundle), "--source", "s", "--grant", "team:t", "--json",
                           env={"SKILLSEARCH_MAX_BUNDLE_BYTES": "1000"})
    assert code == 1 and payload["created"] == 0 and "over the limit" in payload["problems"][0]["reason"]


@pytest.mark.parametrize("path", ["C:/x", "C:x", "a\0b", "a\nb", "evil\u202etxt.sh", "~/.ssh/x", "../x", "/etc/x"])
def test_unsafe_resource_paths_are_refused(catalog: Catalog, tmp_path: Path, path: str) -> None:
    """Resource paths a host could misuse when writing resources to disk (drive letters, NUL, newline,
    a right-to-left override, a home folder, parent and absolute paths) refuse their entry."""
    bundle = tmp_path / "b.json"
    bundle.write_text(json.dumps([_entry("ok"), _entry("bad", resources=[{"path": path, "text": "x"}])]),
                      encoding="utf-8")
    report = catalog.import_path(bundle, "s", "team:t")
    assert len(report.created) == 1 and len(report.problems) == 1
    assert "resource path must be" in report.problems[0].reason


def test_bundle_skill_ids_are_checked_for_shape_and_owner(catalog: Catalog, tmp_path: Path) -> None:
    """A bundle's skill_id is accepted only in the design's shape, and only for the source and grant that
    own it: a second bundle of the same source into another grant cannot move team:a's skill (and its old
    revisions) to sub:public; ids like ../../etc/passwd, 5,000 characters or a newline are refused."""
    first = tmp_path / "a.json"
    first.write_text(json.dumps([_entry("private", instructions="team a only")]), encoding="utf-8")
    owned = catalog.import_path(first, "src", "team:a").created[0]
    second = tmp_path / "b.json"
    second.write_text(json.dumps([
        _entry("public", skill_id=owned, instructions="moved"),
        _entry("dots", skill_id="../../etc/passwd"),
        _entry("long", skill_id="a" * 5000),
        _entry("newline", skill_id="sk_1\nx"),
        _entry("fine", skill_id="sk_0123456789abcdef0123"),
    ]), encoding="utf-8")
    report = catalog.import_path(second, "src", "sub:public")
    assert [catalog.store.skill(s).slug for s in report.created] == ["fine"]  # type: ignore[union-attr]
    reasons = [p.reason for p in report.problems]
    assert f"skill {owned} belongs to source 'src' in grant team:a" in reasons[-1]
    assert sum("invalid skill_id" in r for r in reasons) == 3
    skill = catalog.store.skill(owned)
    assert skill is not None and skill.grant == "team:a" and skill.slug == "private"
    hits = catalog.search_view(Principal("p", frozenset({"sub:public"})), SearchRequest("team a only moved")).hits
    assert owned not in [h.skill_id for h in hits]


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=40))
def test_the_ascii_short_path_of_the_skeleton_gives_the_full_paths_answer(name: str) -> None:
    """Every import checks every name of its grant (1.2 s at 100k names the long way): an ASCII name skips
    NFKC and the homoglyph table, and must land on the same key."""
    assert skeleton(name) == _skeleton_of_any(name)


def test_the_skeleton_still_folds_what_only_the_long_path_sees() -> None:
    assert skeleton("\uff27it  Bisect\u200b tool") == skeleton("git bisect tool") == "git bisect tool"
    assert confusable("G\u0456t bisect", "Git bisect") and not confusable("Git bisect", "Git bisect")


def test_look_alike_names_in_one_grant_are_refused(catalog: Catalog, tmp_path: Path) -> None:
    """A name that differs from another skill's of the same grant only by look-alike letters (Cyrillic
    U+043E, U+0456 for Latin o, i) is refused, in the same import and against the catalog; the same name
    in another grant, and a re-import of the skill itself, are fine."""
    first = tmp_path / "a.json"
    first.write_text(json.dumps([_entry("git-bisect", name="Git bisect tool")]), encoding="utf-8")
    assert catalog.import_path(first, "src", "team:a").ok
    second = tmp_path / "b.json"
    second.write_text(json.dumps([_entry("fake-bisect", name="G\u0456t bisect t\u043eol"),
                                  _entry("twin-one", name="Deploy t\u043eol"), _entry("twin-two", name="Deploy tool"),
                                  _entry("git-bisect", name="Git bisect tool")]), encoding="utf-8")
    report = catalog.import_path(second, "src", "team:a")
    assert sorted(catalog.store.skill(s).slug for s in report.created) == ["twin-one"]  # type: ignore[union-attr]
    assert len(report.unchanged) == 1 and len(report.problems) == 2
    assert all("look-alike letters" in p.reason for p in report.problems)
    assert catalog.import_path(second, "src2", "team:b").created


def test_a_look_alike_is_found_by_one_indexed_lookup_not_a_scan_of_the_grant(catalog: Catalog) -> None:
    """Every stored skill keeps its name's skeleton, indexed with the grant: the look-alike check of an
    import is one index lookup (at 100k skills, folding every name of the grant took 1.2 s per import)."""
    plan = " ".join(str(r[-1]) for r in catalog.store.connection().execute(
        "EXPLAIN QUERY PLAN SELECT skill_id, name FROM skills WHERE grant_key = ? AND name_key = ?"
        " AND skill_id != ? AND name != ? ORDER BY skill_id LIMIT 1", ("team:a", "k", "s", "n")))
    assert "skills_by_name_key" in plan


def test_the_stored_keys_follow_the_unicode_data_the_fold_reads() -> None:
    """NFKC and case folding come from Python's Unicode database: a Python with another one can fold a name
    differently, so the keys' version names it and every catalog recomputes its keys under a new one."""
    assert f"unicode-{unicodedata.unidata_version}:" in SKELETON_VERSION


def _name_keys(catalog: Catalog) -> dict[str, str]:
    return dict(catalog.store.connection().execute("SELECT slug, name_key FROM skills").fetchall())


def _assert_look_alikes_refused(catalog: Catalog, bundle: Path, entries: list[dict[str, Any]]) -> None:
    """Import ``entries`` (each a look-alike of a stored name) from ``bundle``: every one refused as such."""
    bundle.write_text(json.dumps(entries), encoding="utf-8")
    report = catalog.import_path(bundle, "src", "team:a")
    assert not report.created and len(report.problems) == len(entries)
    assert all("look-alike letters" in p.reason for p in report.problems)


def test_a_catalog_from_before_the_name_keys_gets_them_when_opened(
    catalog: Catalog, fake_encoder: Encoder, tmp_path: Path
) -> None:
    """A catalog written before ``skills.name_key`` existed (or by another version of the skeleton) has its
    keys computed on open, so its old skills still refuse a look-alike newcomer."""
    bundle = tmp_path / "a.json"
    bundle.write_text(json.dumps([_entry("git-bisect", name="Git bisect tool"), _entry("deploy", name="Dеploy")]),
                      encoding="utf-8")
    assert len(catalog.import_path(bundle, "src", "team:a").created) == 2
    data_dir = catalog.data_dir
    catalog.close()
    conn = sqlite3.connect(data_dir / "catalog.sqlite3")
    conn.execute("DROP INDEX skills_by_name_key")
    for trigger in ("skills_name_key_unset", "skills_name_key_kept"):
        conn.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    conn.execute("ALTER TABLE skills DROP COLUMN name_key")  # the table as it was before the column
    conn.execute("DELETE FROM meta WHERE key = 'name_key_version'")
    conn.commit()
    conn.close()

    reopened = Catalog.open(Settings(data_dir=data_dir, seed_sample=False, encoder="hashing"), encoder=fake_encoder)
    keys = _name_keys(reopened)
    assert keys == {"git-bisect": "git bisect tool", "deploy": "deploy"}
    _assert_look_alikes_refused(reopened, tmp_path / "b.json",
                                [_entry("fake-bisect", name="Gіt bisect tool"), _entry("fake-deploy", name="Deploy")])

    # Another skeleton version: every key is computed again.
    conn = reopened.store.connection()
    conn.execute("UPDATE skills SET name_key = 'stale'")
    conn.execute("UPDATE meta SET value = 'an older skeleton' WHERE key = 'name_key_version'")
    reopened.close()
    again = Catalog.open(Settings(data_dir=data_dir, seed_sample=False, encoder="hashing"), encoder=fake_encoder)
    assert _name_keys(again) == keys
    again.close()


# How a version from before ``skills.name_key`` (3d068da and older) wrote a skill: its two statements as
# they were, which leave the column to its default ('') or as it was.
_OLD_INSERT = ("INSERT INTO skills (slug, name, description, kind, tags, grant_key, status, current_revision_id,"
               " updated_at, source, skill_id) VALUES (?, ?, 'd', 'knowledge', '[]', ?, 'active', ?, ?, 'src', ?)")
_OLD_UPDATE = ("UPDATE skills SET slug = ?, name = ?, description = 'd', kind = 'knowledge', tags = '[]',"
               " grant_key = ?, status = 'active', current_revision_id = ?, updated_at = ?, source = 'src'"
               " WHERE skill_id = ?")


def test_a_rollback_that_writes_skills_without_keys_has_them_keyed_at_the_next_open(
    catalog: Catalog, fake_encoder: Encoder, tmp_path: Path
) -> None:
    """Upgrade, roll back, upgrade again: the older version adds a skill with no name key and renames one
    without changing its key, while the meta row says every key is current. Reopened by this version, both
    refuse a look-alike newcomer (before, 'Stripe Checkout' written by the older version let its look-alike
    in, with a Cyrillic S, and the renamed skill was found under its old name's key only)."""
    bundle = tmp_path / "a.json"
    bundle.write_text(json.dumps([_entry("deploy", name="Deploy tool")]), encoding="utf-8")
    assert catalog.import_path(bundle, "src", "team:a").created
    deploy = catalog.store.skills_by_slug("deploy")[0]
    data_dir = catalog.data_dir
    catalog.close()

    conn = sqlite3.connect(data_dir / "catalog.sqlite3")  # the older version, on the upgraded file
    now = "2026-12-03T00:00:00Z"
    conn.execute(_OLD_INSERT, ("stripe", "Stripe Checkout", "team:a", deploy.current_revision_id, now, "sk_old1"))
    conn.execute(_OLD_UPDATE, ("deploy", "Release helper", "team:a", deploy.current_revision_id, now,
                               deploy.skill_id))
    conn.commit()
    conn.close()

    reopened = Catalog.open(Settings(data_dir=data_dir, seed_sample=False, encoder="hashing"), encoder=fake_encoder)
    assert _name_keys(reopened) == {"stripe": "stripe checkout", "deploy": "release helper"}
    _assert_look_alikes_refused(reopened, tmp_path / "b.json", [_entry("fake-stripe", name="\u0405tripe Checkout"),
                                                               _entry("fake-release", name="R\u0435lease helper")])
    reopened.close()
