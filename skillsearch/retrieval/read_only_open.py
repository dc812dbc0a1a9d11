"""Opening the index of a data directory this user may read but not write (or whose disk refused the catalog's
open for writing: full, a file size limit): :func:`open_read_only`.

A catalog folder restored read-only, or another user's that this one may read, is searched as it is: the
store opens ``mode=ro`` (``catalog/connections.py``), the vectors load from their files, and Tantivy opens
the lexical side through a private folder of links (``lexical.read_only_view``: it takes a lock file to open
an index). Nothing is written, so nothing is repaired: an index behind its catalog, built with other
settings, or never built is ``INDEX_NOT_READY`` saying who can bring it up. The files are read under a
shared ``flock`` of ``write.lock`` (``WriteLock.shared``: opened read-only, it keeps writers out for the
moment of the read, and waits up to the search's bound for one at work), and the manifest, written last by
every write, is read before and after them: a write that landed in between is read again, so a search never
mixes two writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skillsearch.catalog.store import CatalogStore
from skillsearch.core.errors import IndexNotReadyError
from skillsearch.retrieval import vector_saves
from skillsearch.retrieval.calibration import is_current, with_packaged_decisions
from skillsearch.retrieval.lexical import LexicalIndex
from skillsearch.retrieval.manifest import built_with

if TYPE_CHECKING:
    from skillsearch.retrieval.indexer import SearchIndex

__all__ = ["ADVICE", "TRIES", "open_read_only"]

# What a reader who cannot write the folder is told to do when its index cannot serve as it is.
ADVICE = ("run a search or `skillsearch reindex` there as a user who may write the folder (its owner), or copy"
          " the folder somewhere this user may write")
# How many times the files are read again when a write lands while they load.
TRIES = 3


def _advice(store: CatalogStore) -> str:
    """Why this process cannot bring the index up, and what to do."""
    if store.full_disk:
        return "its disk refused this process's writes (full, or a file size limit): free space, then run it again"
    return f"this user cannot write the folder to bring it up: {ADVICE}"


def _refuse(idx: SearchIndex, store: CatalogStore, why: str, reason: str) -> IndexNotReadyError:
    return IndexNotReadyError(f"the search index in {idx.data_dir} {why}, and {_advice(store)}",
                              {"path": str(idx.data_dir), "reason": reason})


def _usable(idx: SearchIndex, store: CatalogStore) -> tuple[dict[str, Any], int, dict[str, Any]]:
    """The manifest, its generation and its calibration, once the index can serve ``store`` as it is."""
    manifest = idx.read_manifest()
    if manifest is None:
        raise _refuse(idx, store, "was never built", "read_only_no_index")
    built_with(manifest, idx.encoder, idx.data_dir)  # another encoder or model files: IndexMismatchError
    embedded = (manifest.get("embedded_text") or {}).get("instructions_chars")
    if (embedded is not None and embedded != idx.instructions_chars) or manifest.get("lexical") != idx.lexical_config():
        raise _refuse(idx, store, "was built with other settings (embedded text or lexical recipe) than this process's",
                      "read_only_other_settings")
    generation, current = int(manifest.get("store_generation", -1)), store.generation()
    if generation != current:
        raise _refuse(idx, store, f"is behind its catalog (index generation {generation}, catalog {current})",
                      "read_only_behind")
    calibration = dict(manifest.get("calibration") or {})
    if not is_current(calibration, idx.encoder):
        adopted = with_packaged_decisions(calibration, idx.encoder)
        if adopted is None:
            raise _refuse(idx, store, "was calibrated by another version", "read_only_other_settings")
        calibration = adopted  # this version's packaged decision, in memory only
    return manifest, generation, calibration


def open_read_only(idx: SearchIndex, store: CatalogStore, wait_s: float) -> None:
    """Open ``idx`` (its folder this user cannot write) for searching ``store`` (opened read-only) as it is;
    a writer at work is waited for up to ``wait_s``."""
    with idx.wlock.shared(wait_s):
        _open(idx, store)


def _open(idx: SearchIndex, store: CatalogStore) -> None:
    for _ in range(TRIES):
        before, generation, calibration = _usable(idx, store)
        vectors = vector_saves.load(idx.data_dir / "vectors")
        try:
            lexical = LexicalIndex(idx.data_dir / "lexical", french=idx.french, head_chars=idx.head_chars,
                                   read_only=True)
        except IndexNotReadyError as exc:
            raise IndexNotReadyError(f"{exc.message}; {_advice(store)}",
                                     {"path": str(idx.data_dir), "reason": "read_only_unreadable"}) from exc
        after = idx.read_manifest()
        if after is None or after.get("write_id") != before.get("write_id"):
            lexical.close()
            continue  # a write landed while the files loaded: read them again
        if vectors.dim != idx.encoder.dim or lexical.num_docs() != len(vectors):
            lexical.close()
            raise _refuse(idx, store, "holds the two sides of different writes", "read_only_unreadable")
        idx.calibration = calibration
        idx.lexical = lexical
        idx._disk_id = before.get("write_id")
        idx._snapshot = idx._snapshot_of(lexical.searcher(), vectors, generation)
        return
    raise _refuse(idx, store, f"was written {TRIES} times while it loaded", "read_only_busy")
