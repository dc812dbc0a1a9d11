"""How the lexical side weighs a request's terms: each term's document frequency over the text fields, one
IDF per term blended across the fields, and the common terms a long request leaves out. Pure functions over
document counts (a Tantivy searcher gives them, ``retrieval/lexical.py``); no ``tantivy`` import here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

__all__ = [
    "COMMON_TERM_SHARE", "SHORT_REQUEST_TERMS", "DocFreqs", "blended_idf", "doc_freqs", "field_doc_freqs", "idf",
    "informative_terms", "largest",
]

# A long request's terms found in more than this share of the documents are left out of its query. BM25
# gives such a term a weight under ln 2 (about a tenth of a rare term's), yet its posting list is the longest
# to walk: at 100k skills the requests' few terms in most documents took a third of the Tantivy time. A
# request of up to ``SHORT_REQUEST_TERMS`` terms keeps them all (every word of a short request counts and its
# query is cheap anyway), and so does a request whose terms are all common. Measured on the dev splits
# before it was adopted (docs/benchmarks.md, "Speed work", "Lexical at 100k").
COMMON_TERM_SHARE = 0.5
SHORT_REQUEST_TERMS = 8


class DocFreqs(Protocol):
    """What the weights read of an index: how many documents a field's term is in (a Tantivy searcher)."""

    def doc_freq(self, field_name: str, field_value: str) -> int: ...


def field_doc_freqs(terms: list[str], searcher: DocFreqs, fields: Sequence[str]) -> dict[str, dict[str, int]]:
    """How many documents hold each term, per text field of ``fields``."""
    return {f: {t: searcher.doc_freq(f, t) for t in terms} for f in fields}


def largest(per_field: dict[str, dict[str, int]]) -> dict[str, int]:
    """Each term's largest document frequency over the fields of ``per_field``."""
    terms = next(iter(per_field.values()), {})
    return {t: max(dfs[t] for dfs in per_field.values()) for t in terms}


def doc_freqs(terms: list[str], searcher: DocFreqs, fields: Sequence[str]) -> dict[str, int]:
    """How many documents hold each term, at least (the largest count over ``fields``: a word of a
    name alone is in ``name`` only)."""
    return largest(field_doc_freqs(terms, searcher, fields))


def idf(num_docs: int, df: int) -> float:
    """Tantivy's BM25 IDF."""
    return math.log(1.0 + (num_docs - df + 0.5) / (df + 0.5))


def blended_idf(per_field: dict[str, dict[str, int]], top: dict[str, int], num_docs: int,
                ) -> dict[str, dict[str, float]]:
    """Per text field and term, the factor that turns the field's own IDF into the term's one IDF: that of
    the largest document frequency over the fields (what Lucene's ``BlendedTermQuery``, behind
    Elasticsearch's ``cross_fields``, does). Tantivy computes IDF per field, so a word frequent in
    descriptions but rare in names ("building", "base", "large" in model names) got a name IDF several
    times its description IDF, and one accidental name match outranked the description that matched.
    BM25F (Robertson et al., 2004) has one IDF per term for the same reason. ``top``: :func:`largest` of
    ``per_field``."""
    return {f: {t: idf(num_docs, top[t]) / idf(num_docs, df) if 0 < df < top[t] else 1.0 for t, df in dfs.items()}
            for f, dfs in per_field.items()}


def informative_terms(terms: list[str], df: dict[str, int], num_docs: int) -> list[str]:
    """The terms found in some documents but in at most ``COMMON_TERM_SHARE`` of them (``df``: from
    :func:`doc_freqs`); all the terms when none is (a request whose only matching words are common still
    finds what they match)."""
    limit = COMMON_TERM_SHARE * num_docs  # read at each call: ``bench.dev.common_term_rule`` sets it for a run
    kept = [t for t in terms if 0 < df[t] <= limit]
    return kept or terms
