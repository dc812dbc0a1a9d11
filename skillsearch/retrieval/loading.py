"""A model read from disk when it is first needed, or in a background thread, with a bounded wait.

Why: importing sentence-transformers (and torch with it) takes about 5 s on two cores, and most commands
never embed anything (``list``, ``get``, a lexical search, ``--help``). An encoder therefore knows its name
and dimension without its model (the index's manifest check needs only those) and loads the model the first
time it encodes. A server (``serve``, ``mcp``) answers the protocol at once and starts the load in a
background thread (:meth:`LazyModel.start`); a search that arrives first waits for that load, for at most
the bound it was started with, then gets ``INDEX_NOT_READY`` saying the model is still loading.

States: not started -> loading (in the first caller's thread, or the background thread) -> loaded, or
failed (the error is kept and raised to every later caller: a missing package does not fix itself).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from skillsearch.core.errors import IndexNotReadyError, SkillSearchError
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.wrapper import Wrapper

__all__ = ["DEFAULT_WAIT_S", "LazyModel", "ModelEncoder", "models_of", "start_loading"]

log = logging.getLogger("skillsearch")

T = TypeVar("T")

# How long a caller waits for a load another thread is running, unless a server chose its own bound.
DEFAULT_WAIT_S = 120.0


class LazyModel(Generic[T]):
    """``get()`` returns the loaded model, loading it in the caller's thread when nobody has started it."""

    def __init__(self, load: Callable[[], T], what: str) -> None:
        self._load = load
        self.what = what
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._started = False
        self._value: T | None = None
        self._error: BaseException | None = None
        self.wait_s = DEFAULT_WAIT_S

    @property
    def loaded(self) -> bool:
        """The model is in memory (a failed load is not)."""
        return self._done.is_set() and self._error is None

    @property
    def pending(self) -> bool:
        """A load has started and not finished."""
        return self._started and not self._done.is_set()

    @property
    def failure(self) -> BaseException | None:
        """Why the load failed (None: it has not, or not yet)."""
        return self._error if self._done.is_set() else None

    def start(self, wait_s: float | None = None, delay_s: float = 0.0) -> bool:
        """Load in a daemon thread, after ``delay_s`` seconds (0 in service; tests delay it to watch a server
        answer before its model is in memory). ``wait_s``: how long a caller waits for it from now on.
        False when a load had already started (nothing new is started)."""
        if wait_s is not None:
            self.wait_s = wait_s
        with self._lock:
            if self._started:
                return False
            self._started = True

        def run() -> None:
            if delay_s > 0:
                time.sleep(delay_s)
            self._run()

        threading.Thread(target=run, name=f"skillsearch-load-{self.what}", daemon=True).start()
        return True

    def wait(self, timeout: float | None = None) -> bool:
        """Block until a started load has finished (loaded or failed), or ``timeout`` seconds have passed;
        whether it has finished (True when none started). For background work that needs the model and has
        no caller to answer meanwhile (a server's index repair), which waits a step at a time to see a stop."""
        return not self._started or self._done.wait(timeout)

    def get(self) -> T:
        if not self._done.is_set():
            with self._lock:
                mine = not self._started
                self._started = True
            if mine:
                self._run()
            elif not self._done.wait(self.wait_s):
                raise IndexNotReadyError(
                    f"the embedding model ({self.what}) is still loading after {self.wait_s:g} s; try again shortly",
                    {"model": self.what, "waited_s": self.wait_s},
                )
        if self._error is not None:
            if isinstance(self._error, SkillSearchError):
                raise self._error
            raise IndexNotReadyError(f"the embedding model ({self.what}) failed to load: "
                                     f"{type(self._error).__name__}: {self._error}") from self._error
        value = self._value
        assert value is not None
        return value

    def _run(self) -> None:
        started = time.perf_counter()
        try:
            self._value = self._load()
            log.info("embedding model %s loaded in %.1f s", self.what, time.perf_counter() - started)
        except BaseException as exc:  # kept for every caller; a background thread has nobody else to tell
            self._error = exc
            log.error("embedding model %s failed to load: %s: %s", self.what, type(exc).__name__, exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._done.set()


@runtime_checkable
class ModelEncoder(Protocol):
    """An encoder over one model it loads lazily (MiniLM, e5)."""

    loading: LazyModel[Any]


def models_of(encoder: Encoder) -> list[LazyModel[Any]]:
    """The models behind ``encoder`` (through its wrappers and routes), each loaded or not; none for an
    encoder without a model (``hashing``, a test's)."""
    if isinstance(encoder, Wrapper):
        return models_of(encoder.inner)
    routed = encoder.routed()
    if routed is not None:
        return [m for part in routed.parts.values() for m in models_of(part)]
    return [encoder.loading] if isinstance(encoder, ModelEncoder) else []


def start_loading(encoder: Encoder, wait_s: float, delay_s: float = 0.0) -> None:
    """Load ``encoder``'s models in background threads; an encode that needs one meanwhile waits for it up
    to ``wait_s`` seconds, then gets ``INDEX_NOT_READY``."""
    for model in models_of(encoder):
        model.start(wait_s, delay_s)
