"""The composition root: one :class:`Catalog` that owns the store and, through its
:class:`~skillsearch.retrieval.index_holder.IndexHolder`, the encoder and the search index, and offers every
use case to the surfaces (CLI, MCP, HTTP). Surfaces never reach below this class.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from threading import Event
from typing import TYPE_CHECKING, Any

from skillsearch.catalog.changes import visible_mark
from skillsearch.catalog.imports import ImportReport, store_import
from skillsearch.catalog.read_cache import GenerationReads
from skillsearch.catalog.reads import get_detail, get_resource, list_page, resolve_flow
from skillsearch.catalog.sample import holds_only_sample, sample_sources
from skillsearch.catalog.store import CatalogStore
from skillsearch.core.domain import Principal, Resource, Skill
from skillsearch.core.errors import StopFlag, ValidationError
from skillsearch.core.grants import check_grants
from skillsearch.core.lru import LRU
from skillsearch.core.settings import Settings
from skillsearch.core.text_parts import instructions_part
from skillsearch.core.views import ListResponse, ResolvedFlow, SearchResponse, SkillDetail
from skillsearch.retrieval.batching import BatchingEncoder, BatchStats, QueryEncoders
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.index_holder import IndexHolder, Readiness
from skillsearch.retrieval.indexer import IndexStats, ProgressFactory, SearchIndex
from skillsearch.retrieval.manifest import TUNED_KEYS
from skillsearch.retrieval.routed_encoder import RoutedEncoder
from skillsearch.retrieval.search import run_search
from skillsearch.retrieval.search_types import SearchRequest, SearchResult, search_response
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

__all__ = ["Catalog", "ImportReport", "Readiness"]

log = logging.getLogger("skillsearch")


class Catalog:
    """Store + encoder + index for one data directory (the encoder and the index held by an ``IndexHolder``)."""

    def __init__(self, settings: Settings, encoder: Encoder | None = None, stopping: Event | None = None,
                 reads_only: bool = False) -> None:
        self.settings = settings
        self.data_dir = Path(settings.data_dir)
        # ``reads_only``: a catalog this user cannot write is opened read-only (``CatalogStore``).
        self.store = CatalogStore.in_dir(self.data_dir, reads_only)
        # The search path's re-check reads, kept per store generation (catalog/read_cache.py).
        self._reads = GenerationReads(self.store)
        # The encoder and the search index: opened, repaired, warmed, ready, stopped (retrieval/index_holder.py).
        self._holder = IndexHolder(settings, self.store, encoder, stopping)
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
        reads_only: bool = False,
    ) -> Catalog:
        """Open a data directory for reading: seed the sample catalog into an empty one (when enabled) and
        open the index, building or repairing it as needed. A directory with a sync configuration
        (``sync.toml``: subscriptions or sources) is never seeded, whichever command opens it first.
        ``index=False``: the caller only reads the store (list, get, resolve), so an index behind the store
        (an import killed half way) is left for the next search or write to bring up, with the model it
        needs, instead of this read. ``stopping``: see :meth:`stop_writes`. ``reads_only``: the caller only
        reads the store (``list``, ``get``, ``resolve``), so a catalog this user cannot write (a snapshot
        restored read-only, another user's) is opened read-only, and never seeded."""
        catalog = cls(settings, encoder, stopping, reads_only)
        if (settings.seed_sample if seed is None else seed) and not catalog.store.read_only and catalog.is_empty() \
                and not default_config_path(catalog.data_dir).exists():
            # Into the store alone, whole or not at all: a read (list, get) or a server that opens its index in
            # the background embeds nothing here; the index is built below, or by its next open.
            catalog.seeded = sum(len(r.created) for r in catalog.import_sample())
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
        self._holder.stopping.set()

    @property
    def stopping(self) -> StopFlag:
        """Whether this catalog's writes stop (:meth:`stop_writes`, or the process's event it was given)."""
        return self._holder.stopping

    def resume_writes(self) -> None:
        """The server that called :meth:`stop_writes` has joined its syncs: writes may start again (unless the
        process itself is stopping)."""
        self._holder.stopping.clear()

    def embedded_documents(self) -> int:
        """Documents this process has embedded into its index so far (0 after opening a restored snapshot)."""
        return self._holder.embedded_documents()

    def is_empty(self) -> bool:
        return self.store.count() == 0 and not self.store.sync.states()

    @property
    def encoder(self) -> Encoder:
        return self._holder.encoder

    def prepare_in_background(self) -> None:
        """For servers: the model loads and the index opens in background threads, each snapshot is warmed
        (``IndexHolder.prepare_in_background``)."""
        self._holder.prepare_in_background()

    def index_opening(self) -> bool:
        """A server's background open of the index (``prepare_in_background``) has not finished."""
        return self._holder.opening()

    def encoder_choice(self) -> str:
        """The configured encoder, else the one the index was built with, else ``DEFAULT_ENCODER``."""
        return self._holder.encoder_choice()

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
        """The search index, opened on first use and kept up with the store (``IndexHolder.index``)."""
        return self._holder.index(progress, generation, bounded=bounded)

    def reindex(self, progress: ProgressFactory | None = None) -> IndexStats:
        with self._holder.lock:
            stats = self._holder.reindex(progress)
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
        self._holder.close()
        self.store.close()

    # -- what the surfaces show about the catalog itself ---------------------------------------

    def generation(self) -> int:
        """The store's generation: it moves with every write (import, sync, revocation, archive)."""
        return self.store.generation()

    def readiness(self) -> Readiness:
        """For ``/readyz``: ``IndexHolder.readiness``."""
        return self._holder.readiness()

    def indexed_documents(self) -> int:
        """Skills in the search index; 0 while it cannot be opened, or is opening in the background."""
        return self._holder.indexed_documents()

    def index_generation(self) -> int:
        """The store generation the index reflects; -1 while it cannot be opened, or is opening."""
        return self._holder.index_generation()

    def skill_count(self) -> int:
        return self.store.count()

    def visible_count(self, principal: Principal) -> int:
        """How many skills ``principal`` may see now: the active skills of its visible grants' change marks."""
        return sum(active for _, (_, active, _) in visible_mark(self.store, principal))

    def runs_on_sample(self) -> bool:
        """True when the catalog holds the bundled sample and nothing else (``catalog/sample.py``)."""
        return holds_only_sample(self.store)

    # -- writes: import ---------------------------------------------------------------------------

    def import_path(
        self, path: Path, source: str, grant: str, progress: ProgressFactory | None = None
    ) -> ImportReport:
        check_grants([grant])
        if not source or len(source) > 128:
            raise ValidationError("source must be a non-empty name of at most 128 characters")
        if self._holder.opened is None and (self.data_dir / "manifest.json").exists():
            # Opened before the store moves: an index that is current now takes the import as one refresh
            # of what changed. Opened after, it would be behind the store and repaired whole (every skill's
            # lexical document written again: 15 s for one skill at 100k, `skillsearch import` in a new
            # process every time).
            self.index(progress, bounded=False)
        from skillsearch.catalog.importer import parse_path

        # SIGTERM ends a large folder's read between skills, before anything is stored (exit 143).
        parsed = parse_path(path, source, grant, stopping=self.stopping, progress=progress)
        report = store_import(self.store, parsed, source, grant)
        changed = report.changed
        if (idx := self._holder.opened) is not None:
            report.index = idx.refresh(self.store, changed, report.span, progress) if changed else None
        elif changed or self.store.count():  # the first index of this data directory: built now, its embedding
            # reported (unless another thread opened it meanwhile); also when this import changed nothing but an
            # earlier one was killed before its index was first written (the store holds skills, no index does)
            report.index = self._holder.open_first(progress)
        return report

    def import_sample(self) -> list[ImportReport]:
        """Import the bundled sample catalog into the store, every source in one transaction: a disk that fills
        part-way keeps none of it, so the catalog stays empty and the next open seeds it again (one left with
        some of the sources was never seeded again: it was no longer empty). Embeds nothing: the index is
        brought up to the store by its next open (a whole build where there is none)."""
        from skillsearch.catalog.importer import parse_path

        with self.store.transaction():  # each source's store_import joins it
            reports = [store_import(self.store, parse_path(s.path, s.source, s.grant), s.source, s.grant)
                       for s in sample_sources()]
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

    def get_skill(self, principal: Principal, skill_id: str, *, offset: int = 0,
                  max_chars: int | None = None) -> SkillDetail:
        """One visible skill; its instructions from ``offset``, at most ``max_chars`` of them (``core/text_parts``)."""
        return instructions_part(get_detail(self.store, principal, skill_id), offset, max_chars)

    def get_resource(self, principal: Principal, skill_id: str, path: str) -> tuple[Skill, str, Resource]:
        """One resource of a visible skill's current revision, bytes included (``catalog/reads.get_resource``)."""
        return get_resource(self.store, principal, skill_id, path)

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
        offset: int = 0,
        max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES,
    ) -> CloudSkillEnvelope:
        """``recall_cloud_skill`` (design section 6); Level 0 uses the very search of ``search_skills``.
        Failures raise the package's errors; ``recall.error_envelope`` turns one into the tool's envelope."""
        return recall(
            RecallRequest(query=query, skill_id=skill_id, slug=slug, revision_id=revision_id, resource=resource,
                          offset=offset),
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
        with self._holder.lock:
            yield

    def skill_files(self) -> SkillFiles:
        """Visible skills as files with digests: the MCP Skills extension's reads."""
        return SkillFiles(self.store)

    def change_mark(self, principal: Principal) -> tuple[Any, ...]:
        """Moves whenever a skill ``principal`` can (or could) see is added, changed, withdrawn or revoked."""
        return visible_mark(self.store, principal)
