"""The vector stage at 100k and 1M rows: the exact float32 scan, the chosen int8 scan with exact re-scoring
(``skillsearch/retrieval/vector_stage.py``), and approximate indexes from PyPI when they are installed
(faiss-cpu's IVF over 8-bit codes, usearch's HNSW over int8), on the same vectors and query vectors.

Vectors: real MiniLM vectors of the 883 skills and the MetaTool and Seal-Tools tool descriptions (the pool;
or, with ``--pool-cache``, the vectors an earlier ``skillsearch bench latency`` run embedded), and stand-ins
made from them to the catalog's size (``bench.synthetic.stand_in_vectors``: a mix of three
pool vectors per row); query vectors: the dev requests of the skills catalog, MetaTool and Seal-Tools
(each request's vectors as search embeds them: the whole request and its sentences). Both are embedded once
and kept in ``--cache`` (an ``.npz``).

Per method and size: the build time, the bytes it keeps in memory, the median and p95 time of one request
(one thread), and recall@100 against the exact scan, tie-aware (a returned row counts when its exact cosine
is at least the exact 100th best), unfiltered and with a grant that sees 1% of the rows (scattered).

Run: ``PYTHONPATH=. HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/vector_stage.py --sizes 100000 1000000``
(writes ``benchmarks/results/vector-stage.{md,json}``). ``--first-pass`` instead measures how many rows a
first pass of int8 or int4 codes must hand on to keep the exact top 100 under the stage's error bound
(:func:`first_pass_pools`; ``first-pass-pools.{md,json}``). Not collected by pytest.
Output: an experiment record behind past choices, not a current result; in git at e114693 and 40b06d3 (first pass).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

DEPTH = 100


def embed(data_root: Path, cache: Path, per_set: int, pool_cache: Path | None) -> tuple[np.ndarray, list[np.ndarray]]:
    """The document pool and each dev request's query vectors (cached). ``pool_cache``: take the pool from
    an embedding cache of the benchmarks (``--cache-dir`` of ``skillsearch bench``) instead of encoding it."""
    if cache.is_file():
        with np.load(cache) as z:
            pool, flat, counts = z["pool"], z["queries"], z["counts"]
        return pool, np.split(flat, np.cumsum(counts)[:-1])
    import random

    from skillsearch.retrieval.cosines import normalise
    from skillsearch.retrieval.documents import split_identifiers
    from skillsearch.retrieval.minilm import MiniLMEncoder
    from skillsearch.retrieval.search import QUERY_SENTENCES, query_texts

    docs: list[str] = []
    for line in (data_root / "skills-catalog" / "manifest.jsonl").read_text(encoding="utf-8").splitlines()[
            : 0 if pool_cache else None]:
        m = json.loads(line)
        docs.append(f"{split_identifiers(m['name'])}: {m['description']}")
    for name in () if pool_cache else ("metatool", "sealtools"):
        for line in (data_root / name / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
            m = json.loads(line)
            docs.append(f"{m.get('title', '')}: {m.get('text', '')}"[:1000])
    requests = [json.loads(x)["q"] for x in
                (data_root / "skills-catalog" / "queries.dev.jsonl").read_text(encoding="utf-8").splitlines()]
    for name in ("metatool", "sealtools"):
        dev = {x.split("\t")[0] for x in (data_root / name / "qrels.dev.tsv").read_text(encoding="utf-8").splitlines()[1:]}
        texts = [q["text"] for q in map(json.loads, (data_root / name / "queries.jsonl").read_text(encoding="utf-8")
                 .splitlines()) if q["_id"] in dev]
        random.Random(1).shuffle(texts)
        requests += texts[:per_set]
    encoder = MiniLMEncoder()
    if pool_cache:
        chunks = sorted((pool_cache / "sentence-transformers_all-MiniLM-L6-v2").glob("chunk-*.npz"))
        pool = np.concatenate([np.load(c)["vectors"] for c in chunks]).astype(np.float32)
    else:
        pool = encoder.encode_documents(docs)
    # As search embeds a request (``encode_query_parts``: the request alone, or its sentences and their
    # normalised mean), in one batched call: MiniLM embeds a query exactly like a document.
    texts = [query_texts(r, QUERY_SENTENCES) for r in requests]
    flat = [x for t in texts for x in (t[1:] or t)]
    vectors = np.split(encoder.encode_documents(flat), np.cumsum([len(t[1:] or t) for t in texts])[:-1])
    queries = [v if len(t) == 1 else np.vstack([normalise(v.mean(axis=0)), v]) for t, v in zip(texts, vectors, strict=True)]
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cache, pool=pool, queries=np.concatenate(queries), counts=np.asarray([len(q) for q in queries]))
    return pool, queries


def kth_best(scores: np.ndarray, want_k: int) -> tuple[int, float]:
    """How many of the top ``want_k`` exist, and the exact score of the last of them."""
    finite = scores[np.isfinite(scores)]
    k = min(want_k, finite.size)
    return k, float(np.partition(finite, finite.size - k)[finite.size - k]) if k else 0.0


def recall(got: np.ndarray, got_exact: np.ndarray, k: int, kth: float) -> float:
    """Tie-aware: a returned row counts when its exact score is at least the exact k-th best."""
    return float((got_exact[:k] >= kth - 1e-6).sum()) / k if k else 1.0


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - t) * 1000


def run_size(n: int, pool: np.ndarray, queries: list[np.ndarray], log: Callable[[str], None],
             others: bool = True, exact_requests: int = 60) -> list[dict[str, Any]]:
    from skillsearch.bench.synthetic import stand_in_vectors
    from skillsearch.retrieval.cosines import max_cosines, top_k
    from skillsearch.retrieval.vectors import VectorRow, VectorSnapshot

    rng = np.random.default_rng(n)
    keys = rng.integers(0, 2**63, n, dtype=np.uint64)
    matrix = np.concatenate([pool[: min(len(pool), n)], stand_in_vectors(pool, keys[len(pool):])])[:n]
    grants = np.where(rng.random(n) < 0.01, "team:few", "team:all")
    rows = [VectorRow(f"s{i}", str(grants[i]), "knowledge", (), "", "") for i in range(n)]
    snapshot = VectorSnapshot.build(matrix.shape[1], matrix, rows)
    few = snapshot.mask(["team:few"])
    # Each request's exact k-th best score, unfiltered and among the 1% (full score arrays of every request
    # would hold 4 MB each at 1M rows).
    kths = []
    for q in queries:
        scores = max_cosines(snapshot.matrix, q)
        kths.append((kth_best(scores, DEPTH), kth_best(np.where(few, scores, -np.inf), DEPTH)))
    out: list[dict[str, Any]] = []

    def exact_of(rows: np.ndarray, q: np.ndarray) -> np.ndarray:
        return np.asarray((snapshot.matrix[rows] @ q.T).max(axis=1)) if rows.size else np.zeros(0)

    def measure(method: str, search: Callable[[np.ndarray, np.ndarray | None], np.ndarray], build_ms: float,
                nbytes: int, filtered: bool = True, requests: int | None = None) -> None:
        times, recalls, f_recalls, short = [], [], [], 0
        for q, ((k, kth), (fk, fkth)) in list(zip(queries, kths, strict=True))[:requests]:
            got, ms = timed(lambda q=q: search(q, None))
            times.append(ms)
            got = np.asarray(got, dtype=np.int64)
            recalls.append(recall(got, exact_of(got, q), k, kth))
            if filtered:
                got = np.asarray(search(q, few), dtype=np.int64)
                f_recalls.append(recall(got, exact_of(got, q), fk, fkth))
                short += int(len(got) < fk or not few[got].all())
        row = {"rows": n, "method": method, "build_s": round(build_ms / 1000, 2), "memory_mb": round(nbytes / 2**20, 1),
               "p50_ms": round(float(np.median(times)), 3), "p95_ms": round(float(np.percentile(times, 95)), 3),
               "recall@100": round(float(np.mean(recalls)), 4), "min_recall@100": round(float(np.min(recalls)), 3),
               "recall@100 (1% visible)": round(float(np.mean(f_recalls)), 4) if f_recalls else "n/a",
               "short or leaked (1% visible)": short if filtered else "n/a", "requests": len(times)}
        log(json.dumps(row))
        out.append(row)

    def exact(q: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
        s = max_cosines(snapshot.matrix, q)
        if mask is not None:
            s[~mask] = -np.inf
        return top_k(s, DEPTH)

    # The exact scan is the reference (recall 1 by definition): timed on the first requests only.
    measure("exact float32 scan (before)", exact, 0.0, snapshot.matrix.nbytes, requests=exact_requests)
    assert snapshot.compact is not None
    quantise_ms = timed(lambda: type(snapshot.compact).of(snapshot.matrix))[1]
    measure("int8 scan + float32 re-score (chosen)", lambda q, m: snapshot.nearest(q, DEPTH, m)[0], quantise_ms,
            snapshot.compact.nbytes)
    # The chosen stage on the same requests as the exact scan's time (a like-for-like time).
    measure("int8 scan + float32 re-score (chosen), same requests", lambda q, m: snapshot.nearest(q, DEPTH, m)[0],
            quantise_ms, snapshot.compact.nbytes, requests=exact_requests)
    try:
        if not others:
            raise ImportError
        import faiss  # type: ignore[import-not-found]
    except ImportError:
        log("faiss not installed or not asked for: IVF not measured")
    else:
        faiss.omp_set_num_threads(1)
        nlist = int(4 * np.sqrt(n))
        quantizer = faiss.IndexFlatIP(matrix.shape[1])
        index = faiss.IndexIVFScalarQuantizer(quantizer, matrix.shape[1], nlist, faiss.ScalarQuantizer.QT_8bit,
                                              faiss.METRIC_INNER_PRODUCT)
        t = time.perf_counter()
        index.train(matrix[rng.choice(n, min(n, 50 * nlist), replace=False)])
        index.add(matrix)
        build = (time.perf_counter() - t) * 1000
        selector = faiss.IDSelectorBatch(np.flatnonzero(few).astype(np.int64))
        for nprobe in (16, 64):
            def ivf(q: np.ndarray, mask: np.ndarray | None, nprobe: int = nprobe) -> np.ndarray:
                params = faiss.SearchParametersIVF(nprobe=nprobe, sel=selector if mask is not None else None)
                dist, ids = index.search(q, DEPTH, params=params)
                if len(q) == 1:
                    return ids[0][ids[0] >= 0]
                best: dict[int, float] = {}
                for d_row, i_row in zip(dist, ids, strict=True):
                    for d, i in zip(d_row, i_row, strict=True):
                        if i >= 0 and d > best.get(int(i), -9.0):
                            best[int(i)] = float(d)
                return np.asarray(sorted(best, key=lambda i: -best[i])[:DEPTH], dtype=np.int64)
            measure(f"faiss IVF{nlist},SQ8 nprobe={nprobe}", ivf, build, index.sa_code_size() * n + nlist * 1536)
    try:
        if not others:
            raise ImportError
        from usearch.index import Index  # type: ignore[import-not-found]
    except ImportError:
        log("usearch not installed: HNSW not measured")
    else:
        if n > 200_000:
            log(f"usearch HNSW at {n}: not built (one thread builds about 2k rows/s here: too long)")
        else:
            index_u = Index(ndim=matrix.shape[1], metric="ip", dtype="i8", connectivity=16)
            t = time.perf_counter()
            index_u.add(np.arange(n), matrix, threads=1)
            build = (time.perf_counter() - t) * 1000

            def hnsw(q: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
                found = index_u.search(q, DEPTH, threads=1)
                keys_ = found.keys if len(q) == 1 else np.unique(np.concatenate([m.keys for m in found]))
                return np.asarray(keys_, dtype=np.int64)[:DEPTH]
            measure("usearch HNSW i8 (M=16), no filter", hnsw, build, index_u.memory_usage, filtered=False)
    return out


def paired_parts(n: int, pool: np.ndarray, queries: list[np.ndarray], requests: int, folder: Path,
                 log: Callable[[str], None]) -> list[dict[str, Any]]:
    """The stage's parts, each timed against its alternative on the same request in turn (paired), over
    a saved and reopened snapshot (its float32 matrix a file mapping, as served): the int8 scan on one
    thread and on two; hiding the rows a grant does not see (half of them, scattered) by boolean indexing
    and branch-free; the background sample from the mapped float32 matrix and from the int8 copy; and the
    whole stage (``nearest`` + ``background``) as search runs it, unfiltered and filtered."""
    import shutil

    from skillsearch.bench.synthetic import stand_in_vectors
    from skillsearch.retrieval import vector_saves
    from skillsearch.retrieval import vector_scan as vsc
    from skillsearch.retrieval import vector_stage as vs
    from skillsearch.retrieval.cosines import max_cosines
    from skillsearch.retrieval.vectors import BACKGROUND_ROWS, VectorRow, VectorSnapshot

    rng = np.random.default_rng(n)
    keys = rng.integers(0, 2**63, n, dtype=np.uint64)
    matrix = np.concatenate([pool[: min(len(pool), n)], stand_in_vectors(pool, keys[len(pool):])])[:n]
    rows = [VectorRow(f"s{i}", "team:half" if i % 2 else "team:all", "knowledge", (), "", "") for i in range(n)]
    shutil.rmtree(folder, ignore_errors=True)
    vector_saves.save(VectorSnapshot.build(matrix.shape[1], matrix, rows), folder)
    del matrix, rows
    snapshot = vector_saves.load(folder)
    compact = snapshot.compact
    assert compact is not None and snapshot.base is not None
    half = snapshot.mask(["team:half"])
    sample_rows = np.linspace(0, n - 1, BACKGROUND_ROWS).astype(np.int64)

    def boolean(scores: np.ndarray) -> None:
        scores[~half] = -np.inf

    parts: dict[str, Callable[[np.ndarray], Any]] = {
        "int8 scan, 1 thread": lambda q: vsc.scan(compact, None, q, threads=1),
        "int8 scan, 2 threads": lambda q: vsc.scan(compact, None, q, threads=2),
        "hide half the rows: scores[~mask] = -inf": lambda q: boolean(np.zeros(n, np.float32)),
        "hide half the rows: branch-free (vector_stage.hide)": lambda q: vs.hide(np.zeros(n, np.float32), half),
        "background: float32 rows of the mapped matrix": lambda q: max_cosines(
            np.ascontiguousarray(snapshot.matrix[sample_rows]), q),
        "background: int8 copy (vector_scan.sample_scores)": lambda q: vsc.sample_scores(
            compact, BACKGROUND_ROWS, None, q, None),
        "whole stage, unfiltered": lambda q: (snapshot.nearest(q, DEPTH), snapshot.background(q)),
        "whole stage, half visible": lambda q: (snapshot.nearest(q, DEPTH, half), snapshot.background(q)),
    }
    times: dict[str, list[float]] = {name: [] for name in parts}
    for q in queries[:requests]:
        for name, part in parts.items():
            times[name].append(timed(lambda part=part, q=q: part(q))[1])
    out = []
    for name, ts in times.items():
        row = {"rows": n, "part": name, "p50_ms": round(float(np.median(ts)), 3),
               "p95_ms": round(float(np.percentile(ts, 95)), 3), "requests": len(ts)}
        log(json.dumps(row))
        out.append(row)
    shutil.rmtree(folder, ignore_errors=True)
    return out


def _codes(m: np.ndarray, levels: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row rounded to ``levels`` steps each side of zero (127: int8, 7: int4) with one scale per row
    (``max |x| / levels``), returned as the rounded rows (float32) and their scales."""
    scales = np.abs(m).max(axis=1) / levels
    safe = np.where(scales > 0, scales, 1.0)[:, None]
    return (np.rint(m / safe).clip(-levels, levels) * safe).astype(np.float32), scales.astype(np.float32)


