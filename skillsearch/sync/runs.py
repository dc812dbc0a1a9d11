"""Running several subscriptions: once each (``skillsearch sync``), or on a background poller (``serve``).

Both take ``run_one``, the one-subscription run (``Catalog.subscriptions.sync_subscription``: the store, the index and the
index lock), so this module knows nothing above ``sync``. One subscription's failure never stops the others.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from threading import Event
from typing import Protocol

from skillsearch.core.errors import SkillSearchError, UpstreamUnavailableError, ValidationError, WriteStopped
from skillsearch.sync.client import HttpSubscriptionClient, SubscriptionClient
from skillsearch.sync.config import SubscriptionConfig, SyncConfig
from skillsearch.sync.poller import Poller
from skillsearch.sync.runner import SyncReport, unexpected_text

__all__ = ["RunOne", "make_poller", "sync_each"]

log = logging.getLogger("skillsearch.sync")


class RunOne(Protocol):
    def __call__(self, sub: SubscriptionConfig, client: SubscriptionClient, *, page_limit: int = 100,
                 cancel: Event | None = None, max_pages: int = 1000) -> SyncReport: ...


def sync_each(run_one: RunOne, config: SyncConfig, subscription_ids: Sequence[str] | None = None,
              client: SubscriptionClient | None = None, cancel: Event | None = None) -> list[SyncReport]:
    """One run of each configured subscription (or of those named). A subscription whose upstream fails
    gets a report with ``error`` set; the others still run. A run whose index write stopped raises its
    ``WriteStopped`` on (the process is stopping). ``cancel`` (the CLI's SIGTERM): once set, a
    request in flight and a retry's wait stop, as when a poller stops, and no later subscription starts."""
    subs = list(config.subscriptions)
    if subscription_ids:
        unknown = sorted(set(subscription_ids) - {s.id for s in subs})
        if unknown:
            raise ValidationError(f"not configured: {', '.join(unknown)}", {"unknown": unknown})
        subs = [s for s in subs if s.id in subscription_ids]
    own = client is None
    http = client or HttpSubscriptionClient(config.upstream, cancel=cancel)
    reports: list[SyncReport] = []
    try:
        for sub in subs:
            if cancel is not None and cancel.is_set():
                break
            try:
                reports.append(run_one(sub, http, page_limit=config.upstream.page_limit,
                                       max_pages=config.upstream.max_pages_per_run))
            except SkillSearchError as exc:
                reports.append(SyncReport.failed(sub.id, exc))
            except WriteStopped:  # the process is stopping (SIGTERM), not a failure: no later run starts
                raise
            except Exception as exc:  # one subscription's failure never stops the others
                log.exception("sync %s: run failed", sub.id)
                reports.append(SyncReport.failed(sub.id, UpstreamUnavailableError(
                    f"{unexpected_text(exc)}; see the log", {"subscription_id": sub.id})))
    finally:
        if own:
            http.close()
    return reports


def make_poller(run_one: RunOne, config: SyncConfig, client: SubscriptionClient | None = None) -> Poller:
    """A background poller for ``config`` (not started). Stopping it cuts a retry wait short."""
    stop = Event()
    http = client or HttpSubscriptionClient(config.upstream, cancel=stop)

    def run(sub: SubscriptionConfig, cancel: Event) -> SyncReport:
        return run_one(sub, http, page_limit=config.upstream.page_limit, cancel=cancel,
                       max_pages=config.upstream.max_pages_per_run)

    return Poller(
        run, config.subscriptions,
        backoff_base_s=max(config.upstream.backoff_base_s, 0.05),
        backoff_max_s=max(config.upstream.backoff_max_s, 1.0),
        stop_event=stop,
        on_stop=http.close if client is None else None,
    )
