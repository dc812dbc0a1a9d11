"""The search index as a whole: the Tantivy index and the vector store kept in step with the catalog.

On disk (``<data_dir>``)::

    lexical/        Tantivy index
    vectors/        vectors.npy + rows.npz (+ codes.npy, scales.npy, changes.log: retrieval/vector_files.py)
    manifest.json   format, encoder, calibration, store generation, write id (written last)
    write.lock      held by whichever process writes the three above (``writelock.py``)

Every catalog change bumps the store's generation; a batch brings its changed skills into the index
(re-embedding only changed text: ``write_diff.py``) and writes the manifest with that generation. A manifest
behind the store (a crash between the two) is repaired on open: vectors diffed by content hash, the cheap
lexical side rebuilt; another encoder's is refused with the command to run. Searches read a whole
:class:`IndexSnapshot`; a writer first follows what another process wrote (the manifest's write id:
``following.py``).

A write embeds :data:`EMBED_CHUNK` skills at a time. Once ``stopping`` is set (SIGTERM, a server's shutdown)
it stops after the encoder's current batch, saves the skills it embedded (both sides hold the same skills)
under a manifest at generation -1, behind every store, and raises :class:`WriteStopped`: the next open,
or another process's catch-up, diffs the content hashes and embeds only the rest. The lexical side's write
looks at ``stopping`` every ``lexical.APPLY_CHUNK`` documents; a stopped one commits nothing, and the manifest
records :data:`LEXICAL_INCOMPLETE` as its lexical recipe, so whoever opens or follows the index next rebuilds
that side (a whole rebuild, after an upgrade changed the recipe, stops at SIGTERM instead of finishing).
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from threading import Event, RLock
from typing import Any

from skillsearch.catalog.store import CatalogStore
from skillsearch.core.errors import IndexMismatchError, IndexNotReadyError, StopFlag, WriteStopped
from skillsearch.retrieval import following, read_only_open, vector_saves
from skillsearch.retrieval.calibration import calibrate, is_current, with_packaged_decisions
from skillsearch.retrieval.documents import lexical_doc
from skillsearch.retrieval.embedding_chunks import EMBED_CHUNK, ProgressFactory
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.lexical import APPLY_CHUNK as LEXICAL_CHUNK
from skillsearch.retrieval.lexical import LexicalIndex, Searcher
from skillsearch.retrieval.lexical_schema import HEAD_CHARS, LEXICAL_FIELDS_VERSION, recipe_change
from skillsearch.retrieval.manifest import MANIFEST, TUNED_KEYS, built_with, read_manifest, write_manifest
from skillsearch.retrieval.routing import Routing
from skillsearch.retrieval.vector_files import remove_temporaries
from skillsearch.retrieval.vectors import VectorSnapshot
from skillsearch.retrieval.warming import warm_in_background
from skillsearch.retrieval.write_diff import diff_and_embed
from skillsearch.retrieval.writelock import WriteLock

__all__ = ["EMBED_CHUNK", "IndexSnapshot", "IndexStats", "ProgressFactory", "SearchIndex"]

log = logging.getLogger("skillsearch")

# What a stopped write's manifest records as its lexical recipe: no process's (``lexical_config``), so whoever
# opens or follows the index next rebuilds the lexical side.
LEXICAL_INCOMPLETE = "incomplete: a stopped write"
# The generation a stopped write records: behind every store, so whoever opens the index next catches up.
STOPPED_GENERATION = -1


@dataclass(frozen=True)
class IndexSnapshot:
    """What one search reads: a Tantivy searcher and the vector snapshot of the same moment, and the
    routing of requests over those vectors (the encoder's routes, with the index's calibration)."""

    searcher: Searcher
    vectors: VectorSnapshot
    generation: int
    routing: Routing


@dataclass(frozen=True)
class IndexStats:
    upserted: int
    deleted: int
    embedded: int
    seconds: float


class SearchIndex:
    """Owns ``lexical/``, ``vectors/`` and ``manifest.json`` in a data directory."""

    def __init__(
        self, data_dir: Path, encoder: Encoder, instructions_chars: int = 0, french: str = "both",
        head_chars: int = HEAD_CHARS, stopping: StopFlag | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.french = french
        # Characters of the instructions the lexical side weighs with the rest of a skill (lexical_schema.HEAD_CHARS).
        self.head_chars = head_chars
        self.encoder = encoder
        self.instructions_chars = instructions_chars
        self.embed_count = 0
        # Set when the process stops: a write in progress saves what it embedded and raises WriteStopped.
        self.stopping: StopFlag = stopping or Event()
        self.calibration: dict[str, Any] = {}
        self._lock = RLock()
        # One writer per data directory; ``_disk_id``: the manifest ``write_id`` last loaded or written here.
        self.wlock = WriteLock(self.data_dir)
        self._disk_id: str | None = None
        # A stopped write left the lexical side without some of the vectors' skills: the manifest says so
        # (LEXICAL_INCOMPLETE) until a rebuild of that side completes.
        self._lexical_incomplete = False
        self.lexical: LexicalIndex
        self._snapshot: IndexSnapshot
        # Set by servers (``Catalog.prepare_in_background``): every snapshot made from then on is warmed in the
        # background (``warming.warm_in_background``), those of this process's writes and of catching up with others.
        self.warm_snapshots = False

    # -- paths and manifest -----------------------------------------------------------------------

    @property
    def manifest_path(self) -> Path:
        return self.data_dir / MANIFEST

    def read_manifest(self) -> dict[str, Any] | None:
        return read_manifest(self.manifest_path)

    def _write_manifest(self, generation: int) -> None:
        self._disk_id = write_manifest(self.manifest_path, {
            "encoder": {"name": self.encoder.name, "dim": self.encoder.dim, "fingerprint": self.encoder.fingerprint()},
            "store_generation": generation,
            "documents": len(self._snapshot.vectors),
            "embedded_text": {"instructions_chars": self.instructions_chars},
            "calibration": self.calibration,
            "lexical": LEXICAL_INCOMPLETE if self._lexical_incomplete else self.lexical_config(),
        })

    def _lexical_index(self, create: bool = False) -> LexicalIndex:
        return LexicalIndex(self.data_dir / "lexical", create=create, french=self.french, head_chars=self.head_chars)

    def lexical_config(self) -> dict[str, Any]:
        """What decides the lexical side's content; a manifest that differs gets its lexical side rebuilt."""
        return {"french": self.french, "fields": LEXICAL_FIELDS_VERSION, "instructions_head_chars": self.head_chars}

    # -- open / build -----------------------------------------------------------------------------

    def open(self, store: CatalogStore, progress: ProgressFactory | None = None) -> IndexStats | None:
        """Open the index, building it when absent and repairing it when behind the store.

        Raises :class:`IndexMismatchError` when it was built with another encoder or format.
        """
        with self._lock, self.wlock.hold():
            return self._open(store, progress)

    def open_read_only(self, store: CatalogStore, wait_s: float) -> None:
        """Open the index of a folder this user cannot write, as it is, to search ``store`` (opened read-only),
        waiting up to ``wait_s`` for a writer at work; ``INDEX_NOT_READY`` when it cannot serve without a
        repair (``read_only_open.py``)."""
        with self._lock:
            read_only_open.open_read_only(self, store, wait_s)

    def _open(self, store: CatalogStore, progress: ProgressFactory | None = None) -> IndexStats | None:
        manifest = self.read_manifest()
        if manifest is None:
            return self.rebuild(store, progress)
        built = built_with(manifest, self.encoder, self.data_dir)
        embedded = (manifest.get("embedded_text") or {}).get("instructions_chars")
        if embedded is not None and embedded != self.instructions_chars:
            # Every vector embeds another text than the one configured: skills changed from now on would not
            # match the rest, so all of them are embedded again (as a changed lexical recipe is rebuilt).
            log.warning("the index in %s embeds %s characters of each skill's instructions, %s are configured"
                        " (embed_instructions_chars): embedding every skill again", self.data_dir, embedded,
                        self.instructions_chars)
            return self.rebuild(store, progress)
        self.calibration = dict(manifest.get("calibration") or {})
        self._disk_id = manifest.get("write_id")
        generation = int(manifest.get("store_generation", -1))
        # The manifest is written last: behind the store, unreadable files are what a process killed in the
        # middle of an update leaves (derived data, rebuilt here); with a current manifest they are damage
        # the operator must see.
        behind = generation != store.generation()
        damaged = False
        # Under the write lock no save is under way: what one left under a temporary name is a dead process's.
        if left := remove_temporaries(self.data_dir / "vectors"):
            log.warning("removed %s in %s, left by a write that did not finish", ", ".join(left),
                        self.data_dir / "vectors")
        try:
            vectors = vector_saves.load(self.data_dir / "vectors")
        except IndexNotReadyError as exc:
            if not behind:
                raise
            log.warning("%s; the index is behind the catalog, rebuilding the vectors", exc.message)
            vectors, damaged = VectorSnapshot.empty(self.encoder.dim), True
        if vectors.dim != self.encoder.dim:
            raise IndexMismatchError(f"vector dimension {vectors.dim} != encoder's {self.encoder.dim}; reindex")
        try:
            self.lexical = self._lexical_index()
            searcher = self.lexical.searcher()
        except (IndexNotReadyError, ValueError) as exc:
            if not behind:
                raise IndexNotReadyError(f"the lexical index is unreadable ({exc}); run `skillsearch reindex`") \
                    from exc
            log.warning("lexical index unreadable (%s); the index is behind the catalog, rebuilding it", exc)
            self.lexical, damaged = self._lexical_index(create=True), True
            searcher = self.lexical.searcher()
        self._snapshot = self._snapshot_of(searcher, vectors, generation)
        other_recipe = manifest.get("lexical") != self.lexical_config()
        if manifest.get("lexical") == LEXICAL_INCOMPLETE:
            log.warning("the lexical index in %s was left incomplete by a stopped write: rebuilding it", self.data_dir)
        elif other_recipe:
            # Another version's (or another setting's) lexical recipe, an upgrade or a rollback: the lexical
            # side is rebuilt from the store; no vector is embedded again.
            log.warning("the lexical index in %s was built by another version or setting (%s): rebuilding the"
                        " lexical side (no skill is embedded again)", self.data_dir,
                        recipe_change(manifest.get("lexical"), self.lexical_config()))
        if damaged or behind or other_recipe or self.lexical.num_docs() != len(vectors):
            stats = self.repair(store, progress)
            self._ensure_calibration()
            return stats
        if not built.get("fingerprint"):
            self._write_manifest(generation)  # written before fingerprints were recorded: record this model's
        self._ensure_calibration()
        return None

    def rebuild(self, store: CatalogStore, progress: ProgressFactory | None = None) -> IndexStats:
        """Build both sides from the store from scratch (``skillsearch reindex``), then calibrate.

        A ``semantic_weight`` tuned for the same encoder (``skillsearch calibrate --queries``) survives."""
        with self._lock, self.wlock.hold():
            if hasattr(self, "lexical"):
                self.lexical.close()
            try:
                previous = self.read_manifest()
            except IndexNotReadyError:
                previous = None
            kept = {}
            if previous and (previous.get("calibration") or {}).get("encoder") == self.encoder.name:
                kept = {k: v for k, v in previous["calibration"].items() if k in TUNED_KEYS}
            self.calibration = {}
            self.manifest_path.unlink(missing_ok=True)
            self.lexical = self._lexical_index(create=True)
            self._lexical_incomplete = False  # both sides empty, then filled by the write below
            shutil.rmtree(self.data_dir / "vectors", ignore_errors=True)
            self._snapshot = self._snapshot_of(self.lexical.searcher(), VectorSnapshot.empty(self.encoder.dim), -1)
            stats = self._sync(store, None, progress, rebuild_lexical=False)
            self.recalibrate(kept)
            return stats

    def recalibrate(self, tuned: dict[str, Any] | None = None) -> dict[str, Any]:
        """Compute this encoder's calibration against the current vectors and store it in the manifest.

        ``tuned`` holds values set from labelled requests (``semantic_weight``); they are kept as given."""
        with self._lock, self.wlock.hold():
            calibration = calibrate(self.encoder, self._snapshot.vectors.matrix)
            calibration.update(tuned or {})
            self._keep_calibration(calibration)
            return dict(calibration)

    def _keep_calibration(self, calibration: dict[str, Any]) -> None:
        """Under the write lock: serve ``calibration`` from now on and record it in the manifest."""
        self.calibration = calibration
        snap = self._snapshot
        self._snapshot = self._snapshot_of(snap.searcher, snap.vectors, snap.generation)
        self._write_manifest(snap.generation)

    def _ensure_calibration(self) -> None:
        """An index built before calibration existed or by another encoder's settings is calibrated now (its
        vectors are kept); one whose only difference is the fitted decision this package ships takes that
        decision as it is, without the model (``calibration.with_packaged_decisions``)."""
        c = self.calibration
        if is_current(c, self.encoder):
            return
        adopted = with_packaged_decisions(c, self.encoder)
        if adopted is not None:
            log.info("index in %s: taking the decision this version ships (its calibration is kept)", self.data_dir)
            with self._lock, self.wlock.hold():
                self._keep_calibration(adopted)
            return
        same = c.get("encoder") == self.encoder.name
        self.recalibrate({k: v for k, v in c.items() if k in TUNED_KEYS and same})

    def repair(self, store: CatalogStore, progress: ProgressFactory | None = None) -> IndexStats:
        """Bring a stale index up to the store: re-embed what changed, rebuild the cheap lexical side."""
        with self._lock, self.wlock.hold():
            return self._sync(store, None, progress, rebuild_lexical=True)

    def refresh(
        self, store: CatalogStore, skill_ids: Sequence[str] | None = None, span: tuple[int, int] | None = None,
        progress: ProgressFactory | None = None,
    ) -> IndexStats:
        """Apply the store's current state of these skills (all when ``None``) to the index. ``span``: the
        store's generation just before and after the caller's transaction; unless the index was at ``before``
        and nobody committed since, another process (maybe one killed before its refresh) wrote too, so
        every skill is diffed (which re-embeds only what changed). ``progress``: the embedding shown."""
        with self._lock, self.wlock.hold():
            following.follow_write(self, store)
            if span is None:
                return self._sync(store, skill_ids, progress, rebuild_lexical=False)
            before, after = span
            if skill_ids is not None and self._snapshot.generation == before and store.generation() == after:
                return self._sync(store, skill_ids, progress, rebuild_lexical=False, generation=after)
            return self._sync(store, None, progress, rebuild_lexical=False)

    def follow(self, store: CatalogStore) -> bool:
        """A request's step when the store moved: load another process's whole write, never embed; whether the
        index is still behind with no writer at work (``following.follow``)."""
        return following.follow(self, store)

    def catch_up(self, store: CatalogStore) -> bool:
        """When the store moved and no writer is at work: follow, then diff and embed what is still behind;
        whether it ran (``following.catch_up``). A server runs it in a background thread, never a request's."""
        return following.catch_up(self, store)

    # -- the one update path ----------------------------------------------------------------------

    def _sync(
        self,
        store: CatalogStore,
        skill_ids: Sequence[str] | None,
        progress: ProgressFactory | None,
        rebuild_lexical: bool,
        generation: int | None = None,
    ) -> IndexStats:
        started = time.perf_counter()
        generation = store.generation() if generation is None else generation
        current = self._snapshot.vectors
        rows = list(store.index_rows(skill_ids))
        diff = diff_and_embed(current, rows, skill_ids, self.encoder, self.instructions_chars, progress, self.stopping)
        self.embed_count += diff.embedded
        changed, deletes, upserts, left = diff.changed, diff.deletes, diff.upserts, diff.left
        if left:  # stopped: the skills not embedded stay as the index had them
            generation = STOPPED_GENERATION
        # The store's folder: a removal from a mapped matrix writes its kept rows there, and the save below names them.
        new_vectors = current.apply(upserts, deletes, self.data_dir / "vectors")
        if rebuild_lexical:
            self.lexical.close()
            self.lexical = self._lexical_index(create=True)
            all_rows = {r.skill_id: r for r in (rows if skill_ids is None else store.index_rows())}
            for skill_id in left:
                if diff.where[skill_id] < 0:  # a new skill not embedded yet has no vector: no lexical document either
                    del all_rows[skill_id]
            docs = [lexical_doc(r) for r in all_rows.values()]
            lexical_done = self.lexical.apply(docs, [], self.stopping, self._tick(progress, len(docs)))
            self._lexical_incomplete = not lexical_done
        else:
            docs = [lexical_doc(r) for r in changed]
            # After a stopped embedding, the lexical side still takes the skills embedded (no more than the
            # chunks done, a small part of their embedding's time), so both sides hold the same skills and the
            # next open embeds the rest without rebuilding the lexical side.
            lexical_done = self.lexical.apply(docs, deletes, None if left else self.stopping,
                                              self._tick(progress, len(docs)))
            self._lexical_incomplete = self._lexical_incomplete or not lexical_done
        if not lexical_done:  # stopped: nothing of this write is in the lexical side, which the next open rebuilds
            generation = STOPPED_GENERATION
        try:
            if rebuild_lexical or skill_ids is None:
                new_vectors = vector_saves.save(new_vectors, self.data_dir / "vectors")
            elif upserts or deletes:
                new_vectors = vector_saves.save_changes(new_vectors, self.data_dir / "vectors", upserts, deletes)
            # A large matrix is now a mapping of what was saved (the copy in memory goes).
            self._snapshot = self._snapshot_of(self.lexical.searcher(), new_vectors, generation)
            self._write_manifest(generation)
        finally:
            # No Tantivy writer outlives the write lock, also when the vectors' save failed (a full disk): the
            # next writer may be another process, whose lexical write would fail on the writer's lock.
            self.lexical.close()
        if not lexical_done:
            # This process's next write (a server's after its writes resume) opens the index again, as another
            # process would: the manifest's LEXICAL_INCOMPLETE has the lexical side rebuilt.
            self._disk_id = None
        if left:
            raise WriteStopped(
                f"stopped embedding: {diff.embedded} of {diff.to_embed} skills embedded and saved; the other"
                f" {len(left)} are in the catalog and get embedded when the index in {self.data_dir} is next opened"
                + ("" if lexical_done else " (its lexical side is rebuilt then)"))
        if not lexical_done:
            raise WriteStopped(
                f"stopped writing the lexical index ({len(docs)} skills) before its commit; the embedded vectors"
                f" are saved, and the lexical side is rebuilt when the index in {self.data_dir} is next opened")
        return IndexStats(len(changed), len(deletes), diff.to_embed, time.perf_counter() - started)

    @staticmethod
    def _tick(progress: ProgressFactory | None, docs: int) -> Callable[[int], None] | None:
        """The progress of a lexical write, shown when it is large (a rebuild: seconds at 100k skills)."""
        return progress(docs, "lexical index") if progress is not None and docs > LEXICAL_CHUNK else None

    # -- reads ------------------------------------------------------------------------------------

    def snapshot(self) -> IndexSnapshot:
        return self._snapshot

    def _snapshot_of(self, searcher: Searcher, vectors: VectorSnapshot, generation: int) -> IndexSnapshot:
        snapshot = IndexSnapshot(searcher, vectors, generation, Routing(self.encoder, vectors.matrix,
                                                                        self.calibration, vectors.nearest_of))
        if self.warm_snapshots:
            warm_in_background(snapshot)
        return snapshot

    def close(self) -> None:
        self.lexical.close()