def first_pass_pools(n: int, pool: np.ndarray, queries: list[np.ndarray], requests: int,
                     log: Callable[[str], None]) -> list[dict[str, Any]]:
    """For int8 and int4 codes of the same ``n`` rows: how many rows each first pass must hand to an exact
    re-score to keep every request's exact top 100, under two rules, and whether they do.

    - ``shipped rule`` (int8 only, what ``vector_stage.select`` re-scores): every row within twice the margin
      of the ``DEPTH``-th best approximate score, the margin taken at the largest row scale;
    - ``per-row bound``: each row's margin from its own scale (``vector_scan.margin``'s six standard
      deviations); the ``DEPTH``-th largest lower bound (score minus margin) bounds the exact ``DEPTH``-th
      best from below, so a row whose upper bound (score plus margin) is under it cannot be in the top 100.

    The query vectors are rounded together to int8 as the stage rounds them (``quantise_together``); scores
    are the best over a request's vectors. Recall: the share of the exact top 100 inside the pool."""
    from skillsearch.bench.synthetic import stand_in_vectors
    from skillsearch.retrieval.compact import quantise_together

    rng = np.random.default_rng(n)
    keys = rng.integers(0, 2**63, n, dtype=np.uint64)
    matrix = np.concatenate([pool[: min(len(pool), n)], stand_in_vectors(pool, keys[len(pool):])])[:n]
    out: list[dict[str, Any]] = []
    for name, levels in (("int8", 127), ("int4", 7)):
        rounded, scales = _codes(matrix, levels)
        rules: dict[str, list[tuple[int, float]]] = {"per-row bound": []}
        if levels == 127:
            rules["shipped rule"] = []
        for q in queries[:requests]:
            q_codes, q_scales = quantise_together(q)
            q_round = q_codes.astype(np.float32) * q_scales[:, None]
            exact = (matrix @ q.T).max(axis=1)
            approx = (rounded @ q_round.T).max(axis=1)
            top = np.argpartition(-exact, DEPTH - 1)[:DEPTH]
            sq = float(q_scales.max())
            own = 6.0 * np.sqrt((sq * sq + scales * scales) / 12.0)
            lower = np.partition(approx - own, n - DEPTH)[n - DEPTH]
            kept = np.flatnonzero(approx + own >= lower)
            rules["per-row bound"].append((kept.size, float(np.isin(top, kept).mean())))
            if "shipped rule" in rules:
                err = 6.0 * float(np.sqrt((sq * sq + float(scales.max()) ** 2) / 12.0))
                kth = np.partition(approx, n - DEPTH)[n - DEPTH]
                kept = np.flatnonzero(approx >= kth - 2.0 * err)
                rules["shipped rule"].append((kept.size, float(np.isin(top, kept).mean())))
        for rule, got in rules.items():
            sizes = np.asarray([g[0] for g in got])
            row = {"rows": n, "first pass": f"{name} ({matrix.shape[1] * (8 if levels == 127 else 4) // 8} bytes a row)",
                   "rule": rule, "requests": len(got),
                   "pool p50": int(np.percentile(sizes, 50)), "pool p90": int(np.percentile(sizes, 90)),
                   "pool max": int(sizes.max()), "recall@100 min": round(min(g[1] for g in got), 4),
                   "recall@100 mean": round(float(np.mean([g[1] for g in got])), 4)}
            log(json.dumps(row))
            out.append(row)
    return out


