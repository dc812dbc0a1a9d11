"""The relevance harness: a BEIR dataset through the product's own import and search paths, scored by trec_eval.

1. The corpus is written as a JSONL skill bundle and imported with :meth:`Catalog.import_path` into a
   fresh data directory (title as name, text as description, tags when present).
2. Each judged query of the split runs through :meth:`Catalog.search` as the operator, once per mode:
   ``lexical``, ``semantic``, ``hybrid`` (the configured default) and ``hybrid-<method>`` for every
   fusion method; hits map back to BEIR ids through their slugs.
3. ``bm25s`` answers the same queries in the same run as the outside baseline.
4. :mod:`skillsearch.bench.metrics` scores every run (nDCG@10, Recall@10/50, MRR@10, P@1).

Query vectors are computed once per run in batches (see :mod:`skillsearch.bench.cache`); document vectors
are cached on disk, so a rerun only pays for what changed.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

from skillsearch.bench.baseline import bm25s_run
from skillsearch.bench.beir import BeirDataset, load_beir, write_bundle
from skillsearch.bench.cache import BenchEncoder
from skillsearch.bench.metrics import METRICS, evaluate
from skillsearch.bench.no_vectors import NoVectors
from skillsearch.bench.report import head_commit, run_metadata
from skillsearch.core.domain import FUSION_METHODS, FusionMethod, Principal, SearchMode
from skillsearch.core.settings import Settings
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.encoders import make_encoder
from skillsearch.retrieval.indexer import ProgressFactory
from skillsearch.retrieval.lexical import FIELD_BOOSTS
from skillsearch.retrieval.search import QUERY_SENTENCES
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.service import Catalog

__all__ = ["ALL_MODES", "RANKING_SETTINGS", "RelevanceOptions", "open_bench_catalog", "run_relevance", "search_runs",
           "test_split_overrides"]

ALL_MODES: tuple[str, ...] = (
    "lexical", "semantic", "hybrid", *(f"hybrid-{m}" for m in FUSION_METHODS), "bm25s",
)
DEPTH = 50
BENCH_GRANT = "team:bench"
# The settings a run may override that change the ranking (``bench relevance --fusion`` and the like): tuned
# on dev only. A split holding test judgments (``all`` holds them too) is for reporting, so a run that
# overrides one there says so on stderr and in its report (an engineer may reproduce a published setting).
RANKING_SETTINGS = ("fusion", "semantic_weight", "embed_instructions_chars", "lexical_instructions_chars")
TEST_SPLITS = ("test", "all")


@dataclass
class RelevanceOptions:
    dataset: Path
    split: str = "dev"
    modes: Sequence[str] = ALL_MODES
    max_queries: int | None = None
    cache_dir: Path | None = Path("benchmarks/.cache")
    settings: dict[str, Any] = field(default_factory=dict)
    command: str | None = None


def open_bench_catalog(
    dataset: BeirDataset, data_dir: Path, encoder: Encoder, settings: Mapping[str, Any] | None = None,
    progress: ProgressFactory | None = None,
) -> tuple[Catalog, dict[str, str]]:
    """A catalog in ``data_dir`` holding the dataset's corpus as skills; returns it and skill_id -> BEIR id.
    ``progress`` shows the import's embedding (4,076 uncached Seal-Tools APIs take minutes on 2 cores)."""
    bundle = data_dir.parent / f"{data_dir.name}-bundle.jsonl"
    slugs = write_bundle(dataset, bundle)
    catalog = Catalog(Settings(data_dir=data_dir, seed_sample=False, **dict(settings or {})), encoder=encoder)
    report = catalog.import_path(bundle, f"beir-{dataset.name}", BENCH_GRANT, progress)
    if report.problems:
        first = report.problems[0]
        raise ValueError(f"{len(report.problems)} corpus entries failed to import, first: {first}")
    id_map: dict[str, str] = {}
    for slug, doc_id in slugs.items():
        skill = catalog.store.skill_by_slug(BENCH_GRANT, slug)
        if skill is not None:
            id_map[skill.skill_id] = doc_id
    return catalog, id_map


def _mode_request(mode: str, query: str, limit: int) -> SearchRequest:
    if mode.startswith("hybrid-"):
        fusion = cast(FusionMethod, mode.removeprefix("hybrid-"))  # checked by the search
        return SearchRequest(query=query, limit=limit, mode="hybrid", fusion=fusion)
    return SearchRequest(query=query, limit=limit, mode=cast(SearchMode, mode))


def search_runs(
    catalog: Catalog,
    id_map: Mapping[str, str],
    queries: Mapping[str, str],
    modes: Sequence[str],
    limit: int = DEPTH,
    tick: Callable[[], None] | None = None,
) -> tuple[dict[str, dict[str, list[str]]], dict[str, float]]:
    """Per mode, ``{query_id: [BEIR doc id, ...]}`` from the normal search path, and mean ms per search."""
    principal = Principal.operator()
    max_chars = catalog.settings.max_query_chars
    runs: dict[str, dict[str, list[str]]] = {}
    mean_ms: dict[str, float] = {}
    for mode in modes:
        run: dict[str, list[str]] = {}
        started = time.perf_counter()
        for qid, text in queries.items():
            text = text.strip()[:max_chars]
            if text:
                result = catalog.search(principal, _mode_request(mode, text, limit))
                run[qid] = [id_map[h.skill.skill_id] for h in result.hits]
            if tick:
                tick()
        mean_ms[mode] = (time.perf_counter() - started) * 1000 / max(len(queries), 1)
        runs[mode] = run
    return runs, mean_ms


