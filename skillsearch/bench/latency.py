"""The latency harness: build, update and search catalogs of 1k to 1M skills, in process.

For each catalog (``N`` synthetic skills, or ``real``: the 883 Agent Skills in ``../shared/data``):

1. **Build**: the bundle is imported through :meth:`Catalog.import_path` (above ``IMPORT_BATCH`` skills, in
   batches of that many, as a sync would apply them); the time spent inside the
   encoder is measured apart, so the report says what share of the build is *not* embedding.
   Document vectors come from the on-disk cache when present (keyed by model and text); the real encoding
   rate is then measured on a sample of the catalog's own texts, and the embedding time is reported as
   estimated from it. Catalogs above ``stand_in_above`` rows use real vectors for the texts in the cache and
   cheap stand-ins (a mix of three cached vectors, ``synthetic.stand_in_vectors``) for the rest: search cost
   does not depend on the values.
2. **Update**: one skill's description changes and is imported as a one-skill batch; the time until a
   search finds its new word is reported (median of 3).
3. **Search**, in a fresh child process (``bench/serving.py``) that only opens the index (so its peak RSS is the serving
   footprint): the query-embedding time alone (the floor: ``encode_query`` for the whole query once, and
   ``encode_query_texts``, what search embeds: ``encode_query_parts`` of the query and its sentences; both
   at torch's own thread count, and ``encode_query_texts (served threads)`` once more after the searches,
   at the count the batching service set), then
   ``lexical``, ``semantic`` and ``hybrid`` on queries it has not seen (each fresh hybrid search timed beside
   the batching service embedding the same texts, ``encode_query_texts (served, paired with hybrid)``, and
   ``hybrid_over_paired_encode`` the ratio of their medians), then the hybrid requests again
   (result-cache hits), then the same texts with another limit (new requests whose query vectors are
   cached). p50/p95/p99 each, and the vector stage's own time in the fresh hybrid searches. Last, the
   serving process changes one skill, as a node syncing itself does, and finds it by its new word
   (``update_in_server_ms``): ``peak_rss_mb`` is the child's peak with that update,
   ``peak_rss_mb_searching`` its peak before it.

The encoder is ``minilm`` unless named (``skillsearch --encoder minilm+e5 bench latency``). With the routed
pair, the catalog's stand-ins normalise each model's columns on their own, the modes above use the requests
the pair sends to MiniLM, and ``hybrid (other languages)`` searches the skills dev set's requests in other
languages (the e5 route), each beside e5 embedding the same texts (``hybrid_other_over_paired_encode``).
``query_vectors_embedded`` counts, per mode, the requests the search's query LRUs embedded: every fresh
request, no repeat (a floor that filled the LRU would make the "fresh" searches cache hits).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from skillsearch.bench.cache import BenchEncoder
from skillsearch.bench.report import head_commit, run_metadata
from skillsearch.bench.serving import GRANT, SOURCE, changed_entry, import_and_find, peak_rss_mb
from skillsearch.bench.synthetic import stand_in_vectors, write_synthetic_bundles
from skillsearch.core.settings import Settings
from skillsearch.retrieval import int8_kernels
from skillsearch.retrieval.documents import embedded_text
from skillsearch.retrieval.encoder import Encoder, ProgressCallback
from skillsearch.retrieval.encoders import make_encoder
from skillsearch.retrieval.wrapper import Wrapper
from skillsearch.service import Catalog

__all__ = ["missing_data", "run_latency"]

POOL = 512
# A synthetic catalog larger than this is imported in batches of this many skills (as a sync would apply it).
IMPORT_BATCH = 100_000


class TimedEncoder(Wrapper):
    """Counts documents and seconds spent encoding them."""

    def __init__(self, inner: Encoder) -> None:
        super().__init__(inner)
        self.seconds = 0.0
        self.documents = 0

    def encode_documents(self, texts: Sequence[str], progress: ProgressCallback | None = None) -> np.ndarray:
        t = time.perf_counter()
        out = self.inner.encode_documents(texts, progress)
        self.seconds += time.perf_counter() - t
        self.documents += len(texts)
        return out

    def encode_query(self, text: str) -> np.ndarray:
        return self.inner.encode_query(text)

    def encode_query_parts(self, query: str, parts: Sequence[str]) -> np.ndarray:
        return self.inner.encode_query_parts(query, parts)


class StandInEncoder(Wrapper):
    """Real vectors for cached texts (at least the first ``pool`` ones, encoded for real when not cached);
    for the rest, a deterministic normalised mix of three of those (``synthetic.stand_in_vectors``), each
    model's columns normalised on their own when the encoder is a routed pair.

    The pool fills over as many calls as it takes: an index write embeds 128 skills per call
    (``embedding_chunks.EMBED_CHUNK``), so a rule per call ("this call's first ``pool`` texts are real")
    encoded every text of a 100k catalog for real (hours on two cores) instead of ``pool`` of them."""

    def __init__(self, cached: BenchEncoder, pool: int = POOL) -> None:
        super().__init__(cached)
        self.inner: BenchEncoder = cached
        self.pool_size = pool
        routed = cached.routed()
        self.parts = tuple(routed.columns.values()) if routed is not None else ()
        self.stand_ins = 0
        self.pool: np.ndarray | None = None  # the first batch's real vectors (a later batch may have none)

    def encode_documents(self, texts: Sequence[str], progress: ProgressCallback | None = None) -> np.ndarray:
        known = self.inner.cached_documents(texts)
        short = self.pool_size - (0 if self.pool is None else len(self.pool))
        if short > 0 and sum(v is not None for v in known) < min(short, len(texts)):
            self.inner.encode_documents(list(texts[:short]))
            known = self.inner.cached_documents(texts)
        if short > 0 and any(v is not None for v in known):
            real = np.stack([v for v in known if v is not None][:short])
            self.pool = real if self.pool is None else np.concatenate([self.pool, real])
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        missing = [i for i, vec in enumerate(known) if vec is None]
        for i, vec in enumerate(known):
            if vec is not None:
                out[i] = vec
        if missing and self.pool is None:
            out[missing] = self.inner.encode_documents([texts[i] for i in missing])
        elif missing and self.pool is not None:
            keys = np.fromiter((int.from_bytes(hashlib.blake2b(texts[i].encode(), digest_size=8).digest(), "little")
                                for i in missing), dtype=np.uint64, count=len(missing))
            out[missing] = stand_in_vectors(self.pool, keys, self.parts)
            self.stand_ins += len(missing)
        if progress:
            progress(len(texts))
        return out

    def encode_query(self, text: str) -> np.ndarray:
        return self.inner.encode_query(text)

    def encode_query_parts(self, query: str, parts: Sequence[str]) -> np.ndarray:
        return self.inner.encode_query_parts(query, parts)


QUERY_FILES = ("metatool/queries.jsonl", "sealtools/queries.jsonl")


def missing_data(data_root: Path, catalogs: Sequence[str]) -> list[str]:
    """What ``data_root`` lacks for these catalogs: the requests (MetaTool's and Seal-Tools' queries), the
    synthetic skills' sentences (a ``*/corpus.jsonl``) when a catalog is synthetic, ``skills-catalog/`` for
    ``real``. Empty when nothing is missing."""
    if not data_root.is_dir():
        return [f"{data_root}/ (no such folder)"]
    missing = [f"{data_root / name}" for name in QUERY_FILES if not (data_root / name).is_file()]
    if any(c != "real" for c in catalogs) and not any(data_root.glob("*/corpus.jsonl")):
        missing.append(f"{data_root}/*/corpus.jsonl (the synthetic skills' sentences)")
    if "real" in catalogs and not (data_root / "skills-catalog").is_dir():
        missing.append(f"{data_root / 'skills-catalog'}/ (the real catalog)")
    return missing


def query_texts(data_root: Path | None, n: int) -> list[str]:
    """Real user requests (MetaTool and Seal-Tools queries), interleaved, or generated ones."""
    texts: list[str] = []
    if data_root is not None:
        for name in ("metatool", "sealtools"):
            path = data_root / name / "queries.jsonl"
            if path.is_file():
                lines = path.read_text(encoding="utf-8").splitlines()[: n]
                texts.extend(str(json.loads(line)["text"])[:500] for line in lines)
    if not texts:
        texts = [f"how do I fix problem number {i} in my deployment" for i in range(n)]
    texts = list(dict.fromkeys(texts))
    rng = np.random.default_rng(11)
    return [texts[i] for i in rng.permutation(len(texts))[:n]]


def other_language_texts(data_root: Path | None) -> list[str]:
    """The skills dev set's requests in other languages than English (``lang`` not ``en``), in file order."""
    path = data_root / "skills-catalog" / "queries.dev.jsonl" if data_root is not None else None
    if path is None or not path.is_file():
        return []
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [str(r["q"]) for r in rows if r.get("lang", "en") != "en"]