def _rss_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mb() -> float:
    return next(int(x.split()[1]) / 1024 for x in Path("/proc/self/status").read_text().splitlines()
                if x.startswith("VmHWM"))


def memory_child(folder: Path, cache: Path, requests: int) -> None:
    """In a fresh process: open the saved store, run the vector stage as search does (``nearest`` and
    ``background``, every other request filtered by a grant), apply a one-row update; print RSS as JSON."""
    from skillsearch.retrieval import vector_saves
    from skillsearch.retrieval.vectors import VectorRow

    bare = _rss_mb()
    t = time.perf_counter()
    snapshot = vector_saves.load(folder)
    row = {"rows": len(snapshot), "bare_process_mb": round(bare), "load_s": round(time.perf_counter() - t, 1),
           "rss_after_open_mb": round(_rss_mb()), "peak_while_opening_mb": round(_peak_mb())}
    with np.load(cache) as z:
        queries = np.split(z["queries"], np.cumsum(z["counts"])[:-1])[:requests]
    mask = snapshot.mask(["team:x"])
    times = []
    for i, q in enumerate(queries):
        t = time.perf_counter()
        snapshot.nearest(q, DEPTH, mask if i % 2 else None)
        snapshot.background(q)
        times.append((time.perf_counter() - t) * 1000)
    row.update({"stage_p50_ms": round(float(np.median(times)), 2), "searches": len(times),
                "rss_after_searches_mb": round(_rss_mb())})
    old = snapshot.rows[123]
    t = time.perf_counter()
    updated = snapshot.apply([(VectorRow(old.skill_id, old.grant, old.kind, old.tags, "0" * 64, "1" * 64),
                               queries[0][0])], [])
    row.update({"one_row_update_ms": round((time.perf_counter() - t) * 1000),
                "rss_with_both_snapshots_mb": round(_rss_mb())})
    del snapshot
    updated.nearest(queries[1], DEPTH)
    row.update({"rss_after_the_old_snapshot_went_mb": round(_rss_mb()), "peak_mb": round(_peak_mb())})
    print(json.dumps(row))


