"""How fresh each configured subscription and local source is: what ``/metrics`` exposes per sync and what
``/readyz`` calls *degraded*.

A sync is **failing** when its last attempt failed (``last_error`` is newer than ``last_success``; a run
that succeeded while refusing some skills records both at the same moment, which is not a failure). It has
been failing since the first failure after its last success (``SyncState.failing_since``, kept by the
ledger; a catalog written before that was kept falls back to the latest failure), and, when it never
succeeded, for at most as long as this process has been watching (``since``). How old the served data is
stays ``last_success_age_s``: one failed poll after a long interval is not yet a failing sync, and a revoked
subscription (the platform answers 403 to each pull) is not failing at all. A replica
whose sync has been failing for longer than the operator's bound is degraded: it still answers, from its
last good state.

A subscription is **caught up** once a pull of it has finished (stored, failed or found revoked) since the
data directory's writer took the lead (``sync/leader.term_began``), or since it was added to the followed
``sync.toml`` if that was later (``sync/followed.py``): until then the replica may hold skills
whose revocation or removal it has not heard of (it was down when the webhook went out, or it was restored
from an older snapshot), and ``/readyz`` keeps it out of the balancer's pool.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from skillsearch.catalog.store import CatalogStore
from skillsearch.catalog.sync_state import ended_pull, failing, stamp
from skillsearch.sync.config import SyncConfig
from skillsearch.sync.sources import SourceConfig

__all__ = ["SyncHealth", "behind", "degraded_reasons", "poller_failing", "sync_health"]


@dataclass(frozen=True)
class SyncHealth:
    kind: Literal["subscription", "source"]
    name: str
    last_success_age_s: float | None  # None: never succeeded
    failing_for_s: float | None  # None: the last attempt did not fail
    caught_up: bool = True  # a pull finished since the writer took the lead (always True for a source)


def _stamp(text: str | None) -> float | None:
    """Unix seconds of an ISO time, or of the time that starts a ``last_error`` (``"<time> <message>"``)."""
    moment = stamp(text)
    return None if moment is None else moment.timestamp()


def poller_failing(failing_since: float | None, finished: float | None, success: float | None) -> bool:
    """Whether a poller's own record says failing (``failing_since``; its last run ended at ``finished``) where
    the store may not (a full disk refuses the record of a failure too): only while that failed run is newer
    than the stored ``success``, which another process (``skillsearch sync``) may have stored since."""
    return failing_since is not None and (success is None or (finished is not None and finished > success))


def sync_health(store: CatalogStore, config: SyncConfig | None, sources: Sequence[SourceConfig], since: float,
                now: float | None = None, term_began: float | None = None,
                ran: Mapping[str, tuple[float | None, float | None]] | None = None,
                added: Mapping[str, float] | None = None) -> list[SyncHealth]:
    """Per configured subscription and source; ``since``: when this process started watching (unix s);
    ``term_began``: when the data directory's writer took the lead (unix s; ``None``: every sync counts as
    caught up); ``ran``: this process's poller's own record per subscription id (``Poller.run_times``: when
    its last run ended, since when its runs fail), which counts too: a failure the store could not record
    (a full disk refuses that write as well) is still a failing sync. ``added``: when a subscription was
    added to the followed ``sync.toml`` while the server ran (unix s): only a pull ended since then catches
    it up, as one begun with the writer's term would at a restart (a pull from before it was removed and
    added again may have missed a revocation, which a webhook for a subscription not configured is not)."""
    now = time.time() if now is None else now
    named: list[tuple[Literal["subscription", "source"], str, str]] = [
        *(("subscription", s.id, s.source) for s in (config.subscriptions if config is not None else ())),
        *(("source", s.name, s.name) for s in sources),
    ]
    out = []
    for kind, name, key in named:
        state = store.sync.state(key)
        success = _stamp(state.last_success) if state else None
        failing_for: float | None = None
        # A subscription the platform revoked is not failing: the replica shows what it must (none of its
        # skills), however often the platform repeats its 403.
        revoked = kind == "subscription" and store.revoked_at(name) is not None
        if state is not None and not revoked and failing(state.last_success, state.last_error):
            began = _stamp(state.failing_since)
            if began is None or (success is not None and began < success):
                began = _stamp(state.last_error)  # written before the first failure was kept
            if success is None:
                began = max(began or since, since)
            failing_for = max(0.0, now - (began if began is not None else since))
        finished, failing_since = (ran or {}).get(name, (None, None)) if kind == "subscription" else (None, None)
        if not revoked and poller_failing(failing_since, finished, success):
            failing_for = max(failing_for or 0.0, now - (failing_since or now))
        caught_up = True
        if kind == "subscription" and not revoked and term_began is not None:
            # A page's note of refused items is no end: the pages after it (removals it missed) are still to come.
            ended = _stamp(state.last_error) if state and ended_pull(state.last_error) else None
            attempts = [t for t in (success, ended, finished) if t is not None]
            caught_up = bool(attempts) and max(attempts) >= max(term_began, (added or {}).get(name, term_began))
        out.append(SyncHealth(kind, name, None if success is None else max(0.0, now - success), failing_for,
                              caught_up))
    return out


def degraded_reasons(health: Sequence[SyncHealth], bound_s: float) -> list[str]:
    """One sentence per sync failing for longer than ``bound_s``."""
    return [
        f"{h.kind} {h.name}: sync failing for {h.failing_for_s:.0f}s (bound {bound_s:.0f}s)"
        for h in health if h.failing_for_s is not None and h.failing_for_s > bound_s
    ]


def behind(health: Sequence[SyncHealth]) -> list[str]:
    """The subscriptions with no pull finished since the writer took the lead (``kind name``)."""
    return [f"{h.kind} {h.name}" for h in health if not h.caught_up]
