"""Watched folder sources: real files, a real git checkout, the real watcher and model, in one process."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_sources import OPERATOR, TIMEOUT, commit, eventually, git, init_repo, listed, slugs, write_skill

from skillsearch.service import Catalog
from skillsearch.sync.local import LocalSources
from skillsearch.sync.sources import SourceConfig


def last_error(catalog: Catalog, source: str) -> str | None:
    state = catalog.store.sync.state(source)
    return state.last_error if state else None


@pytest.fixture
def keeper(empty_catalog: Catalog, tmp_path: Path) -> Iterator[LocalSources]:
    (tmp_path / "skills").mkdir()
    keeper = empty_catalog.sources.keeper([SourceConfig("mine", "user:me", path=tmp_path / "skills")])
    keeper.start()
    assert keeper.poller.wait_for_runs("mine", 1, TIMEOUT)
    yield keeper
    keeper.stop()


def test_a_watched_folder_is_mirrored_as_it_changes(empty_catalog: Catalog, keeper: LocalSources, tmp_path: Path) -> None:
    catalog, root = empty_catalog, tmp_path / "skills"
    write_skill(root, "ssh-hardening", "Harden an SSH server: disable passwords, limit users, rotate host keys.")
    eventually(lambda: "ssh-hardening" in slugs(catalog, "harden the ssh server"))
    skill = catalog.store.skill_by_slug("user:me", "ssh-hardening")
    assert skill is not None
    first = skill.current_revision_id

    write_skill(root, "ssh-hardening", "Harden an SSH server with fail2ban and key-only logins.")
    eventually(lambda: "fail2ban" in catalog.get_skill(OPERATOR, skill.skill_id).description)
    assert len(catalog.store.revisions_of(skill.skill_id)) == 2 and catalog.store.revision(first) is not None

    (root / "ssh-hardening" / "SKILL.md").write_text("---\nname: ssh-hard", encoding="utf-8")  # half written
    eventually(lambda: last_error(catalog, "mine") is not None)
    assert "fail2ban" in catalog.get_skill(OPERATOR, skill.skill_id).description

    shutil.rmtree(root / "ssh-hardening")
    eventually(lambda: "ssh-hardening" not in listed(catalog))
    assert "ssh-hardening" not in slugs(catalog, "harden the ssh server")
    assert keeper.status()["mine"]["watch"]["watching"] is True


def test_a_checkout_of_500_files_is_one_batch(empty_catalog: Catalog, tmp_path: Path) -> None:
    catalog, work = empty_catalog, init_repo(tmp_path / "checkout")
    (work / "README.md").write_text("skills\n", encoding="utf-8")
    commit(work, "empty")
    git(work, "checkout", "-q", "-b", "many")
    for i in range(50):
        folder = write_skill(work, f"generated-{i:02d}", f"Generated skill number {i} about topic {i * 7}.")
        for j in range(9):
            (folder / "references").mkdir(exist_ok=True)
            (folder / "references" / f"note-{j}.md").write_text(f"note {i}.{j}\n", encoding="utf-8")
    commit(work, "fifty skills, five hundred files")
    git(work, "checkout", "-q", "main")
    assert listed(catalog) == set()

    keeper = catalog.sources.keeper([SourceConfig("work", "user:me", path=work)])
    keeper.start()
    try:
        assert keeper.poller.wait_for_runs("work", 1, TIMEOUT)
        runs, batches = keeper.poller.runs("work"), keeper.watcher.batches("work")
        git(work, "checkout", "-q", "many")  # 500 files appear at once
        eventually(lambda: len(listed(catalog)) == 50)
        time.sleep(2.0)  # anything still queued would show as a second run
        assert keeper.watcher.batches("work") == batches + 1
        assert keeper.poller.runs("work") == runs + 1
        skill = catalog.store.skill_by_slug("user:me", "generated-07")
        assert skill is not None and len(catalog.store.resources(skill.current_revision_id)) == 9
    finally:
        keeper.stop()


def test_a_folder_that_appears_later_is_picked_up(empty_catalog: Catalog, tmp_path: Path) -> None:
    root = tmp_path / "not-yet"
    keeper = empty_catalog.sources.keeper([SourceConfig("later", "user:me", path=root)])
    keeper.watcher.recheck_s = 0.2
    keeper.start()
    try:
        assert keeper.poller.wait_for_runs("later", 1, TIMEOUT)
        assert last_error(empty_catalog, "later") is not None  # missing: reported, nothing lost
        staging = tmp_path / "staging"
        write_skill(staging, "late-skill", "A skill whose folder was created after the server started.")
        staging.rename(root)
        eventually(lambda: listed(empty_catalog) == {"late-skill"})
    finally:
        keeper.stop()


def test_the_catalogs_own_writes_do_not_run_a_folder_that_holds_its_data_directory(
        empty_catalog: Catalog, tmp_path: Path) -> None:
    # `sources add here --path .` beside the default data directory `./index`: the watched folder holds the
    # data directory, so every run's writes of the catalog were a change of the folder, and ran it again, endlessly.
    catalog = empty_catalog
    assert catalog.data_dir.resolve().is_relative_to(tmp_path.resolve())
    write_skill(tmp_path, "ssh-hardening", "Harden an SSH server: disable passwords, limit users, rotate host keys.")
    keeper = catalog.sources.keeper([SourceConfig("here", "user:me", path=tmp_path)])
    keeper.start()
    try:
        assert keeper.poller.wait_for_runs("here", 1, TIMEOUT)
        time.sleep(2.0)  # what the first run wrote has been seen by now
        runs = keeper.poller.runs("here")
        time.sleep(3.0)
        assert keeper.poller.runs("here") == runs, "the catalog's own writes ran the source again"
        write_skill(tmp_path, "nginx-tuning", "Tune nginx worker processes and buffers for high traffic.")
        eventually(lambda: "nginx-tuning" in listed(catalog))  # a change of the folder itself still runs it
    finally:
        keeper.stop()
