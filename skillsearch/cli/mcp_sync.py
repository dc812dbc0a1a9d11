"""What ``skillsearch mcp`` (stdio and ``--http``) keeps in step with ``<data-dir>/sync.toml`` while its server
is open: the local sources (``[[sources]]``, their keeper) and the subscriptions (``[upstream]``,
``[[subscriptions]]``, their poller), each following the file as ``serve`` does (added, removed or changed
there, taken up without a restart).

Every ``mcp`` process polls for itself (an MCP host starts one per session): there is no leader among them,
and none is needed, since the runs of one data directory take turns (``sync/run_lock.py``) and each run is
incremental from the cursor the last one stored, whichever process stored it; a process waiting for another's
run waits on its poller's thread, never on the protocol's. There is no webhook endpoint: only the poller.
What a pull changes reaches a stdio session as a ``notifications/resources/list_changed`` through the
server's ``ChangeNotifier``, which follows the store whoever wrote it.

A data directory with no ``sync.toml`` when the server starts imports none of this (the file is read at the
next start, which an MCP host makes each session); ``--no-sync`` leaves both alone, ``--no-sources`` the
sources only.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from skillsearch.sync.config import SyncConfig, default_config_path, load_subscriptions
from skillsearch.sync.sources import SourceConfig, load_sources

if TYPE_CHECKING:
    from skillsearch.mcp.changes import WhileOpen

__all__ = ["McpSync"]


@dataclass(frozen=True)
class McpSync:
    """The file (``config``), what it held at start, and what of it this server keeps."""

    config: Path
    sources: tuple[SourceConfig, ...] = ()
    subscriptions: SyncConfig | None = None
    keep_sources: bool = False
    keep_subscriptions: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> McpSync:
        """Read ``<data-dir>/sync.toml`` as ``args`` ask (a file that does not read is the usual
        ``VALIDATION_ERROR``, before anything is opened)."""
        config = default_config_path(Path(args.data_dir))
        no_sync = getattr(args, "no_sync", False)
        if no_sync or not config.exists():
            return cls(config)
        keep_sources = not getattr(args, "no_sources", False)
        return cls(config, tuple(load_sources(config)) if keep_sources else (), load_subscriptions(config),
                   keep_sources=keep_sources, keep_subscriptions=True)

    @property
    def seed(self) -> bool | None:
        """``Catalog.open``'s ``seed``: a synced catalog is not seeded with the sample (its demo subscriptions
        would collide with real ones), as under ``serve``."""
        return False if self.sources or self.subscriptions is not None else None

    def while_open(self) -> list[WhileOpen]:
        """The keepers the server runs while its catalog is open (``build_mcp_server(while_open=...)``)."""
        kept: list[WhileOpen] = []
        if self.keep_sources:
            kept.append(lambda catalog: catalog.sources.keeper(self.sources, config=self.config).lifespan())
        if self.keep_subscriptions:
            # Kept even when the file configures no subscription yet: one added there is pulled at once.
            kept.append(lambda catalog: catalog.subscriptions.keeper(self.subscriptions, followed=self.config)
                        .lifespan())
        return kept
