"""The local-sources use case over one catalog: mirror a source, retire one, keep them in step.

``Catalog.sources`` is this object; it needs of the catalog only its store, its data directory, its index
and its write lock (:class:`CatalogParts`), so the composition root stays small.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from skillsearch.catalog.store import CatalogStore
from skillsearch.core.errors import StopFlag
from skillsearch.retrieval.indexer import ProgressFactory, SearchIndex

# Every catalog has this use case, most never run a source: the mirror (the importer, git) and the keeper
# (watchfiles) are imported by the method that needs them, not by opening a catalog.
if TYPE_CHECKING:
    from skillsearch.sync.local import LocalSources
    from skillsearch.sync.mirror import SourceReport
    from skillsearch.sync.sources import SourceConfig

__all__ = ["CatalogParts", "LocalSourcesUseCase"]


class CatalogParts(Protocol):
    store: CatalogStore
    data_dir: Path

    @property
    def stopping(self) -> StopFlag:
        """Set when the process stops: a source's read (a git run, a folder's skills) ends early."""
        ...

    def index(self, *, bounded: bool = ...) -> SearchIndex:
        """The search index; ``bounded=False``: a write waits for a server's background open however long."""
        ...

    def writing(self) -> AbstractContextManager[None]: ...


class LocalSourcesUseCase:
    def __init__(self, catalog: CatalogParts) -> None:
        self._catalog = catalog

    def sync(self, source: SourceConfig, *, force: bool = False, allow_rewind: bool = False,
             folders: frozenset[str] | None = None, progress: ProgressFactory | None = None,
             configured: Callable[[], Sequence[SourceConfig]] | None = None) -> SourceReport:
        """Mirror one source (see :mod:`skillsearch.sync.mirror`); a git fetch runs outside the write lock.
        ``folders``: only these top-level folders of a folder source changed (a watcher's batch). ``progress``:
        the read shown as it goes. The catalog's ``stopping`` ends a git run or a folder's read early.
        ``configured`` (a server's keeper): the sources its file holds now (``FollowedSources.current``), looked
        at before the run and once more under the write lock: a source taken out of it meanwhile (``sources
        remove``, which archives its skills) is not run, so nothing brings its skills back; a source changed
        there runs as it is now."""
        from skillsearch.sync.mirror import SourceReport, apply_source, read_source

        c = self._catalog
        current = _as_configured(source, configured)
        if current is None:
            return SourceReport(source.name, source.kind, source.grant, skipped=True)
        read = read_source(c.store, current, c.data_dir / "sources", force=force, allow_rewind=allow_rewind,
                           folders=folders if current == source else None, stopping=c.stopping, progress=progress)
        index = c.index(bounded=False)  # a server's background open: waited for, however long
        with c.writing():
            if _as_configured(current, configured) is None:
                return SourceReport(source.name, source.kind, source.grant, skipped=True)
            return apply_source(c.store, index, read)

    def retire(self, name: str) -> list[str]:
        """A source taken out of the configuration: its skills are archived (pinned revisions stay)."""
        from skillsearch.sync.mirror import retire_source

        index = self._catalog.index(bounded=False)
        with self._catalog.writing():
            return retire_source(self._catalog.store, index, name)

    def keeper(self, sources: Sequence[SourceConfig], *, quiet_ms: int = 400,
               config: Path | None = None) -> LocalSources:
        """The background runner of ``sources`` (not started): each on its interval, with the poller's
        backoff after a failed run, and each folder source watched: a change is applied ``quiet_ms`` after
        its last write, reading only the folders that changed. ``config``: the file they were loaded from,
        followed while it runs: a source added there is run and watched, one removed is no longer run (and
        each run follows what the file says then, see :meth:`sync`)."""
        from skillsearch.sync.followed import FollowedSources
        from skillsearch.sync.local import LocalSources

        followed = FollowedSources(config, sources) if config is not None else None
        configured = followed.current if followed is not None else None
        return LocalSources(lambda s, folders: self.sync(s, folders=folders, configured=configured), sources,
                            quiet_ms=quiet_ms, data_dir=self._catalog.data_dir, followed=followed)


def _as_configured(source: SourceConfig,
                   configured: Callable[[], Sequence[SourceConfig]] | None) -> SourceConfig | None:
    """``source`` as the configuration holds it now: ``None`` once it is no longer there (a file that does not
    read keeps its last good sources, ``sync/followed.py``)."""
    if configured is None:
        return source
    return next((s for s in configured() if s.name == source.name), None)
