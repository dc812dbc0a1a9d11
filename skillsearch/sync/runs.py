"""Running several subscriptions: once each (``skillsearch sync``), or on a background poller (``serve``, ``mcp``), which
:class:`SubscriptionKeeper` keeps in step with ``sync.toml`` while the server runs.

Both take ``run_one``, the one-subscription run (``Catalog.subscriptions.sync_subscription``: the store, the index and the
index lock), so this module knows nothing above ``sync``. One subscription's failure never stops the others.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from threading import Event
from typing import Protocol

from skillsearch.core.errors import SkillSearchError, UpstreamUnavailableError, ValidationError, WriteStopped
from skillsearch.sync.background import running
from skillsearch.sync.client import HttpSubscriptionClient, SubscriptionClient
from skillsearch.sync.config import SubscriptionConfig, SyncConfig, UpstreamConfig
from skillsearch.sync.followed import FollowedSubscriptions, FollowLoop
from skillsearch.sync.poller import Poller
from skillsearch.sync.runner import SyncReport, unexpected_text

__all__ = ["RunOne", "SubscriptionKeeper", "make_poller", "sync_each"]

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
    return SubscriptionKeeper(run_one, config, client=client).poller


class SubscriptionKeeper:
    """A server's subscriptions, each pulled on its interval by one :class:`Poller` (``poller``). With
    ``followed`` (``sync.toml``, :class:`~skillsearch.sync.followed.FollowedSubscriptions`) they are those the
    file holds now, as a restart would read them, without one: a subscription added there is pulled at once,
    one removed is no longer pulled (its skills stay as they are), one whose interval changed runs at once and
    then on its new interval, and each run uses the ``[upstream]`` the file holds then (URL, token, limits;
    the HTTP client is made again when it changed). ``client``: one to use throughout (tests), never closed
    here."""

    def __init__(self, run_one: RunOne, config: SyncConfig | None, *, client: SubscriptionClient | None = None,
                 followed: FollowedSubscriptions | None = None, recheck_s: float = 2.0) -> None:
        self.config = config  # what the poller schedules now: ``follow`` moves it while running
        self._run_one = run_one
        self._followed = followed
        self._following = FollowLoop(self.follow, "subscriptions", followed.path if followed else None, recheck_s)
        self._given = client
        self._http: SubscriptionClient | None = None  # made for ``_http_for``, on the poller's thread
        self._http_for: UpstreamConfig | None = None
        self._lock = threading.Lock()
        self._stopping = Event()  # the poller's: set, a request in flight and a retry's wait stop
        self.poller: Poller = Poller(self._run, config.subscriptions if config is not None else (),
                                     stop_event=self._stopping, on_stop=self._close)
        self._backoff(config)

    def _backoff(self, config: SyncConfig | None) -> None:
        if config is not None:
            self.poller.backoff_base_s = max(config.upstream.backoff_base_s, 0.05)
            self.poller.backoff_max_s = max(config.upstream.backoff_max_s, 1.0)

    # -- running one ----------------------------------------------------------------------------------

    def _client(self, upstream: UpstreamConfig) -> SubscriptionClient:
        """The HTTP client for ``upstream`` (the poller's thread only, so no run holds the one replaced)."""
        if self._given is not None:
            return self._given
        if self._http is None or self._http_for != upstream:
            self._close()
            self._http, self._http_for = HttpSubscriptionClient(upstream, cancel=self._stopping), upstream
        return self._http

    def _close(self) -> None:
        http, self._http, self._http_for = self._http, None, None
        if http is not None:
            http.close()

    def _run(self, sub: SubscriptionConfig, cancel: Event) -> SyncReport | None:
        config = self.current()
        now = config.subscription(sub.id) if config is not None else None
        if config is None or now is None:  # taken out of the file since it was scheduled: not pulled again
            return None
        return self._run_one(now, self._client(config.upstream), page_limit=config.upstream.page_limit,
                             cancel=cancel, max_pages=config.upstream.max_pages_per_run)

    # -- following the configuration ------------------------------------------------------------------

    def current(self) -> SyncConfig | None:
        """The upstream and subscriptions configured now: as the followed file says (read again when it
        changed), else those given. What the status, the health and the webhook route answer for, in any
        process of a server, writer or not."""
        return self._followed.current() if self._followed is not None else self.config

    def added(self) -> dict[str, float]:
        """When each subscription added to the followed file while serving was written there (unix s)."""
        return self._followed.added() if self._followed is not None else {}

    def follow(self) -> None:
        """Schedule the subscriptions the file holds now (see the class)."""
        with self._lock:
            now = self.current()
            before = self.config
            if now == before:
                return
            self.config = now
            self._backoff(now)
            self.poller.replace(now.subscriptions if now is not None else ())
        was = {s.id: s for s in (before.subscriptions if before is not None else ())}
        subs = {s.id: s for s in (now.subscriptions if now is not None else ())}
        upstream = (before.upstream if before else None) != (now.upstream if now else None)
        log.info("subscriptions: %s", "; ".join(f"{what}: {', '.join(which)}" for what, which in (
            ("added", sorted(set(subs) - set(was))), ("removed", sorted(set(was) - set(subs))),
            ("changed", sorted(i for i in subs if i in was and was[i] != subs[i])),
            ("upstream changed", ["next runs use it"] if upstream else [])) if which))

    def trigger(self, subscription_id: str) -> bool:
        """Pull this subscription now (a webhook's pull): the file is looked at first, so one just added
        there is pulled; ``False`` when it is not one we poll."""
        self.follow()
        return self.poller.trigger(subscription_id)

    # -- lifecycle ------------------------------------------------------------------------------------

    def start(self) -> None:
        self.follow()  # what the file says now: it may have changed since it was read at start-up
        self.poller.start()
        if self._followed is not None:
            self._following.start()

    def stop(self) -> None:
        self._following.stop()
        self.poller.stop()

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        return running(self.start, self.stop)
