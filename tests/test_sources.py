"""Local sources mirrored into the catalog: real folders, a real git repository, the real model."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from skillsearch.core.domain import Principal
from skillsearch.core.errors import SkillArchivedError, SkillNotFoundError, ValidationError, WriteStopped
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.service import Catalog
from skillsearch.sync.git import GitCache
from skillsearch.sync.sources import SourceConfig, add_source, load_sources, remove_source
from skillsearch.sync.status import error_line

OPERATOR = Principal.operator()
TIMEOUT = 120.0  # generous: the machine is shared; no test asserts a duration


def eventually(check: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    """Until ``check()`` holds (a watched or synced change reaching the catalog), at most ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("the change never showed")
        time.sleep(0.05)


def stop_process(proc: subprocess.Popen[str]) -> None:
    """End a child ``serve``: SIGTERM, then SIGKILL if it has not exited within 30 s; its pipes read and closed."""
    proc.terminate()
    try:
        proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()


def write_skill(root: Path, slug: str, description: str, body: str = "Follow these steps.") -> Path:
    folder = root / slug
    folder.mkdir(parents=True, exist_ok=True)
    text = f"---\nname: {slug}\ndescription: {json.dumps(description)}\n---\n{body}\n"
    (folder / "SKILL.md").write_text(text, encoding="utf-8")
    return folder


def slugs(catalog: Catalog, query: str, principal: Principal = OPERATOR) -> list[str]:
    return [h.skill.slug for h in catalog.search(principal, SearchRequest(query, limit=10)).hits]


def listed(catalog: Catalog, principal: Principal = OPERATOR) -> set[str]:
    return {s.name for s in catalog.list_skills(principal, limit=200).items}  # names are the slugs here


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True)
    return out.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return init_repo(tmp_path / "repo")


def init_repo(path: Path) -> Path:
    """An empty git repository on branch main at ``path``, with a committer configured."""
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "dev@example.com")
    git(path, "config", "user.name", "dev")
    return path


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


# -- configuration ------------------------------------------------------------------------------------


def test_sources_are_added_and_removed_in_the_sync_file_keeping_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "sync.toml"
    path.write_text('# my settings\n[upstream]\nurl = "http://127.0.0.1:1"\ntoken = "t"  # keep me\n', encoding="utf-8")
    add_source(path, SourceConfig("mine", "user:me", path=tmp_path / "skills"))
    add_source(path, SourceConfig("team", "team:x", git="file:///srv/skills.git", ref="main", subdir="skills"))
    got = load_sources(path)
    assert [s.name for s in got] == ["mine", "team"]
    assert got[1].git == "file:///srv/skills.git" and got[1].subdir == "skills" and got[1].kind == "git"
    with pytest.raises(ValidationError, match="already configured"):
        add_source(path, SourceConfig("mine", "user:me", path=tmp_path))
    remove_source(path, "mine")
    text = path.read_text(encoding="utf-8")
    assert "# my settings" in text and "# keep me" in text and "mine" not in text
    assert [s.name for s in load_sources(path)] == ["team"]
    remove_source(path, "team")
    assert load_sources(path) == ()
    with pytest.raises(ValidationError, match="no source named"):
        remove_source(path, "team")


@pytest.mark.parametrize(
    "table, problem",
    [
        ('name = "a"\ngrant = "user:me"', "exactly one of path or git"),
        ('name = "a"\ngrant = "user:me"\npath = "x"\ngit = "https://h/r.git"', "exactly one of path or git"),
        ('name = "a"\ngrant = "nobody"\npath = "x"', "invalid grant 'nobody'"),
        ('name = "a b"\ngrant = "user:me"\npath = "x"', "name 'a b' must be"),
        ('name = "a"\ngrant = "user:me"\ngit = "ssh://h/r.git"', "https:// or file://"),
        ('name = "a"\ngrant = "user:me"\ngit = "--upload-pack=touch /tmp/x"', "https:// or file://"),
        ('name = "a"\ngrant = "user:me"\ngit = "https://h/r.git"\nsubdir = "../up"', "subdir must be"),
        ('name = "a"\ngrant = "user:me"\ngit = "https://h/r.git"\nref = "-x"', "ref must be"),
        ('name = "a"\ngrant = "user:me"\npath = "x"\nref = "main"', "belong to a git source"),
        ('name = "a"\ngrant = "user:me"\npath = "x"\ncolour = 1', "unknown key"),
    ],
)
def test_a_bad_source_table_is_one_validation_error_naming_the_problem(tmp_path: Path, table: str, problem: str) -> None:
    path = tmp_path / "sync.toml"
    path.write_text(f"[[sources]]\n{table}\n", encoding="utf-8")
    with pytest.raises(ValidationError, match=problem):
        load_sources(path)


