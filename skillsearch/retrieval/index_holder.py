"""The search index of one data directory as a catalog holds it for its life: :class:`IndexHolder`.

It owns the encoder the index embeds with (the configured one, else the one the index was built with) and
the one :class:`~skillsearch.retrieval.indexer.SearchIndex` of the directory: opened on first use or, in a
server, in a background thread behind the first answers (built or repaired there, then each snapshot
warmed; an open that failed there is tried again there, with a backoff, and never by a reader:
``background_open.py``); brought
up to the store when another process wrote (in a server, a repair that must diff and embed runs in a
background thread, never a request's: ``background_repair.py``); rebuilt (``reindex``). It answers whether the
index can serve (:class:`Readiness`, for ``/readyz``; the model's load, the background open, a write in
progress) and holds the lock an in-process batch writes under, and the :class:`WriteStops` that stop a
write at a server's shutdown. ``service.Catalog`` owns one and delegates to it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from threading import Event, RLock

from skillsearch.catalog.changes import changed_at
from skillsearch.catalog.store import CatalogStore
from skillsearch.core.errors import IndexNotReadyError, SkillSearchError
from skillsearch.core.settings import Settings
from skillsearch.retrieval.background_open import BackgroundOpen
from skillsearch.retrieval.background_repair import BackgroundRepair
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
        # A server's background open of the index (``prepare_in_background``): readers wait for it within a
        # bound, or are told at once why its last try failed (``background_open.py``).
        self._opening = BackgroundOpen(self.data_dir, self.stopping, self._open_unless_open,
                                       lambda: self._index is not None, lambda: models_of(self.encoder),
                                       self._warm_opened)
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
        self._opening.start()

    def _open_unless_open(self) -> None:
        with self.lock:
            if self._index is None:
                self._open_index(None)

    def _warm_opened(self) -> None:
        assert self._index is not None
        self._warm(self._index)

    @staticmethod
    def _warm(idx: SearchIndex) -> None:
        idx.warm_snapshots = True
        warm_in_background(idx.snapshot())

    def opening(self) -> bool:
        """A server's background open of the index (``prepare_in_background``) has not finished."""
        return self._opening.opening()

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
        if self._index is None and (self.opening() or self._opening.failure is not None):
            self._opening.wait(bounded, self.settings.model_wait_s)
        current = self._index
        if current is not None:
            if current.snapshot().generation == (self.store.generation() if generation is None else generation):
                return current
            if self.store.read_only:  # another user wrote: open what they wrote, as it is
                with self.lock:
                    if self._index is current:
                        self._index = None
                        current.close()
                        self._open_index(progress)
                    assert self._index is not None
                    return self._index
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

    def open_first(self, progress: ProgressFactory | None) -> IndexStats | None:
        """Open (build) the index unless another thread has meanwhile: what that embedded, None when it did
        not embed or was opened already (an import's first index of a data directory)."""
        with self.lock:
            return self._open_index(progress) if self._index is None else None

    def _open_index(self, progress: ProgressFactory | None) -> IndexStats | None:
        """Open (build, repair) the index; what that embedded, None when it was current. Under ``lock``."""
        idx = self._new_index()
        if self.store.read_only:  # a folder this user cannot write: searched as it is, nothing repaired
            idx.open_read_only(self.store, self.settings.model_wait_s)
            self._index = idx
            return None
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
        if self._index is None and (failure := self._opening.failure) is not None:
            raise self._opening.not_opened() or failure  # why the background open failed: at once
        self.check_model()
        if (not_opened := self._opening.not_opened()) is not None:
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
        if self._opening.not_opened() is not None or self._unopened_server():
            return 0
        try:
            return len(self.index().snapshot().vectors)
        except SkillSearchError:
            return 0

    def index_generation(self) -> int:
        """The store generation the index this process serves reflects; -1 while it cannot be opened, or is
        opening in the background."""
        if self._opening.not_opened() is not None or self._unopened_server():
            return -1
        try:
            return self.index().snapshot().generation
        except SkillSearchError:
            return -1

    def _unopened_server(self) -> bool:
        """A server whose background open ended without an index (its writes stopped: SIGTERM while it was
        starting): a gauge or a probe must not open (and repair, embed) it in its own thread, as the metrics'
        registration did in the main thread, keeping a stopping server from exiting."""
        return self._serving and self._index is None

    def embedded_documents(self) -> int:
        """Documents this process has embedded into its index so far (0 after opening a restored snapshot:
        its vectors are used as they are)."""
        return self._index.embed_count if self._index is not None else 0

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """Close the index. A background open still at work is told to stop (an embedding keeps the batches it
        finished, as at SIGTERM) and waited for up to ``wait_s``, so it does not write on after the store is
        closed, nor leave with its finished batches unsaved."""
        if self._opening.running():
            self.stopping.set()
            self._opening.join(wait_s)
        if self._repair.running():
            self.stopping.set()
            self._repair.join(wait_s)
        if self._index is not None:
            self._index.close()