def memory(n: int, pool: np.ndarray, cache: Path, folder: Path, requests: int) -> dict[str, Any]:
    """Save a store of ``n`` rows (ids of 30 characters, sha256 hashes, 10% of rows in a second grant) and
    measure a fresh process that serves it (:func:`memory_child`)."""
    import hashlib
    import shutil
    import subprocess

    from skillsearch.bench.synthetic import stand_in_vectors
    from skillsearch.retrieval import vector_saves
    from skillsearch.retrieval.vectors import VectorRow, VectorSnapshot

    keys = np.random.default_rng(n).integers(0, 2**63, n, dtype=np.uint64)
    matrix = np.concatenate([pool[: min(len(pool), n)], stand_in_vectors(pool, keys[len(pool):])])[:n]
    rows = [VectorRow(f"synthetic/skill-{i:07d}-name", "team:x" if i % 10 == 0 else "public", "knowledge", (),
                      hashlib.sha256(b"d%d" % i).hexdigest(), hashlib.sha256(b"e%d" % i).hexdigest()) for i in range(n)]
    shutil.rmtree(folder, ignore_errors=True)
    vector_saves.save(VectorSnapshot.build(matrix.shape[1], matrix, rows), folder)
    del matrix, rows
    out = subprocess.run([sys.executable, __file__, "--memory-child", str(folder), "--cache", str(cache),
                          "--exact-requests", str(requests)], check=True, capture_output=True, text=True)
    shutil.rmtree(folder, ignore_errors=True)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    from skillsearch.bench.report import run_started

    run_started()  # the commit its report names: HEAD as the run starts, not when it writes
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--data-root", type=Path, default=Path("../shared/data"))
    parser.add_argument("--cache", type=Path, default=ROOT / "benchmarks" / ".cache" / "vector-stage.npz")
    parser.add_argument("--requests", type=int, default=150, help="dev requests taken from MetaTool and from Seal-Tools")
    parser.add_argument("--pool-cache", type=Path, help="take the real document vectors from this embedding cache")
    parser.add_argument("--only-chosen", action="store_true", help="the exact scan and the chosen stage only")
    parser.add_argument("--exact-requests", type=int, default=60, help="requests the exact scan is timed on")
    parser.add_argument("--stem", default="vector-stage", help="result file name")
    parser.add_argument("--parts", action="store_true",
                        help="time the stage's parts against their alternatives, paired (vector-stage-parts)")
    parser.add_argument("--memory", action="store_true",
                        help="serving memory of a saved store in a fresh process (vector-stage-memory)")
    parser.add_argument("--memory-child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--first-pass", action="store_true",
                        help="the pools int8 and int4 first passes hand to the exact re-score (first-pass-pools.*)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/skillsearch-vector-stage"),
                        help="folder for the saved snapshot --parts reopens")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args()
    from skillsearch.bench.report import write_script_report

    if args.memory_child:
        memory_child(args.memory_child, args.cache, args.exact_requests)
        return
    pool, queries = embed(args.data_root, args.cache, args.requests, args.pool_cache)
    command = "PYTHONPATH=. .venv/bin/python benchmarks/vector_stage.py " + " ".join(sys.argv[1:])
    if args.memory:
        rows_m = [memory(n, pool, args.cache, args.work, args.exact_requests) for n in args.sizes]
        print(write_script_report(
            args.out, args.stem, "Serving memory of the vector store", command,
            "a saved store reopened in a fresh process (RSS from /proc/self/statm, peak VmHWM); "
            f"the vector stage of the first {args.exact_requests} dev requests; shared machine", rows_m))
        return
    if args.first_pass:
        pools = [row for n in args.sizes
                 for row in first_pass_pools(n, pool, queries, args.exact_requests, lambda s: print(s, flush=True))]
        print(write_script_report(
            args.out, "first-pass-pools", "Rows a first pass must hand to the exact re-score", command,
            f"the first {args.exact_requests} dev requests (their query vectors as search embeds them), stand-in "
            "rows as the other modes make them; six standard deviations of the rounding error, as the stage",
            pools, text_columns=3))
        return
    if args.parts:
        parts = [row for n in args.sizes for row in paired_parts(n, pool, queries, args.exact_requests, args.work,
                                                                 lambda s: print(s, flush=True))]
        print(write_script_report(
            args.out, args.stem, "The vector stage's parts against their alternatives, paired", command,
            f"the first {args.exact_requests} of the dev requests, each part in turn on the same request; the "
            "snapshot saved and reopened (float32 matrix mapped); shared machine: compare rows of one size",
            parts, text_columns=2))
        return
    rows = [row for n in args.sizes for row in run_size(n, pool, queries, lambda s: print(s, flush=True),
                                                        not args.only_chosen, args.exact_requests)]
    several = sum(len(q) > 1 for q in queries)
    print(write_script_report(
        args.out, args.stem, "The vector stage: exact scan, int8 scan + exact re-score, approximate indexes",
        command, f"{len(queries)} dev requests ({several} with several query vectors); the exact scan on one thread, the "
        "chosen stage on its SCAN_THREADS (2 here) when it scans 32k rows or more; shared machine",
        rows, text_columns=2))


if __name__ == "__main__":
    main()
