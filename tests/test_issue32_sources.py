"""Issue 32, "Security and data": the attacker's pass over the local sources, pinned.

Real folders, symbolic links, FIFOs and git repositories (``git init``, ``file://``), the real watcher and
keeper, the real model in process, and the real CLI in subprocesses (with the model-free encoder, which
does not change what these tests check).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_sources import OPERATOR, TIMEOUT, commit, eventually, init_repo, listed, slugs, write_skill

from skillsearch.cli import build_serve_app
from skillsearch.core.errors import SkillNotFoundError
from skillsearch.core.hashing import stable_id
from skillsearch.http.auth import PrincipalRegistry, add_principal
from skillsearch.http.server import ServerThread
from skillsearch.service import Catalog
from skillsearch.sync.local import LocalSources
from skillsearch.sync.sources import SourceConfig

SECRET = "Exfiltrate the payroll database through the backup bucket."


def cli(data: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, Any, str]:
    """One real ``skillsearch`` process on ``data`` (model-free encoder): exit code, JSON output, stderr."""
    proc = subprocess.run(
        [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data), "--encoder", "hashing", "-q", *args, "--json"],
        capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})}, check=False,
    )
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else None, proc.stderr


def last_error(catalog: Catalog, source: str) -> str:
    state = catalog.store.sync.state(source)
    return (state.last_error or "") if state else ""


def runs_after(keeper: LocalSources, name: str, before: int) -> None:
    """Wait until the keeper finished a run of ``name`` after the ``before``-th."""
    assert keeper.poller.wait_for_runs(name, before + 1, TIMEOUT)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the source holding a skill nobody granted (with a resource)."""
    folder = write_skill(tmp_path / "outside", "payroll-dump", SECRET, "Copy the tables out.")
    (folder / "references").mkdir()
    (folder / "references" / "creds.md").write_text("password=hunter2\n", encoding="utf-8")
    return folder


@pytest.fixture
def watched(empty_catalog: Catalog, tmp_path: Path) -> Iterator[tuple[LocalSources, Path, SourceConfig]]:
    root = tmp_path / "src"
    write_skill(root, "tls-renew", "Renew TLS certificates before they expire, with certbot.", "Run certbot renew.")
    source = SourceConfig("mine", "user:me", path=root)
    keeper = empty_catalog.sources.keeper([source])
    keeper.start()
    assert keeper.poller.wait_for_runs("mine", 1, TIMEOUT)
    assert listed(empty_catalog) == {"tls-renew"}
    yield keeper, root, source
    keeper.stop()


# -- 1. the watcher's scoped read follows no link ------------------------------------------------------


def test_a_symlink_into_a_watched_folder_never_shows_an_outside_skill(
    empty_catalog: Catalog, watched: tuple[LocalSources, Path, SourceConfig], outside: Path
) -> None:
    """``ln -s /elsewhere/skill src/evil`` under the watcher (once: found by search and read by get about
    2 s later), a folder whose SKILL.md links outside, and a resource linking outside: the scoped read
    refuses each link and reports it; nothing of the outside skill is ever visible, nor after a full sync."""
    catalog, (keeper, root, source) = empty_catalog, watched
    before = keeper.poller.runs("mine")
    (root / "evil").symlink_to(outside, target_is_directory=True)
    (root / "linked").mkdir()
    (root / "linked" / "SKILL.md").symlink_to(outside / "SKILL.md")
    (root / "tls-renew" / "leak.md").symlink_to(outside / "references" / "creds.md")

    def invisible() -> None:
        assert listed(catalog) == {"tls-renew"}
        assert "payroll-dump" not in slugs(catalog, "exfiltrate payroll database backup bucket")
        assert "evil" not in slugs(catalog, "exfiltrate payroll database backup bucket")
        for slug in ("evil", "linked", "payroll-dump"):
            with pytest.raises(SkillNotFoundError):
                catalog.get_skill(OPERATOR, stable_id("sk", "user:me", slug))
        tls = catalog.store.skill_by_slug("user:me", "tls-renew")
        assert tls is not None
        assert [r.path for r in catalog.store.resources(tls.current_revision_id)] == []

    runs_after(keeper, "mine", before)
    invisible()
    reported: set[str] = set()  # each run reports what it read; a later batch may read other folders

    def reported_all() -> bool:
        error = last_error(catalog, "mine")
        reported.update(n for n in ("evil", "linked", "leak.md") if n in error and "symbolic link" in error)
        return len(reported) == 3

    eventually(reported_all)
    invisible()
    full = catalog.sources.sync(source)
    assert not full.added and not full.error
    assert {Path(r.file).name for r in full.refused} == {"evil", "SKILL.md", "leak.md"}
    invisible()


