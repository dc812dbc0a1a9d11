"""What the multilingual encoders buy across languages and cost in English, over the shared harness.

Parts (``benchmarks/multilingual.py PART``):

- ``devset``: ``benchmarks/data/multilingual.jsonl`` (French, Japanese and Chinese requests with their
  English originals) through ``Catalog.search`` over one catalog holding the bundled sample and the 883 real
  skills, per encoder: hit@5 and MRR@10 per language, and how often off-topic requests get ``no_match``.
- ``beir``: nDCG@10 on the *test* qrels of MetaTool and Seal-Tools (``--weights`` sweeps the semantic weight
  on the *dev* qrels, the only split used for choosing), each corpus imported as in ``bench relevance``.
- ``speed``: index build throughput (cold, nothing cached) and search latency p50/p95 on fresh query texts.
- ``matrix``: ``minilm+e5``'s matrix product on a synthetic 100,000 x 768 matrix: whole width, the route's
  column view and a contiguous copy.
- ``routing``: the share of requests ``minilm+e5`` sends to MiniLM (``not language.is_foreign``, no model).

Vectors are cached on disk by :class:`~skillsearch.bench.cache.BenchEncoder` (``--cache-dir``); ``minilm+e5``
routes between the two single encoders' caches, so it costs nothing more once they ran. ``speed`` caches
nothing.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from skillsearch.bench.beir import BeirDataset, load_beir
from skillsearch.bench.cache import BenchEncoder
from skillsearch.bench.metrics import evaluate
from skillsearch.bench.relevance import open_bench_catalog
from skillsearch.bench.report import median_ms
from skillsearch.core.domain import Principal, SearchMode
from skillsearch.core.language import is_foreign
from skillsearch.core.settings import Settings
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.encoders import make_encoder
from skillsearch.retrieval.model_files import minilm_words
from skillsearch.retrieval.routed_encoder import RoutedEncoder
from skillsearch.retrieval.search import QUERY_SENTENCES
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.service import Catalog

__all__ = ["ENCODERS", "LANGS", "Options", "part_beir", "part_devset", "part_matrix", "part_routing",
           "part_speed", "render"]

ENCODERS = ("minilm", "e5", "minilm+e5")
LANGS = ("en", "fr", "ja", "zh")
HIT_AT, MRR_AT, NDCG_AT = 5, 10, 10
FRENCH_MODES = ("detect", "both", "all", "off")
WEIGHT_GRID = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
SKILLS_GRANT = "sub:skills-catalog"
# Requests no skill should answer, held out from the calibration probes (retrieval/calibration.py).
OFF_TOPIC_HELD_OUT = (
    "what time does the bakery open on sunday", "how many calories are in an avocado",
    "recommend a good fantasy novel", "où acheter des croissants à Paris", "comment s'appelle le chien de Tintin",
    "quelle est la capitale du Canada", "東京で一番おいしいラーメン屋は？", "週末に行ける温泉を教えて",
    "猫の名前を考えて", "北京今天空气怎么样", "周末去哪里爬山比较好", "给我讲个笑话",
)
OPERATOR = Principal.operator()


class Options:
    """Where the inputs are and what to run (``benchmarks/multilingual.py`` fills it from its flags)."""

    def __init__(self, *, devset: Path, data_root: Path, cache_dir: Path | None, encoders: Sequence[str] = ENCODERS,
                 datasets: Sequence[str] = ("metatool", "sealtools"), max_queries: int | None = None,
                 weights: bool = False, french_modes: bool = False, speed_queries: int = 200,
                 speed_full: bool = False, log: Callable[[str], None] = lambda s: None) -> None:
        self.devset, self.data_root, self.cache_dir = devset, data_root, cache_dir
        self.encoders, self.datasets, self.max_queries = list(encoders), list(datasets), max_queries
        self.weights, self.french_modes = weights, french_modes
        self.speed_queries, self.speed_full, self.log = speed_queries, speed_full, log


def cached_encoder(name: str, cache_dir: Path | None) -> tuple[Encoder, dict[str | None, BenchEncoder]]:
    """The encoder ``name`` over on-disk caches, and each cache by the route it answers (None: every request)."""
    if name == "minilm+e5":
        routes = (RoutedEncoder.ENGLISH, RoutedEncoder.OTHER)
        parts: dict[str | None, BenchEncoder] = {r: BenchEncoder(make_encoder(r), cache_dir) for r in routes}
        return RoutedEncoder(parts[RoutedEncoder.ENGLISH], parts[RoutedEncoder.OTHER]), parts
    bench = BenchEncoder(make_encoder(name), cache_dir)
    return bench, {None: bench}


def prime(encoder: Encoder, caches: dict[str | None, BenchEncoder], texts: Sequence[str]) -> None:
    """Embed the requests once, each by the model its route picks, as search will ask for them."""
    routed = encoder.routed()
    sentences = QUERY_SENTENCES
    for route, cache in caches.items():
        mine = [t for t in texts if route is None or (routed is not None and routed.route(t) == route)]
        cache.prime_queries(list(dict.fromkeys(mine)), sentences)


def _devset(options: Options) -> list[dict[str, Any]]:
    """The multilingual dev set's requests (``lang``, ``query``, ``expected`` slugs, ``corpus``)."""
    return [json.loads(line) for line in options.devset.read_text(encoding="utf-8").splitlines() if line.strip()]


