"""Following another process's writes of a data directory's index: :func:`follow`, :func:`catch_up`.

Processes share a data directory's index files (``serve --workers``, an import beside a server); one writes
at a time (``writelock.py``), and each write ends with the manifest and its ``write_id``. When the store's
generation moved, a process loads what another one wrote: its whole write (a generation reload, a moment)
when the files load as they are and match this process's settings (the encoder and its fingerprint, the
lexical recipe, both sides holding as many skills), else a fresh open's checks and repairs. A writer follows
first, so it never writes over another's write stale (``SearchIndex.refresh``). A request only loads
(:func:`follow`); an index still behind with no writer at work (a writer died or stopped part-way) is diffed
and embedded by :func:`catch_up`, which a server runs in a background thread (``background_repair.py``).
These work on a :class:`~skillsearch.retrieval.indexer.SearchIndex`'s state; its methods of the same names
call them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from skillsearch.catalog.store import CatalogStore
from skillsearch.core.errors import IndexNotReadyError
from skillsearch.retrieval import vector_saves

if TYPE_CHECKING:
    from skillsearch.retrieval.indexer import SearchIndex

__all__ = ["catch_up", "follow", "follow_write"]

log = logging.getLogger("skillsearch")


def follow(idx: SearchIndex, store: CatalogStore) -> bool:
    """A request's step when the store moved: with no writer at work, load what another process wrote
    since (its whole write: a generation reload, a moment); never embed, diff or rebuild. Whether the
    index is still behind with no writer at work (a writer died or stopped part-way; files another
    process's settings wrote): what :func:`catch_up` repairs, in a server's background thread."""
    if idx.stopping.is_set():
        return False  # the process is stopping: no write starts, the last snapshot serves
    with idx.wlock.try_hold() as got:
        if not got or not idx._lock.acquire(blocking=False):
            return False  # a writer is at work: it brings the index up, the last snapshot serves
        try:
            return not follow_write(idx, store, repair=False) or idx._snapshot.generation != store.generation()
        finally:
            idx._lock.release()


def catch_up(idx: SearchIndex, store: CatalogStore) -> bool:
    """When the store moved: with no writer at work, follow what another process wrote, and diff every
    skill if still behind (a writer died), embedding the difference; else serve the last snapshot.
    Whether it ran. A server runs it in a background thread (``IndexHolder``), never in a request's."""
    if idx.stopping.is_set():
        return False  # the process is stopping: no write starts, the last snapshot serves
    with idx.wlock.try_hold() as got:
        if not got or not idx._lock.acquire(blocking=False):
            return False
        try:
            follow_write(idx, store)
            if idx._snapshot.generation != store.generation():
                idx._sync(store, None, None, rebuild_lexical=False)
            return True
        finally:
            idx._lock.release()


def follow_write(idx: SearchIndex, store: CatalogStore, repair: bool = True) -> bool:
    """Under the write lock: load what another process wrote since, never write over it stale. Files that
    do not load as they are get a fresh open's checks and repairs, unless ``repair`` is False: then they
    are left as they are, and the answer is False (not followed)."""
    try:
        manifest = idx.read_manifest()
    except IndexNotReadyError:
        manifest = None  # unreadable: the fresh open below repairs or refuses it
    if manifest is not None and manifest.get("write_id") == idx._disk_id:
        return True
    log.info("index in %s was written by another process; following it", idx.data_dir)
    if hasattr(idx, "lexical"):
        idx.lexical.close()
    try:
        if manifest is None:
            raise IndexNotReadyError("no manifest")
        vectors = vector_saves.load(idx.data_dir / "vectors")
        lexical = idx._lexical_index()
        if (
            vectors.dim != idx.encoder.dim
            or (manifest.get("encoder") or {}).get("name") != idx.encoder.name
            or (manifest.get("encoder") or {}).get("fingerprint") not in (None, idx.encoder.fingerprint())
            or manifest.get("lexical") != idx.lexical_config()
            or lexical.num_docs() != len(vectors)
        ):
            raise IndexNotReadyError("the index on disk does not match this process's settings")
    except (IndexNotReadyError, ValueError):
        if not repair:
            return False
        idx._open(store, None)  # the checks, repairs and refusals of a fresh open
        return True
    idx.lexical = lexical
    idx.calibration = dict(manifest.get("calibration") or {})
    idx._snapshot = idx._snapshot_of(lexical.searcher(), vectors, int(manifest.get("store_generation", -1)))
    idx._disk_id = manifest.get("write_id")
    return True
