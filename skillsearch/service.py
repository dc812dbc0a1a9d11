"""The composition root: one :class:`Catalog` that owns the store, the encoder and the search index, and
offers every use case to the surfaces (CLI, MCP, HTTP). Surfaces never reach below this class.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources as importlib_resources
from pathlib import Path
from threading import Event, RLock, Thread
from typing import TYPE_CHECKING, Any

from skillsearch.catalog.changes import changed_at, visible_mark
from skillsearch.catalog.imports import ImportReport, store_import
from skillsearch.catalog.read_cache import GenerationReads
from skillsearch.catalog.reads import get_detail, list_page, resolve_flow
from skillsearch.catalog.store import CatalogStore
from skillsearch.core.domain import Principal
from skillsearch.core.errors import IndexNotReadyError, SkillSearchError, ValidationError, WriteStopped
from skillsearch.core.grants import check_grants
from skillsearch.core.lru import LRU
from skillsearch.core.settings import Settings
from skillsearch.core.views import ListResponse, ResolvedFlow, SearchResponse, SkillDetail
from skillsearch.retrieval.batching import BatchingEncoder, BatchStats, QueryEncoders
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.encoders import DEFAULT_ENCODER, encoder_choice, make_encoder
from skillsearch.retrieval.indexer import IndexStats, ProgressFactory, SearchIndex
from skillsearch.retrieval.loading import models_of, start_loading
from skillsearch.retrieval.manifest import TUNED_KEYS, recorded_encoder
from skillsearch.retrieval.query_cache import CachedQueryEncoder
from skillsearch.retrieval.routed_encoder import RoutedEncoder
from skillsearch.retrieval.search import run_search, search_response
from skillsearch.retrieval.search_types import SearchRequest, SearchResult
from skillsearch.retrieval.warming import warm_in_background
from skillsearch.sync.config import default_config_path
from skillsearch.usecases.recall import DEFAULT_MAX_CONTENT_BYTES, CloudSkillEnvelope, RecallRequest, recall
from skillsearch.usecases.skill_files import SkillFiles, legacy_skill_md_note
from skillsearch.usecases.sources import LocalSourcesUseCase
from skillsearch.usecases.subscriptions import SubscriptionsUseCase

# What only a write, a sync, a snapshot or tuning needs is imported by the method that does it: a command
# that only reads (``list``, ``skillsearch mcp`` up to its first answer) then never imports the sync client,
# runner and poller, the importer (and PyYAML), the snapshot code or the tuner (tests/test_startup.py).
if TYPE_CHECKING:
    from skillsearch.usecases.restore import RestoreInfo
    from skillsearch.usecases.snapshots import SnapshotInfo

__all__ = ["Catalog", "ImportReport", "Readiness", "sample_catalog_dir"]

log = logging.getLogger("skillsearch")


def sample_catalog_dir() -> Path:
    return Path(str(importlib_resources.files("skillsearch") / "sample"))


@dataclass(frozen=True)
class Readiness:
    documents: int
    generation: int
    changed_at: str | None = None  # when the catalog last changed
    catching_up: bool = False  # the store moved and a write is bringing the index up to it


class WriteStops:
    """Whether a catalog's index writes stop: while a server that owns the catalog shuts down (``set`` by
    :meth:`Catalog.stop_writes`, ``clear``-ed by :meth:`Catalog.resume_writes` once its syncs are joined: a
    catalog may outlive a server, in a library caller or a test), or once the process-wide event it was given
    is set (the CLI's SIGTERM, never cleared)."""

    def __init__(self, process: Event | None = None) -> None:
        self._process = process
        self._own = Event()

    def is_set(self) -> bool:
        return self._own.is_set() or (self._process is not None and self._process.is_set())

    def set(self) -> None:
        self._own.set()

    def clear(self) -> None:
        self._own.clear()


class Catalog:
    """Store + encoder + index for one data directory."""

    def __init__(self, settings: Settings, encoder: Encoder | None = None, stopping: Event | None = None) -> None:
        self.settings = settings
        # Set when the process stops (``stop_writes``; the CLI passes the event its SIGTERM sets): an index
        # write in progress stops between batches of embeddings and raises ``WriteStopped``.
        self.stopping = WriteStops(stopping)
        self.data_dir = Path(settings.data_dir)
        self.store = CatalogStore.in_dir(self.data_dir)
        # The search path's re-check reads, kept per store generation (catalog/read_cache.py).
        self._reads = GenerationReads(self.store)
        self._encoder = encoder
        self._index: SearchIndex | None = None
        self._lock = RLock()
        # Clear while a server's background thread opens the index (``prepare_in_background``): readers that
        # need it wait for it within a bound instead of queueing on ``_lock`` behind a repair.
        self._opened = Event()
        self._opened.set()
        self.sources = LocalSourcesUseCase(self)  # local folders and git repositories
        self.subscriptions = SubscriptionsUseCase(self)  # the subscription platform: pulls, polls, webhooks
        self._results: LRU[tuple[Any, ...], SearchResult] = LRU(settings.result_cache_size)
        self._queries = QueryEncoders(lambda: self.encoder, settings)  # search's, over the batching service
        self.seeded = 0  # skills of the bundled sample that open() seeded an empty directory with

    # -- lifecycle --------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        settings: Settings,
        *,
        encoder: Encoder | None = None,
        seed: bool | None = None,
        progress: ProgressFactory | None = None,
        index: bool = True,
        stopping: Event | None = None,
    ) -> Catalog:
        """Open a data directory for reading: seed the sample catalog into an empty one (when enabled) and
        open the index, building or repairing it as needed. A directory with a sync configuration
        (``sync.toml``: subscriptions or sources) is never seeded, whichever command opens it first.
        ``index=False``: the caller only reads the store (list, get, resolve), so an index behind the store
        (an import killed half way) is left for the next search or write to bring up, with the model it
        needs, instead of this read. ``stopping``: see :meth:`stop_writes`."""
        catalog = cls(settings, encoder, stopping)
        if (settings.seed_sample if seed is None else seed) and catalog.is_empty() \
                and not default_config_path(catalog.data_dir).exists():
            # ``index=False``: into the store alone, so that a read (list, get) or a server that opens its index
            # in the background embeds nothing here: the index is built by its next open.
            catalog.seeded = sum(len(r.created) for r in catalog.import_sample(progress, index=index))
        if index:
            catalog.index(progress)
        if note := legacy_skill_md_note(catalog.store):
            log.warning("%s", note)
        return catalog

    @staticmethod
    def create_snapshot(settings: Settings, dest: Path, wait_s: float = 60.0) -> SnapshotInfo:
        """A consistent snapshot of ``settings.data_dir`` into the new folder ``dest``, while other processes
        serve and write it (``usecases/snapshots.py``). Loads no model and opens no index."""
        from skillsearch.usecases.snapshots import create_snapshot

        return create_snapshot(Path(settings.data_dir), Path(dest), wait_s=wait_s)

    @staticmethod
    def restore_snapshot(settings: Settings, src: Path) -> RestoreInfo:
        """Verify the snapshot ``src`` (every digest, the model fingerprint of ``settings.encoder``) and swap
        it into ``settings.data_dir`` (``usecases/restore.py``); a refusal leaves the folder as it was."""
        from skillsearch.usecases.restore import restore_snapshot

        return restore_snapshot(Path(src), Path(settings.data_dir), settings.encoder)

    def stop_writes(self) -> None:
        """The process is stopping (a server's shutdown): an index write in progress (a sync's, a source's,
        an import's, an open's repair) stops after the encoder's current batch, keeps what it embedded and
        raises :class:`~skillsearch.core.errors.WriteStopped`; the store keeps what it committed, and the
        next open embeds the rest. Reads keep serving the last whole snapshot."""
        self.stopping.set()

    def resume_writes(self) -> None:
        """The server that called :meth:`stop_writes` has joined its syncs: writes may start again (unless the
        process itself is stopping)."""
        self.stopping.clear()

    def embedded_documents(self) -> int:
        """Documents this process has embedded into its index so far (0 after opening a restored snapshot:
        its vectors are used as they are)."""
        return self._index.embed_count if self._index is not None else 0

    def is_empty(self) -> bool:
        return self.store.count() == 0 and not self.store.sync.states()

    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            self._encoder = make_encoder(self.encoder_choice())
        if not isinstance(self._encoder, CachedQueryEncoder):
            self._encoder = CachedQueryEncoder(self._encoder, self.settings.query_cache_size)
        return self._encoder

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
        if self._index is not None:
            self._warm(self._index)
            return
        self._opened.clear()
        Thread(target=self._open_behind_the_answer, name="skillsearch-index-open", daemon=True).start()

    def _open_behind_the_answer(self) -> None:
        """The background open of :meth:`prepare_in_background`. A repair that must embed waits for the
        model without the readers' bound (nobody waits on this thread's answer), then opens again: an open
        that failed there changed nothing a second open does not check and repair."""
        try:
            while True:
                try:
                    with self._lock:
                        if self._index is None:
                            self._open_index(None)
                    break
                except IndexNotReadyError:
                    loading = [m for m in models_of(self.encoder) if m.pending]
                    if not loading:
                        raise
                    for model in loading:
                        model.wait()
            assert self._index is not None
            self._warm(self._index)
        except WriteStopped as exc:  # the process is stopping: the next open embeds the rest
            log.warning("%s", exc)
        except SkillSearchError as exc:  # the next reader opens it again and gets the error (a reindex fixes it)
            log.error("cannot open the index in %s: %s: %s", self.data_dir, exc.code, exc.message)
        except Exception:
            log.exception("opening the index in %s failed; the next search opens it again", self.data_dir)
        finally:
            self._opened.set()

    @staticmethod
    def _warm(idx: SearchIndex) -> None:
        idx.warm_snapshots = True
        warm_in_background(idx.snapshot())

    def index_opening(self) -> bool:
        """A server's background open of the index (``prepare_in_background``) has not finished."""
        return not self._opened.is_set()

    def check_model(self) -> None:
        """``INDEX_NOT_READY`` while a model behind the encoder is loading, or when its load failed."""
        for model in models_of(self.encoder):
            if model.pending:
                raise IndexNotReadyError(f"the embedding model ({model.what}) is still loading", {"model": model.what})
            if model.failure is not None:
                raise IndexNotReadyError(f"the embedding model ({model.what}) failed to load", {"model": model.what})

    def encoder_choice(self) -> str:
        """The configured encoder, else the one the index was built with (so that a later command, ``reindex``
        included, needs no flag), else ``DEFAULT_ENCODER``."""
        if self.settings.encoder:
            return self.settings.encoder
        built = recorded_encoder(self.data_dir)
        return (encoder_choice(built) if built else None) or DEFAULT_ENCODER

    def batch_stats(self) -> BatchStats | None:
        """The batching query encoder's counters (None before the first search, or without batching)."""
        return self._queries.stats()

    def query_service(self) -> Encoder | None:
        """What search embeds an English request with, without the query LRU in front of it: the batching
        service over MiniLM (None when nothing is batched). For benchmarks that time the model as search
        calls it, beside the searches."""
        routes = self._queries.routes()
        route = routes.get(None) or routes.get(RoutedEncoder.ENGLISH)
        inner = getattr(route, "inner", None)
        return inner if isinstance(inner, BatchingEncoder) else None

    def index(self, progress: ProgressFactory | None = None, generation: int | None = None, *,
              bounded: bool = True) -> SearchIndex:
        """The search index, opened on first use and brought up to the store when another process
        changed the catalog since (the store's generation moved). ``generation``: the store's, when the
        caller has just read it. While a server's background open runs (``prepare_in_background``) a
        caller waits for it, up to ``settings.model_wait_s`` (``bounded``; a write waits as long as it
        takes), then gets ``INDEX_NOT_READY``."""
        if self._index is None and not self._opened.is_set():
            wait_s = self.settings.model_wait_s
            if not self._opened.wait(wait_s if bounded else None):
                raise IndexNotReadyError(
                    f"the search index is still being opened (and repaired where needed) after {wait_s:g} s;"
                    " try again shortly", {"waited_s": wait_s})
        current = self._index
        if current is not None:
            if current.snapshot().generation == (self.store.generation() if generation is None else generation):
                return current
            # Someone else is already bringing it up to date: serve the last whole snapshot meanwhile.
            if not self._lock.acquire(blocking=False):
                return current
            try:
                if current.snapshot().generation != self.store.generation():
                    # Follows another process's writes; does nothing while a writer holds the directory.
                    current.catch_up(self.store)
                return current
            finally:
                self._lock.release()
        with self._lock:
            if self._index is None:
                self._open_index(progress)
            assert self._index is not None
            return self._index

    def _open_index(self, progress: ProgressFactory | None) -> IndexStats | None:
        """Open (build, repair) the index; what that embedded, None when it was current. Under ``_lock``."""
        idx = SearchIndex(
            self.data_dir, self.encoder, self.settings.embed_instructions_chars, self.settings.french_analysis,
            self.settings.lexical_instructions_chars, self.stopping,
        )
        stats = idx.open(self.store, progress)
        log.info("index open in %s: %d documents, %d embedded", self.data_dir, len(idx.snapshot().vectors),
                 idx.embed_count)
        self._index = idx
        return stats

    def reindex(self, progress: ProgressFactory | None = None) -> IndexStats:
        with self._lock:
            idx = self._index or SearchIndex(
                self.data_dir, self.encoder, self.settings.embed_instructions_chars, self.settings.french_analysis,
                self.settings.lexical_instructions_chars, self.stopping,
            )
            stats = idx.rebuild(self.store, progress)
            self._index = idx
            self._results.clear()
            return stats

    def calibrate(self, labelled: Sequence[tuple[str, Sequence[str]]] = ()) -> dict[str, Any]:
        """Recompute the index's calibration for its encoder (``skillsearch calibrate``).

        With labelled requests (text, expected slugs) the semantic weight is also tuned on them, by MRR@10
        over the live index as the operator sees it, and stored with the calibration."""
        try:
            return self._calibrate(labelled)
        finally:
            self._results.clear()  # cached answers were fused with the old calibration's weight

    def _calibrate(self, labelled: Sequence[tuple[str, Sequence[str]]]) -> dict[str, Any]:
        idx = self.index()
        if not labelled:
            kept = {k: v for k, v in idx.calibration.items() if k in TUNED_KEYS}
            return idx.recalibrate(kept if idx.calibration.get("encoder") == self.encoder.name else {})
        from skillsearch.usecases.tuning import tuned_weight

        operator = Principal.operator()
        return idx.recalibrate(tuned_weight(lambda request: self.search(operator, request), labelled))

    def close(self) -> None:
        self._queries.close()
        if self._index is not None:
            self._index.close()
        self.store.close()

    # -- what the surfaces show about the catalog itself ---------------------------------------

    def generation(self) -> int:
        """The store's generation: it moves with every write (import, sync, revocation, archive)."""
        return self.store.generation()

    def readiness(self) -> Readiness:
        """The index is open and reflects the store (both retrievers hold every active skill), else
        ``INDEX_NOT_READY`` with both generations and both document counts. An index a moment behind the
        store while a write is in progress (a sync batch here, or another process holding the write lock)
        is ready and ``catching_up`` (unless that snapshot is empty): it serves its last whole snapshot, and
        every replica of a fleet pulls the same change at once, so a 503 then would empty the balancer's pool
        on every update. Also
        ``INDEX_NOT_READY`` while the embedding model is loading in the background (a server's first moments),
        and while the index is still opening there (a repair after an upgrade or an interrupted import)."""
        self.check_model()
        if self.index_opening():
            raise IndexNotReadyError("the search index is still being opened (and repaired where needed)",
                                     {"opening": True})
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
        if not self._lock.acquire(blocking=False):
            return True  # a batch of this process (a sync run, a source's run) holds the index
        try:
            with idx.wlock.try_hold() as free:
                return not free  # another thread's or process's write of the index files
        finally:
            self._lock.release()

    def indexed_documents(self) -> int:
        """Skills in the search index; 0 while it cannot be opened, or is opening in the background."""
        if self.index_opening():
            return 0
        try:
            return len(self.index().snapshot().vectors)
        except SkillSearchError:
            return 0

    def skill_count(self) -> int:
        return self.store.count()

    def index_generation(self) -> int:
        """The store generation the index this process serves reflects; -1 while it cannot be opened, or is
        opening in the background."""
        if self.index_opening():
            return -1
        try:
            return self.index().snapshot().generation
        except SkillSearchError:
            return -1

    def runs_on_sample(self) -> bool:
        """True when every skill came from the bundled sample's sources (and there is one): the only
        catalog on which a server offers the demo principal."""
        manifest = json.loads((sample_catalog_dir() / "manifest.json").read_text(encoding="utf-8"))
        sources = [s["source"] for s in manifest["sources"] if s["source"].startswith("sample-")]
        sample_count = sum(len(self.store.skill_ids_of_source(s)) for s in sources)
        synced = [s for s in self.store.sync.states() if s.source not in sources]
        total = self.store.count()
        return total > 0 and sample_count == total and not synced

    # -- writes: import ---------------------------------------------------------------------------

    def import_path(
        self, path: Path, source: str, grant: str, progress: ProgressFactory | None = None
    ) -> ImportReport:
        check_grants([grant])
        if not source or len(source) > 128:
            raise ValidationError("source must be a non-empty name of at most 128 characters")
        if self._index is None and (self.data_dir / "manifest.json").exists():
            # Opened before the store moves: an index that is current now takes the import as one refresh
            # of what changed. Opened after, it would be behind the store and repaired whole (every skill's
            # lexical document written again: 15 s for one skill at 100k, `skillsearch import` in a new
            # process every time).
            self.index(progress, bounded=False)
        from skillsearch.catalog.importer import parse_path

        report = store_import(self.store, parse_path(path, source, grant), source, grant)
        changed = report.changed
        if self._index is not None:
            report.index = self._index.refresh(self.store, changed, report.span) if changed else None
        elif changed:
            with self._lock:  # the first index of this data directory: built now, its embedding reported
                if self._index is None:  # (else another thread opened it meanwhile, with this import's skills)
                    report.index = self._open_index(progress)
        return report

    def import_sample(self, progress: ProgressFactory | None = None, *, index: bool = True) -> list[ImportReport]:
        """Import the bundled sample catalog. ``index=False``: into the store alone, embedding nothing; the
        index is brought up to the store by its next open (a whole build where there is none)."""
        root = sample_catalog_dir()
        manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
        if index:
            reports = [self.import_path(root / s["path"], s["source"], s["grant"], progress)
                       for s in manifest["sources"]]
        else:
            from skillsearch.catalog.importer import parse_path

            reports = [store_import(self.store, parse_path(root / s["path"], s["source"], s["grant"]), s["source"],
                                    s["grant"]) for s in manifest["sources"]]
        for r in reports:
            for p in r.problems:
                log.warning("sample catalog: %s", p)
        return reports

    # -- reads ------------------------------------------------------------------------------------

    def search(self, principal: Principal, request: SearchRequest) -> SearchResult:
        """Search as ``principal``. A repeat of a request by a caller with the same grants, while neither
        the store nor the index has changed, is answered from the result cache: every write to the store
        (an upsert, a removal, a revocation) moves its generation and so misses every cached answer, which
        makes the cached list exactly what the visibility re-check would return now."""
        started = time.perf_counter()
        generation = self.store.generation()
        idx = self.index(generation=generation)
        snapshot = idx.snapshot()
        key = (generation, snapshot.generation, principal.grants, request)
        cached = self._results.get(key)
        if cached is not None:
            return dataclasses.replace(
                cached, hits=list(cached.hits), took_ms=(time.perf_counter() - started) * 1000,
                timings={"result_cache_hit": 1.0},
            )
        result = run_search(
            request,
            principal,
            snapshot=snapshot,
            lexical=idx.lexical,
            query_encoders=self._queries.routes(),
            store=self._reads.at(generation),
            settings=self.settings,
        )
        self._results.put(key, result)
        return result

    def search_view(self, principal: Principal, request: SearchRequest) -> SearchResponse:
        return search_response(request, self.search(principal, request))

    def list_skills(
        self,
        principal: Principal,
        *,
        kind: str | None = None,
        tags: Sequence[str] = (),
        cursor: str | None = None,
        limit: int = 50,
    ) -> ListResponse:
        return list_page(self.store, principal, kind=kind, tags=tags, cursor=cursor, limit=limit)

    def get_skill(self, principal: Principal, skill_id: str) -> SkillDetail:
        return get_detail(self.store, principal, skill_id)

    def resolve(
        self,
        principal: Principal,
        skill_id: str,
        values: Mapping[str, Any],
        known_tools: Iterable[str] | None = None,
    ) -> ResolvedFlow:
        return resolve_flow(self.store, principal, skill_id, values, known_tools)

    def recall(
        self,
        principal: Principal,
        *,
        query: str = "",
        skill_id: str = "",
        slug: str = "",
        revision_id: str = "",
        resource: str = "",
        max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES,
    ) -> CloudSkillEnvelope:
        """``recall_cloud_skill`` (design section 6); Level 0 uses the very search of ``search_skills``.
        Failures raise the package's errors; ``recall.error_envelope`` turns one into the tool's envelope."""
        return recall(
            RecallRequest(query=query, skill_id=skill_id, slug=slug, revision_id=revision_id, resource=resource),
            principal,
            store=self.store,
            search=lambda req: self.search_view(principal, req),
            max_content_bytes=max_content_bytes,
        )

    # -- writes: batches (a sync run, a local source's run) --------------------------------------

    @contextmanager
    def writing(self) -> Iterator[None]:
        """An in-process batch in progress: it holds the index lock, so reads in other threads keep serving
        the last whole snapshot (see :meth:`index`) instead of refreshing on their own; the batch refreshes
        the index itself after each commit."""
        with self._lock:
            yield

    def skill_files(self) -> SkillFiles:
        """Visible skills as files with digests: the MCP Skills extension's reads."""
        return SkillFiles(self.store)

    def change_mark(self, principal: Principal) -> tuple[Any, ...]:
        """Moves whenever a skill ``principal`` can (or could) see is added, changed, withdrawn or revoked."""
        return visible_mark(self.store, principal)
