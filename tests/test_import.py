"""Import of Agent Skills folders and JSON/JSONL bundles into a real SQLite catalog and index."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from skillsearch.core.domain import Principal
from skillsearch.core.errors import ValidationError
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.service import Catalog


def write_skill(root: Path, folder: str, front: str, body: str = "Body text.", files: dict[str, bytes] | None = None
                ) -> Path:
    d = root / folder
    d.mkdir(parents=True, exist_ok=True)
    (d / "SKILL.md").write_text(f"---\n{front}\n---\n{body}\n", encoding="utf-8")
    for rel, content in (files or {}).items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_bytes(content)
    return d


def test_folder_import_stores_skills_and_typed_resources(empty_catalog: Catalog, tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "csv-cleaner", "name: csv-cleaner\ndescription: Clean messy CSV files.\n"
                "metadata:\n  tags: [csv, data]", "# Clean CSVs\nRun `scripts/clean.py`.",
                {"scripts/clean.py": b"print('hi')\n", "references/notes.md": b"# Notes\n",
                 "assets/report_template.md": b"# Report\n", "assets/logo.png": b"\x89PNG\r\n\x1a\n\x00\xff"})
    report = empty_catalog.import_path(root, "local", "team:data")
    assert report.ok and len(report.created) == 1
    detail = empty_catalog.get_skill(Principal.operator(), report.created[0])
    assert detail.slug == "csv-cleaner" and detail.tags == ["csv", "data"]
    kinds = {r.path: r.kind for r in detail.resources}
    assert kinds == {"scripts/clean.py": "script", "references/notes.md": "reference",
                     "assets/report_template.md": "template", "assets/logo.png": "artifact"}
    png = empty_catalog.store.resource(detail.revision_id, "assets/logo.png")
    assert png is not None and png.content == b"\x89PNG\r\n\x1a\n\x00\xff" and png.media_type == "image/png"
    hits = empty_catalog.search(Principal.operator(), SearchRequest("tidy up a messy csv", mode="lexical")).hits
    assert [h.skill.slug for h in hits] == ["csv-cleaner"]


def test_a_front_matter_value_after_a_tab_imports_as_yaml_1_2_and_hosts_read_it(
    empty_catalog: Catalog, tmp_path: Path
) -> None:
    """A tab between a key and its value is separation space in YAML 1.2 (and to the JavaScript ``yaml``
    hosts parse SKILL.md with); PyYAML's Python scanner refused it ("found character '\\t' that cannot start
    any token"), so an authored skill every host loads was refused here. libyaml reads it."""
    root = tmp_path / "skills"
    write_skill(root, "tabbed", "name:\ttabbed\ndescription:\tClean messy CSV files.")
    report = empty_catalog.import_path(root, "local", "team:data")
    assert report.ok and len(report.created) == 1, report.problems
    detail = empty_catalog.get_skill(Principal.operator(), report.created[0])
    assert (detail.slug, detail.description) == ("tabbed", "Clean messy CSV files.")


def test_invalid_entries_are_reported_one_per_line_and_valid_ones_still_import(
    empty_catalog: Catalog, tmp_path: Path
) -> None:
    root = tmp_path / "skills"
    write_skill(root, "good-one", "name: good-one\ndescription: A fine skill.")
    write_skill(root, "bad-yaml", "name: bad-yaml\ndescription: [unclosed")
    write_skill(root, "long-name", f"name: {'x' * 65}\ndescription: Too long a name.")
    write_skill(root, "no-desc", "name: no-desc")
    write_skill(root, "list-desc", "name: list-desc\ndescription: [a, b]")
    write_skill(root, "yes-desc", "name: yes-desc\ndescription: yes")
    write_skill(root, "2048", "name: 2048\ndescription: 2024-01-31")  # YAML's number and date, kept as written
    (root / "no-front").mkdir()
    (root / "no-front" / "SKILL.md").write_text("# just markdown\n", encoding="utf-8")
    report = empty_catalog.import_path(root, "local", "user:me")
    reasons = {Path(p.file).parent.name: p.reason for p in report.problems}
    assert set(reasons) == {"bad-yaml", "long-name", "no-desc", "no-front", "list-desc", "yes-desc"}
    assert reasons["list-desc"] == "front matter 'description' must be text, not a list (quote it if it is meant as text)"
    assert "not true/false" in reasons["yes-desc"]
    assert "bad front matter" in reasons["bad-yaml"]
    assert "over the limit of 64" in reasons["long-name"]
    assert reasons["no-desc"] == "missing description"
    assert "no YAML front matter" in reasons["no-front"]
    assert len(report.created) == 2 and not report.ok
    assert empty_catalog.store.count() == 2
    numbered = empty_catalog.get_skill(Principal.operator(), "2048")
    assert (numbered.name, numbered.description) == ("2048", "2024-01-31")