# -- the parent: build, update, spawn the search check ----------------------------------------------


def _one_catalog(
    label: str, bundles: Sequence[Path], work: Path, encoder: Encoder, cache_dir: Path | None, stand_in: bool,
    queries: Sequence[str], log: Callable[[str], None], encoder_name: str = "minilm", other: Sequence[str] = (),
    child_options: Sequence[str] = (),
) -> dict[str, Any]:
    cached = BenchEncoder(encoder, cache_dir)
    timed = TimedEncoder(StandInEncoder(cached) if stand_in else cached)
    data_dir = work / f"data-{label}"
    catalog = Catalog(Settings(data_dir=data_dir, seed_sample=False), encoder=timed)
    problems = 0
    t = time.perf_counter()
    for i, bundle in enumerate(bundles):
        log(f"[{label}] building ({i + 1}/{len(bundles)})")
        problems += len(catalog.import_path(bundle, SOURCE, GRANT).problems)
        if len(bundles) > 1:
            bundle.unlink()
    build_s = time.perf_counter() - t
    docs = len(catalog.index().snapshot().vectors)
    really_encoded = cached.encoded_documents
    # The real encoding rate, on this catalog's own texts as the index embeds them (cached runs and stand-ins
    # encode few or none).
    sample = [embedded_text(r, catalog.settings.embed_instructions_chars)
              for r in list(catalog.store.index_rows())[:64]]
    t = time.perf_counter()
    encoder.encode_documents(sample)
    docs_per_s = len(sample) / (time.perf_counter() - t)
    non_embed_s = build_s - timed.seconds
    embed_est_s = docs / docs_per_s
    row: dict[str, Any] = {
        "catalog": label, "skills": docs, "import_problems": problems, "import_batches": len(bundles),
        "build_s": round(build_s, 2), "encoder_s": round(timed.seconds, 2), "encoded_for_real": really_encoded,
        "stand_in_vectors": getattr(timed.inner, "stand_ins", 0),
        "non_embedding_s": round(non_embed_s, 2), "embed_docs_per_s": round(docs_per_s, 1),
        "embedding_share_est": round(embed_est_s / (embed_est_s + non_embed_s), 3),
        "build_docs_per_s_est": round(docs / (embed_est_s + non_embed_s), 1),
        "non_embedding_docs_per_s": round(docs / max(non_embed_s, 1e-9), 1),
    }
    log(f"[{label}] one-skill updates")
    first = next(iter(catalog.store.index_rows()))
    update_ms, refresh_ms, add_ms = [], [], []
    for i in range(3):
        word = f"zqxupdate{i}{int(time.time())}"
        ms, rep, hit = import_and_find(catalog, work / f"update-{label}-{i}.jsonl", changed_entry(first, word), word)
        update_ms.append(ms)
        refresh_ms.append((rep.index.seconds if rep.index else 0.0) * 1000)
        if hit is None or hit.skill.skill_id != first.skill_id:
            raise RuntimeError(f"updated skill not found by its new word in {label}")
    row["update_to_searchable_ms"] = round(float(np.median(update_ms)), 1)
    row["update_index_refresh_ms"] = round(float(np.median(refresh_ms)), 1)
    log(f"[{label}] one-skill additions")
    for i in range(3):  # a skill no catalog held: a new row of the vector matrix, not a replaced one
        word = f"zqxadded{i}{int(time.time())}"
        entry = {"slug": f"added-{word}", "name": f"added {word}", "tags": list(first.tags),
                 "description": f"{first.description[:900]} {word}", "instructions": first.instructions}
        ms, _, hit = import_and_find(catalog, work / f"add-{label}-{i}.jsonl", entry, word)
        add_ms.append(ms)
        if hit is None or hit.skill.name != entry["name"]:
            raise RuntimeError(f"added skill not found by its word in {label}")
    row["add_to_searchable_ms"] = round(float(np.median(add_ms)), 1)
    row["build_peak_rss_mb"] = peak_rss_mb()
    catalog.close()
    log(f"[{label}] searching in a child process")
    qfile = work / "queries.json"
    qfile.write_text(json.dumps({"queries": list(queries), "other": list(other)}), encoding="utf-8")
    # The child opens the index with the encoder it was built with (the choice's name, not the model's).
    child = subprocess.run(
        [sys.executable, "-m", "skillsearch.bench.serving", str(data_dir), str(qfile), encoder_name, *child_options],
        capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}, check=False,
    )
    if child.returncode != 0:
        raise RuntimeError(f"search check failed for {label}: {child.stderr[-2000:]}")
    row["search"] = json.loads(child.stdout.strip().splitlines()[-1])
    return row