def run_relevance(options: RelevanceOptions, encoder: Encoder | None = None,
                  progress: Callable[[int, str], Callable[[int], None]] | None = None) -> dict[str, Any]:
    """Run every requested mode on one dataset split; returns the report (see :mod:`report`)."""
    unknown = [m for m in options.modes if m not in ALL_MODES]
    if unknown:
        raise ValueError(f"unknown modes {unknown}; choose from {', '.join(ALL_MODES)}")
    started, commit = time.time(), head_commit()  # the code that runs: HEAD may move before the report
    dataset = load_beir(options.dataset, options.split)
    qids = dataset.query_ids(options.max_queries)
    queries = {q: dataset.queries[q] for q in qids}
    qrels = {q: dataset.qrels[q] for q in qids}
    settings = Settings(**options.settings)
    ours = [m for m in options.modes if m != "bm25s"]
    reads_vectors = any(m != "lexical" for m in ours)
    # English tool sets: the default pair (minilm+e5) answers their English requests with MiniLM, so they are
    # measured with MiniLM alone unless an encoder is named (embedding every tool with e5 too only costs time).
    # A run of lexical modes only reads no vector: no model is loaded and nothing embedded (``no_vectors.py``).
    bench_encoder = (BenchEncoder(encoder or make_encoder(settings.encoder or "minilm"), options.cache_dir)
                     if reads_vectors else None)
    import_progress = progress if reads_vectors or progress is None else _without_embedding(progress)

    modes: dict[str, dict[str, float]] = {}
    timing: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="skillsearch-bench-") as tmp:
        t = time.perf_counter()
        catalog, id_map = open_bench_catalog(dataset, Path(tmp) / "data", bench_encoder or NoVectors(),
                                             options.settings, import_progress)
        timing["import_s"] = time.perf_counter() - t
        try:
            if bench_encoder is not None:
                t = time.perf_counter()
                texts = [v.strip()[: settings.max_query_chars] for v in queries.values()]
                tick = progress(len(set(texts)), "embedding queries") if progress and texts else None
                bench_encoder.prime_queries(texts, QUERY_SENTENCES, tick)
                timing["encode_queries_s"] = time.perf_counter() - t
            bar = progress(len(queries) * len(ours), "searching") if progress and ours else None
            runs, mean_ms = search_runs(catalog, id_map, queries, ours, tick=(lambda: bar(1)) if bar else None)
        finally:
            catalog.close()
    for mode in ours:
        modes[mode] = evaluate(qrels, runs[mode])
        timing[f"{mode}_ms_per_query"] = mean_ms[mode]
    if "bm25s" in options.modes:
        t = time.perf_counter()
        modes["bm25s"] = evaluate(qrels, bm25s_run(dataset.corpus, dataset.queries, qids, DEPTH))
        timing["bm25s_s"] = time.perf_counter() - t
    ordered = {m: modes[m] for m in options.modes if m in modes}
    return {
        **run_metadata(options.command, commit),
        "kind": "relevance",
        "dataset": dataset.name,
        "dataset_path": str(options.dataset),
        "split": options.split,
        "queries": len(qids),
        "max_queries": options.max_queries,
        "corpus": len(dataset.corpus),
        "encoder": bench_encoder.name if bench_encoder else None,  # None: lexical modes only, nothing embedded
        "settings": _settings_summary(settings),
        "test_split_overrides": test_split_overrides(options.split, options.settings),
        "metrics": list(METRICS),
        "modes": ordered,
        "timing": {k: round(v, 3) for k, v in timing.items()},
        "seconds": round(time.time() - started, 1),
    }


def test_split_overrides(split: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The ranking settings (:data:`RANKING_SETTINGS`) overridden on a split holding test judgments; empty
    on dev, or with the shipped ranking."""
    if split not in TEST_SPLITS:
        return {}
    return {k: settings[k] for k in RANKING_SETTINGS if settings.get(k) is not None}


def _without_embedding(progress: ProgressFactory) -> ProgressFactory:
    """``progress`` without the import's ``embedding`` stage: a lexical-only run's stand-in vectors are no
    embedding to show (the reading and the lexical index are still shown)."""
    return lambda total, label: (lambda _n: None) if label == "embedding" else progress(total, label)


def _settings_summary(settings: Settings) -> dict[str, Any]:
    data = asdict(settings)
    keep = ("encoder", "fusion", "semantic_weight", "embed_instructions_chars", "lexical_instructions_chars",
            "no_match_cosine")
    out = {k: data[k] for k in keep if k in data}
    out["field_boosts"] = dict(FIELD_BOOSTS)
    return out
