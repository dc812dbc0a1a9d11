"""Git sources whose commits were crafted (trees git itself never writes, fetched unchecked): real
repositories, real git plumbing (``hash-object --literally``), the real model in process."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from test_sources import commit, git, init_repo, listed, write_skill

from skillsearch.service import Catalog
from skillsearch.sync.sources import SourceConfig


def _object(repo: Path, kind: str, data: bytes) -> str:
    out = subprocess.run(["git", "-C", str(repo), "hash-object", "-w", "--literally", "-t", kind, "--stdin"],
                         input=data, capture_output=True, check=True)
    return out.stdout.decode().strip()


def _tree(repo: Path, entries: list[tuple[str, str, str]]) -> str:
    """A tree object of ``(mode, name, sha)`` entries as given: duplicates and order unchecked."""
    return _object(repo, "tree", b"".join(f"{mode} {name}".encode() + b"\0" + bytes.fromhex(sha)
                                          for mode, name, sha in entries))


def _skill_md(repo: Path, name: str) -> str:
    return _object(repo, "blob", f"---\nname: {name}\ndescription: crafted skill {name}\n---\nBody.\n".encode())


@pytest.mark.parametrize("twice", ["SKILL.md", "notes"])
def test_a_tree_naming_a_path_twice_is_refused_by_name_and_keeps_the_last_good_commit(
        empty_catalog: Catalog, tmp_path: Path, twice: str) -> None:
    """Such a tree failed with "git archive failed: [Errno 17] File exists: '<data-dir>/sources/export-.../
    tree/dup/SKILL.md'", a temporary folder gone by then; now the error names the path in the tree."""
    catalog, repo = empty_catalog, init_repo(tmp_path / "repo")
    write_skill(repo, "good-skill", "A skill committed the ordinary way.")
    commit(repo, "one good skill")
    source = SourceConfig("team", "team:eng", git=f"file://{repo}", ref="main")
    assert catalog.sources.sync(source).added
    head = git(repo, "rev-parse", "HEAD")
    good_tree = git(repo, "rev-parse", "HEAD^{tree}")
    note = _object(repo, "blob", b"a note\n")
    if twice == "SKILL.md":
        dup = _tree(repo, [("100644", "SKILL.md", _skill_md(repo, "dup")), ("100644", "SKILL.md", _skill_md(repo, "dup2"))])
    else:  # a file and a folder of one name
        dup = _tree(repo, [("100644", "SKILL.md", _skill_md(repo, "dup")), ("100644", "notes", note),
                           ("40000", "notes", _tree(repo, [("100644", "inner.md", note)]))])
    good = git(repo, "ls-tree", good_tree).split("\t")[0].split()
    top = _tree(repo, [("40000", "dup", dup), (good[0], "good-skill", good[2])])
    crafted = git(repo, "commit-tree", top, "-p", head, "-m", "crafted")
    git(repo, "update-ref", "refs/heads/main", crafted)

    report = catalog.sources.sync(source)
    assert report.error == (f"the tree names 'dup/{twice}' more than once (a malformed tree, which git fsck "
                            "reports): nothing of this commit was applied"), report.error
    assert "export-" not in report.error and not report.added and not report.removed
    assert listed(catalog) == {"good-skill"}
    assert not list((catalog.data_dir / "sources").glob("export-*/"))


