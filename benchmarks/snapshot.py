"""Snapshot and restore at catalog scale: how long a new replica takes from a snapshot to answering searches,
and how many documents it embeds on the way (the target: none).

For each catalog: build a data directory once (the 883 real Agent Skills imported with MiniLM; N synthetic
skills with stand-in vectors above STAND_IN_ABOVE, as ``benchmarks/latency.py`` does, since embedding 100k
skills takes over half an hour here), ``snapshot create`` it, then in a fresh child process (nothing
imported, no model loaded): load MiniLM, ``snapshot restore`` into an empty folder, open the catalog,
answer QUERIES searches. The child reports each step's seconds (the model load apart) and
``Catalog.embedded_documents()``.

Knobs: SIZES (``real`` and synthetic sizes), DATA (``../shared/data``, env SKILLSEARCH_BENCH_DATA: the real
catalog and the text pool), WORK (built data directories, kept between runs: delete it to rebuild), QUERIES.

    python benchmarks/snapshot.py [real] [100000]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SKILLSEARCH_BENCH_DATA", ROOT.parent / "shared" / "data"))
WORK = ROOT / "benchmarks" / ".cache" / "snapshot"
SIZES = ["real", "100000"]
STAND_IN_ABOVE = 20_000
QUERIES = ["generate a changelog from the git commits", "review a pull request for security issues",
           "set up an A/B test", "query a ClickHouse database", "profile a slow python function"]
GRANT, SOURCE = "team:bench", "bench"


def child(snapshot: str, target: str) -> None:
    """In a fresh process: load the model, restore, open, search; one JSON line on stdout. The model load is
    timed apart: it is the same for any replica start (torch and MiniLM), not part of a restore."""
    started = time.perf_counter()
    from skillsearch.core.domain import Principal
    from skillsearch.core.settings import Settings
    from skillsearch.retrieval.encoders import make_encoder
    from skillsearch.retrieval.loading import models_of
    from skillsearch.retrieval.search_types import SearchRequest
    from skillsearch.service import Catalog

    imported = time.perf_counter()
    # Process-wide: the catalog below uses this very model. Its weights are read on first use (LazyModel):
    # read here, or the restore's first search would pay the model load.
    for model in models_of(make_encoder("minilm")):
        model.get()
    loaded = time.perf_counter()
    settings = Settings(data_dir=Path(target), seed_sample=False)
    info = Catalog.restore_snapshot(settings, Path(snapshot))
    restored = time.perf_counter()
    catalog = Catalog.open(settings)
    opened = time.perf_counter()
    hits = [len(catalog.search(Principal.operator(), SearchRequest(query=QUERIES[0], limit=10)).hits)]
    answered = time.perf_counter()
    hits += [len(catalog.search(Principal.operator(), SearchRequest(query=q, limit=10)).hits) for q in QUERIES[1:]]
    print(json.dumps({
        "imports_s": round(imported - started, 2), "model_load_s": round(loaded - imported, 2),
        "restore_s": round(restored - loaded, 2), "open_s": round(opened - restored, 2),
        "first_search_s": round(answered - opened, 3), "restore_to_first_answer_s": round(answered - loaded, 2),
        "with_process_start_s": round(answered - started, 2), "documents": len(catalog.index().snapshot().vectors),
        "queries_with_hits": f"{sum(h > 0 for h in hits)}/{len(hits)}", "embedded": catalog.embedded_documents(),
        "files": info.files, "snapshot_mb": round(info.bytes / 1e6, 1),
    }))
    catalog.close()


def build(spec: str) -> tuple[str, Path]:
    from skillsearch.bench.cache import BenchEncoder
    from skillsearch.bench.latency import StandInEncoder
    from skillsearch.bench.synthetic import write_synthetic_bundle
    from skillsearch.core.settings import Settings
    from skillsearch.retrieval.encoders import make_encoder
    from skillsearch.service import Catalog

    label = "real-883" if spec == "real" else f"{int(spec) // 1000}k"
    data_dir = WORK / f"data-{label}"
    if (data_dir / "manifest.json").is_file():
        return label, data_dir
    shutil.rmtree(data_dir, ignore_errors=True)
    WORK.mkdir(parents=True, exist_ok=True)
    cached = BenchEncoder(make_encoder("minilm"), ROOT / "benchmarks" / ".cache")
    if spec == "real":
        source, encoder = DATA / "skills-catalog", cached
    else:
        os.environ["SKILLSEARCH_MAX_BUNDLE_BYTES"] = str(1 << 30)  # one bundle of 100k entries (~150 MB)
        source = write_synthetic_bundle(WORK / f"synthetic-{spec}.jsonl", int(spec), DATA)
        encoder = StandInEncoder(cached) if int(spec) > STAND_IN_ABOVE else cached
    catalog = Catalog(Settings(data_dir=data_dir, seed_sample=False), encoder=encoder)
    t = time.perf_counter()
    report = catalog.import_path(source, SOURCE, GRANT)
    print(f"[{label}] built in {time.perf_counter() - t:.0f}s ({len(report.created)} skills)", file=sys.stderr)
    catalog.close()
    return label, data_dir


def measure(spec: str) -> dict[str, Any]:
    from skillsearch.core.settings import Settings
    from skillsearch.service import Catalog

    label, data_dir = build(spec)
    snap, target = WORK / f"snap-{label}", WORK / f"replica-{label}"
    shutil.rmtree(snap, ignore_errors=True)
    shutil.rmtree(target, ignore_errors=True)
    t = time.perf_counter()
    info = Catalog.create_snapshot(Settings(data_dir=data_dir), snap)
    create_s = time.perf_counter() - t
    done = subprocess.run([sys.executable, __file__, "--child", str(snap), str(target)], capture_output=True,
                          text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{label}: the restoring child failed: {done.stderr[-3000:]}")
    row = {"catalog": label, "skills": info.skills, "create_s": round(create_s, 2),
           **json.loads(done.stdout.strip().splitlines()[-1])}
    shutil.rmtree(snap, ignore_errors=True)
    shutil.rmtree(target, ignore_errors=True)
    return row


def main(sizes: list[str]) -> None:
    from skillsearch.bench.report import run_started

    run_started()  # the commit its report names: HEAD as the run starts, not when it writes
    from skillsearch.bench.report import machine, run_metadata, write_script_report

    rows = [measure(spec) for spec in sizes]
    command = "python benchmarks/snapshot.py " + " ".join(sizes)
    notes = (
        "restore_to_first_answer_s: in a fresh process with MiniLM loaded, the restore (every file's sha256 checked,"
        " the atomic swap), opening the catalog and index, and the first search answered; with_process_start_s adds"
        " the Python imports and the model load (model_load_s: torch and MiniLM, the same for any replica start,"
        " and the part the machine's load inflates most); embedded: documents that process embedded (0: the"
        " snapshot's vectors are served as they are)",
        "targets: real-883 at most 10 s, 100k at most 60 s, 0 embedded; the 100k catalog's vectors are stand-ins"
        " (the first 512 texts embedded for real, the rest mixes of those), which changes nothing restored",
        f"machine: {machine()}, shared with other engineers' builds and tests while it ran (see the load)",
    )
    text = write_script_report(ROOT / "benchmarks" / "results", "snapshot", "Snapshot restore to first answer",
                               command, "each restore in a fresh child process", rows, notes=notes,
                               extra=run_metadata(command))
    print(text)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3])
    else:
        main(sys.argv[1:] or SIZES)
