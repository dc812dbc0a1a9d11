"""Which process of a data directory runs sync: ``fcntl.flock`` on ``<data-dir>/leader.lock``.

``skillsearch serve --workers N`` runs N processes on one data directory. Each serves reads and follows the
index files the others write (``retrieval/writelock.py``); exactly one at a time, the *writer*, runs the
background duties: the subscription poller (and so the pulls a webhook asks for) and the local sources'
runner with its folder watcher. The writer is whoever holds ``leader.lock``; the others try to take it
every ``poll_s``, so when the writer dies (even by ``kill -9``: the kernel drops a dead process's
``flock``) another one starts the duties within about ``poll_s``. Its poller starts with every
subscription due, so nothing the dead writer had in hand is lost: the store's cursors say where to resume.

A verified webhook may reach any process. A non-writer asks the writer for the pull with a file
``<data-dir>/sync-requests/pull-<subscription id>`` (written atomically, idempotent); the writer looks at
that folder every ``poll_s`` and triggers its poller. The event itself (a revocation, the replay record)
is already in the shared store by then, so every process hides a revoked subscription at once.

    leadership = Leadership(data_dir, duties=[poller, keeper], on_pull=poller.trigger)
    async with leadership.lifespan():  # or start() / stop()
        ...
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Protocol

from skillsearch.retrieval.writelock import claim_pid_lock, release_pid_lock
from skillsearch.sync.background import running
from skillsearch.sync.contract import SUBSCRIPTION_ID_PATTERN

__all__ = ["LEADER_FILE", "REQUESTS_DIR", "Duty", "Leadership", "leader_pid", "term_began"]

log = logging.getLogger("skillsearch.sync")

LEADER_FILE = "leader.lock"
REQUESTS_DIR = "sync-requests"
_PREFIX = "pull-"
_SUB_ID = re.compile(SUBSCRIPTION_ID_PATTERN)


class Duty(Protocol):
    """A background service only the writer runs (``Poller``, ``LocalSources``)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


def leader_pid(data_dir: Path) -> int | None:
    """The process id the current writer wrote into ``leader.lock`` (``None``: none recorded). Advisory:
    for operators and tests; only the lock itself decides."""
    try:
        text = (Path(data_dir) / LEADER_FILE).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def term_began(data_dir: Path) -> float | None:
    """When the data directory's current (or last) writer took the lead, in unix seconds: ``leader.lock``'s
    modification time, which the writer sets by writing its pid as it takes the lock (``None``: no writer
    ever ran here). ``/readyz`` holds a replica back until a pull has finished since then."""
    try:
        return (Path(data_dir) / LEADER_FILE).stat().st_mtime
    except OSError:
        return None


class Leadership:
    """Runs ``duties`` while this process holds ``<data-dir>/leader.lock``; ``on_pull(subscription_id)``
    is the writer's pull trigger (the poller's ``trigger``)."""

    def __init__(self, data_dir: Path, duties: Sequence[Duty], on_pull: Callable[[str], object] | None = None,
                 *, poll_s: float = 0.5) -> None:
        self.data_dir = Path(data_dir)
        self.path = self.data_dir / LEADER_FILE
        self.requests = self.data_dir / REQUESTS_DIR
        self.duties = tuple(duties)
        self.poll_s = poll_s
        self._on_pull = on_pull
        self._fd: int | None = None
        self._mutex = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.terms = 0  # how many times this process became the writer

    @property
    def is_writer(self) -> bool:
        return self._fd is not None

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        """Try once at once (so a lone process is the writer before it serves), then keep trying."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._step()
        self._thread = threading.Thread(target=self._loop, name="skillsearch-leader", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
            self._thread = None
        with self._mutex:
            if self._fd is not None:
                for duty in reversed(self.duties):
                    duty.stop()
                self._release()

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        return running(self.start, self.stop)

    # -- asking for a pull --------------------------------------------------------------------------

    def request_pull(self, subscription_id: str) -> str:
        """Have the writer pull ``subscription_id`` now: directly when this process is the writer, else
        through a request file it picks up within ``poll_s``. Returns ``triggered`` or ``requested``."""
        with self._mutex:
            if self._fd is not None and self._on_pull is not None:
                self._on_pull(subscription_id)
                return "triggered"
        if not _SUB_ID.match(subscription_id) or subscription_id in (".", ".."):
            raise ValueError(f"not a subscription id: {subscription_id!r}")
        self.requests.mkdir(parents=True, exist_ok=True)
        target = self.requests / f"{_PREFIX}{subscription_id}"
        tmp = self.requests / f".{_PREFIX}{subscription_id}.{os.getpid()}.{threading.get_ident()}"
        tmp.write_bytes(b"")
        os.replace(tmp, target)
        return "requested"

    # -- the loop -----------------------------------------------------------------------------------

    def _loop(self) -> None:
        failing: str | None = None  # the failure last logged: said once, not every poll_s while it lasts
        while not self._stop.wait(self.poll_s):
            try:
                self._step()
                failing = None
            except Exception as exc:  # the loop must outlive a failing duty, a full disk, no file descriptor left
                text = f"{type(exc).__name__}: {exc}"
                if text != failing:
                    # The OS refusing (EMFILE under a flood of clients, a full disk) is one line; anything else
                    # is a defect, logged with its traceback, once.
                    log.error("leadership step failed (tried again every %.1f s): %s", self.poll_s, text,
                              exc_info=not isinstance(exc, OSError))
                failing = text

    def _step(self) -> None:
        with self._mutex:
            if self._stop.is_set():
                return
            if self._fd is None and self._take():
                self.terms += 1
                log.info("process %d is now the writer of %s (runs sync and the source watchers)",
                            os.getpid(), self.data_dir)
                self._drain()  # the fresh poller runs everything anyway
                for duty in self.duties:
                    duty.start()
                return
            if self._fd is not None:
                for sid in self._drain():
                    if self._on_pull is not None:
                        self._on_pull(sid)

    def _drain(self) -> list[str]:
        """Take the pending pull requests (each file removed before its pull is triggered)."""
        try:
            names = sorted(os.listdir(self.requests))
        except FileNotFoundError:
            return []
        out = []
        for name in names:
            if not name.startswith(_PREFIX):
                continue
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.requests / name)
                sid = name[len(_PREFIX):]
                if _SUB_ID.match(sid):
                    out.append(sid)
        return out

    def _take(self) -> bool:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        claim_pid_lock(fd)
        self._fd = fd
        return True

    def _release(self) -> None:
        fd, self._fd = self._fd, None
        release_pid_lock(fd)
