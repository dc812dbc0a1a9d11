"""The latency harness's search child: open a built index in a fresh process and time its searches.

``python -m skillsearch.bench.serving DATA_DIR QUERIES_JSON ENCODER`` prints one JSON object
(:func:`serve_check`); :mod:`skillsearch.bench.latency` builds the catalog and starts this process, so that
its peak RSS is the serving footprint. The helpers both sides use (timing, percentiles, the peak RSS, a
one-skill import found by its new word) live here.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from skillsearch.catalog.imports import ImportReport
from skillsearch.catalog.rows import IndexRow
from skillsearch.core.domain import Principal, SearchMode
from skillsearch.core.settings import Settings
from skillsearch.retrieval import int8_kernels
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.encoders import make_encoder
from skillsearch.retrieval.query_cache import CachedQueryEncoder
from skillsearch.retrieval.search import QUERY_SENTENCES
from skillsearch.retrieval.search import query_texts as search_texts
from skillsearch.retrieval.search_types import Hit, SearchRequest
from skillsearch.service import Catalog

__all__ = ["GRANT", "SOURCE", "changed_entry", "import_and_find", "peak_rss_mb", "serve_check"]

GRANT = "team:bench"
SOURCE = "bench"
# The fresh hybrid modes timed beside the route's encoder: the keys of that encoder's times and of the ratio.
PAIRED = {
    "hybrid": ("encode_query_texts (served, paired with hybrid)", "hybrid_over_paired_encode"),
    "hybrid (other languages)": ("encode_query_texts (other languages, paired)", "hybrid_other_over_paired_encode"),
}


def timed_ms(fn: Callable[..., object], *args: object) -> float:
    t = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - t) * 1000


def percentiles(ms: Sequence[float]) -> dict[str, float]:
    a = np.asarray(ms, dtype=np.float64)
    return {f"p{p}_ms": round(float(np.percentile(a, p)), 3) for p in (50, 95, 99)}


def peak_rss_mb() -> float:
    """This process's peak RSS. ``VmHWM`` restarts at exec; ``ru_maxrss`` would carry the parent's peak
    into a child started with fork + exec."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _model_for(encoder: Encoder, text: str) -> Encoder:
    """What a request of this text is embedded by, with no query LRU in front: the encoder itself, or the
    route's model of a routed pair (whose parts each keep an LRU that the catalog's searches share: a floor
    measured through it would turn the searches after it into cache hits)."""
    routed = encoder.routed()
    if routed is None:
        return encoder
    part = routed.parts[routed.route(text)]
    return part.inner if isinstance(part, CachedQueryEncoder) else part


def _query_misses(catalog: Catalog) -> int:
    """How many requests the catalog's query LRUs (one per route of a routed pair) have embedded so far."""
    encoder = catalog.encoder
    routed = encoder.routed()
    caches = list(routed.parts.values()) if routed is not None else [encoder]
    return sum(int(getattr(cache, "misses", 0)) for cache in caches)