def test_a_name_with_no_ascii_spelling_in_a_folder_of_that_name_says_how_to_give_it_a_slug(
    empty_catalog: Catalog, tmp_path: Path
) -> None:
    """``发布说明/SKILL.md`` named 发布说明 leaves the slug empty: the report said "invalid slug ''", which names
    neither the cause (no letter a-z in the name) nor the fix (an ASCII folder name), which imports it."""
    root = tmp_path / "skills"
    write_skill(root, "发布说明", "name: 发布说明\ndescription: 根据合并的拉取请求生成版本发布说明。")
    write_skill(root, "코드-리뷰", "name: 코드 리뷰\ndescription: 풀 리퀘스트의 코드를 검토한다.")
    report = empty_catalog.import_path(root, "local", "user:me")
    reasons = {Path(p.file).parent.name: p.reason for p in report.problems}
    assert set(reasons) == {"发布说明", "코드-리뷰"}
    assert "'发布说明' has no letter a-z or digit" in reasons["发布说明"] and "folder" in reasons["发布说明"]
    assert "invalid slug ''" not in reasons["코드-리뷰"]
    (root / "发布说明").rename(root / "release-notes")
    (root / "코드-리뷰").rename(root / "code-review")
    again = empty_catalog.import_path(root, "local", "user:me")
    assert again.ok and len(again.created) == 2
    assert empty_catalog.get_skill(Principal.operator(), "release-notes").name == "发布说明"


def test_bundle_duplicates_and_undeclared_placeholders_are_rejected(empty_catalog: Catalog, tmp_path: Path) -> None:
    flow = {"slug": "scale", "name": "Scale", "description": "Scale a service.", "kind": "flow_template",
            "parameters": [{"name": "service", "type": "string", "required": True}],
            "steps": [{"tool": "k8s.scale", "args": {"name": "{service}", "n": "{replicas}"}}]}
    ok = {"slug": "notes", "name": "Notes", "description": "Write notes."}
    dup = {"slug": "notes", "name": "Notes again", "description": "Duplicate slug."}
    bundle = tmp_path / "bundle.jsonl"
    bundle.write_text("\n".join(json.dumps(x) for x in (flow, ok, dup)) + "\n{not json\n", encoding="utf-8")
    report = empty_catalog.import_path(bundle, "b", "sub:x")
    by_line = {p.file.rsplit(":", 1)[1]: p.reason for p in report.problems}
    assert "placeholder(s) with no matching parameter: replicas" in by_line["1"]
    assert "duplicate slug 'notes'" in by_line["3"]
    assert "invalid JSON" in by_line["4"]
    assert len(report.created) == 1


def test_reimport_is_idempotent_and_changes_make_new_revisions(empty_catalog: Catalog, tmp_path: Path) -> None:
    root = tmp_path / "skills"
    d = write_skill(root, "alpha", "name: alpha\ndescription: First text.", "v1 body")
    first = empty_catalog.import_path(root, "local", "user:me")
    again = empty_catalog.import_path(root, "local", "user:me")
    assert len(first.created) == 1 and again.unchanged == first.created and not again.updated
    skill_id = first.created[0]
    old_rev = empty_catalog.store.skill(skill_id).current_revision_id  # type: ignore[union-attr]
    (d / "SKILL.md").write_text("---\nname: alpha\ndescription: Second text.\n---\nv2 body\n", encoding="utf-8")
    changed = empty_catalog.import_path(root, "local", "user:me")
    assert changed.updated == [skill_id]
    revisions = empty_catalog.store.revisions_of(skill_id)
    assert len(revisions) == 2
    old = empty_catalog.store.revision(old_rev)
    assert old is not None and old.instructions == "v1 body" and old.description == "First text."
    current = empty_catalog.get_skill(Principal.operator(), skill_id)
    assert current.instructions == "v2 body" and current.revision_id != old_rev
    assert current.canonical_hash != old.canonical_hash