def _settings(data_dir: Path, encoder: str, french: str) -> dict[str, Any]:
    return {"data_dir": data_dir, "encoder": encoder, "seed_sample": False, "french_analysis": french}


@contextmanager
def devset_catalog(options: Options, encoder_name: str, french: str) -> Iterator[tuple[Catalog, list[dict[str, Any]]]]:
    items = _devset(options)
    encoder, caches = cached_encoder(encoder_name, options.cache_dir)
    prime(encoder, caches, [i["query"] for i in items] + list(OFF_TOPIC_HELD_OUT))
    with tempfile.TemporaryDirectory() as tmp:
        catalog = Catalog(Settings(**_settings(Path(tmp) / "data", encoder_name, french)), encoder=encoder)
        catalog.import_sample()
        report = catalog.import_path(options.data_root / "skills-catalog", "skills-catalog", SKILLS_GRANT)
        if report.problems:
            options.log(f"  skills-catalog: {len(report.problems)} invalid skills left out")
        catalog.reindex()
        try:
            yield catalog, items
        finally:
            catalog.close()


def run_devset(catalog: Catalog, items: list[dict[str, Any]], mode: SearchMode = "hybrid",
               weight: float | None = None) -> dict[str, Any]:
    per: dict[str, dict[str, list[float]]] = {lang: {"hit": [], "rr": []} for lang in LANGS}
    misses: list[dict[str, Any]] = []
    for item in items:
        result = catalog.search(OPERATOR, SearchRequest(item["query"], limit=MRR_AT, mode=mode, semantic_weight=weight))
        ranked = [(h.skill.slug, "sample" if h.skill.source.startswith("sample-") else "skills-catalog")
                  for h in result.hits]
        want = {(s, item["corpus"]) for s in item["expected"]}
        rank = next((i for i, r in enumerate(ranked, start=1) if r in want), None)
        per[item["lang"]]["hit"].append(1.0 if rank is not None and rank <= HIT_AT else 0.0)
        per[item["lang"]]["rr"].append(1.0 / rank if rank else 0.0)
        if rank is None or rank > HIT_AT:
            misses.append({"id": item["id"], "rank": rank, "top": [s for s, _ in ranked[:3]]})
    out: dict[str, Any] = {}
    for lang, v in per.items():
        if v["hit"]:
            out[lang] = {"n": len(v["hit"]), f"hit@{HIT_AT}": round(statistics.fmean(v["hit"]), 4),
                         f"mrr@{MRR_AT}": round(statistics.fmean(v["rr"]), 4)}
    en = out.get("en", {}).get(f"hit@{HIT_AT}") or 0.0
    for lang in ("fr", "ja", "zh"):
        if lang in out and en:
            out[lang]["vs_en"] = round(out[lang][f"hit@{HIT_AT}"] / en, 3)
    out["misses"] = misses
    if mode == "hybrid":
        silent = [catalog.search(OPERATOR, SearchRequest(q, limit=MRR_AT)).no_match for q in OFF_TOPIC_HELD_OUT]
        wrong = [catalog.search(OPERATOR, SearchRequest(i["query"], limit=MRR_AT)).no_match for i in items]
        out["no_match"] = {"off_topic_rate": round(statistics.fmean(silent), 3),
                           "devset_false_rate": round(statistics.fmean(wrong), 3)}
    return out


def part_devset(options: Options) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for encoder in options.encoders:
        for french in (FRENCH_MODES if options.french_modes else ("both",)):
            started = time.perf_counter()
            with devset_catalog(options, encoder, french) as (catalog, items):
                options.log(f"devset {encoder}/{french}: built in {time.perf_counter() - started:.1f}s")
                runs: list[tuple[SearchMode, float | None]] = [("hybrid", None), ("semantic", None)]
                if encoder == options.encoders[0]:
                    runs.append(("lexical", None))
                if options.weights:
                    runs += [("hybrid", w) for w in WEIGHT_GRID]
                for mode, w in runs:
                    r = run_devset(catalog, items, mode, w)
                    results[f"{encoder}|{french}|{mode}|{w if w is not None else 'default'}"] = r
                    options.log(f"  {mode} w={w}: " + ", ".join(f"{k} {v.get(f'hit@{HIT_AT}')}" for k, v in r.items()
                                                         if k in LANGS) + f" no_match {r.get('no_match')}")
    return results


