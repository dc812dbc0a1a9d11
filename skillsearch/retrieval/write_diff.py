"""What one write of the search index changes, its text embedded: :func:`diff_and_embed`, :class:`WriteDiff`.

The store's rows of a write are diffed against the vector snapshot the index serves: a row whose content
hash (``documents.doc_hash``) is its vector row's is unchanged and left out; a changed row whose embedded
text hashes the same (the encoder's name and the text: ``embed_hash``) keeps its vector; only the rest is
embedded (``embedding_chunks.embed_in_chunks``). An embedding stopped part-way (``stopping``: SIGTERM, a
server's shutdown) keeps the skills it embedded and leaves the others as the index had them
(:attr:`WriteDiff.left`), so both sides of the index take the same skills. ``indexer.SearchIndex`` applies
the difference to both sides and saves it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from skillsearch.catalog.rows import IndexRow
from skillsearch.core.errors import StopFlag
from skillsearch.core.hashing import sha256_hex
from skillsearch.retrieval.documents import doc_hash, embedded_text
from skillsearch.retrieval.embedding_chunks import ProgressFactory, embed_in_chunks
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.vectors import VectorRow, VectorSnapshot

__all__ = ["WriteDiff", "diff_and_embed"]


@dataclass(frozen=True)
class WriteDiff:
    deletes: list[str]  # the skills to remove
    where: dict[str, int]  # each row's place in the current snapshot (-1: a new skill)
    changed: list[IndexRow]  # the rows whose content changed, less those a stop left out
    upserts: list[tuple[VectorRow, np.ndarray]]  # their vector rows and vectors
    to_embed: int  # how many of them had to be embedded
    embedded: int  # how many were
    left: list[str]  # the skills a stop left as the index had them (not embedded)


def diff_and_embed(
    current: VectorSnapshot, rows: list[IndexRow], skill_ids: Sequence[str] | None, encoder: Encoder,
    instructions_chars: int, progress: ProgressFactory | None, stopping: StopFlag,
) -> WriteDiff:
    """The difference ``rows`` (the store's rows of ``skill_ids``, all skills when ``None``) make to
    ``current``, each changed text embedded unless its vector can be kept."""
    present = {r.skill_id for r in rows}
    if skill_ids is None:
        deletes = [s for s in current.rows.skill_ids() if s not in present]
    else:
        deletes = [s for s in skill_ids if s not in present and current.row_of(s) is not None]
    # Each row's place in the current snapshot, found once for the batch (-1: a new skill).
    where = dict(zip([r.skill_id for r in rows], current.rows_of([r.skill_id for r in rows]).tolist(), strict=True))
    changed: list[IndexRow] = []
    for r in rows:
        i = where[r.skill_id]
        if i < 0 or current.rows[i].doc_hash != doc_hash(r):
            changed.append(r)
    texts = [embedded_text(r, instructions_chars) for r in changed]
    embed_hashes = [sha256_hex(f"{encoder.name}\n{t}".encode()) for t in texts]
    to_embed = [
        j for j, r in enumerate(changed)
        if (i := where[r.skill_id]) < 0 or current.rows[i].embed_hash != embed_hashes[j]
    ]
    vectors = np.zeros((len(changed), encoder.dim), dtype=np.float32)
    for j, r in enumerate(changed):
        i = where[r.skill_id]
        if i >= 0:
            vectors[j] = current.matrix[i]
    embedded = embed_in_chunks(encoder, texts, to_embed, vectors, progress, stopping) if to_embed else []
    not_embedded = set(to_embed) - set(embedded)
    left = [changed[j].skill_id for j in sorted(not_embedded)]
    if left:  # stopped: the skills not embedded stay as the index had them, both sides alike
        kept = [j for j in range(len(changed)) if j not in not_embedded]
        changed, vectors, embed_hashes = [changed[j] for j in kept], vectors[kept], [embed_hashes[j] for j in kept]
    upserts = [
        (VectorRow(r.skill_id, r.grant, r.kind, r.tags, doc_hash(r), embed_hashes[j]), vectors[j])
        for j, r in enumerate(changed)
    ]
    return WriteDiff(deletes, where, changed, upserts, len(to_embed), len(embedded), left)
