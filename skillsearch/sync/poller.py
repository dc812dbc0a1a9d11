"""The background poller: one thread that keeps every configured subscription in sync.

Poll is the baseline (seed 001, D3): each subscription runs on its own interval, each wait jittered by
+-10% so that many deployments do not hit the platform in step. A failed run is retried sooner or later
by exponential backoff with jitter (capped), and the interval resumes after the next success. A webhook
only moves a subscription's next run to now (:meth:`Poller.trigger`); a trigger that arrives during a run
of the same subscription makes it run once more right after, so a change published mid-run is not missed.

One thread is enough and is what we want: runs are serialised, so only one batch at a time writes to the
store and the index. It is a plain thread, so it runs the same under ``skillsearch serve`` (started and
stopped from FastAPI's lifespan) and in a script::

    poller = Poller(run, subscriptions)
    poller.start()
    ...
    poller.stop()
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, Protocol

from typing_extensions import TypeVar

from skillsearch.core.errors import SkillSearchError, WriteStopped
from skillsearch.sync.background import running
from skillsearch.sync.config import SubscriptionConfig

__all__ = ["Poller", "PollerEntry", "Scheduled"]

log = logging.getLogger("skillsearch.sync")

JITTER = 0.1


class Scheduled(Protocol):
    """What the poller schedules: a subscription, or a local source (``skillsearch.sync.sources``)."""

    @property
    def id(self) -> str: ...

    @property
    def interval_s(self) -> float: ...


T = TypeVar("T", bound=Scheduled, default=SubscriptionConfig)


def _iso(moment: float | None) -> str | None:
    return None if moment is None else datetime.fromtimestamp(moment, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


@dataclass
class PollerEntry(Generic[T]):
    sub: T
    due: float
    failures: int = 0
    runs: int = 0
    running: bool = False
    again: bool = False
    last_error: str | None = None
    last_report: dict[str, Any] | None = None
    # Wall-clock (unix s): when the last run ended, and when the failures in a row began (None: not failing).
    # Kept here as well as in the store, which cannot record a failure it cannot write (a full disk).
    finished_at: float | None = None
    failing_since: float | None = None


class Poller(Generic[T]):
    """Runs ``run(subscription)`` for each subscription on its interval, with backoff and triggers."""

    def __init__(
        self,
        run: Callable[[T, threading.Event], Any],
        subscriptions: Sequence[T],
        *,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 300.0,
        rng: random.Random | None = None,
        stop_event: threading.Event | None = None,
        on_stop: Callable[[], None] | None = None,
    ) -> None:
        self._run = run
        self._on_stop = on_stop
        self._rng = rng or random.Random()
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        now = time.monotonic()
        self._entries: dict[str, PollerEntry[T]] = {s.id: PollerEntry(s, now) for s in subscriptions}
        self._cond = threading.Condition()
        self._stop = stop_event or threading.Event()
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="skillsearch-poller", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop after the current page at the latest; a retry wait is cut short."""
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        if self._on_stop is not None:
            self._on_stop()

    def lifespan(self) -> AbstractAsyncContextManager[None]:
        """Run while an ASGI app runs: ``create_app(..., lifespans=[lambda app: poller.lifespan()])``."""
        return running(self.start, self.stop)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- control ----------------------------------------------------------------------------------

    def trigger(self, subscription_id: str) -> bool:
        """Run this subscription as soon as possible; ``False`` when it is not one we poll."""
        with self._cond:
            entry = self._entries.get(subscription_id)
            if entry is None:
                return False
            if entry.running:
                entry.again = True
            entry.due = time.monotonic()
            self._cond.notify_all()
            return True

    def replace(self, items: Sequence[T]) -> None:
        """Schedule ``items`` from now on: a new one is due at once, as is one whose configuration changed
        (it runs as it now says); one no longer there is not run again (a run of it in progress ends as it
        would have)."""
        now = time.monotonic()
        with self._cond:
            kept = self._entries
            self._entries = {}
            for item in items:
                entry = kept.get(item.id)
                if entry is None:
                    entry = PollerEntry(item, now)
                elif entry.sub != item:
                    entry.sub = item
                    entry.due = now
                    entry.again = entry.running
                self._entries[item.id] = entry
            self._cond.notify_all()

    def runs(self, subscription_id: str) -> int:
        with self._cond:
            return self._entries[subscription_id].runs

    def wait_for_runs(self, subscription_id: str, count: int, timeout: float) -> bool:
        """Block until the subscription has completed ``count`` runs in all (for tests and benchmarks)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._entries[subscription_id].runs < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def status(self) -> dict[str, dict[str, Any]]:
        now = time.monotonic()
        with self._cond:
            return {
                sid: {
                    "running": e.running,
                    "runs": e.runs,
                    "failures": e.failures,
                    "next_run_in_s": round(max(0.0, e.due - now), 3),
                    "interval_s": e.sub.interval_s,
                    "last_error": e.last_error,
                    "last_finished_at": _iso(e.finished_at),
                    "failing_since": _iso(e.failing_since),
                }
                for sid, e in self._entries.items()
            }

    def run_times(self) -> dict[str, tuple[float | None, float | None]]:
        """Per subscription, when its last run here ended and since when its runs have been failing (unix s;
        ``None``: none ended, not failing), as this process saw them (``sync/health.py``)."""
        with self._cond:
            return {sid: (e.finished_at, e.failing_since) for sid, e in self._entries.items()}

    # -- the loop ---------------------------------------------------------------------------------

    def _jitter(self, seconds: float) -> float:
        return seconds * self._rng.uniform(1.0 - JITTER, 1.0 + JITTER)

    def _next(self) -> PollerEntry[T] | None:
        """Wait for the earliest due subscription; ``None`` when stopping."""
        with self._cond:
            while not self._stop.is_set():
                if not self._entries:
                    self._cond.wait()
                    continue
                entry = min(self._entries.values(), key=lambda e: e.due)
                wait = entry.due - time.monotonic()
                if wait <= 0:
                    entry.running = True
                    entry.again = False
                    return entry
                self._cond.wait(wait)
            return None

    def _loop(self) -> None:
        while (entry := self._next()) is not None:
            error: str | None = None
            report: Any = None
            try:
                report = self._run(entry.sub, self._stop)
            except WriteStopped as exc:  # the process is stopping: what the run stored waits for the next open
                log.warning("sync %s: %s", entry.sub.id, exc)
                with self._cond:
                    entry.running = False
                    self._cond.notify_all()
                return
            except SkillSearchError as exc:
                error = f"{exc.code}: {exc.message}"
            except Exception as exc:  # the poller must outlive any one bad run
                log.exception("sync %s: run failed", entry.sub.id)
                from skillsearch.sync.runner import unexpected_text  # the runner's weight only on this path

                error = unexpected_text(exc)  # bounded and escaped, as the run's recorded error is
            with self._cond:
                entry.running = False
                entry.runs += 1
                now = time.monotonic()
                entry.finished_at = time.time()
                if error is None:
                    entry.failures = 0
                    entry.last_error = None
                    entry.failing_since = None
                    entry.last_report = report.to_dict() if hasattr(report, "to_dict") else None
                    delay = self._jitter(entry.sub.interval_s)
                else:
                    entry.failures += 1
                    entry.last_error = error
                    entry.failing_since = entry.failing_since or entry.finished_at
                    delay = min(self.backoff_max_s, self.backoff_base_s * 2 ** (entry.failures - 1))
                    delay = self._rng.uniform(delay / 2, delay)
                    log.warning("sync %s failed (%d in a row), next try in %.1fs: %s", entry.sub.id,
                                entry.failures, delay, error)
                entry.due = now if entry.again else now + delay
                entry.again = False
                self._cond.notify_all()