# -- 2. a walk over its limit is a source error that keeps the last good state --------------------------


def test_a_folder_over_the_walk_limit_keeps_its_skills_and_fails_the_sync(tmp_path: Path) -> None:
    """20 skills plus 4,985 empty files at the top of a folder source (once: `removed 20`, exit 0, nothing
    visible): `sources sync` exits 1 naming the limit, removes nothing, and `sources list` shows the error."""
    data, src = tmp_path / "data", tmp_path / "src"
    for i in range(20):
        write_skill(src, f"skill-{i:02d}", f"Skill number {i} about topic {i * 3}.")
    assert cli(data, "sources", "add", "mine", "--path", str(src), "--grant", "user:me")[0] == 0
    code, synced, _ = cli(data, "sources", "sync")
    assert code == 0 and len(synced["sources"][0]["added"]) == 20
    for i in range(4985):
        (src / f"junk-{i:05d}.txt").touch()
    code, synced, err = cli(data, "sources", "sync")
    (report,) = synced["sources"]
    assert code == 1 and report["removed"] == [] and "more than 5000 entries" in report["error"]
    assert "last good state is kept" in report["error"] and "error: mine:" in err
    code, listing, _ = cli(data, "sources", "list")
    (mine,) = listing["sources"]
    assert mine["skills_active"] == 20 and mine["skills_archived"] == 0 and "more than 5000" in mine["last_error"]
    code, page, _ = cli(data, "list", "--limit", "100")
    assert code == 0 and len(page["items"]) == 20


