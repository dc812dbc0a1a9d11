"""The readiness gate's notion of a finished pull (``sync/health.py``: ``caught_up``), on a real store with the
pages applied by the real ``apply_page``: what counts as a pull that ended since the writer took the lead."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta

from fleetsupport import SUB
from syncsupport import config_for

from skillsearch.catalog.sync_state import SyncState
from skillsearch.service import Catalog
from skillsearch.sync.apply import apply_page


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
