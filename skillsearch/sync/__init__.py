"""Sync from the subscription platform (design section 3): the wire contract, the HTTP client, applying
pages to the store and index, the background poller and the webhook's proof. The HTTP routes live in
``skillsearch/http/sync_routes.py``; the reference upstream in ``skillsearch/upstream/``.

Layout, one concept per module:

    contract.py   pydantic models of the wire format, webhook signature
    config.py     sync settings from TOML (upstream URL, token, secret, subscriptions)
    client.py     SubscriptionClient protocol + the httpx client (timeouts, retries, Retry-After)
    apply.py      validate and apply one page: store transaction, then incremental index refresh
    runner.py     one run of one subscription: paging, full resync on 410, revocation
    poller.py     background thread: intervals with jitter, backoff, triggers
    runs.py       several subscriptions: once each (sync), or kept on a poller by a server (SubscriptionKeeper)
    followed.py   what sync.toml holds now (sources, subscriptions) for a server that follows it
    status.py     per-subscription status view
    webhook.py    webhook signature check, replay guard and the event's effect on the store
    sources.py    local sources ([[sources]]: folders and git repositories) in the same TOML file
    mirror.py     one run of a local source: read it whole, apply the difference (archive what is gone)
    git.py        the git command line: fetch into a bare cache, export a tree (bounded, prompt-free)
    watch.py      watchfiles: one batch per burst of writes under a folder source
    local.py      the keeper: poller + watcher of the local sources under serve / mcp
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from skillsearch.sync.client import (
        CursorExpired,
        HttpSubscriptionClient,
        SubscriptionClient,
        SubscriptionRevoked,
    )
    from skillsearch.sync.config import (
        SubscriptionConfig,
        SyncConfig,
        UpstreamConfig,
        default_config_path,
        load_config,
    )
    from skillsearch.sync.poller import Poller
    from skillsearch.sync.runner import SyncReport, sync_subscription
    from skillsearch.sync.status import SyncStatus

__all__ = [
    "CursorExpired",
    "HttpSubscriptionClient",
    "Poller",
    "SubscriptionClient",
    "SubscriptionConfig",
    "SubscriptionRevoked",
    "SyncConfig",
    "SyncReport",
    "SyncStatus",
    "UpstreamConfig",
    "default_config_path",
    "load_config",
    "sync_subscription",
]

# Each name is imported from its module on first use (PEP 562): importing one sync module (the config's
# path, the local sources) runs this file first, and must not import the client, runner and poller with it.
_HOMES = {
    "CursorExpired": "client", "HttpSubscriptionClient": "client", "SubscriptionClient": "client",
    "SubscriptionRevoked": "client", "SubscriptionConfig": "config", "SyncConfig": "config",
    "UpstreamConfig": "config", "default_config_path": "config", "load_config": "config", "Poller": "poller",
    "SyncReport": "runner", "sync_subscription": "runner", "SyncStatus": "status",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