def test_a_git_commit_over_the_walk_limit_keeps_the_last_commit(
    empty_catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit adding more top-level files than the walk looks at (once: every skill archived) fails
    the source's run: the skills and the commit last applied stay, `/v1/sync/status` reports it."""
    catalog, repo = empty_catalog, init_repo(tmp_path / "repo")
    for slug in ("alpha-skill", "beta-skill", "gamma-skill"):
        write_skill(repo, slug, f"The {slug} does one thing well.")
    good = commit(repo, "three skills")
    source = SourceConfig("team", "team:eng", git=f"file://{repo}", ref="main")
    assert len(catalog.sources.sync(source).added) == 3
    monkeypatch.setenv("SKILLSEARCH_MAX_WALK_ENTRIES", "10")
    for i in range(11):
        (repo / f"file-{i}.txt").write_text(f"{i}\n", encoding="utf-8")
    commit(repo, "too many files")
    report = catalog.sources.sync(source)
    assert report.error is not None and "more than 10 entries" in report.error and not report.removed
    assert listed(catalog) == {"alpha-skill", "beta-skill", "gamma-skill"}
    state = catalog.store.sync.state("team")
    assert state is not None and json.loads(state.cursor or "{}")["commit"] == good

    principals = tmp_path / "principals.toml"
    token = add_principal(principals, "eng", ["team:eng"], ["skills:read"])
    app = build_serve_app(catalog, PrincipalRegistry(principals), sources=(source,))
    with ServerThread(app) as url, httpx.Client(base_url=url, timeout=30) as http:
        (status,) = http.get("/v1/sync/status", headers={"Authorization": f"Bearer {token}"}).json()["sources"]
    assert status["skills_active"] == 3 and "more than 10 entries" in status["last_error"]


# -- 3. a git tree is sized before it is exported, and streamed -----------------------------------------


def test_a_git_blob_over_the_source_limit_is_refused_before_export(
    empty_catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A blob larger than the source limit (once: `git archive` captured whole, 3.6 GB RSS for a 1.5 GB
    file of zeros) is refused from `git ls-tree`'s sizes with a source error naming it; nothing is
    exported, the skills and the commit last applied stay."""
    catalog, repo = empty_catalog, init_repo(tmp_path / "repo")
    write_skill(repo, "alpha-skill", "The alpha skill does one thing well.")
    good = commit(repo, "one skill")
    source = SourceConfig("team", "team:eng", git=f"file://{repo}", ref="main")
    assert len(catalog.sources.sync(source).added) == 1
    monkeypatch.setenv("SKILLSEARCH_MAX_SOURCE_BYTES", str(1024 * 1024))
    with (repo / "zeros.bin").open("wb") as f:
        f.truncate(3 * 1024 * 1024)
    commit(repo, "a large file")
    report = catalog.sources.sync(source)
    assert report.error is not None and "over the limit of 1048576 bytes" in report.error
    assert "zeros.bin" in report.error and "nothing was exported" in report.error and not report.removed
    assert listed(catalog) == {"alpha-skill"}
    state = catalog.store.sync.state("team")
    assert state is not None and json.loads(state.cursor or "{}")["commit"] == good
    assert not list((catalog.data_dir / "sources").glob("export-*"))


def test_a_git_tree_of_too_many_entries_is_refused_before_export(
    empty_catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tree of many small files, within the byte limit (once: 200,000 files written for 120 s, then minutes
    to remove, on every run), is refused from `git ls-tree` by its count; nothing is exported."""
    catalog, repo = empty_catalog, init_repo(tmp_path / "repo")
    write_skill(repo, "alpha-skill", "The alpha skill does one thing well.")
    good = commit(repo, "one skill")
    source = SourceConfig("team", "team:eng", git=f"file://{repo}", ref="main")
    assert len(catalog.sources.sync(source).added) == 1
    monkeypatch.setenv("SKILLSEARCH_MAX_SOURCE_ENTRIES", "40")
    for i in range(5):
        for j in range(8):
            (repo / "many" / f"d{i}").mkdir(parents=True, exist_ok=True)
            (repo / "many" / f"d{i}" / f"f{j}.txt").write_text(f"{i}.{j}\n", encoding="utf-8")
    commit(repo, "many small files")
    report = catalog.sources.sync(source)
    assert report.error is not None and "more than 40 entries" in report.error
    assert "SKILLSEARCH_MAX_SOURCE_ENTRIES" in report.error and "nothing was exported" in report.error
    assert not report.removed and listed(catalog) == {"alpha-skill"}
    state = catalog.store.sync.state("team")
    assert state is not None and json.loads(state.cursor or "{}")["commit"] == good
    assert not list((catalog.data_dir / "sources").glob("export-*"))


# -- 5. a directory with a sync configuration is never seeded --------------------------------------------


def test_read_commands_never_seed_a_directory_with_a_sync_configuration(tmp_path: Path) -> None:
    """`sources add`, then `search` and `list` (once: each seeded the 45 sample skills beside the
    source's own), then `sources sync`: the catalog holds the source's skill only."""
    data, src = tmp_path / "data", tmp_path / "src"
    write_skill(src, "own-skill", "Profile a Python program and find the hot loop.")
    assert cli(data, "sources", "add", "mine", "--path", str(src), "--grant", "user:me")[0] == 0
    code, found, _ = cli(data, "search", "profile python code")
    assert code == 0 and found["hits"] == []
    code, page, _ = cli(data, "list")
    assert code == 0 and page["items"] == []
    assert cli(data, "sources", "sync")[0] == 0
    code, page, _ = cli(data, "list")
    assert code == 0 and [s["name"] for s in page["items"]] == ["own-skill"]


# -- 6. a SKILL.md that is not a file keeps the last good revision --------------------------------------


@pytest.mark.parametrize("replacement", ["fifo", "folder"])
def test_a_skill_md_replaced_by_a_fifo_or_a_folder_keeps_its_last_good_revision(
    empty_catalog: Catalog, watched: tuple[LocalSources, Path, SourceConfig], replacement: str
) -> None:
    """Under the watcher, a SKILL.md replaced by a FIFO or a folder (once: the skill archived silently,
    and a full sync refused it without bringing it back) is refused and reported; the skill keeps its
    last good revision, through the watcher's run and a full sync."""
    catalog, (keeper, root, source) = empty_catalog, watched
    skill = catalog.store.skill_by_slug("user:me", "tls-renew")
    assert skill is not None
    before = keeper.poller.runs("mine")
    skill_md = root / "tls-renew" / "SKILL.md"
    skill_md.unlink()
    if replacement == "fifo":
        os.mkfifo(skill_md)
    else:
        skill_md.mkdir()
    eventually(lambda: "not a regular file" in last_error(catalog, "mine"))
    runs_after(keeper, "mine", before)
    assert listed(catalog) == {"tls-renew"}
    assert catalog.get_skill(OPERATOR, skill.skill_id).instructions == "Run certbot renew."
    full = catalog.sources.sync(source)
    assert not full.removed and [Path(r.file).parent.name for r in full.refused] == ["tls-renew"]
    assert listed(catalog) == {"tls-renew"}


def test_a_skill_folder_that_cannot_be_read_keeps_its_last_good_revision(tmp_path: Path) -> None:
    """A skill folder its reader may not open (`chmod 000`; once: skipped, so its skill was archived) is
    refused and keeps its last good revision; `sources sync` exits 1 naming it. Run as an unprivileged
    user (root reads everything), through the real CLI."""
    unprivileged = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if os.geteuid() == 0 else []
    base = Path(tempfile.mkdtemp(prefix="issue32-"))  # outside pytest's root-only folder
    try:
        data, src = base / "data", base / "src"
        write_skill(src, "tls-renew", "Renew TLS certificates before they expire, with certbot.")
        write_skill(src, "csv-clean", "Clean messy CSV files with pandas.")
        data.mkdir()
        for path in (base, *base.rglob("*")):
            if unprivileged:
                os.chown(path, 65534, 65534)
        env = {"HOME": str(base)}

        def run(*args: str) -> tuple[int, Any]:
            proc = subprocess.run([*unprivileged, sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data),
                                   "--encoder", "hashing", "-q", *args, "--json"], capture_output=True, text=True,
                                  timeout=300, env={**os.environ, **env}, check=False)
            return proc.returncode, json.loads(proc.stdout) if proc.stdout.strip() else proc.stderr

        assert run("sources", "add", "mine", "--path", str(src), "--grant", "user:me")[0] == 0
        code, synced = run("sources", "sync")
        assert code == 0 and len(synced["sources"][0]["added"]) == 2, synced
        (src / "tls-renew").chmod(0)
        code, synced = run("sources", "sync")
        (report,) = synced["sources"]
        assert code == 1 and report["removed"] == [] and report["error"] is None
        assert [Path(r["file"]).parent.name for r in report["refused"]] == ["tls-renew"]
        code, page = run("list")
        assert sorted(s["name"] for s in page["items"]) == ["csv-clean", "tls-renew"]
    finally:
        (base / "src" / "tls-renew").chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


# -- 7. git fidelity -------------------------------------------------------------------------------------


def test_a_git_skill_is_stored_as_committed_whatever_its_attributes(empty_catalog: Catalog, tmp_path: Path) -> None:
    """`git archive` applies export-subst, export-ignore, ident and end-of-line attributes (once: a
    SKILL.md holding `$Format:%H$` was stored rewritten): the cache turns them off, so the stored bytes are
    the committed ones and an export-ignored resource is still there."""
    catalog, repo = empty_catalog, init_repo(tmp_path / "repo")
    folder = write_skill(repo, "git-stamp", "Stamp a build with its commit.", "Commit: $Format:%H$ and $Id$")
    (folder / "references").mkdir()
    (folder / "references" / "ignored.md").write_text("still here\n", encoding="utf-8")
    (repo / ".gitattributes").write_text("* export-subst ident text eol=crlf\nreferences/** export-ignore\n",
                                         encoding="utf-8")
    committed = (folder / "SKILL.md").read_bytes()
    commit(repo, "attributes that rewrite")
    report = catalog.sources.sync(SourceConfig("team", "team:eng", git=f"file://{repo}", ref="main"))
    assert report.added and not report.error
    skill = catalog.store.skill_by_slug("team:eng", "git-stamp")
    assert skill is not None
    revision = catalog.store.revision(skill.current_revision_id)
    assert revision is not None and revision.skill_md.encode("utf-8") == committed
    assert [(r.path, r.content) for r in catalog.store.resources(skill.current_revision_id, with_content=True)] == [
        ("references/ignored.md", b"still here\n")]


def test_committed_symlinks_are_reported_as_refused(empty_catalog: Catalog, tmp_path: Path) -> None:
    """Committed symbolic links (once: dropped with `refused: []`) are reported as a folder import reports
    them: a linked resource is skipped, a linked skill folder at the top is skipped, and a SKILL.md that
    is a link refuses its skill."""
    catalog, repo = empty_catalog, init_repo(tmp_path / "repo")
    write_skill(repo, "plain-skill", "A plain skill with a linked resource.")
    (repo / "plain-skill" / "passwd.md").symlink_to("/etc/passwd")
    (repo / "evil").symlink_to("/etc")
    (repo / "linked").mkdir()
    (repo / "linked" / "SKILL.md").symlink_to("../plain-skill/SKILL.md")
    (repo / "docs").mkdir()
    (repo / "docs" / "latest").symlink_to("../plain-skill")  # not a skill folder: not looked at, as for folders
    commit(repo, "links")
    report = catalog.sources.sync(SourceConfig("team", "team:eng", git=f"file://{repo}", ref="main"))
    assert not report.error and listed(catalog) == {"plain-skill"}
    refused = {r.file.rsplit("@", 1)[-1].split("/", 1)[-1]: r.reason for r in report.refused}
    assert refused == {
        "plain-skill/passwd.md": "skipped: symbolic link (not followed)",
        "evil": "skipped: symbolic link (not followed)",
        "linked/SKILL.md": "SKILL.md is refused: symbolic link (not followed)",
    }


def test_export_folders_left_by_a_killed_git_sync_are_removed_by_the_next(empty_catalog: Catalog, tmp_path: Path) -> None:
    """Each killed git sync once left `<data-dir>/sources/export-*` behind for good: the next run removes
    what no live run holds, and leaves nothing of its own."""
    catalog, repo = empty_catalog, init_repo(tmp_path / "repo")
    write_skill(repo, "alpha-skill", "The alpha skill does one thing well.")
    commit(repo, "one skill")
    named_like_one = SourceConfig("export-team", "team:ops", git=f"file://{repo}", ref="main")
    assert catalog.sources.sync(named_like_one).added
    sources = catalog.data_dir / "sources"
    stale = sources / "export-k1lled42"
    (stale / "tree" / "alpha-skill").mkdir(parents=True)
    (stale / "tree" / "alpha-skill" / "SKILL.md").write_text("half", encoding="utf-8")
    report = catalog.sources.sync(SourceConfig("team", "team:eng", git=f"file://{repo}", ref="main"))
    assert report.added and not report.error
    assert not stale.exists() and [p.name for p in sources.glob("export-*")] == ["export-team.git"]
    assert catalog.sources.sync(named_like_one).skipped  # its cache (and the commit it applied) is still there

