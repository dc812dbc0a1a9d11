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
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Generic, TypeVar

from skillsearch.core.errors import ValidationError
from skillsearch.sync.config import SyncConfig, load_subscriptions
from skillsearch.sync.sources import SourceConfig, load_sources

__all__ = ["FollowLoop", "Followed", "FollowedSources", "FollowedSubscriptions"]

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
                value = self._load(self.path)
            except ValidationError as exc:
                log.warning("%s: %s; the %s stay as they were until it reads", self.path, exc.message, self._what)
                return self._value
            # Written then: its modification or, if later, its change (a rename); gone: now.
            self._took(self._value, value, time.time() if signature is None else max(signature[2:]) / 1e9)
            self._value = value
            return self._value

    def _took(self, before: T, after: T, written: float) -> None:
        """``after`` replaces ``before``, read from the file as written at ``written`` (unix s)."""


class FollowedSources(Followed[tuple[SourceConfig, ...]]):
    """The local sources (``[[sources]]``) the file holds now."""

    def __init__(self, path: Path, initial: Sequence[SourceConfig]) -> None:
        super().__init__(path, load_sources, tuple(initial), "sources")


class FollowedSubscriptions(Followed[SyncConfig | None]):
    """The upstream and its subscriptions (``[upstream]``, ``[[subscriptions]]``) the file holds now; ``None``:
    none (no file, or one of local sources only). ``added()``: when each subscription added while following
    was written into the file (unix s): a pull of it counts as the replica catching up only from then on
    (``sync/health.py``), as it would after a restart, even one re-added whose last pull is recent."""

    def __init__(self, path: Path, initial: SyncConfig | None) -> None:
        super().__init__(path, load_subscriptions, initial, "subscriptions")
        self._added: dict[str, float] = {}

    def _took(self, before: SyncConfig | None, after: SyncConfig | None, written: float) -> None:
        was = {s.id for s in before.subscriptions} if before is not None else set()
        now = {s.id for s in after.subscriptions} if after is not None else set()
        kept = {sid: self._added[sid] for sid in now & was if sid in self._added}
        self._added = {**kept, **{sid: written for sid in now - was}}

    def added(self) -> dict[str, float]:
        self.current()
        with self._lock:
            return dict(self._added)


class FollowLoop:
    """A keeper's thread that calls ``follow`` every ``recheck_s`` while it runs (``start``, ``stop``): the one
    loop the sources keeper and the subscription keeper look at their file with. A failing look is logged
    (``what``: ``sources``, ``subscriptions``) and the next one comes as usual."""

    def __init__(self, follow: Callable[[], None], what: str, path: Path | None, recheck_s: float = 2.0) -> None:
        self._follow, self._what, self._path = follow, what, path
        self.recheck_s = recheck_s
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name=f"skillsearch-{self._what}", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10.0)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.wait(self.recheck_s):
            try:
                self._follow()
            except Exception:  # the keeper outlives one bad look at its file
                log.exception("%s: following %s failed", self._what, self._path or "the configuration")