def test_a_relative_path_is_relative_to_the_configuration_file(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "sync.toml"
    path.parent.mkdir()
    path.write_text('[[sources]]\nname = "a"\ngrant = "user:me"\npath = "skills"\n', encoding="utf-8")
    assert load_sources(path)[0].path == tmp_path / "conf" / "skills"


# -- a folder source ----------------------------------------------------------------------------------


def test_a_folder_source_mirrors_adds_edits_and_removals(empty_catalog: Catalog, tmp_path: Path) -> None:
    catalog = empty_catalog
    root = tmp_path / "skills"
    write_skill(root, "kube-debug", "Debug crashing Kubernetes pods with kubectl logs and describe.")
    write_skill(root, "csv-clean", "Clean messy CSV files with pandas: types, duplicates, missing values.")
    source = SourceConfig("mine", "user:me", path=root)

    first = catalog.sources.sync(source)
    assert len(first.added) == 2 and not first.changed and not first.removed and not first.error
    assert first.index is not None and first.index.embedded == 2
    assert slugs(catalog, "kubernetes pod crash")[0] == "kube-debug"
    kube = catalog.store.skill_by_slug("user:me", "kube-debug")
    assert kube is not None and kube.source == "mine"
    old_revision = kube.current_revision_id

    again = catalog.sources.sync(source)
    assert again.unchanged == 2 and not again.changed_ids and (again.index is None or again.index.embedded == 0)

    write_skill(root, "kube-debug", "Debug crashing Kubernetes pods and OOMKilled containers.", "New steps.")
    edited = catalog.sources.sync(source)
    assert edited.changed == [kube.skill_id] and edited.unchanged == 1
    detail = catalog.get_skill(OPERATOR, kube.skill_id)
    assert detail.revision_id != old_revision and "OOMKilled" in detail.description
    pinned = catalog.recall(OPERATOR, skill_id=kube.skill_id, revision_id=old_revision)
    assert pinned.kind == "root" and pinned.data.revision.revision_id == old_revision  # type: ignore[union-attr]
    assert "OOMKilled" not in pinned.data.description  # type: ignore[union-attr]

    shutil.rmtree(root / "kube-debug")
    removed = catalog.sources.sync(source)
    assert removed.removed == [kube.skill_id] and removed.unchanged == 1
    assert "kube-debug" not in slugs(catalog, "kubernetes pod crash")
    assert listed(catalog) == {"csv-clean"}
    with pytest.raises(SkillNotFoundError):
        catalog.get_skill(OPERATOR, kube.skill_id)
    with pytest.raises(SkillArchivedError):  # a host that pinned it learns it was withdrawn
        catalog.recall(OPERATOR, skill_id=kube.skill_id, revision_id=old_revision)

    write_skill(root, "kube-debug", "Debug crashing Kubernetes pods and OOMKilled containers.", "New steps.")
    back = catalog.sources.sync(source)
    assert back.added == [kube.skill_id]  # the same skill comes back, with its history
    assert len(catalog.store.revisions_of(kube.skill_id)) == 2


def test_a_half_written_skill_is_refused_and_its_last_good_revision_still_served(
    empty_catalog: Catalog, tmp_path: Path
) -> None:
    catalog = empty_catalog
    root = tmp_path / "skills"
    write_skill(root, "tls-renew", "Renew TLS certificates before they expire, with certbot.", "Run certbot renew.")
    write_skill(root, "oddly named", "A skill in a folder whose name is not a slug.")
    source = SourceConfig("mine", "user:me", path=root)
    catalog.sources.sync(source)
    skill = catalog.store.skill_by_slug("user:me", "tls-renew")
    odd = catalog.store.skill_by_slug("user:me", "oddly-named")
    assert skill is not None and odd is not None

    (root / "tls-renew" / "SKILL.md").write_text("---\nname: tls-renew\ndescrip", encoding="utf-8")
    (root / "oddly named" / "SKILL.md").write_text("", encoding="utf-8")
    report = catalog.sources.sync(source)
    assert not report.removed and not report.changed and not report.error
    assert {Path(r.file).parent.name for r in report.refused} == {"tls-renew", "oddly named"}
    # a file cut short was said to need a first line '---', which it has
    assert {Path(r.file).parent.name: r.reason for r in report.refused} == {
        "tls-renew": "the front matter is not closed (no line '---' after it)",
        "oddly named": "no YAML front matter (the file must start with a line '---')"}
    assert all(r.file.startswith(str(root)) for r in report.refused)
    assert catalog.get_skill(OPERATOR, skill.skill_id).instructions == "Run certbot renew."
    assert "tls-renew" in slugs(catalog, "renew TLS certificate")
    assert listed(catalog) == {"tls-renew", "oddly named"}
    state = catalog.store.sync.state("mine")
    assert state is not None and state.last_error is not None and "tls-renew" in state.last_error


def test_the_last_error_counts_the_refusals_it_does_not_list(empty_catalog: Catalog, tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "good-one", "A skill that parses.")
    for i in range(5):
        (root / f"broken-{i}").mkdir()
        (root / f"broken-{i}" / "SKILL.md").write_text("---\nname: x\n", encoding="utf-8")
    report = empty_catalog.sources.sync(SourceConfig("mine", "user:me", path=root))
    assert len(report.refused) == 5
    state = empty_catalog.store.sync.state("mine")
    assert state is not None and state.last_error is not None
    assert " refused 5: " in state.last_error and state.last_error.endswith("; and 2 more")
    assert state.last_error.count("broken-") == 3


def test_a_missing_folder_keeps_the_last_good_state(empty_catalog: Catalog, tmp_path: Path) -> None:
    catalog = empty_catalog
    root = tmp_path / "skills"
    write_skill(root, "regex-debug", "Debug regular expressions step by step.")
    source = SourceConfig("mine", "user:me", path=root)
    catalog.sources.sync(source)
    shutil.move(root, tmp_path / "elsewhere")
    report = catalog.sources.sync(source)
    assert report.error is not None and "not a folder" in report.error and not report.removed
    assert listed(catalog) == {"regex-debug"}
    state = catalog.store.sync.state("mine")
    assert state is not None and state.last_error is not None and state.last_success is not None


def test_status_says_whether_the_last_error_is_still_the_news(empty_catalog: Catalog, tmp_path: Path) -> None:
    """``sync --status`` and ``sources list`` say which a last error is: failing now, refused in the last
    (successful) run, or from before a success (a subscription keeps it as history)."""
    catalog = empty_catalog
    root = tmp_path / "skills"
    write_skill(root, "regex-debug", "Debug regular expressions step by step.")
    source = SourceConfig("mine", "user:me", path=root)

    def status() -> tuple[bool, str]:
        s = catalog.subscriptions.sync_status(None, sources=[source]).sources[0]
        return s.failing, error_line(s.last_success, s.last_error)

    catalog.sources.sync(source)
    assert status() == (False, "")
    shutil.move(root, tmp_path / "elsewhere")
    time.sleep(0.01)
    catalog.sources.sync(source)
    failing, line = status()
    assert failing and line.startswith("\n  last error (failing now): ") and "not a folder" in line
    shutil.move(tmp_path / "elsewhere", root)
    time.sleep(0.01)
    catalog.sources.sync(source)
    assert status() == (False, "")  # a source's run that applied it whole clears its error
    (root / "broken").mkdir()
    (root / "broken" / "SKILL.md").write_text("---\nname: [oops\n---\nbody\n", encoding="utf-8")
    time.sleep(0.01)
    catalog.sources.sync(source)
    failing, line = status()
    assert not failing and line.startswith("\n  refused in the last run: ") and "broken" in line
    # A subscription keeps its last error after a success (sync/apply.py): said as history.
    old = error_line("2026-12-06T10:00:00+00:00", "2026-12-06T09:00:00+00:00 upstream answered 502")
    assert old == "\n  earlier error (a run succeeded since): 2026-12-06T09:00:00+00:00 upstream answered 502"


def test_an_emptied_folder_removes_its_skills_only(empty_catalog: Catalog, tmp_path: Path) -> None:
    catalog = empty_catalog
    write_skill(tmp_path / "a", "shared-name", "Deploy the web service with helm charts.")
    write_skill(tmp_path / "b", "shared-name", "Deploy the web service with terraform modules.")
    write_skill(tmp_path / "c", "shared-name", "Another team's take on deploying.")
    write_skill(tmp_path / "c", "c-only", "Rotate database credentials.")
    a = SourceConfig("a", "user:me", path=tmp_path / "a")
    b = SourceConfig("b", "team:ops", path=tmp_path / "b")
    c = SourceConfig("c", "user:me", path=tmp_path / "c")  # same grant as a: its shared-name is refused
    assert len(catalog.sources.sync(a).added) == 1
    assert len(catalog.sources.sync(b).added) == 1
    report_c = catalog.sources.sync(c)
    assert [catalog.store.skill(s).slug for s in report_c.added] == ["c-only"]  # type: ignore[union-attr]
    assert len(report_c.refused) == 1 and "belongs to source 'a'" in report_c.refused[0].reason

    me = Principal(name="me", grants=frozenset({"user:me"}))
    ops = Principal(name="ops", grants=frozenset({"team:ops"}))
    assert listed(catalog, me) == {"shared-name", "c-only"} and listed(catalog, ops) == {"shared-name"}
    mine, theirs = catalog.store.skill_by_slug("user:me", "shared-name"), catalog.store.skill_by_slug("team:ops", "shared-name")
    assert mine is not None and theirs is not None and mine.skill_id != theirs.skill_id
    assert (mine.source, theirs.source) == ("a", "b") and "terraform" in theirs.description

    shutil.rmtree(tmp_path / "c")
    (tmp_path / "c").mkdir()
    emptied = catalog.sources.sync(c)
    assert len(emptied.removed) == 1 and not emptied.error  # its own c-only, never a's shared-name
    assert listed(catalog, me) == {"shared-name"} and listed(catalog, ops) == {"shared-name"}
    shutil.rmtree(tmp_path / "b" / "shared-name")
    catalog.sources.sync(b)
    assert listed(catalog, me) == {"shared-name"} and listed(catalog, ops) == set()


def test_another_local_source_may_take_over_a_withdrawn_skill(empty_catalog: Catalog, tmp_path: Path) -> None:
    catalog = empty_catalog
    write_skill(tmp_path / "old", "moved-skill", "Profile slow Python code with cProfile.")
    old = SourceConfig("old", "user:me", path=tmp_path / "old")
    new = SourceConfig("new", "user:me", path=tmp_path / "new")
    catalog.sources.sync(old)
    (tmp_path / "new").mkdir()
    shutil.move(tmp_path / "old" / "moved-skill", tmp_path / "new" / "moved-skill")
    assert catalog.sources.sync(new).refused  # still active in "old": refused
    assert len(catalog.sources.sync(old).removed) == 1
    taken = catalog.sources.sync(new)
    assert len(taken.added) == 1 and not taken.refused
    skill = catalog.store.skill(taken.added[0])
    assert skill is not None and skill.source == "new" and skill.status == "active"


# -- a git source -------------------------------------------------------------------------------------


def test_a_git_source_records_the_commit_and_refuses_a_ref_moving_backwards(
    empty_catalog: Catalog, repo: Path, tmp_path: Path
) -> None:
    catalog = empty_catalog
    write_skill(repo / "skills", "pr-review", "Review a pull request for correctness and tests.")
    write_skill(repo / "skills", "release-notes", "Write release notes from merged pull requests.")
    (repo / "README.md").write_text("not a skill\n", encoding="utf-8")
    first = commit(repo, "two skills")
    source = SourceConfig("team", "team:eng", git=f"file://{repo}", ref="main", subdir="skills")

    report = catalog.sources.sync(source)
    assert report.commit == first and len(report.added) == 2 and not report.refused
    review = catalog.store.skill_by_slug("team:eng", "pr-review")
    assert review is not None
    assert catalog.get_skill(OPERATOR, review.skill_id).version == first
    assert slugs(catalog, "review a pull request")[0] == "pr-review"
    assert catalog.sources.sync(source).skipped  # same commit: nothing read, nothing written

    write_skill(repo / "skills", "pr-review", "Review a pull request for correctness, tests and security.")
    second = commit(repo, "edit one")
    edited = catalog.sources.sync(source)
    assert edited.commit == second and edited.changed == [review.skill_id] and edited.unchanged == 1
    assert catalog.get_skill(OPERATOR, review.skill_id).version == second
    notes = catalog.store.skill_by_slug("team:eng", "release-notes")
    assert notes is not None and catalog.get_skill(OPERATOR, notes.skill_id).version == first  # untouched

    forced = catalog.sources.sync(source, force=True)  # re-read the same commit: nothing changed
    assert forced.unchanged == 2 and not forced.changed_ids and forced.index is None

    git(repo, "reset", "-q", "--hard", first)
    refused = catalog.sources.sync(source)
    assert refused.error is not None and "moved backwards" in refused.error and "--allow-rewind" in refused.error
    assert "security" in catalog.get_skill(OPERATOR, review.skill_id).description
    rewound = catalog.sources.sync(source, allow_rewind=True)
    assert rewound.changed == [review.skill_id] and rewound.warnings
    assert catalog.get_skill(OPERATOR, review.skill_id).version == first

    shutil.rmtree(repo / "skills" / "release-notes")
    commit(repo, "drop one")
    gone = catalog.sources.sync(source)
    assert gone.removed == [notes.skill_id]
    assert "release-notes" not in listed(catalog)


def test_a_rewritten_history_is_applied_with_a_warning(empty_catalog: Catalog, repo: Path) -> None:
    write_skill(repo, "one", "The first skill of a repository holding skills at its root.")
    commit(repo, "one")
    source = SourceConfig("team", "team:eng", git=f"file://{repo}", ref="main")
    assert len(empty_catalog.sources.sync(source).added) == 1
    write_skill(repo, "one", "The first skill, amended.")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--amend", "-m", "one, amended")
    report = empty_catalog.sources.sync(source)
    assert not report.error and report.changed and any("rewritten" in w for w in report.warnings)


def test_a_ref_lock_left_by_a_killed_git_does_not_fail_every_later_fetch(empty_catalog: Catalog, repo: Path) -> None:
    write_skill(repo, "one", "The first skill of a repository holding skills at its root.")
    first = commit(repo, "one")
    source = SourceConfig("team", "team:eng", git=f"file://{repo}", ref="main")
    assert len(empty_catalog.sources.sync(source).added) == 1
    cache = empty_catalog.data_dir / "sources" / "team.git"
    # A git killed (SIGKILL) while it updates the fetched ref, as a fetch killed at that moment is:
    # `update-ref --stdin` takes the ref's lock at "prepare" and says so, and is killed holding it.
    killed = subprocess.Popen(["git", f"--git-dir={cache}", "update-ref", "--stdin"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert killed.stdin is not None and killed.stdout is not None
    killed.stdin.write(f"start\nupdate refs/skillsearch/fetched {first}\nprepare\n")
    killed.stdin.flush()
    assert [killed.stdout.readline().strip() for _ in range(2)] == ["start: ok", "prepare: ok"]
    killed.kill()
    killed.wait()
    killed.stdin.close()
    killed.stdout.close()
    assert (cache / "refs" / "skillsearch" / "fetched.lock").exists()

    write_skill(repo, "two", "The second skill, committed after the kill.")
    commit(repo, "two")
    report = empty_catalog.sources.sync(source)
    assert report.error is None and len(report.added) == 1
    assert listed(empty_catalog) == {"one", "two"}


def test_a_stop_while_another_process_fetches_the_cache_does_not_wait_for_that_fetch(repo: Path,
                                                                                       tmp_path: Path) -> None:
    """A fetch takes the cache's flock, which another process's fetch may hold up to git's time limit (120 s).
    It waited in a blocking flock that no stop flag reached: SIGTERM waited for the other process's fetch. A
    stop flag set meanwhile now ends the wait with WriteStopped, nothing fetched."""
    write_skill(repo, "one", "The first skill of a repository holding skills at its root.")
    commit(repo, "one")
    stopping = threading.Event()
    cache = GitCache(tmp_path / "sources" / "team.git", stopping=stopping)
    cache.git_dir.parent.mkdir(parents=True)
    other = os.open(cache.git_dir.with_name(".team.git.writing"), os.O_RDWR | os.O_CREAT)  # another process's fetch
    fcntl.flock(other, fcntl.LOCK_EX)
    outcome: list[BaseException | str] = []

    def fetch() -> None:
        try:
            outcome.append(cache.fetch(f"file://{repo}", "main"))
        except BaseException as exc:
            outcome.append(exc)

    fetching = threading.Thread(target=fetch, daemon=True)
    try:
        fetching.start()
        stopping.set()
        fetching.join(30)  # a hang detector (no duration asserted): without the fix it waits for the holder
        assert not fetching.is_alive(), "the fetch waited for another process's lock through a stop"
    finally:
        os.close(other)
        fetching.join(TIMEOUT)
    assert len(outcome) == 1 and isinstance(outcome[0], WriteStopped), outcome
    assert not cache.git_dir.exists()  # nothing fetched


def test_an_unreachable_repository_or_missing_subdir_keeps_the_last_good_state(
    empty_catalog: Catalog, repo: Path, tmp_path: Path
) -> None:
    catalog = empty_catalog
    write_skill(repo / "skills", "pr-review", "Review a pull request for correctness and tests.")
    commit(repo, "one")
    source = SourceConfig("team", "team:eng", git=f"file://{repo}", ref="main", subdir="skills")
    catalog.sources.sync(source)

    shutil.move(repo / "skills", repo / "renamed")
    commit(repo, "rename the folder")
    missing = catalog.sources.sync(source)
    assert missing.error is not None and "not a folder" in missing.error and not missing.removed
    shutil.move(repo, tmp_path / "gone")
    unreachable = catalog.sources.sync(source)
    # git's own reason, whole (it was cut to its last line: "git fetch failed: and the repository exists.").
    assert unreachable.error == (f"git fetch failed: '{repo}' does not appear to be a git repository;"
                                 " Could not read from remote repository."), unreachable.error
    wrong_ref = catalog.sources.sync(SourceConfig("team", "team:eng", git=f"file://{tmp_path / 'gone'}", ref="nope",
                                                 subdir="skills"))
    assert wrong_ref.error is not None
    assert listed(catalog) == {"pr-review"}
    state = catalog.store.sync.state("team")
    assert state is not None and state.counts["errors"] == 3


def test_the_change_mark_moves_only_for_those_who_can_see_the_change(empty_catalog: Catalog, tmp_path: Path) -> None:
    catalog = empty_catalog
    me = Principal(name="me", grants=frozenset({"user:me"}))
    subscriber = Principal(name="s", grants=frozenset({"sub:pack"}))
    write_skill(tmp_path / "mine", "my-skill", "Format SQL queries consistently.")
    write_skill(tmp_path / "theirs", "their-skill", "Tune JVM garbage collection.")
    mine, theirs = SourceConfig("mine", "user:me", path=tmp_path / "mine"), SourceConfig("theirs", "sub:pack",
                                                                                       path=tmp_path / "theirs")
    catalog.sources.sync(mine)
    catalog.sources.sync(theirs)
    marks = (catalog.change_mark(me), catalog.change_mark(subscriber), catalog.change_mark(OPERATOR))
    changed_before = catalog.readiness().changed_at

    write_skill(tmp_path / "theirs", "their-skill", "Tune JVM garbage collection with G1 and ZGC.")
    catalog.sources.sync(theirs)
    assert catalog.change_mark(me) == marks[0]  # nothing of theirs leaks into my view
    assert catalog.change_mark(subscriber) != marks[1] and catalog.change_mark(OPERATOR) != marks[2]
    assert catalog.readiness().changed_at != changed_before

    moved = catalog.change_mark(subscriber)
    catalog.store.set_revoked("pack", True)  # a revocation hides the grant: the subscriber's view changes
    assert catalog.change_mark(subscriber) != moved and catalog.change_mark(me) == marks[0]