def _beir_ndcg(catalog: Catalog, id_map: dict[str, str], ds: BeirDataset, qids: Sequence[str], mode: SearchMode,
               weight: float | None) -> float:
    limit = catalog.settings.max_query_chars
    run = {q: [id_map[h.skill.skill_id] for h in catalog.search(
        OPERATOR, SearchRequest(ds.queries[q].strip()[:limit], limit=NDCG_AT, mode=mode, semantic_weight=weight)).hits]
        for q in qids}
    return round(evaluate({q: ds.qrels[q] for q in qids}, run)["ndcg@10"], 4)


def part_beir(options: Options) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name in options.datasets:
        splits = {"test": load_beir(options.data_root / name, "test")}
        if options.weights:
            splits["dev"] = load_beir(options.data_root / name, "dev")
        for encoder_name in options.encoders:
            encoder, caches = cached_encoder(encoder_name, options.cache_dir)
            with tempfile.TemporaryDirectory() as tmp:
                started = time.perf_counter()
                settings = {k: v for k, v in _settings(Path(tmp) / "data", encoder_name, "both").items()
                            if k not in ("data_dir", "seed_sample")}
                catalog, id_map = open_bench_catalog(splits["test"], Path(tmp) / "data", encoder, settings)
                options.log(f"beir {name}/{encoder_name}: built in {time.perf_counter() - started:.1f}s")
                for split, ds in splits.items():
                    qids = ds.query_ids(options.max_queries)
                    prime(encoder, caches, [ds.queries[q].strip()[:catalog.settings.max_query_chars] for q in qids])
                    configs: list[tuple[SearchMode, float | None]] = [("hybrid", w) for w in WEIGHT_GRID]
                    if split == "test":
                        configs = [("hybrid", None), ("semantic", None)]
                        if encoder_name == options.encoders[0]:
                            configs.append(("lexical", None))
                    for mode, w in configs:
                        key = f"{name}|{split}|{encoder_name}|{mode}|{w if w is not None else 'default'}"
                        results[key] = {"ndcg@10": _beir_ndcg(catalog, id_map, ds, qids, mode, w), "queries": len(qids)}
                        options.log(f"  {key}: nDCG@10 {results[key]['ndcg@10']}")
                catalog.close()
    return results


