"""A team's everyday use of local sources, outside in: a git repository whose configuration changes (another
branch, another subdir), a source removed while a server keeps the sources, a source that holds no skill,
and the commands the CLI tells its user to run next. Real git repositories, real folders, the real model."""

from __future__ import annotations

from pathlib import Path

from test_sources import OPERATOR, commit, git, init_repo, listed, slugs, write_skill

from skillsearch.service import Catalog
from skillsearch.sync.sources import SourceConfig


def team_repo(tmp_path: Path) -> Path:
    """A repository whose `main` holds two skills under skills/ and one under other/, and whose `release`
    branch is one commit ahead of main (an edit), so main is an ancestor of release."""
    repo = init_repo(tmp_path / "repo")
    write_skill(repo / "skills", "pr-review", "Review a pull request for correctness and tests.")
    write_skill(repo / "skills", "release-notes", "Write release notes from merged pull requests.")
    write_skill(repo / "other", "kangaroo-billing", "Reconcile the kangaroo billing ledger at month end.")
    commit(repo, "skills and other")
    git(repo, "checkout", "-q", "-b", "release")
    write_skill(repo / "skills", "pr-review", "Review a pull request for correctness, tests and security.")
    commit(repo, "release: a stricter review")
    git(repo, "checkout", "-q", "main")
    return repo


def test_switching_the_tracked_branch_is_no_rewind(empty_catalog: Catalog, tmp_path: Path) -> None:
    """`ref` changed in sync.toml from release to main, whose commit is an ancestor of release's: the branch
    main never moved, so the run applies main (with a warning saying what it reads now), no --allow-rewind."""
    repo = team_repo(tmp_path)
    release = SourceConfig("team", "team:eng", git=f"file://{repo}", ref="release", subdir="skills")
    assert len(empty_catalog.sources.sync(release).added) == 2
    review = empty_catalog.store.skill_by_slug("team:eng", "pr-review")
    assert review is not None and "security" in empty_catalog.get_skill(OPERATOR, review.skill_id).description

    main_ref = SourceConfig("team", "team:eng", git=f"file://{repo}", ref="main", subdir="skills")
    report = empty_catalog.sources.sync(main_ref)
    assert report.error is None, report.error
    assert report.changed == [review.skill_id]
    assert any("now reading" in w and "#release" in w for w in report.warnings)
    assert "security" not in empty_catalog.get_skill(OPERATOR, review.skill_id).description
    # main now moving backwards is judged against main's own last commit again.
    assert empty_catalog.sources.sync(main_ref).skipped


def test_changing_the_subdir_at_the_same_commit_reads_the_new_folder(empty_catalog: Catalog, tmp_path: Path) -> None:
    """`subdir` changed from skills to other while the ref still names the commit last applied: the run
    must not say "nothing new" and keep serving the old folder's skills."""
    repo = team_repo(tmp_path)
    skills = SourceConfig("team", "team:eng", git=f"file://{repo}", ref="main", subdir="skills")
    assert len(empty_catalog.sources.sync(skills).added) == 2
    other = SourceConfig("team", "team:eng", git=f"file://{repo}", ref="main", subdir="other")
    report = empty_catalog.sources.sync(other)
    assert not report.skipped and report.error is None
    assert len(report.added) == 1 and len(report.removed) == 2
    assert listed(empty_catalog) == {"kangaroo-billing"}
    assert slugs(empty_catalog, "kangaroo billing ledger")[:1] == ["kangaroo-billing"]
