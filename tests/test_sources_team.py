"""A team's everyday use of local sources, outside in: a git repository whose configuration changes (another
branch, another subdir), a source removed while a server keeps the sources, a source that holds no skill,
and the commands the CLI tells its user to run next. Real git repositories, real folders, the real model."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from test_sources import OPERATOR, commit, eventually, git, init_repo, listed, slugs, stop_process, write_skill

from skillsearch.cli import main
from skillsearch.http.auth import add_principal
from skillsearch.service import Catalog
from skillsearch.sync.sources import SourceConfig


def run_cli(*args: str) -> tuple[int, Any]:
    out = io.StringIO()
    code = main([*args, "--json"], out=out)
    return code, json.loads(out.getvalue())


@contextmanager
def serving(data: Path) -> Iterator[str]:
    """``skillsearch serve`` on ``data`` as its own process (the hashing encoder: nothing to load); its URL."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "HF_HUB_OFFLINE": "1"}
    log = data.parent / "serve.log"  # a file, not a pipe: a pipe nobody reads would block the server's log
    with log.open("w", encoding="utf-8") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data), "--encoder", "hashing", "-q", "serve",
             "--port", "0"], stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        url = re.search(r"serving on (http://127\.0\.0\.1:\d+)", first)
        assert url, first + (log.read_text(encoding="utf-8") if proc.wait(timeout=30) is not None else "")
        yield url.group(1)
    finally:
        stop_process(proc)


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


def test_a_source_removed_while_serve_runs_stays_removed(tmp_path: Path) -> None:
    """`sources remove` from another terminal archives the source's skills at once; the running server's
    watcher and interval runs then brought them back at the next write in the folder (or the next interval),
    since the server kept running the sources it had read at start."""
    data, skills, others = tmp_path / "data", tmp_path / "skills", tmp_path / "others"
    write_skill(skills, "kafka-offsets", "Reset and rotate Kafka consumer group offsets safely.")
    others.mkdir()
    for name, folder in (("mine", skills), ("other", others)):
        code, _ = run_cli("--data-dir", str(data), "-q", "sources", "add", name, "--path", str(folder),
                          "--grant", "user:me", "--interval", "1")
        assert code == 0
    me = {"Authorization": f"Bearer {add_principal(data / 'principals.toml', 'me', ['user:me'], ['skills:read'])}"}
    with serving(data) as url, httpx.Client(base_url=url, headers=me, timeout=30) as http:

        def names() -> list[str]:
            return [item["name"] for item in http.get("/v1/skills").json()["items"]]

        def runs() -> dict[str, int]:
            return {s["name"]: int((s["runner"] or {}).get("runs", 0))
                    for s in http.get("/v1/sync/status").json()["sources"]}

        eventually(lambda: names() == ["kafka-offsets"])
        code, removed = run_cli("--data-dir", str(data), "--encoder", "hashing", "-q", "sources", "remove", "mine")
        assert code == 0 and len(removed["archived"]) == 1
        assert names() == []  # at once
        assert list(runs()) == ["other"]  # the status follows sync.toml
        before = runs()["other"]
        write_skill(skills, "kafka-offsets", "Reset, rotate and audit Kafka consumer group offsets.")
        write_skill(skills, "pg-vacuum", "Vacuum and analyze a bloated PostgreSQL table.")
        # The watcher has seen the writes and the poller has gone round twice (the other source's interval runs).
        eventually(lambda: runs()["other"] >= before + 2)
        assert names() == []


def test_a_source_that_holds_no_skill_says_so_and_where_skills_are(tmp_path: Path, capsys: Any) -> None:
    """A repository keeping its skills in skills/, added without --subdir, and a folder holding only notes:
    each run said `0 added, ... 0 refused` and nothing else, as if the skills had been read and were none."""
    repo = team_repo(tmp_path)
    notes = tmp_path / "notes"
    (notes / "drafts").mkdir(parents=True)
    (notes / "drafts" / "README.md").write_text("not a skill\n", encoding="utf-8")
    data = tmp_path / "data"
    for argv in (["root", "--git", f"file://{repo}", "--ref", "main"], ["notes", "--path", str(notes)]):
        code, _ = run_cli("--data-dir", str(data), "-q", "sources", "add", *argv, "--grant", "team:eng")
        assert code == 0
    capsys.readouterr()
    code, synced = run_cli("--data-dir", str(data), "--encoder", "hashing", "-q", "sources", "sync")
    assert code == 0  # an empty source is a state, not a failure
    root, empty = synced["sources"]
    assert root["added"] == [] and empty["added"] == []
    assert any("holds no skill" in w and "--subdir other" in w for w in root["warnings"]), root["warnings"]
    assert any("holds no skill" in w and "--path" not in w for w in empty["warnings"]), empty["warnings"]
    err = capsys.readouterr().err
    assert f"warning: notes: {notes} holds no skill" in err and "warning: root: " in err
    assert err.count("holds no skill") == 2, err  # printed once each: the mirror's log record is not shown too


