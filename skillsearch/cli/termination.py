"""SIGTERM (what docker, Kubernetes and systemd send before SIGKILL): how a ``skillsearch`` process stops.

The first SIGTERM sets :data:`STOPPING`, the event every catalog the CLI opens is given: an index write in
progress (an import's, a sync's, a reindex, an open's repair) stops after the encoder's current batch,
saves what it embedded and raises ``WriteStopped``, whose message the CLI prints (``terminated: ...``)
before exiting with 143 (128 + SIGTERM), as a shell reports a process the signal killed. A lexical rebuild
stops after its current chunk of documents, committing nothing; a source's read ends its git run (SIGTERM,
then SIGKILL) or stops between skills, applying nothing. The store keeps every transaction it committed;
the next open embeds the rest and rebuilds what was left incomplete. A second SIGTERM kills at once.

``serve`` and ``mcp --http`` run under uvicorn, which takes SIGTERM while it serves and shuts the app down
(its lifespan calls ``Catalog.stop_writes``), then sends the signal again to this handler. ``mcp`` over
stdio has no such loop: its callback (:func:`on_terminate`) ends the session, whose lifespan stops and joins
the writes, then leaves the process without waiting for the stdin the client keeps open.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from types import FrameType

__all__ = ["EXIT_TERMINATED", "STOPPING", "install", "on_terminate", "terminated"]

EXIT_TERMINATED = 128 + signal.SIGTERM

STOPPING = threading.Event()
_received: list[int] = []
_callbacks: list[Callable[[], None]] = []


def install() -> None:
    """Take SIGTERM in this process (from the main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGTERM, _on_sigterm)


def on_terminate(callback: Callable[[], None]) -> None:
    """Run ``callback`` (in the main thread) when SIGTERM arrives: e.g. pass it on to a child process."""
    _callbacks.append(callback)


def terminated() -> bool:
    """Whether this process received SIGTERM."""
    return bool(_received)


def _on_sigterm(signum: int, _frame: FrameType | None) -> None:
    if _received:  # the second one: no more waiting
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    _received.append(signum)
    STOPPING.set()
    for callback in _callbacks:
        callback()
