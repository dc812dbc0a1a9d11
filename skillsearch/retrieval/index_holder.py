"""The search index of one data directory as a catalog holds it for its life: :class:`IndexHolder`.

It owns the encoder the index embeds with (the configured one, else the one the index was built with) and
the one :class:`~skillsearch.retrieval.indexer.SearchIndex` of the directory: opened on first use or, in a
server, in a background thread behind the first answers (built or repaired there, then each snapshot
warmed; an open that failed there is tried again there, with a backoff, and never by a reader); brought
up to the store when another process wrote (in a server, a repair that must diff and embed runs in a
background thread, never a request's: ``background_repair.py``); rebuilt (``reindex``). It answers whether the
index can serve (:class:`Readiness`, for ``/readyz``; the model's load, the background open, a write in
progress) and holds the lock an in-process batch writes under, and the :class:`WriteStops` that stop a
write at a server's shutdown. ``service.Catalog`` owns one and delegates to it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from threading import Event, RLock, Thread

from skillsearch.catalog.changes import changed_at
from skillsearch.catalog.store import CatalogStore
from skillsearch.core.errors import IndexNotReadyError, SkillSearchError, WriteStopped
from skillsearch.core.settings import Settings
from skillsearch.retrieval.background_repair import RETRY_FIRST_S, RETRY_MAX_S, BackgroundRepair
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.encoders import DEFAULT_ENCODER, encoder_choice, make_encoder
from skillsearch.retrieval.indexer import IndexStats, ProgressFactory, SearchIndex
from skillsearch.retrieval.loading import models_of, start_loading
from skillsearch.retrieval.manifest import recorded_encoder
from skillsearch.retrieval.query_cache import CachedQueryEncoder
from skillsearch.retrieval.warming import warm_in_background

__all__ = ["IndexHolder", "Readiness", "WriteStops"]

log = logging.getLogger("skillsearch")

# How long closing waits for a background open to stop: the encoder's batch in progress, or a lexical write's
# chunk of documents; past it the process goes on, and the next open repairs.
CLOSE_WAIT_S = 30.0
# How often the background open, waiting for the model to load or to try again, looks whether it should stop.
_STOP_POLL_S = 0.1


class _Stopped(Exception):
    """The background open ends: the catalog closes, or its writes stop (the next open repairs)."""


@dataclass(frozen=True)
class Readiness:
    documents: int
    generation: int
    changed_at: str | None = None  # when the catalog last changed
    catching_up: bool = False  # the store moved and a write is bringing the index up to it


class WriteStops:
    """Whether a catalog's index writes stop: while a server that owns the catalog shuts down (``set`` by
    ``Catalog.stop_writes``, ``clear``-ed by ``Catalog.resume_writes`` once its syncs are joined: a catalog
    may outlive a server, in a library caller or a test), or once the process-wide event it was given is set
    (the CLI's SIGTERM, never cleared)."""

    def __init__(self, process: Event | None = None) -> None:
        self._process = process
        self._own = Event()

    def is_set(self) -> bool:
        return self._own.is_set() or (self._process is not None and self._process.is_set())

    def set(self) -> None:
        self._own.set()

    def clear(self) -> None:
        self._own.clear()


class IndexHolder:
    """The encoder and the search index over ``store`` in ``data_dir``, opened once and kept."""

    def __init__(self, settings: Settings, store: CatalogStore, encoder: Encoder | None = None,
                 stopping: Event | None = None) -> None:
        self.settings = settings
        self.data_dir = Path(settings.data_dir)
        self.store = store
        # Set when the process stops (``Catalog.stop_writes``; the CLI passes the event its SIGTERM sets): an
        # index write in progress stops between batches of embeddings and raises ``WriteStopped``.
        self.stopping = WriteStops(stopping)
        self._encoder = encoder
        self._index: SearchIndex | None = None
        # Held by every open, rebuild and catch-up, and by an in-process batch (``Catalog.writing``).
        self.lock = RLock()
        # Clear while a server's background thread opens the index (``prepare_in_background``): readers that
        # need it wait for it within a bound instead of queueing on ``lock`` behind a repair.
        self._opened = Event()
        self._opened.set()
        self._opener: Thread | None = None  # the background open of prepare_in_background
        # Why the background open's last try failed (cleared once it opens): what readers and /readyz are told,
        # at once, instead of opening the index in their own thread. ``_tries``: the failed tries so far.
        self._failure: SkillSearchError | None = None
        self._tries = 0
        # A server's (``prepare_in_background``): an index left behind by a write that died or stopped is
        # repaired there, in a background thread, never in a request's (``background_repair.py``).
        self._serving = False
        self._repair = BackgroundRepair(self.data_dir, self.lock, self.stopping)

    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            self._encoder = make_encoder(self.encoder_choice())
        if not isinstance(self._encoder, CachedQueryEncoder):
            self._encoder = CachedQueryEncoder(self._encoder, self.settings.query_cache_size)
        return self._encoder

    def encoder_choice(self) -> str:
        """The configured encoder, else the one the index was built with (so that a later command, ``reindex``
        included, needs no flag), else ``DEFAULT_ENCODER``."""
        if self.settings.encoder:
            return self.settings.encoder
        built = recorded_encoder(self.data_dir)
        return (encoder_choice(built) if built else None) or DEFAULT_ENCODER

    @property
    def opened(self) -> SearchIndex | None:
        """The index if this process has opened it, without opening it."""
        return self._index

    # -- opening ----------------------------------------------------------------------------------

    def prepare_in_background(self) -> None:
        """Servers call this once the store is open (``open(..., index=False)``), and answer the protocol at
        once: the embedding model loads in a background thread, and the index opens in another, with what
        opening may have to do first (the lexical side rebuilt after an upgrade changed its recipe, a backlog
        of skills embedded after an import killed half way, a recalibration, a whole build where a restore
        left no index: seconds to minutes on a large catalog). Meanwhile the store's reads answer, and a
        search waits for the index (and the model) up to ``settings.model_wait_s``, then gets
        ``INDEX_NOT_READY``; ``readiness`` says not ready. Each index snapshot, the opened one and every
        later one, then makes in a third thread what its first search would make otherwise
        (``warming.warm``: at 1M rows the int4 copy, 0.34 s, and the document languages of the e5 route).
        Readers never see a half-repaired index: the opened one is published whole, when its repair is done."""
        start_loading(self.encoder, self.settings.model_wait_s, self.settings.model_load_delay_s)
        self._serving = True
        if self._index is not None:
            self._warm(self._index)
            return
        self._opened.clear()
        self._opener = Thread(target=self._open_behind_the_answer, name="skillsearch-index-open", daemon=True)
        self._opener.start()

    def _open_behind_the_answer(self) -> None:
        """The background open of :meth:`prepare_in_background`. A repair that must embed waits for the
        model without the readers' bound (nobody waits on this thread's answer), but ends when the catalog
        is closed or its writes stop meanwhile, then opens again: an open that failed there changed nothing
        a second open does not check and repair. An open that fails (a damaged file, a model that failed to
        load, another process's write lock held past its wait) is kept as the reason readers are given, and
        tried again here after ``RETRY_FIRST_S``, doubling up to ``RETRY_MAX_S``; a model that failed to
        load does not come back in this process, so its failure is kept and not tried again."""
        delay = RETRY_FIRST_S
        try:
            while not self._try_open():
                if self._model_failed():
                    return  # its failure stays the answer
                self._pause(delay)
                delay = min(delay * 2, RETRY_MAX_S)
            assert self._index is not None
            self._warm(self._index)
        except WriteStopped as exc:  # the process is stopping: the next open embeds the rest
            self._failure = None
            log.warning("%s", exc)
        except _Stopped:  # closing, or the writes stop: the next open (a reader's, from now on) repairs
            self._failure = None
        finally:
            self._opened.set()

    def _try_open(self) -> bool:
        """One try of the background open (waiting for a model that is loading): whether it opened. A failure
        is kept in ``_failure``; ``WriteStopped`` and ``_Stopped`` end the background open."""
        try:
            while True:
                try:
                    with self.lock:
                        if self._index is None:
                            self._open_index(None)
                    self._failure = None
                    return True
                except IndexNotReadyError:
                    if self.stopping.is_set():
                        raise _Stopped() from None
                    loading = [m for m in models_of(self.encoder) if m.pending]
                    if not loading:
                        raise
                    for model in loading:
                        while not model.wait(_STOP_POLL_S):
                            if self.stopping.is_set():
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
        self._failure = exc

    def _model_failed(self) -> bool:
        return any(m.failure is not None for m in models_of(self.encoder))

    def _pause(self, seconds: float) -> None:
        """Wait ``seconds`` before the next try; ``_Stopped`` when the catalog closes or its writes stop."""
        end = time.monotonic() + seconds
        while not self.stopping.is_set():
            if time.monotonic() >= end:
                return
            time.sleep(min(_STOP_POLL_S, max(0.0, end - time.monotonic())))
        raise _Stopped()

    def _not_opened(self) -> IndexNotReadyError | None:
        """Why a server's index is not there to read (None when it is, or when no background open was asked
        for): still opening, or the reason its background open failed (tried again there)."""
        if self._index is not None:
            return None
        failure = self._failure
        if failure is not None:
            retrying = self.opening() and not self._model_failed()
            return IndexNotReadyError(
                f"the search index could not be opened: {failure.message}"
                + ("; trying again in the background" if retrying else ""),
                {"opening": self.opening(), "reason": failure.message, "reason_code": failure.code,
                 "failed_tries": self._tries, "retrying": retrying})
        if self.opening():
            return IndexNotReadyError("the search index is still being opened (and repaired where needed)",
                                      {"opening": True})
        return None

    @staticmethod
    def _warm(idx: SearchIndex) -> None:
        idx.warm_snapshots = True
        warm_in_background(idx.snapshot())

    def opening(self) -> bool:
        """A server's background open of the index (``prepare_in_background``) has not finished."""
        return not self._opened.is_set()

    def index(self, progress: ProgressFactory | None = None, generation: int | None = None, *,
              bounded: bool = True) -> SearchIndex:
        """The search index, opened on first use and brought up to the store when another process
        changed the catalog since (the store's generation moved). ``generation``: the store's, when the
        caller has just read it. In a server (``prepare_in_background``) a reader (``bounded``) only loads
        another process's whole write here; an index still behind (a write died or stopped part-way) is
        repaired in a background thread while the last snapshot serves (``background_repair.py``). While a
        server's background open runs (``prepare_in_background``) a caller waits for it, up to
        ``settings.model_wait_s`` (``bounded``; a write waits as long as it takes), then gets
        ``INDEX_NOT_READY``."""
        if self._index is None and (self.opening() or self._failure is not None):
            self._wait_for_the_open(bounded)
        current = self._index
        if current is not None:
            if current.snapshot().generation == (self.store.generation() if generation is None else generation):
                return current
            # Someone else is already bringing it up to date: serve the last whole snapshot meanwhile.
            if not self.lock.acquire(blocking=False):
                return current
            try:
                if current.snapshot().generation != self.store.generation():
                    # Follows another process's writes; does nothing while a writer holds the directory.
                    if not (self._serving and bounded):
                        current.catch_up(self.store)
                    elif current.follow(self.store):  # still behind: diffed and embedded, not in a request
                        self._repair.start(current, self.store)
                return current
            finally:
                self.lock.release()
        with self.lock:
            if self._index is None:
                self._open_index(progress)
            assert self._index is not None
            return self._index

    def _wait_for_the_open(self, bounded: bool) -> None:
        """Wait for a server's background open, up to ``settings.model_wait_s`` (``bounded``), or as long as
        it takes. ``INDEX_NOT_READY`` past the bound, or at once with the reason once a try has failed (it is
        tried again in the background, never here)."""
        wait_s = self.settings.model_wait_s
        end = time.monotonic() + wait_s if bounded else None
        while self._index is None:
            if (failure := self._failure) is not None:  # read once: the background open may clear it meanwhile
                raise self._not_opened() or failure
            if not self.opening():
                return  # the background open stopped (the catalog closed, or its writes stopped)
            if end is not None and time.monotonic() >= end:
                raise IndexNotReadyError(
                    f"the search index is still being opened (and repaired where needed) after {wait_s:g} s;"
                    " try again shortly", {"waited_s": wait_s})
            self._opened.wait(_STOP_POLL_S if end is None else max(0.0, min(_STOP_POLL_S, end - time.monotonic())))

    def open_first(self, progress: ProgressFactory | None) -> IndexStats | None:
        """Open (build) the index unless another thread has meanwhile: what that embedded, None when it did
        not embed or was opened already (an import's first index of a data directory)."""
        with self.lock:
            return self._open_index(progress) if self._index is None else None

    def _open_index(self, progress: ProgressFactory | None) -> IndexStats | None:
        """Open (build, repair) the index; what that embedded, None when it was current. Under ``lock``."""
        idx = self._new_index()
        stats = idx.open(self.store, progress)
        log.info("index open in %s: %d documents, %d embedded", self.data_dir, len(idx.snapshot().vectors),
                 idx.embed_count)
        self._index = idx
        return stats

    def _new_index(self) -> SearchIndex:
        return SearchIndex(
            self.data_dir, self.encoder, self.settings.embed_instructions_chars, self.settings.french_analysis,
            self.settings.lexical_instructions_chars, self.stopping,
        )

    def reindex(self, progress: ProgressFactory | None = None) -> IndexStats:
        """Rebuild the index whole (the one open, or a new one). Under ``lock``."""
        with self.lock:
            idx = self._index or self._new_index()
            stats = idx.rebuild(self.store, progress)
            self._index = idx
            return stats

    # -- readiness --------------------------------------------------------------------------------

    def check_model(self) -> None:
        """``INDEX_NOT_READY`` while a model behind the encoder is loading, or when its load failed."""
        for model in models_of(self.encoder):
            if model.pending:
                raise IndexNotReadyError(f"the embedding model ({model.what}) is still loading", {"model": model.what})
            if model.failure is not None:
                raise IndexNotReadyError(f"the embedding model ({model.what}) failed to load", {"model": model.what})

    def readiness(self) -> Readiness:
        """The index is open and reflects the store (both retrievers hold every active skill), else
        ``INDEX_NOT_READY`` with both generations and both document counts. An index a moment behind the
        store while a write is in progress (a sync batch here, or another process holding the write lock)
        is ready and ``catching_up`` (unless that snapshot is empty): it serves its last whole snapshot, and
        every replica of a fleet pulls the same change at once, so a 503 then would empty the balancer's pool
        on every update. Also
        ``INDEX_NOT_READY`` while the embedding model is loading in the background (a server's first moments),
        and while the index is still opening there (a repair after an upgrade or an interrupted import)."""
        if self._index is None and (failure := self._failure) is not None:
            raise self._not_opened() or failure  # why the background open failed: at once
        self.check_model()
        if (not_opened := self._not_opened()) is not None:
            raise not_opened  # still opening
        idx = self.index()
        snap, generation = idx.snapshot(), self.store.generation()
        docs, lexical_docs = len(snap.vectors), idx.lexical.num_docs()
        behind = snap.generation != generation
        # Catching up counts as ready only for an index that has something to serve meanwhile: a new replica
        # whose first sync is still embedding is not ready.
        if lexical_docs != docs or (behind and (docs == 0 or not self._write_in_progress(idx))):
            raise IndexNotReadyError("the index does not match the catalog yet", {
                "index_generation": snap.generation, "store_generation": generation,
                "vectors": docs, "lexical": lexical_docs})
        return Readiness(documents=docs, generation=snap.generation, changed_at=changed_at(self.store),
                         catching_up=behind)

    def _write_in_progress(self, idx: SearchIndex) -> bool:
        if self._repair.running():
            return True  # this process's background repair (it may not hold ``lock`` yet)
        if not self.lock.acquire(blocking=False):
            return True  # a batch of this process (a sync run, a source's run) holds the index
        try:
            with idx.wlock.try_hold() as free:
                return not free  # another thread's or process's write of the index files
        finally:
            self.lock.release()

    def indexed_documents(self) -> int:
        """Skills in the search index; 0 while it cannot be opened, or is opening in the background."""
        if self._not_opened() is not None:
            return 0
        try:
            return len(self.index().snapshot().vectors)
        except SkillSearchError:
            return 0

    def index_generation(self) -> int:
        """The store generation the index this process serves reflects; -1 while it cannot be opened, or is
        opening in the background."""
        if self._not_opened() is not None:
            return -1
        try:
            return self.index().snapshot().generation
        except SkillSearchError:
            return -1

    def embedded_documents(self) -> int:
        """Documents this process has embedded into its index so far (0 after opening a restored snapshot:
        its vectors are used as they are)."""
        return self._index.embed_count if self._index is not None else 0

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """Close the index. A background open still at work is told to stop (an embedding keeps the batches it
        finished, as at SIGTERM) and waited for up to ``wait_s``, so it does not write on after the store is
        closed, nor leave with its finished batches unsaved."""
        opener = self._opener
        if opener is not None and opener.is_alive():
            self.stopping.set()
            opener.join(wait_s)
        if self._repair.running():
            self.stopping.set()
            self._repair.join(wait_s)
        if self._index is not None:
            self._index.close()