def test_the_commands_a_hint_names_act_on_the_same_data_directory(tmp_path: Path, capsys: Any) -> None:
    """`sources add` said `run: skillsearch sources sync NAME` and a ref moved backwards said to run
    `skillsearch sources sync NAME --allow-rewind`, both without the `--data-dir` given: pasted, they ran
    on ./index, which holds no such source."""
    repo = team_repo(tmp_path)
    data = tmp_path / "data dir"
    out = io.StringIO()
    assert main(["--data-dir", str(data), "-q", "sources", "add", "team", "--git", f"file://{repo}", "--ref", "release",
                 "--subdir", "skills", "--grant", "team:eng"], out=out) == 0
    assert f"run: skillsearch --data-dir '{data}' sources sync team" in out.getvalue()
    code, _ = run_cli("--data-dir", str(data), "--encoder", "hashing", "-q", "sources", "sync")
    assert code == 0
    git(repo, "branch", "-f", "release", "main")  # release moved back to its parent
    capsys.readouterr()
    code, _ = run_cli("--data-dir", str(data), "--encoder", "hashing", "-q", "sources", "sync", "team")
    assert code == 1
    assert f"`skillsearch --data-dir '{data}' sources sync team --allow-rewind`" in capsys.readouterr().err


def test_the_same_skill_name_from_two_sources_in_two_grants_is_told_apart_in_text(tmp_path: Path) -> None:
    """The team repository and a developer's folder both carry `transcribe`, in team:eng and user:me: both
    are served, and `list` and `search` printed two identical `transcribe` rows, with nothing to say which."""
    team, mine, data = tmp_path / "team", tmp_path / "mine", tmp_path / "data"
    write_skill(team, "transcribe", "Transcribe audio files to text with speaker labels.")
    write_skill(team, "pr-review", "Review a pull request for correctness and tests.")
    write_skill(mine, "transcribe", "Transcribe audio files to text, my own way.")
    for name, folder, grant in (("team", team, "team:eng"), ("mine", mine, "user:me")):
        code, _ = run_cli("--data-dir", str(data), "-q", "sources", "add", name, "--path", str(folder), "--grant", grant)
        assert code == 0
    code, _ = run_cli("--data-dir", str(data), "--encoder", "hashing", "-q", "sources", "sync")
    assert code == 0
    for argv in (["list"], ["search", "transcribe audio", "--mode", "lexical"]):
        out = io.StringIO()
        assert main(["--data-dir", str(data), "-q", *argv], out=out) == 0
        rows = [line for line in out.getvalue().splitlines() if "transcribe" in line and "sk_" in line]
        assert len(rows) == 2 and rows[0] != rows[1]
        assert sorted(row.rsplit("(", 1)[-1] for row in rows) == ["team:eng)", "user:me)"], rows
        pr = [line for line in out.getvalue().splitlines() if "pr-review" in line and "sk_" in line]
        assert all("(" not in line for line in pr)  # a name no other skill has keeps its row as it was


def test_a_ref_edited_in_sync_toml_while_serve_runs_is_followed(tmp_path: Path) -> None:
    """The team moves the catalog from `release` to `main` by editing `ref` in sync.toml: the running server
    follows it at its next run (the server fetched the ref it had read at start until restarted)."""
    repo, data = team_repo(tmp_path), tmp_path / "data"
    code, _ = run_cli("--data-dir", str(data), "-q", "sources", "add", "team", "--git", f"file://{repo}", "--ref",
                      "release", "--subdir", "skills", "--grant", "team:eng", "--interval", "1")
    assert code == 0
    me = {"Authorization": f"Bearer {add_principal(data / 'principals.toml', 'me', ['team:eng'], ['skills:read'])}"}
    with serving(data) as url, httpx.Client(base_url=url, headers=me, timeout=30) as http:

        def review() -> str:
            response = http.get("/v1/skills/pr-review")
            return str(response.json().get("description", "")) if response.status_code == 200 else ""

        eventually(lambda: "security" in review())
        config = data / "sync.toml"
        config.write_text(config.read_text(encoding="utf-8").replace('ref = "release"', 'ref = "main"'),
                          encoding="utf-8")
        eventually(lambda: review() == "Review a pull request for correctness and tests.")
    # The server's log says so, as the CLI's `sources sync` would have (its warnings were the CLI's alone).
    log = (tmp_path / "serve.log").read_text(encoding="utf-8")
    assert f"source team: now reading file://{repo}#main:skills (was file://{repo}#release:skills)" in log, log


