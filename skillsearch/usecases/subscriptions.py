"""The subscription use case over one catalog: pull one subscription's changes, run every configured one,
poll in the background, apply a webhook event that was verified, and report the sync's status and health
(subscriptions and local sources together, as the status route and the metrics show them).

``Catalog.subscriptions`` is this object; like ``Catalog.sources`` it needs of the catalog only its store, its
index and its write lock (:class:`~skillsearch.usecases.sources.CatalogParts`). The sync client, runner, poller
and webhook code are imported by the method that needs them, not by opening a catalog (tests/test_startup.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from threading import Event
from typing import TYPE_CHECKING

from skillsearch.usecases.sources import CatalogParts

if TYPE_CHECKING:
    from skillsearch.sync.client import SubscriptionClient
    from skillsearch.sync.config import SubscriptionConfig, SyncConfig
    from skillsearch.sync.contract import WebhookAction, WebhookEvent
    from skillsearch.sync.health import SyncHealth
    from skillsearch.sync.local import LocalSources
    from skillsearch.sync.poller import Poller
    from skillsearch.sync.runner import SyncReport
    from skillsearch.sync.runs import SubscriptionKeeper
    from skillsearch.sync.sources import SourceConfig
    from skillsearch.sync.status import SyncStatus

__all__ = ["SubscriptionsUseCase"]


class SubscriptionsUseCase:
    def __init__(self, catalog: CatalogParts) -> None:
        self._catalog = catalog

    def sync_health(self, config: SyncConfig | None, sources: Sequence[SourceConfig], since: float,
                    poller: Poller | None = None, added: Mapping[str, float] | None = None) -> list[SyncHealth]:
        """Per configured subscription and source: the age of its last success, how long it has been failing,
        whether a pull of it has finished since the data directory's writer took the lead (and since it was
        ``added`` to the followed file, ``SubscriptionKeeper.added``)."""
        from skillsearch.sync.health import sync_health
        from skillsearch.sync.leader import term_began

        return sync_health(self._catalog.store, config, sources, since,
                           term_began=term_began(self._catalog.data_dir),
                           ran=poller.run_times() if poller is not None else None, added=added)

    def last_sync_successes(self) -> list[str | None]:
        """Per synced subscription, when its last run succeeded (``None``: never)."""
        return [s.last_success for s in self._catalog.store.sync.states()]

    def sync_subscription(
        self,
        sub: SubscriptionConfig,
        client: SubscriptionClient,
        *,
        page_limit: int = 100,
        cancel: Event | None = None,
        max_pages: int = 1000,
    ) -> SyncReport:
        """Pull and apply every waiting change of one subscription (see :mod:`skillsearch.sync.runner`), one
        run at a time per data directory, whichever process asks (:mod:`skillsearch.sync.run_lock`)."""
        from skillsearch.sync.run_lock import sync_run_lock
        from skillsearch.sync.runner import sync_subscription

        index = self._catalog.index(bounded=False)  # a server's background open: waited for
        with sync_run_lock(self._catalog.data_dir, sub.id, (cancel, self._catalog.stopping)), self._catalog.writing():
            return sync_subscription(self._catalog.store, index, client, sub, page_limit=page_limit, cancel=cancel,
                                     max_pages=max_pages)

    def sync_once(
        self,
        config: SyncConfig,
        subscription_ids: Sequence[str] | None = None,
        client: SubscriptionClient | None = None,
        cancel: Event | None = None,
    ) -> list[SyncReport]:
        """One run of each configured subscription (or of those named); see :func:`sync.runs.sync_each`
        (``cancel``: the CLI's SIGTERM stops a request in flight)."""
        from skillsearch.sync.runs import sync_each

        return sync_each(self.sync_subscription, config, subscription_ids, client, cancel)

    def sync_status(self, config: SyncConfig | None, poller: Poller | None = None,
                    sources: Sequence[SourceConfig] = (), keeper: LocalSources | None = None) -> SyncStatus:
        from skillsearch.sync.status import sync_status

        return sync_status(self._catalog.store, config, poller.status() if poller is not None else None,
                           sources, keeper.status() if keeper is not None else None,
                           ran=poller.run_times() if poller is not None else None)

    def receive_webhook_event(self, config: SyncConfig, event: WebhookEvent, now: float) -> WebhookAction:
        """Applies a webhook event that :func:`~skillsearch.sync.webhook.verify_webhook` proved."""
        from skillsearch.sync.webhook import apply_event

        return apply_event(self._catalog.store, config, event, now)

    def make_poller(self, config: SyncConfig, client: SubscriptionClient | None = None) -> Poller:
        """A background poller for ``config`` (not started). Stopping it cuts a retry wait short."""
        from skillsearch.sync.runs import make_poller

        return make_poller(self.sync_subscription, config, client)

    def keeper(self, config: SyncConfig | None, *, followed: Path | None = None) -> SubscriptionKeeper:
        """A server's background poller of ``config``'s subscriptions (not started). ``followed``: the file it
        was read from, followed while the server runs: a subscription added there is pulled at once, one
        removed is no longer pulled, a changed interval or ``[upstream]`` is used from the next run."""
        from skillsearch.sync.followed import FollowedSubscriptions
        from skillsearch.sync.runs import SubscriptionKeeper

        return SubscriptionKeeper(self.sync_subscription, config,
                                  followed=FollowedSubscriptions(followed, config) if followed is not None else None)
