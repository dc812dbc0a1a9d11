"""A sync's health (``sync/health.py``) and status (``sync/status.py``) on a real store, with pages applied by the
real ``apply_page`` and runs by the real ``Poller``: what counts as a pull that ended since the writer took the
lead (``caught_up``, the readiness gate), and which record of a failure wins."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fleetsupport import SUB
from syncsupport import config_for

from skillsearch.catalog.store import utc_now
from skillsearch.catalog.sync_state import SyncState
from skillsearch.service import Catalog
from skillsearch.sync.apply import apply_page
from skillsearch.sync.config import SyncConfig, load_subscriptions
from skillsearch.sync.followed import FollowedSubscriptions
from skillsearch.sync.health import degraded_reasons
from skillsearch.sync.poller import Poller


def _bad_item(skill_id: str) -> dict[str, object]:
    return {"op": "upsert", "skill": {"skill_id": skill_id, "name": ""}}  # refused by the contract


def test_a_page_that_refused_items_is_not_a_pull_that_finished(empty_catalog: Catalog) -> None:
    """A replica restored from an older snapshot pulls what it missed a page at a time. The first page's note
    of an item it refused (``last_error``, written with that page) counted as the end of a pull, so
    ``/readyz`` let it into the pool while the later pages, with the removals it had missed, were still to
    come. Only a stored end (the last page), a failure or a revocation ends a pull."""
    config = config_for("http://127.0.0.1:9", SUB)
    [sub] = config.subscriptions
    store = empty_catalog.store
    earlier = (datetime.now(UTC) - timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    store.sync.save(SyncState(sub.source, "c1", earlier, None, {}))  # the snapshot's last pull
    (empty_catalog.data_dir / "leader.lock").write_text(str(os.getpid()), encoding="ascii")  # the writer's term

    def caught_up() -> bool:
        [health] = empty_catalog.subscriptions.sync_health(config, (), time.time() - 60)
        return health.caught_up

    assert not caught_up()
    state = store.sync.state(sub.source)
    assert state is not None
    outcome, state = apply_page(store, None, sub, [_bad_item("sk-1")], state=state, cursor="c2", finished=False)
    assert outcome.rejected and state.last_error is not None  # the page's note, newer than the term's start
    assert not caught_up()  # more pages to come
    _, state = apply_page(store, None, sub, [], state=state, cursor="c3", finished=True)
    assert caught_up()


def _failed_once_on_a_full_disk(config: SyncConfig) -> Poller:
    """A real poller whose one run failed as SQLite fails on a full disk, having recorded nothing (the disk
    is the boundary here: the store refuses the page and the record of its failure alike)."""

    def run(_sub: object, _stop: threading.Event) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    poller = Poller(run, config.subscriptions, backoff_base_s=3600)
    poller.start()
    try:
        assert poller.wait_for_runs(SUB, 1, 30)
    finally:
        poller.stop()
    return poller


def test_a_sync_failure_the_store_could_not_record_still_counts_as_failing(empty_catalog: Catalog) -> None:
    """On a full disk the store refuses the page and the record of its failure alike: the poller failed 36
    times in a row over 11 minutes while /metrics said failing 0 s, /v1/sync/status said not failing and
    /readyz never turned degraded. The poller's own record counts too now."""
    config = config_for("http://127.0.0.1:9", SUB, interval_s=3600)
    (empty_catalog.data_dir / "leader.lock").write_text(str(os.getpid()), encoding="ascii")  # a writer's term began
    poller = _failed_once_on_a_full_disk(config)
    assert empty_catalog.store.sync.state(f"upstream:{SUB}") is None  # nothing reached the store
    [health] = empty_catalog.subscriptions.sync_health(config, (), time.time() - 60, poller)
    assert health.failing_for_s is not None and degraded_reasons([health], 0.0), health
    assert health.caught_up  # a pull ended since the writer's term began, failed: the replica comes in, degraded
    [status] = empty_catalog.subscriptions.sync_status(config, poller).subscriptions
    assert status.failing and "disk is full" in (status.poller or {}).get("last_error", "")
    assert status.poller is not None and status.poller["failing_since"] is not None


def test_a_success_stored_after_the_pollers_failures_ends_them(empty_catalog: Catalog) -> None:
    """The writer's poller fails where the store cannot record it (a full disk); the operator frees the disk and
    runs ``skillsearch sync``, which succeeds and stores it. The poller's own record of its failures, kept
    for the case the store could not record them, went on saying failing (``/readyz`` degraded, the failing
    seconds growing, ``/v1/sync/status`` ``failing: true`` beside a newer ``last_success``) until the poller's
    next run, up to its 300 s backoff later. A failure counts while it is newer than the stored success."""
    config = config_for("http://127.0.0.1:9", SUB, interval_s=3600)
    [sub] = config.subscriptions
    poller = _failed_once_on_a_full_disk(config)
    since = time.time() - 60
    [health] = empty_catalog.subscriptions.sync_health(config, (), since, poller)
    assert health.failing_for_s is not None  # the poller's record: nothing reached the store
    empty_catalog.store.sync.save(SyncState(sub.source, "c1", utc_now(), None, {}))  # `skillsearch sync`, later

    [health] = empty_catalog.subscriptions.sync_health(config, (), since, poller)
    assert health.failing_for_s is None and not degraded_reasons([health], 0.0), health
    [status] = empty_catalog.subscriptions.sync_status(config, poller).subscriptions
    assert not status.failing, status


def test_a_subscription_added_to_the_followed_file_is_caught_up_only_by_a_pull_since(
        empty_catalog: Catalog, tmp_path: Path) -> None:
    """A server follows sync.toml: a subscription taken out of it and put back (its pull before the removal
    ended during the writer's term) counted as caught up at once, though a revocation sent while it was out
    was ignored (not one of ours then). As after a restart, only a pull ended since it was added counts."""
    path = tmp_path / "sync.toml"
    upstream = '[upstream]\nurl = "http://127.0.0.1:9"\ntoken = "t"\n'
    path.write_text(upstream, encoding="utf-8")
    (empty_catalog.data_dir / "leader.lock").write_text(str(os.getpid()), encoding="ascii")  # the writer's term
    time.sleep(0.05)
    store, source = empty_catalog.store, f"upstream:{SUB}"
    store.sync.save(SyncState(source, "c1", utc_now(), None, {}))  # pulled during the term, before it was out
    followed = FollowedSubscriptions(path, load_subscriptions(path))
    time.sleep(0.05)
    path.write_text(upstream + f'\n[[subscriptions]]\nid = "{SUB}"\n', encoding="utf-8")

    def caught_up() -> bool:
        [health] = empty_catalog.subscriptions.sync_health(followed.current(), (), time.time() - 60,
                                                           added=followed.added())
        return health.caught_up

    assert SUB in followed.added() and not caught_up()
    time.sleep(0.05)
    store.sync.save(SyncState(source, "c2", utc_now(), None, {}))  # its first pull since
    assert caught_up()
    path.write_text(upstream + f'\n[[subscriptions]]\nid = "{SUB}"\ninterval_s = 30\n', encoding="utf-8")
    assert caught_up()  # changed, not added: still caught up
