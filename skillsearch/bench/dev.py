"""Tuning on the dev splits, through the product's own search path: the set-up every sweep shares.

A sweep loads a BEIR dataset's *dev* qrels (never test), takes its first ``max_queries`` judged queries,
embeds them once the way search does (``BenchEncoder.prime_queries``, sentences included), imports the
corpus into a temporary catalog (:func:`~skillsearch.bench.relevance.open_bench_catalog`, no result cache,
since the same requests are asked again under each setting) and scores named request variants with
nDCG@10 / Recall@50 (pytrec_eval). The scripts in ``benchmarks/tuning/`` are lists of variants over this.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillsearch.bench.beir import load_beir
from skillsearch.bench.cache import BenchEncoder
from skillsearch.bench.metrics import evaluate
from skillsearch.bench.relevance import DEPTH, open_bench_catalog, search_runs
from skillsearch.core.domain import Principal
from skillsearch.core.settings import Settings
from skillsearch.retrieval import term_weights
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.minilm import MiniLMEncoder
from skillsearch.retrieval.search import QUERY_SENTENCES
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.service import Catalog

__all__ = [
    "DevSplit",
    "common_term_rule",
    "dev_split",
    "requests_losing_a_term",
    "score_modes",
    "score_requests",
]

DEV_MAX_QUERIES = 2000


@dataclass
class DevSplit:
    name: str
    catalog: Catalog
    id_map: dict[str, str]  # skill_id -> BEIR doc id
    texts: dict[str, str]  # query id -> request text (cut to the search limit)
    qrels: dict[str, dict[str, int]]


@contextmanager
def dev_split(name: str, data_root: Path, *, encoder: Encoder | None = None,
              max_queries: int = DEV_MAX_QUERIES, cache_dir: Path = Path("benchmarks/.cache"),
              settings: Mapping[str, Any] | None = None) -> Iterator[DevSplit]:
    """``data_root/name``'s dev split in a temporary catalog, its queries embedded once."""
    enc = encoder if encoder is not None else BenchEncoder(MiniLMEncoder(), cache_dir)
    ds = load_beir(Path(data_root) / name, "dev")
    qids = ds.query_ids(max_queries)
    limit = Settings().max_query_chars
    texts = {q: ds.queries[q].strip()[:limit] for q in qids}
    if isinstance(enc, BenchEncoder):
        enc.prime_queries(list(texts.values()), QUERY_SENTENCES)
    with tempfile.TemporaryDirectory() as tmp:
        catalog, id_map = open_bench_catalog(ds, Path(tmp) / "data", enc,
                                             {"result_cache_size": 0, **dict(settings or {})})
        try:
            yield DevSplit(name, catalog, id_map, texts, {q: ds.qrels[q] for q in qids})
        finally:
            catalog.close()


def score_requests(split: DevSplit, make: Callable[[str], SearchRequest]) -> dict[str, float]:
    """Mean metrics of the requests ``make(text)`` over the split, through ``Catalog.search``."""
    principal = Principal.operator()
    run = {q: [split.id_map[h.skill.skill_id] for h in split.catalog.search(principal, make(t)).hits]
           for q, t in split.texts.items()}
    return evaluate(split.qrels, run)


def score_modes(split: DevSplit, modes: Sequence[str]) -> dict[str, dict[str, float]]:
    """Mean metrics per mode name of :data:`~skillsearch.bench.relevance.ALL_MODES` (limit ``DEPTH``)."""
    runs, _ = search_runs(split.catalog, split.id_map, split.texts, modes, DEPTH)
    return {mode: evaluate(split.qrels, run) for mode, run in runs.items()}


@contextmanager
def common_term_rule(share: float, short_request_terms: int) -> Iterator[None]:
    """Lexical search with another common-term rule (``term_weights.COMMON_TERM_SHARE`` and
    ``SHORT_REQUEST_TERMS``) for the duration; share 1.0 never leaves a term out."""
    saved = term_weights.COMMON_TERM_SHARE, term_weights.SHORT_REQUEST_TERMS
    term_weights.COMMON_TERM_SHARE, term_weights.SHORT_REQUEST_TERMS = share, short_request_terms
    try:
        yield
    finally:
        term_weights.COMMON_TERM_SHARE, term_weights.SHORT_REQUEST_TERMS = saved


def requests_losing_a_term(split: DevSplit) -> int:
    """How many of the split's requests the current common-term rule takes a matching term from."""
    index = split.catalog.index()
    searcher = index.snapshot().searcher
    return sum(index.lexical.drops_a_matching_term(t, searcher) for t in split.texts.values())
