"""Sync benchmark: throughput of a full sync and time from an upstream change to searchable.

The 883 real skills of ``../shared/data/skills-catalog`` are served by the reference upstream over real
HTTP on 127.0.0.1 and synced into a fresh data directory with the real encoder. Measured:

1. full sync throughput: skills per second, fetching, validating, storing and embedding included, against
   ``Catalog.import_path`` of the same folder (what ``skillsearch import`` runs) in the same run, with the same
   loaded model, in the order import, sync, sync, import (so a drift of the machine's load hits both alike);
   the time inside the model is measured for each, so the rest is what sync or import adds around it;
2. one incremental change: wall time of ``sync_once`` for a single edited skill;
3. change to searchable, poll path: a skill is edited upstream with a fresh word, the background poller
   (interval ``POLL_INTERVAL_S``) picks it up; the clock stops when a search finds the word;
4. change to searchable, webhook path: same, with a long poll interval and a signed ``skills.changed``
   webhook sent to our ``POST /v1/sync/webhook`` right after the edit.

Usage: ``python benchmarks/sync.py`` (writes ``benchmarks/results/sync.md`` and ``sync.json``).
Not collected by pytest.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
from fastapi import FastAPI

from skillsearch.core.domain import Principal
from skillsearch.core.settings import Settings
from skillsearch.http.server import ServerThread
from skillsearch.http.sync_routes import make_sync_router
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.encoders import make_encoder
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.retrieval.wrapper import Wrapper
from skillsearch.service import Catalog
from skillsearch.sync.config import SubscriptionConfig, SyncConfig, UpstreamConfig
from skillsearch.upstream.app import create_upstream_app
from skillsearch.upstream.platform import ReferenceUpstream, WebhookTarget

# -- knobs ---------------------------------------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[1]
CATALOG = Path(os.environ.get("SYNC_BENCH_CATALOG", ROOT.parent / "shared" / "data" / "skills-catalog"))
ENCODER = os.environ.get("SYNC_BENCH_ENCODER", "minilm")
PAGE_LIMIT = 100
POLL_INTERVAL_S = 2.0          # poll path: the poller's interval (each wait jittered by +-10%)
TRIALS = 8                     # change-to-searchable trials per path
SEARCH_EVERY_S = 0.01          # how often the watcher searches for the new word
SPLIT_MODEL_COST = True        # also time the same full sync with the model-free "hashing" encoder
ROUNDS = int(os.environ.get("SYNC_BENCH_ROUNDS", "2"))  # 2: import, sync, sync, import; 1: import, sync
RESULTS = ROOT / "benchmarks" / "results"
SUB = "catalog"
TOKEN = "bench-token"
SECRET = "bench-secret"


def serve(app: Any) -> ServerThread:
    """``with serve(app) as url:``: the app over real HTTP on a free port of 127.0.0.1, without lifespan."""
    return ServerThread(app, lifespan="off")


class TimedEncoder(Wrapper):
    """The loaded model, counting the seconds spent inside it on documents."""

    def __init__(self, inner: Encoder) -> None:
        super().__init__(inner)
        self.seconds = 0.0

    def encode_documents(self, texts: Any, progress: Any = None) -> np.ndarray:
        t = time.perf_counter()
        try:
            return self.inner.encode_documents(texts, progress)
        finally:
            self.seconds += time.perf_counter() - t

    def encode_query(self, text: str) -> np.ndarray:
        return self.inner.encode_query(text)

    def encode_query_parts(self, query: str, parts: Any) -> np.ndarray:
        return self.inner.encode_query_parts(query, parts)


def timed(label: str, n: int, seconds: float, model_s: float) -> dict[str, Any]:
    return {"run": label, "skills": n, "seconds": round(seconds, 2), "skills_per_s": round(n / seconds, 2),
            "model_s": round(model_s, 2), "outside_model_s": round(seconds - model_s, 2),
            "loadavg": round(os.getloadavg()[0], 2)}


def import_run(data_dir: Path, label: str) -> dict[str, Any]:
    enc = TimedEncoder(make_encoder(ENCODER))
    catalog = Catalog.open(Settings(data_dir=data_dir, encoder=ENCODER, seed_sample=False), encoder=enc)
    started = time.perf_counter()
    report = catalog.import_path(CATALOG, "skills-catalog", f"sub:{SUB}")
    seconds = time.perf_counter() - started
    catalog.close()
    return timed(label, len(report.created), seconds, enc.seconds)


def sync_run(catalog: Catalog, enc: TimedEncoder, config: SyncConfig, label: str) -> tuple[dict[str, Any], Any]:
    before = enc.seconds
    started = time.perf_counter()
    [full] = catalog.subscriptions.sync_once(config)
    seconds = time.perf_counter() - started
    assert full.error is None, full.error
    return {**timed(label, len(full.outcome.created), seconds, enc.seconds - before), "pages": full.pages}, full


def searchable_after(catalog: Catalog, word: str, skill_id: str, started: float, timeout: float = 120) -> float:
    principal = Principal(name="bench", grants=frozenset({f"sub:{SUB}"}))
    request = SearchRequest(query=word, limit=3, mode="lexical")
    while time.perf_counter() - started < timeout:
        if any(h.skill_id == skill_id for h in catalog.search_view(principal, request).hits):
            return time.perf_counter() - started
        time.sleep(SEARCH_EVERY_S)
    raise TimeoutError(f"{skill_id} never became searchable by {word!r}")


def edit(up: ReferenceUpstream, skill_id: str) -> str:
    word = "zq" + uuid.uuid4().hex[:10]
    item = up.feed(SUB).get(skill_id)
    assert item is not None
    up.edit(SUB, skill_id, description=f"{item['revision']['description'][:900]} Marker {word}.")
    return word


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "n": len(values),
        "p50_s": round(statistics.median(ordered), 3),
        "mean_s": round(statistics.fmean(ordered), 3),
        "max_s": round(ordered[-1], 3),
        "min_s": round(ordered[0], 3),
    }


def main() -> None:
    up = ReferenceUpstream([TOKEN])
    problems = up.load(SUB, CATALOG)
    n_skills = len(up.feed(SUB).live())
    print(f"upstream serves {n_skills} skills ({len(problems)} invalid) from {CATALOG}", file=sys.stderr)
    results: dict[str, Any] = {}
    with serve(create_upstream_app(up)) as url, tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp) / "data", encoder=ENCODER, seed_sample=False)
        timing = TimedEncoder(make_encoder(ENCODER))
        catalog = Catalog.open(settings, encoder=timing)
        catalog.encoder.encode_documents(["warm up the model"])  # model load is not sync time

        def config(interval: float) -> SyncConfig:
            return SyncConfig(UpstreamConfig(url=url, token=TOKEN, webhook_secret=SECRET, page_limit=PAGE_LIMIT),
                              (SubscriptionConfig(SUB, interval),))

        runs = [import_run(Path(tmp) / "import-1", "import 1")]
        print(runs[-1], file=sys.stderr)
        first, full = sync_run(catalog, timing, config(60), "sync 1")
        runs.append(first)
        print(runs[-1], file=sys.stderr)
        assert len(full.outcome.created) == n_skills
        if ROUNDS > 1:
            other_enc = TimedEncoder(make_encoder(ENCODER))
            other = Catalog.open(Settings(data_dir=Path(tmp) / "sync-2", encoder=ENCODER, seed_sample=False),
                                 encoder=other_enc)
            runs.append(sync_run(other, other_enc, config(60), "sync 2")[0])
            other.close()
            print(runs[-1], file=sys.stderr)
            runs.append(import_run(Path(tmp) / "import-2", "import 2"))
            print(runs[-1], file=sys.stderr)
        sync_rate = statistics.fmean(r["skills_per_s"] for r in runs if r["run"].startswith("sync"))
        import_rate = statistics.fmean(r["skills_per_s"] for r in runs if r["run"].startswith("import"))
        results["sync_vs_import"] = {"runs": runs, "sync_skills_per_s": round(sync_rate, 2),
                                     "import_skills_per_s": round(import_rate, 2),
                                     "ratio": round(sync_rate / import_rate, 3)}
        results["full_sync"] = {
            "skills": n_skills, "pages": full.pages, "embedded": full.embedded, "seconds": first["seconds"],
            "skills_per_s": first["skills_per_s"],
        }
        print("full sync:", results["full_sync"], file=sys.stderr)
        if SPLIT_MODEL_COST:
            bare = Catalog.open(Settings(data_dir=Path(tmp) / "bare", encoder="hashing", seed_sample=False))
            started = time.perf_counter()
            bare.subscriptions.sync_once(config(60))
            bare_s = time.perf_counter() - started
            bare.close()
            results["full_sync_without_model"] = {"seconds": round(bare_s, 2),
                                                  "skills_per_s": round(n_skills / bare_s, 1)}
            print("full sync, hashing encoder:", results["full_sync_without_model"], file=sys.stderr)

        ids = sorted(up.feed(SUB).live())
        single = []
        for i in range(TRIALS):
            edit(up, ids[i])
            t0 = time.perf_counter()
            [r] = catalog.subscriptions.sync_once(config(60))
            single.append(time.perf_counter() - t0)
            assert r.outcome.updated == [ids[i]] and r.embedded == 1
        results["one_change_sync_once"] = summary(single)

        poller = catalog.subscriptions.make_poller(config(POLL_INTERVAL_S))
        poller.start()
        poll = []
        for i in range(TRIALS):
            sid = ids[(100 + i) % len(ids)]
            word = edit(up, sid)
            poll.append(searchable_after(catalog, word, sid, time.perf_counter()))
        poller.stop()
        results["change_to_searchable_poll"] = {"interval_s": POLL_INTERVAL_S, **summary(poll)}
        print("poll:", results["change_to_searchable_poll"], file=sys.stderr)

        poller = catalog.subscriptions.make_poller(config(3600))
        app = FastAPI()
        app.include_router(make_sync_router(catalog, config(3600), poller))
        with serve(app) as app_url:
            up.webhook = WebhookTarget(f"{app_url}/v1/sync/webhook", SECRET)
            poller.start()
            assert poller.wait_for_runs(SUB, 1, 120)
            hook = []
            for i in range(TRIALS):
                sid = ids[(200 + i) % len(ids)]
                word = edit(up, sid)
                t0 = time.perf_counter()
                assert up.notify("skills.changed", SUB) == 202
                hook.append(searchable_after(catalog, word, sid, t0))
            poller.stop()
        results["change_to_searchable_webhook"] = summary(hook)
        print("webhook:", results["change_to_searchable_webhook"], file=sys.stderr)
        catalog.close()

    meta = {
        "command": "python benchmarks/sync.py",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "nproc": os.cpu_count(),
        "encoder": catalog.encoder.name,
        "catalog": str(CATALOG.name),
        "page_limit": PAGE_LIMIT,
        "invalid_in_folder": problems,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "sync.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n", "utf-8")
    full = results["full_sync"]
    lines = [
        "# Sync benchmark",
        "",
        (f"`{meta['command']}` on {meta['date']}; {meta['machine']}; load average at the end"
         f" {meta['load_average_at_end']} (the machine was shared); encoder `{meta['encoder']}`."),
        "",
        (f"The {full['skills']} skills of `{meta['catalog']}` served by the reference upstream over HTTP on"
         f" 127.0.0.1, {PAGE_LIMIT} per page, synced into an empty data directory."),
        "",
        *([f"Left out by the catalog's own validation ({len(problems)}): " + "; ".join(
            f"`{Path(p.split(':', 1)[0]).parent.name}`:{p.split(':', 1)[1]}" for p in problems)] if problems else []),
        "",
        "Full sync against import of the same skills, same run, same loaded model (order: "
        + ", ".join(r["run"] for r in results["sync_vs_import"]["runs"]) + "):",
        "",
        "| run | skills | seconds | skills/s | inside the model s | outside the model s | load 1-min |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        *[f"| {r['run']} | {r['skills']} | {r['seconds']} | {r['skills_per_s']} | {r['model_s']} |"
          f" {r['outside_model_s']} | {r['loadavg']} |" for r in results["sync_vs_import"]["runs"]],
        "",
        (f"**Sync {results['sync_vs_import']['sync_skills_per_s']} skills/s against import"
         f" {results['sync_vs_import']['import_skills_per_s']} skills/s: ratio {results['sync_vs_import']['ratio']}**"
         " (mean of each kind's runs)."),
        "",
        "| measure | value |",
        "| --- | --- |",
        (f"| full sync, embedding included | {full['seconds']} s for {full['skills']} skills in {full['pages']}"
         f" pages: **{full['skills_per_s']} skills/s** |"),
    ]
    if "full_sync_without_model" in results:
        bare = results["full_sync_without_model"]
        lines.append(f"| the same full sync with the model-free `hashing` encoder (fetch, validate, store, index) |"
                     f" {bare['seconds']} s: {bare['skills_per_s']} skills/s |")
    for key, label in [("one_change_sync_once", "one edited skill, `sync_once`"),
                       ("change_to_searchable_poll", f"change to searchable, poll every {POLL_INTERVAL_S} s"),
                       ("change_to_searchable_webhook", "change to searchable, signed webhook")]:
        s = results[key]
        lines.append(f"| {label} | p50 {s['p50_s']} s, mean {s['mean_s']} s, min {s['min_s']} s,"
                     f" max {s['max_s']} s (n={s['n']}) |")
    lines += [
        "",
        "The full sync is bound by the embedding model: the model-free run of the same sync shows what fetching,",
        "validating, storing and indexing cost. On a shared machine (see the load average) the model gets a",
        "fraction of the 2 cores, so the first number is a floor for this hardware, not its capacity.",
        "",
        "Poll path: the expected delay is about half the interval plus one incremental sync; the webhook path",
        "removes the interval and leaves the HTTP round trips, one page fetch, one embedding and the index",
        "commit.",
    ]
    (RESULTS / "sync.md").write_text("\n".join(lines) + "\n", "utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