def test_a_token_pasted_in_the_repository_url_is_in_no_status_refusal_or_error(
        empty_catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`https://user:token@host/...` (as a README tells one to paste it) was shown whole by `sources list`
    and `/v1/sync/status` (any authenticated caller) in the location and in every refused file's name."""
    catalog, repo = empty_catalog, init_repo(tmp_path / "repo")
    folder = write_skill(repo, "deploy-app", "Deploy the app to the cluster.")
    (folder / "passwd.md").symlink_to("/etc/passwd")  # one refusal, named after the repository
    commit(repo, "a skill with a link")
    url = "https://alice:s3cretTOKEN@git.example.invalid/team/skills.git"
    # git itself takes the https URL to the repository on disk (a real fetch, no network)
    config = tmp_path / "gitconfig"
    config.write_text(f'[url "file://{repo}"]\n\tinsteadOf = {url}\n', encoding="utf-8")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    source = SourceConfig("team", "team:eng", git=url, ref="main")

    report = catalog.sources.sync(source)
    assert report.added and not report.error and report.refused
    assert report.refused[0].file.startswith("https://***@git.example.invalid/team/skills.git@")
    (status,) = catalog.subscriptions.sync_status(None, sources=[source]).sources
    assert status.location == "https://***@git.example.invalid/team/skills.git#main"
    assert "s3cretTOKEN" not in status.model_dump_json() and "alice" not in status.model_dump_json()


def test_deep_folders_with_long_names_do_not_fail_the_whole_tree(empty_catalog: Catalog, tmp_path: Path) -> None:
    """The archive's byte cap counted a header per file only, not per folder (`ls-tree -r` lists no trees),
    so a few chains of folders with long names, well within every limit, failed the whole source with
    "git archive wrote more than N bytes, over the limit"."""
    catalog, repo = empty_catalog, init_repo(tmp_path / "repo")
    write_skill(repo, "plain-skill", "A plain skill beside a deep one.")
    folder = write_skill(repo, "deep-skill", "A skill whose references nest deep under long names.")
    for branch in "abcdefghij":  # resource paths of 491 characters, under the 512 a resource may have
        deep = folder.joinpath("references", *[branch * 39] * 12)
        deep.mkdir(parents=True)
        (deep / "note.md").write_text("a deep note\n", encoding="utf-8")
    commit(repo, "deep references")
    report = catalog.sources.sync(SourceConfig("team", "team:eng", git=f"file://{repo}", ref="main"))
    assert not report.error and not report.refused, report.error or report.refused
    assert listed(catalog) == {"plain-skill", "deep-skill"}


def _deep(repo: Path, folders: int) -> str:
    """The skill folder ``deep`` (its references ``folders`` folders of 20 characters deep, then a note) beside
    the skill folder ``fine``, committed on main."""
    chain = _tree(repo, [("100644", "note.md", _object(repo, "blob", b"a deep note\n"))])
    for _ in range(folders):
        chain = _tree(repo, [("40000", "a" * 20, chain)])
    skill = _tree(repo, [("100644", "SKILL.md", _skill_md(repo, "deep")), ("40000", "references", chain)])
    top = _tree(repo, [("40000", "deep", skill), ("40000", "fine", _tree(repo, [("100644", "SKILL.md",
                                                                                  _skill_md(repo, "fine"))]))])
    return git(repo, "update-ref", "refs/heads/main", git(repo, "commit-tree", top, "-m", "deep"))


def test_a_path_over_4096_bytes_is_refused_by_name_before_any_export(empty_catalog: Catalog, tmp_path: Path) -> None:
    """Only a path at the end of one 1 MiB read of `git ls-tree` was measured; one anywhere else reached the
    export and failed it with "git archive wrote more than N bytes, over the limit", naming no path."""
    catalog, repo = empty_catalog, init_repo(tmp_path / "repo")
    _deep(repo, 200)  # a path of 4223 bytes, which no checkout could hold
    report = catalog.sources.sync(SourceConfig("team", "team:eng", git=f"file://{repo}", ref="main"))
    assert report.error is not None and "holds a path over 4096 bytes ('deep/references/aaaa" in report.error, report.error
    assert report.error.endswith("nothing was exported") and listed(catalog) == set()


def test_a_path_too_long_under_the_data_directory_is_refused_by_name(empty_catalog: Catalog, tmp_path: Path) -> None:
    """A path under 4096 bytes that the export folder's own path takes over the system's limit failed with
    "git archive failed: [Errno 36] File name too long: '<data-dir>/sources/export-.../tree/...'", a
    temporary folder gone by then; the error now names the path in the tree and the folder it is exported under."""
    catalog, repo = empty_catalog, init_repo(tmp_path / "repo")
    _deep(repo, 193)  # a path of 4076 bytes: under the limit, not under <data-dir>/sources/export-*/tree/
    report = catalog.sources.sync(SourceConfig("team", "team:eng", git=f"file://{repo}", ref="main"))
    sources = catalog.data_dir / "sources"
    assert report.error is not None and report.error.startswith("the path 'deep/references/aaaa"), report.error
    assert report.error.endswith(f"is too long for this system under {sources}: nothing of this commit was applied")
    assert listed(catalog) == set() and not list(sources.glob("export-*/"))


@pytest.mark.parametrize("target", ["HEAD:good-skill/SKILL.md", "HEAD^{tree}"])
def test_a_ref_naming_a_blob_or_a_tree_is_refused_by_its_name(empty_catalog: Catalog, tmp_path: Path,
                                                              target: str) -> None:
    """It failed with "git rev-parse failed: refs/skillsearch/fetched^{commit}: expected commit type, ...",
    naming the cache's own ref rather than the one configured."""
    catalog, repo = empty_catalog, init_repo(tmp_path / "repo")
    write_skill(repo, "good-skill", "A skill committed the ordinary way.")
    commit(repo, "one good skill")
    git(repo, "tag", "-a", "odd", "-m", "not a commit", git(repo, "rev-parse", target))
    report = catalog.sources.sync(SourceConfig("team", "team:eng", git=f"file://{repo}", ref="odd"))
    kind = "blob" if ":" in target else "tree"
    assert report.error == f"'odd' names a {kind}, not a commit: a git source reads a branch, a tag of a commit or a commit"
    assert listed(catalog) == set()