def test_a_cursor_from_before_tracking_learns_what_it_tracks_on_a_run_that_changes_nothing(
    empty_catalog: Catalog, tmp_path: Path
) -> None:
    """A data directory synced before cursors recorded the ref: its first run with nothing new records it,
    so the team's later switch to another branch is no rewind there either."""
    from skillsearch.catalog.sync_state import SyncState

    repo = team_repo(tmp_path)
    release = SourceConfig("team", "team:eng", git=f"file://{repo}", ref="release", subdir="skills")
    assert len(empty_catalog.sources.sync(release).added) == 2
    state = empty_catalog.store.sync.state("team")
    assert state is not None and state.cursor is not None
    older = {k: v for k, v in json.loads(state.cursor).items() if k != "tracks"}
    with empty_catalog.store.transaction():
        empty_catalog.store.sync.save(SyncState("team", json.dumps(older), state.last_success, None, state.counts))
    assert empty_catalog.sources.sync(release).skipped
    main_ref = SourceConfig("team", "team:eng", git=f"file://{repo}", ref="main", subdir="skills")
    report = empty_catalog.sources.sync(main_ref)
    assert report.error is None, report.error
    assert len(report.changed) == 1


def test_a_source_added_or_moved_while_serve_runs_is_kept_in_step(tmp_path: Path) -> None:
    """`sources add` from another terminal while `serve` ran changed nothing until a restart: the server ran
    and watched the sources it had read at start (a changed `path` too). It follows sync.toml now: a source
    added there is run and watched, its status shown; one whose path is edited is read and watched there."""
    data, first, second, moved = tmp_path / "data", tmp_path / "first", tmp_path / "second", tmp_path / "moved"
    write_skill(first, "kafka-offsets", "Reset and rotate Kafka consumer group offsets safely.")
    write_skill(second, "pg-vacuum", "Vacuum and analyze a bloated PostgreSQL table.")
    write_skill(moved, "dns-cutover", "Move a zone to a new DNS provider without downtime.")
    code, _ = run_cli("--data-dir", str(data), "-q", "sources", "add", "mine", "--path", str(first), "--grant",
                      "user:me")
    assert code == 0
    me = {"Authorization": f"Bearer {add_principal(data / 'principals.toml', 'me', ['user:me'], ['skills:read'])}"}
    with serving(data) as url, httpx.Client(base_url=url, headers=me, timeout=30) as http:

        def names() -> set[str]:
            return {item["name"] for item in http.get("/v1/skills", params={"limit": 50}).json()["items"]}

        eventually(lambda: names() == {"kafka-offsets"})
        code, _ = run_cli("--data-dir", str(data), "-q", "sources", "add", "more", "--path", str(second), "--grant",
                          "user:me")
        assert code == 0
        eventually(lambda: "pg-vacuum" in names())  # run without a restart
        status = http.get("/v1/sync/status").json()
        assert [s["name"] for s in status["sources"]] == ["mine", "more"]
        write_skill(second, "redis-failover", "Fail a Redis primary over to its replica.")
        eventually(lambda: "redis-failover" in names())  # and watched
        config = data / "sync.toml"
        config.write_text(config.read_text(encoding="utf-8").replace(str(second), str(moved)), encoding="utf-8")
        eventually(lambda: names() == {"kafka-offsets", "dns-cutover"})  # read where it now points
        write_skill(moved, "tls-renewal", "Renew a TLS certificate before it expires.")
        eventually(lambda: "tls-renewal" in names())  # and watched there
        write_skill(second, "ignored-now", "A skill in the folder the source no longer names.")
        config.write_text(config.read_text(encoding="utf-8") + "\n[[sources]\n", encoding="utf-8")  # half written
        log = tmp_path / "serve.log"
        eventually(lambda: "the sources stay as they were until it reads" in log.read_text(encoding="utf-8"))
        write_skill(moved, "cron-audit", "Audit the crontabs of a fleet.")
        eventually(lambda: "cron-audit" in names())  # a file that does not read changes nothing
        assert "ignored-now" not in names()
        assert [s["name"] for s in http.get("/v1/sync/status").json()["sources"]] == ["mine", "more"]
    text = log.read_text(encoding="utf-8")
    assert "sources: added: more" in text and "sources: changed: more" in text, text


def test_a_first_source_added_beside_a_server_started_without_sync_toml_is_kept(tmp_path: Path) -> None:
    """`make serve`, then `sources add` in another terminal: the data directory had no sync.toml when the
    server started, so it read none until restarted. It follows the file from its first appearance."""
    data, skills = tmp_path / "data", tmp_path / "skills"
    write_skill(skills, "kafka-offsets", "Reset and rotate Kafka consumer group offsets safely.")
    data.mkdir()
    me = {"Authorization": f"Bearer {add_principal(data / 'principals.toml', 'me', ['user:me'], ['skills:read'])}"}
    with serving(data) as url, httpx.Client(base_url=url, headers=me, timeout=30) as http:
        assert not (data / "sync.toml").exists()
        code, _ = run_cli("--data-dir", str(data), "-q", "sources", "add", "mine", "--path", str(skills), "--grant",
                          "user:me")
        assert code == 0
        eventually(lambda: [i["name"] for i in http.get("/v1/skills").json()["items"]] == ["kafka-offsets"])
        assert [s["name"] for s in http.get("/v1/sync/status").json()["sources"]] == ["mine"]
