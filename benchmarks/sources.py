"""Local sources benchmark: a watched folder's write to searchable, and mirroring an unchanged repository.

The 883 real skills of ``../shared/data/skills-catalog`` are copied into a git working tree and committed.
With the real encoder:

1. build: a git source (``file://`` URL) is mirrored into an empty data directory (every skill embedded);
2. unchanged repository: the same source run again (a) with the ref where it was (fetch, compare, skip),
   (b) forced to re-read the same commit (export, parse, compare every skill), (c) after a commit that
   touches no skill (a README edit: a new commit, so the whole tree is read and compared). Each reports
   how many skills it re-embedded, which must be 0;
3. write to searchable: a folder source with the same name and grant takes over the working tree (the same
   skills: new revisions for the version label, nothing re-embedded), the watcher runs, and 50 times a
   random skill's SKILL.md gets a fresh word appended; the clock starts when the write returns and stops
   when a lexical search finds the word (searched every 10 ms). The watcher's quiet window is part of it.

Usage: ``python benchmarks/sources.py`` (writes ``benchmarks/results/sources.md`` and ``sources.json``).
Not collected by pytest.
"""

from __future__ import annotations

import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from skillsearch.core.domain import Principal
from skillsearch.core.settings import Settings
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.service import Catalog
from skillsearch.sync.sources import SourceConfig

ROOT = Path(__file__).resolve().parents[1]
CATALOG = Path(os.environ.get("SOURCES_BENCH_CATALOG", ROOT.parent / "shared" / "data" / "skills-catalog"))
ENCODER = os.environ.get("SOURCES_BENCH_ENCODER", "minilm")
EDITS = int(os.environ.get("SOURCES_BENCH_EDITS", "50"))
QUIET_MS = 400
SEARCH_EVERY_S = 0.01
RESULTS = ROOT / "benchmarks" / "results"
NAME, GRANT = "team-skills", "team:bench"


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))], 3)


def timed(catalog: Catalog, source: SourceConfig, **kwargs: Any) -> dict[str, Any]:
    started = time.perf_counter()
    report = catalog.sources.sync(source, **kwargs)
    seconds = time.perf_counter() - started
    assert report.error is None, report.error
    return {"seconds": round(seconds, 3), "added": len(report.added), "changed": len(report.changed),
            "unchanged": report.unchanged, "removed": len(report.removed), "refused": len(report.refused),
            "skipped": report.skipped, "embedded": report.index.embedded if report.index else 0}