def run_latency(
    catalogs: Sequence[str],
    *,
    data_root: Path | None,
    cache_dir: Path | None,
    queries: int = 300,
    stand_in_above: int = 20_000,
    encoder_name: str = "minilm",
    command: str | None = None,
    log: Callable[[str], None] = lambda s: None,
    scan_kernel: str | None = None,
    numkong_only: Sequence[str] = (),
    kernel_path: str | None = None,
) -> dict[str, Any]:
    """Run every catalog (``"real"`` or a number of synthetic skills) and return the report. ``scan_kernel``,
    ``numkong_only`` and ``kernel_path``: the search process's vector-stage kernel, numkong's capabilities
    and our kernel's path there (``int8_kernels.pin``; to measure the kernels against each other, or an
    AVX2-only core's choice on a wider one); this process is left as it is."""
    # A bad name fails here, not in the child after the build.
    int8_kernels.check(scan_kernel, numkong_only, kernel_path)
    commit = head_commit()  # the code that runs: HEAD may move during the builds
    child_options = [*(["--scan-kernel", scan_kernel] if scan_kernel else []),
                     *(["--numkong-only", *numkong_only] if numkong_only else []),
                     *(["--kernel-path", kernel_path] if kernel_path else [])]
    if data_root is not None and (missing := missing_data(data_root, catalogs)):
        raise ValueError(f"--data-root {data_root} lacks {', '.join(missing)}")
    encoder = make_encoder(encoder_name)
    texts = query_texts(data_root, queries)
    # A routed pair's other model is timed on real requests in other languages (the skills dev set's).
    other = other_language_texts(data_root) if encoder.routed() is not None else []
    rows = []
    with tempfile.TemporaryDirectory(prefix="skillsearch-latency-") as tmp:
        work = Path(tmp)
        for spec in catalogs:
            if spec == "real":
                if data_root is None or not (data_root / "skills-catalog").is_dir():
                    raise ValueError("the real catalog needs --data-root with skills-catalog/")
                bundles, label, n = [data_root / "skills-catalog"], "real-883", 883
            else:
                n = int(spec)
                label = f"{n // 1_000_000}M" if n >= 1_000_000 and n % 1_000_000 == 0 else \
                    f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)
                log(f"[{label}] writing the synthetic bundle")
                bundles = write_synthetic_bundles(work / f"synthetic-{n}.jsonl", n, data_root, IMPORT_BATCH)
            rows.append(_one_catalog(label, bundles, work, encoder, cache_dir, n > stand_in_above, texts, log,
                                     encoder_name, other, child_options))
            shutil_rmtree(work / f"data-{label}")
    notes = [f"{r['catalog']}: hybrid p50 / the batching service's p50 on the same texts, timed beside each "
             f"search: {r['search']['hybrid_over_paired_encode']:.2f}x"
             for r in rows if "hybrid_over_paired_encode" in r["search"]]
    notes += [f"{r['catalog']}: requests in other languages ({r['search']['other_language_queries']}, the e5 route): "
              f"hybrid p50 / that model's p50 on the same texts, timed beside each search: "
              f"{r['search']['hybrid_other_over_paired_encode']:.2f}x"
              for r in rows if "hybrid_other_over_paired_encode" in r["search"]]
    if data_root is None:
        notes.append("no data root: the requests and the synthetic skills' texts are generated stand-ins, not real text")
    kernels = sorted({str(r["search"].get("scan_kernel")) for r in rows})
    notes.append(f"the vector stage's scan kernel in the search process: {', '.join(kernels)}"
                 + (f" (numkong held to {', '.join(numkong_only)})" if numkong_only else "")
                 + (f" (our kernel held to its {kernel_path} path)" if kernel_path else ""))
    return {**run_metadata(command, commit), "kind": "latency", "encoder": encoder.name, "encoder_choice": encoder_name,
            "queries": len(texts), "other_language_queries": len(other),
            "catalogs": rows, "rows": _flat_rows(rows), "notes": notes}


def shutil_rmtree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def _flat_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One table row per catalog and mode, for the Markdown table and the chart."""
    flat = []
    for r in rows:
        s = r["search"]
        for mode in ("encode_query", "encode_query_texts", "encode_query_texts (served threads)",
                     "encode_query_texts (served, paired with hybrid)", "lexical", "semantic",
                     "hybrid", "hybrid (cache hit)", "hybrid (query vectors cached)", "vector stage (fresh hybrid)",
                     "encode_query_texts (other languages, paired)", "hybrid (other languages)",
                     "vector stage (other languages)"):
            if mode in s:
                flat.append({"catalog": r["catalog"], "mode": mode, **s[mode]})
    return flat


