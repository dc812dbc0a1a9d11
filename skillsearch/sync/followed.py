"""What ``sync.toml`` says now, for a server that follows it while it runs.

``sources add`` and ``sources remove`` (or an editor) change the file under a running ``serve`` or ``mcp``;
a :class:`Followed` part of it (the local sources, :class:`FollowedSources`; the upstream and its
subscriptions, :class:`FollowedSubscriptions`) is read again whenever the file's size, modification time or
inode moved (a stat per look, so a status request, a webhook or a keeper's check every couple of seconds
costs no parse), so the keepers run what the file holds, and the status, the health and the webhook route
answer for it. A file that does not read (half written by an editor, a mistake) changes nothing: the last
good part stays, and the problem is logged once. A file that is gone configures no source and no
subscription (as :func:`~skillsearch.sync.sources.load_sources` and
:func:`~skillsearch.sync.config.load_subscriptions` say).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Generic, TypeVar

from skillsearch.core.errors import ValidationError
from skillsearch.sync.config import SyncConfig, load_subscriptions
from skillsearch.sync.sources import SourceConfig, load_sources

__all__ = ["Followed", "FollowedSources", "FollowedSubscriptions"]

log = logging.getLogger("skillsearch.sync")

T = TypeVar("T")
_Signature = tuple[int, int, int, int] | None
_UNREADABLE = (-1, -1, -1, -1)


def _signature(path: Path) -> _Signature:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError:  # unreadable for now: as good as unchanged
        return _UNREADABLE
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class Followed(Generic[T]):
    """``current()``: what ``load(path)`` gives now (``what`` names it in the log); ``initial``: what was read
    from ``path`` at start."""

    def __init__(self, path: Path, load: Callable[[Path], T], initial: T, what: str) -> None:
        self.path = Path(path)
        self._load = load
        self._what = what
        self._lock = threading.Lock()
        self._seen = _signature(self.path)
        self._value = initial

    def current(self) -> T:
        signature = _signature(self.path)
        with self._lock:
            if signature == self._seen or signature == _UNREADABLE:
                return self._value
            self._seen = signature
            try:
                self._value = self._load(self.path)
            except ValidationError as exc:
                log.warning("%s: %s; the %s stay as they were until it reads", self.path, exc.message, self._what)
            return self._value


class FollowedSources(Followed[tuple[SourceConfig, ...]]):
    """The local sources (``[[sources]]``) the file holds now."""

    def __init__(self, path: Path, initial: Sequence[SourceConfig]) -> None:
        super().__init__(path, load_sources, tuple(initial), "sources")


class FollowedSubscriptions(Followed[SyncConfig | None]):
    """The upstream and its subscriptions (``[upstream]``, ``[[subscriptions]]``) the file holds now; ``None``:
    none (no file, or one of local sources only)."""

    def __init__(self, path: Path, initial: SyncConfig | None) -> None:
        super().__init__(path, load_subscriptions, initial, "subscriptions")