def serve_check(data_dir: Path, queries: Sequence[str], encoder_name: str = "minilm",
                other_languages: Sequence[str] = (), encoder: Encoder | None = None) -> dict[str, Any]:
    """Open an existing index and time searches; run in a fresh process so RSS is the serving footprint.

    With a routed pair (``minilm+e5``), ``queries`` are the requests it sends to its English model (others
    are dropped and counted), and ``other_languages`` those it sends to the other model, searched as
    ``hybrid (other languages)``, each beside that model embedding the same texts. ``encoder``: the loaded
    encoder to use (tests), else ``make_encoder(encoder_name)``."""
    inner = encoder or make_encoder(encoder_name)
    t = time.perf_counter()
    catalog = Catalog.open(Settings(data_dir=data_dir, seed_sample=False, encoder=encoder_name), encoder=inner)
    open_s = time.perf_counter() - t
    catalog.prepare_in_background()  # as a server does once open: the snapshot warmed while the searches below start
    principal = Principal.operator()
    routed = inner.routed()
    # The vector stage's kernel in this process (``int8_kernels.pin`` may have chosen it for the run).
    out: dict[str, Any] = {"encoder_choice": encoder_name, "scan_kernel": int8_kernels.described()}
    if routed is not None:
        english = [q for q in queries if routed.route(q) == routed.ENGLISH]
        other = [q for q in other_languages if routed.route(q) == routed.OTHER]
        out["dropped_queries"] = {"not_english_route": len(queries) - len(english),
                                  "other_languages_not_routed": len(other_languages) - len(other)}
        queries = english
    else:
        other = []
    third = len(queries) // 3
    sets = {"lexical": queries[:third], "semantic": queries[third : 2 * third], "hybrid": queries[2 * third :]}
    for q in [*queries[:10], *other[:4]]:
        _model_for(inner, q).encode_query(q + " warm")
        catalog.search(principal, SearchRequest(query=q + " warm", mode="lexical"))
    floor = []
    for q in sets["hybrid"]:
        t = time.perf_counter()
        _model_for(inner, q).encode_query(q)
        floor.append((time.perf_counter() - t) * 1000)
    out["encode_query"] = percentiles(floor)

    def what_search_embeds() -> dict[str, float]:
        times = []
        for q in sets["hybrid"]:
            parts = search_texts(q, QUERY_SENTENCES)
            times.append(timed_ms(_model_for(inner, q).encode_query_parts, parts[0], parts[1:]))
        return percentiles(times)

    out["encode_query_texts"] = what_search_embeds()
    stages: dict[str, list[float]] = {}
    embedded: dict[str, int] = {}
    # The repeats: the same request again (answered by the result cache), then the same text with another
    # limit (a new request, so it is searched again, but its query vectors come from the query cache).
    for label, mode, texts, limit in (
        ("lexical", "lexical", sets["lexical"], 10), ("semantic", "semantic", sets["semantic"], 10),
        ("hybrid", "hybrid", sets["hybrid"], 10), ("hybrid (cache hit)", "hybrid", sets["hybrid"], 10),
        ("hybrid (query vectors cached)", "hybrid", sets["hybrid"], 9), ("hybrid (other languages)", "hybrid", other, 10),
    ):
        if not texts:
            continue
        times, paired = [], []
        # The fresh hybrid searches are each timed beside the route's model embedding the same texts as
        # search serves it (the batching service for MiniLM, the model itself for e5; no query LRU in front,
        # so the search's own embedding is still a miss), in alternating order: the ratio of the two needs no
        # floor measured at another moment or at another thread count.
        service: Encoder | None = None
        if label in PAIRED:
            service = catalog.query_service() if label == "hybrid" else _model_for(inner, texts[0])
        misses = _query_misses(catalog)
        for i, q in enumerate(texts):
            parts = search_texts(q, QUERY_SENTENCES)
            if service is not None and i % 2 == 0:
                paired.append(timed_ms(service.encode_query_parts, parts[0], parts[1:]))
            t = time.perf_counter()
            result = catalog.search(principal, SearchRequest(query=q, mode=cast(SearchMode, mode), limit=limit))
            times.append((time.perf_counter() - t) * 1000)
            if service is not None and i % 2 == 1:
                paired.append(timed_ms(service.encode_query_parts, parts[0], parts[1:]))
            for k, v in result.timings.items():
                stages.setdefault(f"{label}:{k}", []).append(v)
        out[label] = percentiles(times)
        embedded[label] = _query_misses(catalog) - misses
        if paired:
            encode_key, ratio_key = PAIRED[label]
            out[encode_key] = percentiles(paired)
            out[ratio_key] = round(float(np.median(times)) / float(np.median(paired)), 3)
    # How many of each mode's requests the query LRUs embedded: every fresh one, none of the repeats. A
    # pairing that filled the search's own LRU would show here as fewer than the mode's requests.
    out["query_vectors_embedded"] = embedded
    # The same floor again now that the batching service has set torch's thread count for this process
    # (one per worker by default): the model as search calls it, against torch's own count above.
    out["encode_query_texts (served threads)"] = what_search_embeds()
    out["stages_p50_ms"] = {k: round(float(np.median(v)), 3) for k, v in stages.items()}
    if "hybrid:vector_ms" in stages:
        out["vector stage (fresh hybrid)"] = percentiles(stages["hybrid:vector_ms"])
    if "hybrid (other languages):vector_ms" in stages:
        out["vector stage (other languages)"] = percentiles(stages["hybrid (other languages):vector_ms"])
    out["other_language_queries"] = len(other)
    out["open_s"] = round(open_s, 2)  # the index opened, the change log replayed, the model not loaded yet
    out["peak_rss_mb_searching"] = peak_rss_mb()
    # A node syncs itself: one skill changed in the serving process, as a sync applies it, then found. The
    # serving footprint is the peak with it (an update copied the int8 codes once: 768 MB at 1M rows of
    # minilm+e5, docs/benchmarks.md).
    first = next(iter(catalog.store.index_rows()), None)
    if first is not None:
        with tempfile.TemporaryDirectory(prefix="skillsearch-served-update-") as tmp:
            word = f"zqxserved{int(time.time())}"
            ms, _, hit = import_and_find(catalog, Path(tmp) / "update.jsonl", changed_entry(first, word), word)
        if hit is None:
            raise RuntimeError("a skill changed in the serving process was not found by its new word")
        out["update_in_server_ms"] = round(ms, 1)
    out["documents"] = len(catalog.index().snapshot().vectors)
    out["peak_rss_mb"] = peak_rss_mb()
    catalog.close()
    return out


def changed_entry(row: IndexRow, word: str) -> dict[str, Any]:
    """A bundle entry of this index row's skill with ``word`` added to its description."""
    return {"slug": row.slug, "name": row.name, "tags": list(row.tags),
            "description": f"{row.description[:900]} {word}", "instructions": row.instructions}


def import_and_find(catalog: Catalog, path: Path, entry: dict[str, Any], word: str,
                     ) -> tuple[float, ImportReport, Hit | None]:
    """Import one skill (``entry``, written to ``path`` as a JSON line) and search its ``word``: the
    milliseconds until it is found, the import report and the top hit (None when nothing was found)."""
    path.write_text(json.dumps(entry) + "\n", encoding="utf-8")
    t = time.perf_counter()
    report = catalog.import_path(path, SOURCE, GRANT)
    hits = catalog.search(Principal.operator(), SearchRequest(query=word, mode="lexical", limit=1)).hits
    return (time.perf_counter() - t) * 1000, report, hits[0] if hits else None


if __name__ == "__main__":
    ap = argparse.ArgumentParser(prog="python -m skillsearch.bench.serving")
    ap.add_argument("data", type=Path)
    ap.add_argument("queries", type=Path)
    ap.add_argument("encoder")
    ap.add_argument("--scan-kernel")
    ap.add_argument("--numkong-only", nargs="*", default=[])
    ap.add_argument("--kernel-path")
    cli = ap.parse_args()
    int8_kernels.pin(cli.scan_kernel, cli.numkong_only, cli.kernel_path)
    asked = json.loads(cli.queries.read_text(encoding="utf-8"))
    print(json.dumps(serve_check(cli.data, asked["queries"], cli.encoder, asked["other"])))