def test_slug_owned_by_another_source_is_refused(empty_catalog: Catalog, tmp_path: Path) -> None:
    write_skill(tmp_path / "a", "same", "name: same\ndescription: From A.")
    write_skill(tmp_path / "b", "same", "name: same\ndescription: From B.")
    assert empty_catalog.import_path(tmp_path / "a", "source-a", "team:t").ok
    report = empty_catalog.import_path(tmp_path / "b", "source-b", "team:t")
    assert not report.ok and "source 'source-a'" in report.problems[0].reason
    assert empty_catalog.store.skills_by_slug("same")[0].description == "From A."


def test_missing_path_and_bad_grant_are_clear_errors(empty_catalog: Catalog, tmp_path: Path) -> None:
    report = empty_catalog.import_path(tmp_path / "nope", "s", "user:me")
    assert report.problems[0].reason == "no such file or folder"
    try:
        empty_catalog.import_path(tmp_path, "s", "everyone")
    except ValidationError as exc:
        assert "invalid grant" in exc.message
    else:
        raise AssertionError("a bad grant must be refused")


def test_an_enum_no_value_could_match_is_an_invalid_entry(empty_catalog: Catalog, tmp_path: Path) -> None:
    """``enum: [1, 2]`` on a string parameter (or ``[]``, or ``true`` among integers) imported, and every
    value an agent gave was then refused: a template no call could resolve."""
    def flow(slug: str, parameter: dict[str, object]) -> dict[str, object]:
        return {"slug": slug, "name": slug, "description": "A flow.", "kind": "flow_template",
                "parameters": [{"name": "p", **parameter}], "steps": [{"tool": "t", "args": {"v": "{p}"}}]}
    bundle = tmp_path / "flows.jsonl"
    entries = (flow("text-of-numbers", {"type": "string", "enum": [1, 2]}), flow("none", {"enum": []}),
               flow("bool-among-ints", {"type": "integer", "enum": [True, 2]}),
               flow("fine", {"type": "number", "enum": [1, 2.5]}))
    bundle.write_text("\n".join(json.dumps(x) for x in entries) + "\n", encoding="utf-8")
    report = empty_catalog.import_path(bundle, "b", "sub:x")
    by_line = {p.file.rsplit(":", 1)[1]: p.reason for p in report.problems}
    assert "enum of parameter 'p': 1: expected string, got integer" in by_line["1"]
    assert "enum of parameter 'p' is empty" in by_line["2"]
    assert "enum of parameter 'p': true: expected integer, got boolean" in by_line["3"]
    assert set(by_line) == {"1", "2", "3"} and len(report.created) == 1


def test_a_revision_stored_before_the_enum_rule_still_reads_and_resolves(empty_catalog: Catalog,
                                                                        tmp_path: Path) -> None:
    """A rule added to the parameter schema must not make a revision stored by an older version unreadable
    (get and resolve raised a pydantic error): resolve says what is wrong with the value instead."""
    bundle = tmp_path / "flow.json"
    bundle.write_text(json.dumps([{"slug": "old", "name": "old", "description": "An old flow.",
                                   "kind": "flow_template", "steps": [{"tool": "t", "args": {"v": "{p}"}}],
                                   "parameters": [{"name": "p", "type": "string", "enum": ["a"]}]}]))
    assert empty_catalog.import_path(bundle, "b", "sub:x").ok
    with sqlite3.connect(empty_catalog.data_dir / "catalog.sqlite3") as db:  # as an older version wrote it
        (body,) = db.execute("SELECT body FROM revisions").fetchone()
        old = json.loads(body)
        old["parameters"][0]["enum"] = [1, 2]
        db.execute("UPDATE revisions SET body = ?", (json.dumps(old),))
    assert empty_catalog.get_skill(Principal.operator(), "old").parameters[0].enum == [1, 2]  # type: ignore[index]
    with pytest.raises(ValidationError, match="must be one of"):
        empty_catalog.resolve(Principal.operator(), "old", {"p": "a"})
