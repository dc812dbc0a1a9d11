"""The outside baseline: ``bm25s`` (Lucene BM25, English Snowball stemmer, English stop words).

It indexes the same text the data README's anchors used (title + text) and answers the same queries in the
same run, so our numbers always sit next to a reference that nothing in this project tuned.
This is the one module that imports ``bm25s`` and ``Stemmer``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["bm25s_run"]


def bm25s_run(
    corpus: Mapping[str, Mapping[str, Any]], queries: Mapping[str, str], query_ids: Sequence[str], k: int = 50
) -> dict[str, list[str]]:
    """Top-``k`` document ids per query."""
    import bm25s

    logging.getLogger("bm25s").setLevel(logging.WARNING)
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    doc_ids = list(corpus)
    texts = [f"{corpus[d].get('title') or ''} {corpus[d].get('text') or ''}".strip() for d in doc_ids]
    retriever = bm25s.BM25(method="lucene")
    retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    q_tokens = bm25s.tokenize([queries[q] for q in query_ids], stopwords="en", stemmer=stemmer, show_progress=False)
    k = min(k, len(doc_ids))
    results, scores = retriever.retrieve(q_tokens, k=k, show_progress=False, n_threads=1)
    run: dict[str, list[str]] = {}
    for qid, idx, sc in zip(query_ids, results, scores, strict=True):
        run[qid] = [doc_ids[int(i)] for i, s in zip(idx, sc, strict=True) if float(s) > 0.0]
    return run
