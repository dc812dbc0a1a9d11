"""Keeping the local sources in step while a server runs: the poller runs each source on its interval
(a git source is fetched, a folder re-read as a safety net) and the watcher triggers a folder source's run
after each burst of writes. Runs are serialised by the poller's one thread.

    keeper = catalog.sources.keeper(sources)
    async with keeper.lifespan():   # or keeper.start() / keeper.stop()
        ...
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillsearch.core.errors import UpstreamUnavailableError
from skillsearch.sync.background import running
from skillsearch.sync.followed import FollowedSources, FollowLoop
from skillsearch.sync.poller import Poller
from skillsearch.sync.sources import SourceConfig
from skillsearch.sync.watch import FolderWatcher

if TYPE_CHECKING:  # the mirror (the importer, git) is imported by the first run, not by a server's start
    from skillsearch.sync.mirror import SourceReport

__all__ = ["LocalSources"]

log = logging.getLogger("skillsearch.sync")


SourceRun = Callable[[SourceConfig, "frozenset[str] | None"], "SourceReport"]


class LocalSources:
    """``run(source, folders)`` mirrors one source: ``folders`` the top-level folders a watcher saw change
    (only those are read again), ``None`` the whole source (the first run, each interval, a new folder)."""

    def __init__(self, run: SourceRun, sources: Sequence[SourceConfig], *, quiet_ms: int = 400,
                 backoff_base_s: float = 1.0, backoff_max_s: float = 300.0, data_dir: Path | None = None,
                 followed: FollowedSources | None = None, recheck_s: float = 2.0) -> None:
        self.sources = tuple(sources)  # those kept now (run, watched): ``followed`` moves them while running
        self._followed = followed
        self._following = FollowLoop(self.follow, "sources", followed.path if followed else None, recheck_s)
        self._run = run
        self._lock = threading.Lock()
        self._pending: dict[str, set[str] | None] = {}
        self.poller: Poller[SourceConfig] = Poller(self._run_one, self.sources, backoff_base_s=backoff_base_s,
                                                   backoff_max_s=backoff_max_s)
        folders: dict[str, Path] = {s.name: s.path for s in self.sources if s.path is not None}
        # The catalog's writes (inside ``data_dir``) are no change of a folder that holds the data directory.
        self.watcher = FolderWatcher(folders, self._changed, quiet_ms=quiet_ms, ignore=data_dir)

    def _changed(self, name: str, paths: frozenset[str]) -> None:
        tops = {p.split("/", 1)[0] for p in paths}
        with self._lock:
            if name in self._pending and self._pending[name] is None:
                pass  # a whole read is already due
            elif not tops or "." in tops:
                self._pending[name] = None
            else:
                self._pending[name] = (self._pending.get(name) or set()) | tops
        self.poller.trigger(name)

    def _run_one(self, source: SourceConfig, cancel: threading.Event) -> SourceReport:
        with self._lock:
            scoped = self._pending.pop(source.name, None)
        report = self._run(source, frozenset(scoped) if scoped else None)
        if report.error:
            raise UpstreamUnavailableError(report.error, {"source": source.name})
        return report

    def start(self) -> None:
        self.follow()  # what the file says now: it may have changed since it was read at start-up
        self.watcher.start()  # watching first: the poller's first (whole) run then misses no write
        self.poller.start()
        if self._followed is not None:
            self._following.start()

    def stop(self) -> None:
        self._following.stop()
        self.watcher.stop()
        self.poller.stop()

    # -- following the configuration --------------------------------------------------------------

    def current(self) -> tuple[SourceConfig, ...]:
        """The sources configured now: as the followed file says (read again when it changed), else those
        given at start. What the status and the health report, in any process of a server, writer or not."""
        return self._followed.current() if self._followed is not None else self.sources

    def follow(self) -> None:
        """Keep the sources the file holds now: one added is run at once and watched, one removed is no
        longer run or watched, one changed runs at once as it now says (a changed ``path`` is watched)."""
        now = self.current()
        with self._lock:
            if now == self.sources:
                return
            before = {s.name: s for s in self.sources}
            self.sources = now
            changed = sorted(s.name for s in now if s.name in before and before[s.name] != s)
            for name in changed:  # a changed source's next run reads it whole
                self._pending[name] = None
        self.watcher.replace({s.name: s.path for s in now if s.path is not None})
        self.poller.replace(now)
        names = {s.name for s in now}
        added = sorted(names - set(before))
        removed = sorted(set(before) - names)
        log.info("sources: %s", "; ".join(f"{what}: {', '.join(which)}" for what, which in (
            ("added", added), ("removed", removed), ("changed", changed)) if which))

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        return running(self.start, self.stop)

    def status(self) -> dict[str, dict[str, Any]]:
        """Per source: the poller's view (runs, failures, next run) and, for a folder, the watcher's."""
        polled = self.poller.status()
        watched = self.watcher.status()
        return {s.name: {**polled.get(s.name, {}), **({"watch": watched[s.name]} if s.name in watched else {})}
                for s in self.sources}