def part_speed(options: Options) -> dict[str, Any]:
    queries = [i["query"] for i in _devset(options)]
    out: dict[str, Any] = {}
    for encoder_name in options.encoders:
        load_before = os.getloadavg()[0]
        started = time.perf_counter()
        encoder = make_encoder(encoder_name)
        load_s = time.perf_counter() - started
        with tempfile.TemporaryDirectory() as tmp:
            catalog = Catalog(Settings(**_settings(Path(tmp) / "data", encoder_name, "both")), encoder=encoder)
            catalog.import_sample()
            if options.speed_full:
                catalog.import_path(options.data_root / "skills-catalog", "skills-catalog", SKILLS_GRANT)
            started = time.perf_counter()
            stats = catalog.reindex()
            build_s = time.perf_counter() - started
            lat: list[float] = []
            enc_ms: list[float] = []
            for i, q in enumerate((queries * 10)[: options.speed_queries]):
                started = time.perf_counter()
                catalog.search(OPERATOR, SearchRequest(f"{q} {i}", limit=10))  # a fresh text: really embedded
                lat.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                encoder.encode_query(f"{q} x{i}")
                enc_ms.append((time.perf_counter() - started) * 1000)
            catalog.close()
        lat.sort()
        enc_ms.sort()
        out[encoder_name] = {
            "documents": stats.upserted, "model_load_s": round(load_s, 2), "build_s": round(build_s, 1),
            "docs_per_s": round(stats.upserted / build_s, 1), "search_p50_ms": round(lat[len(lat) // 2], 1),
            "search_p95_ms": round(lat[int(len(lat) * 0.95)], 1),
            "encode_query_p50_ms": round(enc_ms[len(enc_ms) // 2], 1), "queries": len(lat),
            "load_1min": f"{load_before:.1f} -> {os.getloadavg()[0]:.1f}",
        }
        options.log(f"speed {encoder_name}: {out[encoder_name]}")
    return out


def part_matrix(options: Options, rows: int = 100_000, repeats: int = 50) -> dict[str, Any]:
    """Median ms of one query's matrix product, full width vs the route's column view vs a 384-wide copy."""
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((rows, 768)).astype(np.float32)
    half = np.ascontiguousarray(matrix[:, :384])
    view = matrix[:, :384]
    q = rng.standard_normal(384).astype(np.float32)
    padded = np.concatenate([q, np.zeros(384, np.float32)])

    out = {"rows": rows, "full_768_ms": median_ms(lambda: matrix @ padded, repeats),
           "route_view_384_ms": median_ms(lambda: view @ q, repeats),
           "contiguous_384_ms": median_ms(lambda: half @ q, repeats)}
    options.log(f"matrix: {out}")
    return out


def part_routing(options: Options) -> dict[str, Any]:
    """Where ``minilm+e5`` sends real requests (``RoutedEncoder.route``: e5 only on positive evidence of another
    language, ``language.is_foreign`` with MiniLM's vocabulary), no model needed."""
    out: dict[str, Any] = {}
    for name in options.datasets:
        for split in ("dev", "test"):
            ds = load_beir(options.data_root / name, split)
            qids = ds.query_ids()
            english = [not is_foreign(ds.queries[q][:2000], minilm_words()) for q in qids]
            out[f"{name}|{split}"] = {"queries": len(qids), "to_minilm": round(statistics.fmean(english), 4),
                                      "to_e5": [ds.queries[q][:120] for q, e in zip(qids, english, strict=True) if not e]}
    items = _devset(options)
    for lang in LANGS:
        english = [not is_foreign(i["query"], minilm_words()) for i in items if i["lang"] == lang]
        out[f"devset|{lang}"] = {"queries": len(english), "to_minilm": round(statistics.fmean(english), 4)}
    return out


def render(results: dict[str, Any]) -> str:
    """Markdown tables of whatever parts the results hold."""
    out = [f"# Multilingual benchmark\n\n- command: `{results.get('command')}`", f"- date: {results.get('date')}",
           f"- machine: {results.get('machine')}", f"- load average (1 min): {results.get('load_average_1m')}"]
    out += [f"- merged from `{s['file']}`: `{s['command']}` ({s['date']})" for s in results.get("sources", [])]
    out.append("")
    if dev := results.get("devset") or {}:
        out += ["## Multilingual dev set (hit@5 / MRR@10 per language)", "",
                "| encoder | french | mode | weight | en | fr | ja | zh | fr/en | ja/en | zh/en | off-topic no_match |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for key, r in dev.items():
            enc, french, mode, w = ([*key.split("|"), "default"])[:4]
            cells = [f"{r[lang][f'hit@{HIT_AT}']:.3f} / {r[lang][f'mrr@{MRR_AT}']:.3f}" if lang in r else "-"
                     for lang in LANGS]
            ratios = [f"{r[lang]['vs_en']:.2f}" if lang in r and "vs_en" in r[lang] else "-" for lang in ("fr", "ja", "zh")]
            nm = r.get("no_match", {}).get("off_topic_rate")
            out.append(f"| {enc} | {french} | {mode} | {w} | " + " | ".join(cells + ratios)
                       + f" | {'-' if nm is None else nm} |")
        out.append("")
    if beir := results.get("beir") or {}:
        out += ["## English relevance (nDCG@10, pytrec_eval)", "",
                "| dataset | split | encoder | mode | weight | nDCG@10 | queries |",
                "| --- | --- | --- | --- | --- | --- | --- |"]
        for key, r in beir.items():
            name, split, enc, mode, w = key.split("|")
            out.append(f"| {name} | {split} | {enc} | {mode} | {w} | {r['ndcg@10']:.4f} | {r['queries']} |")
        out.append("")
    if matrix := results.get("matrix") or {}:
        out += ["## minilm+e5 matrix product (one query, median ms)", "",
                "| rows | full 768 columns | route's 384-column view | contiguous 384 columns |", "| --- | --- | --- | --- |",
                f"| {matrix['rows']} | {matrix['full_768_ms']} | {matrix['route_view_384_ms']} "
                f"| {matrix['contiguous_384_ms']} |", ""]
    if routing := results.get("routing") or {}:
        out += ["## minilm+e5 routing (share of requests `not is_foreign` sends to MiniLM)", "",
                "| requests | n | to MiniLM |", "| --- | --- | --- |"]
        out += [f"| {key.replace('|', ' ')} | {r['queries']} | {r['to_minilm']:.4f} |" for key, r in routing.items()]
        out.append("")
    if speed := results.get("speed") or {}:
        columns = list(dict.fromkeys(k for r in speed.values() for k in r))
        out += ["## Build time and latency", "", "| encoder | " + " | ".join(columns) + " |",
                "| --- |" + " --- |" * len(columns)]
        out += [f"| {enc} | " + " | ".join(str(r.get(c, "-")) for c in columns) + " |" for enc, r in speed.items()]
        out.append("")
    return "\n".join(out)
