"""A server's open of its index in a background thread, behind the first answers: :class:`BackgroundOpen`.

``IndexHolder.prepare_in_background`` starts it once the store is open. The index opens here, built or
repaired where needed (a repair that must embed waits for the model without the readers' bound: nobody
waits on this thread's answer), and is published whole when that is done; meanwhile a reader that needs it
waits up to a bound (:meth:`BackgroundOpen.wait`). An open that fails (a damaged file, a model that failed
to load, another process's write lock held past its wait) is kept as the reason readers and ``/readyz`` are
told at once (:meth:`BackgroundOpen.not_opened`), never opened in a reader's thread, and tried again here
after ``RETRY_FIRST_S``, doubling up to ``RETRY_MAX_S``; a model that failed to load does not come back in
this process, so its failure is kept and not tried again. The open ends when the catalog closes or its
writes stop; the next open (a reader's, from then on) repairs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from threading import Event, Thread
from typing import Any

from skillsearch.core.errors import IndexNotReadyError, SkillSearchError, StopFlag, WriteStopped
from skillsearch.retrieval.background_repair import RETRY_FIRST_S, RETRY_MAX_S
from skillsearch.retrieval.loading import LazyModel
from skillsearch.retrieval.writelock import writer_elsewhere

__all__ = ["BackgroundOpen"]

log = logging.getLogger("skillsearch")

# How often the background open, waiting for the model to load or to try again, looks whether it should stop.
_STOP_POLL_S = 0.1


class _Stopped(Exception):
    """The background open ends: the catalog closes, or its writes stop (the next open repairs)."""


class BackgroundOpen:
    """The one background open of a holder's index. ``open_index`` opens it (under the holder's lock, unless
    it is open), ``is_open`` says whether the holder has it, ``models`` are the models behind its encoder and
    ``warm`` warms the opened index's snapshots."""

    def __init__(self, data_dir: Path, stopping: StopFlag, open_index: Callable[[], None], is_open: Callable[[], bool],
                 models: Callable[[], Sequence[LazyModel[Any]]], warm: Callable[[], None]) -> None:
        self.data_dir = data_dir
        self._stopping = stopping
        self._open_index = open_index
        self._is_open = is_open
        self._models = models
        self._warm = warm
        # Clear while the thread opens the index: readers that need it wait for it within a bound instead of
        # queueing on the holder's lock behind a repair.
        self._opened = Event()
        self._opened.set()
        self.thread: Thread | None = None
        # Why the last try failed (cleared once it opens): what readers and /readyz are told, at once, instead
        # of opening the index in their own thread. ``_tries``: the failed tries so far.
        self.failure: SkillSearchError | None = None
        self._tries = 0

    def start(self) -> None:
        self._opened.clear()
        self.thread = Thread(target=self._run, name="skillsearch-index-open", daemon=True)
        self.thread.start()

    def opening(self) -> bool:
        """The background open has been started and has not finished."""
        return not self._opened.is_set()

    def running(self) -> bool:
        thread = self.thread
        return thread is not None and thread.is_alive()

    def join(self, wait_s: float) -> None:
        """Wait up to ``wait_s`` for the open in progress (the caller has set the writes' stop)."""
        thread = self.thread
        if thread is not None and thread.is_alive():
            thread.join(wait_s)

    def _run(self) -> None:
        """A repair that must embed waits for the model, but ends when the catalog is closed or its writes
        stop meanwhile, then opens again: an open that failed there changed nothing a second open does not
        check and repair. A failed try is kept as the reason readers are given, and tried again after a
        backoff; unless a model failed to load."""
        delay = RETRY_FIRST_S
        try:
            while not self._try_open():
                if self.model_failed():
                    return  # its failure stays the answer
                self._pause(delay)
                delay = min(delay * 2, RETRY_MAX_S)
            self._warm()
        except WriteStopped as exc:  # the process is stopping: the next open embeds the rest
            self.failure = None
            log.warning("%s", exc)
        except _Stopped:  # closing, or the writes stop: the next open (a reader's, from now on) repairs
            self.failure = None
        finally:
            self._opened.set()

    def _try_open(self) -> bool:
        """One try of the background open (waiting for a model that is loading): whether it opened. A failure
        is kept in ``failure``; ``WriteStopped`` and ``_Stopped`` end the background open."""
        try:
            while True:
                try:
                    self._open_index()
                    self.failure = None
                    return True
                except IndexNotReadyError:
                    if self._stopping.is_set():
                        raise _Stopped() from None
                    loading = [m for m in self._models() if m.pending]
                    if not loading:
                        raise
                    for model in loading:
                        while not model.wait(_STOP_POLL_S):
                            if self._stopping.is_set():
                                raise _Stopped() from None
        except (WriteStopped, _Stopped):
            raise
        except SkillSearchError as exc:
            self._failed(exc)
            log.error("cannot open the index in %s: %s: %s; trying again in the background", self.data_dir,
                      exc.code, exc.message)
        except Exception as exc:
            self._failed(IndexNotReadyError(f"opening the index failed: {type(exc).__name__}: {exc}"))
            log.exception("opening the index in %s failed; trying again in the background", self.data_dir)
        return False

    def _failed(self, exc: SkillSearchError) -> None:
        self._tries += 1
        self.failure = exc

    def model_failed(self) -> bool:
        return any(m.failure is not None for m in self._models())

    def _pause(self, seconds: float) -> None:
        """Wait ``seconds`` before the next try; ``_Stopped`` when the catalog closes or its writes stop."""
        end = time.monotonic() + seconds
        while not self._stopping.is_set():
            if time.monotonic() >= end:
                return
            time.sleep(min(_STOP_POLL_S, max(0.0, end - time.monotonic())))
        raise _Stopped()

    def not_opened(self) -> IndexNotReadyError | None:
        """Why a server's index is not there to read (None when it is, or when no background open was asked
        for): still opening, or the reason its background open failed (tried again there)."""
        if self._is_open():
            return None
        failure = self.failure
        if failure is not None:
            retrying = self.opening() and not self.model_failed()
            return IndexNotReadyError(
                f"the search index could not be opened: {failure.message}"
                + ("; trying again in the background" if retrying else ""),
                {"opening": self.opening(), "reason": failure.message, "reason_code": failure.code,
                 "failed_tries": self._tries, "retrying": retrying})
        if self.opening():
            return IndexNotReadyError("the search index is still being opened (and repaired where needed)",
                                      {"opening": True})
        return None

    def wait(self, bounded: bool, wait_s: float) -> None:
        """Wait for the background open, up to ``wait_s`` (``bounded``), or as long as it takes.
        ``INDEX_NOT_READY`` past the bound, or at once with the reason once a try has failed (it is tried again
        in the background, never here)."""
        end = time.monotonic() + wait_s if bounded else None
        while not self._is_open():
            if (failure := self.failure) is not None:  # read once: the background open may clear it meanwhile
                raise self.not_opened() or failure
            if not self.opening():
                return  # the background open stopped (the catalog closed, or its writes stopped)
            if end is not None and time.monotonic() >= end:
                writer = writer_elsewhere(self.data_dir)
                if writer is not None:  # what it waits for, so a caller knows when to try again
                    raise IndexNotReadyError(
                        f"the search index is still being opened after {wait_s:g} s: process {writer} is writing"
                        f" to the index in {self.data_dir} (an import, a sync or a reindex), and search answers once"
                        " it has finished; try again then", {"waited_s": wait_s, "writer_pid": writer})
                raise IndexNotReadyError(
                    f"the search index is still being opened (and repaired where needed) after {wait_s:g} s;"
                    " try again shortly", {"waited_s": wait_s})
            self._opened.wait(_STOP_POLL_S if end is None else max(0.0, min(_STOP_POLL_S, end - time.monotonic())))