def main() -> int:
    load_before = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="sources-bench-") as tmp:
        work = Path(tmp) / "work"
        shutil.copytree(CATALOG, work)
        for extra in ("manifest.jsonl", "queries.dev.jsonl", "queries.dev.README.md", "SOURCE.json"):
            (work / extra).unlink(missing_ok=True)
        git(work, "init", "-q", "-b", "main")
        git(work, "config", "user.email", "bench@example.com")
        git(work, "config", "user.name", "bench")
        git(work, "add", "-A")
        git(work, "commit", "-q", "-m", "the catalog")
        skills = sorted(p.name for p in work.iterdir() if (p / "SKILL.md").is_file())

        catalog = Catalog.open(Settings(data_dir=Path(tmp) / "data", seed_sample=False, encoder=ENCODER))
        catalog.encoder.encode_documents(["warm up the model"])
        repo_source = SourceConfig(NAME, GRANT, git=f"file://{work}", ref="main")
        results: dict[str, Any] = {"skills_in_tree": len(skills)}
        results["build"] = timed(catalog, repo_source)
        results["unchanged_ref"] = timed(catalog, repo_source)
        results["unchanged_forced_reread"] = timed(catalog, repo_source, force=True)
        (work / "README.md").write_text("These are our skills.\n", encoding="utf-8")
        git(work, "add", "-A")
        git(work, "commit", "-q", "-m", "a commit that touches no skill")
        results["new_commit_no_skill_changed"] = timed(catalog, repo_source)

        folder_source = SourceConfig(NAME, GRANT, path=work)
        results["takeover_by_folder_source"] = timed(catalog, folder_source)
        keeper = catalog.sources.keeper([folder_source], quiet_ms=QUIET_MS)
        keeper.start()
        assert keeper.poller.wait_for_runs(NAME, 1, 600)
        principal = Principal(name="bench", grants=frozenset({GRANT}))
        rng = random.Random(16)
        waits: list[float] = []
        for _ in range(EDITS):
            slug = rng.choice(skills)
            word = "zq" + uuid.uuid4().hex[:10]
            path = work / slug / "SKILL.md"
            path.write_text(path.read_text(encoding="utf-8") + f"\nMarker {word}.\n", encoding="utf-8")
            started = time.perf_counter()
            request = SearchRequest(query=word, limit=3, mode="lexical")
            while not any(h.slug == slug for h in catalog.search_view(principal, request).hits):
                if time.perf_counter() - started > 120:
                    raise TimeoutError(f"{slug} never became searchable by {word}")
                time.sleep(SEARCH_EVERY_S)
            waits.append(time.perf_counter() - started)
            time.sleep(0.2)
        keeper.stop()
        catalog.close()
    results["write_to_searchable_s"] = {
        "n": len(waits), "p50": pct(waits, 0.5), "p95": pct(waits, 0.95), "mean": round(statistics.mean(waits), 3),
        "min": round(min(waits), 3), "max": round(max(waits), 3), "watcher_quiet_ms": QUIET_MS,
    }
    meta = {
        "command": "python benchmarks/sources.py",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "load_average_before": load_before,
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "encoder": ENCODER,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "sources.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n", "utf-8")
    (RESULTS / "sources.md").write_text(render(meta, results), "utf-8")
    print(render(meta, results))
    return 0


def row(label: str, r: dict[str, Any]) -> str:
    what = ", ".join(f"{k} {r[k]}" for k in ("added", "changed", "unchanged", "removed", "refused") if r[k])
    return f"| {label} | {r['seconds']} s | {what or '-'}{' (skipped: same commit)' if r['skipped'] else ''} | {r['embedded']} |"


def render(meta: dict[str, Any], results: dict[str, Any]) -> str:
    w = results["write_to_searchable_s"]
    return "\n".join([
        "# Local sources benchmark",
        "",
        f"`{meta['command']}` on {meta['date']}; {meta['machine']}; load average before {meta['load_average_before']},"
        f" at the end {meta['load_average_at_end']} (the machine was shared with other agents); encoder"
        f" `{meta['encoder']}`.",
        "",
        f"The {results['skills_in_tree']} skill folders of `skills-catalog` in a git working tree (one is refused by"
        " validation: its description is over 1024 characters).",
        "",
        "| run | wall time | outcome | re-embedded |",
        "| --- | --- | --- | --- |",
        row("git source, first mirror (build)", results["build"]),
        row("git source again, ref unchanged", results["unchanged_ref"]),
        row("git source, same commit re-read (`force`)", results["unchanged_forced_reread"]),
        row("git source, a new commit that changes no skill", results["new_commit_no_skill_changed"]),
        row("folder source of the same name takes over the tree", results["takeover_by_folder_source"]),
        "",
        f"Write to searchable under the watcher ({w['n']} edits of a random SKILL.md, quiet window"
        f" {w['watcher_quiet_ms']} ms): **p50 {w['p50']} s, p95 {w['p95']} s** (mean {w['mean']} s,"
        f" min {w['min']} s, max {w['max']} s).",
        "",
        "An edit re-reads only the skill folder the watcher saw change, re-embeds that one skill and commits the"
        " index; the quiet window (no write for that long ends a batch) is the floor. The takeover row shows"
        " that new revisions whose embedded text is unchanged (only the version label moved) embed nothing.",
        "",
    ])


if __name__ == "__main__":
    sys.exit(main())
