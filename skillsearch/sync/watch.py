"""watchfiles' home: watch the folder sources and say which one changed, once per burst of writes.

One thread watches every configured folder (recursively, through the OS's notification API). A burst of
changes is one batch: watchfiles groups the changes until ``quiet_ms`` pass with no new one (capped at
``max_batch_ms`` for a folder that never stops changing), so a ``git checkout`` of hundreds of files is
one call of ``on_change(source_name)``, made ``quiet_ms`` after the last write. The watcher only says
*which* source changed; the caller runs that source (``Poller.trigger``), so runs stay serialised.

A folder that does not exist yet (or was removed) is looked for again (every ``WAKE_MS`` while another
folder is watched, every ``recheck_s`` when none exists); when it appears its source is reported changed.
:meth:`FolderWatcher.start` returns once the OS watches are in place, so a runner started after it misses
no write. Hidden folders (``.git``, ...) and editor droppings are ignored by
watchfiles' default filter, and so are the writes inside the catalog's own data directory (``ignore``) when
a watched folder holds it (``--path .`` beside the default ``./index``): each run writes the catalog, and
those writes must not trigger the next run, endlessly.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import watchfiles

from skillsearch.sync.background import running

__all__ = ["FolderWatcher"]

log = logging.getLogger("skillsearch.sync")

WAKE_MS = 250  # how often the watch thread looks at which folders exist (a stat each) while all is quiet


class FolderWatcher:
    """Calls ``on_change(name, changed)`` after each burst of writes under ``folders[name]``: ``changed``
    holds the paths relative to that folder (empty when the folder itself appeared or vanished). A write
    inside ``ignore`` (the data directory) is not a change of a folder that holds it."""

    def __init__(
        self,
        folders: Mapping[str, Path],
        on_change: Callable[[str, frozenset[str]], object],
        *,
        quiet_ms: int = 400,
        max_batch_ms: int = 10_000,
        recheck_s: float = 2.0,
        ignore: Path | None = None,
    ) -> None:
        self._folders = {name: Path(p).expanduser() for name, p in folders.items()}
        self._ignore = Path(ignore).expanduser().resolve() if ignore is not None else None
        self._on_change = on_change
        self.quiet_ms = quiet_ms
        self.max_batch_ms = max_batch_ms
        self.recheck_s = recheck_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._batches = dict.fromkeys(self._folders, 0)
        self._watching: set[str] = set()
        self._ready = threading.Event()
        self._wanted = False  # started: a folder given later (``replace``) is watched at once

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self, ready_timeout: float = 10.0) -> None:
        """Start watching; returns once the OS watches are in place (so a write after this is seen)."""
        self._wanted = True
        if self._thread is not None or not self._folders:
            return
        self._stop.clear()
        self._ready.clear()
        self._thread = threading.Thread(target=self._loop, name="skillsearch-watch", daemon=True)
        self._thread.start()
        if not self._ready.wait(ready_timeout):
            log.warning("the folder watcher is not ready after %.0f s; changes before then may wait for a run",
                        ready_timeout)

    def stop(self, timeout: float = 10.0) -> None:
        self._wanted = False
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        return running(self.start, self.stop)

    def replace(self, folders: Mapping[str, Path]) -> None:
        """Watch ``folders`` from now on (a source added, removed or moved while running): the watch thread
        takes them up at its next look (within ``WAKE_MS``), and a started watcher that had none starts."""
        with self._lock:
            self._folders = {name: Path(p).expanduser() for name, p in folders.items()}
            for name in self._folders:
                self._batches.setdefault(name, 0)
        if self._wanted and self._thread is None and self._folders:
            self.start()

    def status(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {n: {"watching": n in self._watching, "batches": self._batches[n]} for n in self._folders}

    def batches(self, name: str) -> int:
        with self._lock:
            return self._batches[name]

    # -- the loop ---------------------------------------------------------------------------------

    def _present(self) -> dict[str, Path]:
        out = {}
        with self._lock:
            folders = dict(self._folders)
        for name, folder in folders.items():
            try:
                if folder.is_dir():
                    out[name] = folder.resolve()
            except OSError:
                continue
        return out

    def _changed(self, name: str, changed: frozenset[str] = frozenset()) -> None:
        with self._lock:
            self._batches[name] = self._batches.get(name, 0) + 1
        try:
            self._on_change(name, changed)
        except Exception:  # the watcher must outlive a failing callback
            log.exception("source %s: change callback failed", name)

    def _loop(self) -> None:
        present = self._present()
        watched: dict[str, Path] | None = None  # what the last watch covered (None: none yet, the first)
        while not self._stop.is_set():
            with self._lock:
                self._watching = set(present)
            # A folder that appeared, or a source now pointing elsewhere: reported once its watch is in place,
            # so a write between the two is read by the run it triggers, and any later one is seen.
            fresh = set() if watched is None else {n for n, p in present.items() if watched.get(n) != p}
            if not present:
                self._ready.set()
                self._stop.wait(self.recheck_s)
                watched, present = present, self._present()
                continue
            try:
                watched, present = present, self._watch(present, fresh)
            except Exception:  # a vanished folder, an exhausted inotify limit: look again shortly
                log.exception("watching the folder sources failed; retrying in %.0f s", self.recheck_s)
                self._stop.wait(self.recheck_s)
                present = self._present()

    def _ignored(self, path: Path, root: Path) -> bool:
        """A write of the catalog itself: inside the data directory, which is ``root`` or inside it (a folder
        kept inside the data directory is watched as any other)."""
        return self._ignore is not None and path.is_relative_to(self._ignore) and self._ignore.is_relative_to(root)

    def _watch(self, present: dict[str, Path], fresh: set[str]) -> dict[str, Path]:
        """Watch ``present`` until the set of existing folders changes; returns the new set. ``fresh``: the
        sources to report changed once the watches are in place."""
        for changes in watchfiles.watch(
            *present.values(),
            debounce=self.max_batch_ms,
            step=self.quiet_ms,
            stop_event=self._stop,
            rust_timeout=WAKE_MS,  # the first wake-up proves the watches are in place
            yield_on_timeout=True,
            raise_interrupt=False,
            ignore_permission_denied=True,
        ):
            self._ready.set()
            touched: dict[str, set[str]] = {}
            for _, raw in changes:
                path = Path(raw)
                for name, root in present.items():
                    if (path == root or path.is_relative_to(root)) and not self._ignored(path, root):
                        touched.setdefault(name, set()).add(path.relative_to(root).as_posix())
            for name in sorted(touched):
                self._changed(name, frozenset(touched[name]))
            for name in sorted(fresh - set(touched)):
                self._changed(name)
            fresh = set()
            now = self._present()
            if now != present:
                for name in sorted(set(present) - set(now) - set(touched)):  # vanished: nothing to watch first
                    self._changed(name)
                return now
        return present
