"""The lexical side of a search under the caller's visibility: the top BM25 matches the caller may see.

A filtered Tantivy query cannot prune (see ``LexicalIndex.build_query``); asking the unfiltered one for
``OVERFETCH`` times the candidates and keeping the visible ones usually finds them all, at a fraction of the
cost. ``tests/test_visibility_property.py`` checks the result against the filtered query.
"""

from __future__ import annotations

import numpy as np

from skillsearch.core.domain import SkillKind
from skillsearch.retrieval.indexer import IndexSnapshot
from skillsearch.retrieval.lexical import LexicalIndex

__all__ = ["OVERFETCH", "visible_lexical_matches"]

OVERFETCH = 4


def visible_lexical_matches(
    lexical: LexicalIndex, query: str, grants: list[str], depth: int, snapshot: IndexSnapshot,
    mask: np.ndarray | None, kind: SkillKind | None = None, tags: tuple[str, ...] = (),
) -> tuple[np.ndarray, np.ndarray]:
    """Vector rows and BM25 scores of the top ``depth`` lexical matches the caller may see, best first.
    ``mask``: the snapshot's rows the caller may see and asked for (None: every row, no filter).

    BM25 scores do not depend on the filter (its clause scores 0), so the visible hits of an unfiltered
    ranking are the filtered ranking: when the unfiltered top ``OVERFETCH x depth`` holds ``depth`` visible
    hits, or holds every match, they are exactly what the filtered query returns. Otherwise the filtered
    query runs, so the list is full whenever ``depth`` visible matches exist.
    """
    key_to_row = snapshot.vectors.key_to_row

    def rows_of(keys: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows = key_to_row.rows_of(keys)
        return rows[rows >= 0], scores[rows >= 0].astype(np.float32)

    if mask is None:
        return rows_of(*lexical.search(query, None, depth, searcher=snapshot.searcher))
    wide = OVERFETCH * depth
    keys, scores = lexical.search(query, None, wide, searcher=snapshot.searcher)
    rows, scores = rows_of(keys, scores)
    visible = mask[rows]
    if int(visible.sum()) >= depth or keys.size < wide:
        return rows[visible][:depth], scores[visible][:depth]
    spellings = [snapshot.vectors.tag_spellings(t) for t in tags]  # a tag matches whatever its case
    return rows_of(*lexical.search(query, grants, depth, kind, spellings, searcher=snapshot.searcher))
