"""Benchmark results as files: a Markdown table, the JSON report and a PNG chart, with their provenance.

Every report carries the command, the commit (``+dirty`` when the tree had changes), the date in UTC and
the machine, so a number in ``benchmarks/results/`` can always be traced to what produced it.
This is the one module that imports ``matplotlib`` (lazily, with the Agg backend: no display needed).
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["head_commit", "machine", "median_ms", "run_metadata", "skills_chart", "to_markdown", "write_results",
           "write_script_report"]


def median_ms(fn: Callable[[], Any], repeats: int) -> float:
    """The median wall time of ``repeats`` calls of ``fn`` in milliseconds, after one unmeasured call."""
    fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 2)


def head_commit() -> str:
    """The checkout's commit now (``+dirty`` when tracked files differ from it), or ``unknown``. A run takes it
    as it starts and hands it to :func:`run_metadata`: HEAD may move during a long run (another branch checked
    out, a commit made), and the report must name the code that produced it."""
    try:
        root = Path(__file__).resolve().parents[2]
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5, check=True).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


# The widest vector instructions a core has, best first: the int8 scan's kernels differ by them several
# times over (docs/benchmarks.md, "The kernel by instruction set"), and a machine's name ("AMD EPYC") does
# not say which it has.
SIMD_LEVELS = (("avx512_vnni", "AVX-512 VNNI"), ("avx512f", "AVX-512"), ("avx2", "AVX2"), ("asimd", "NEON"))


def machine() -> str:
    """The CPU (name, family and model, widest vector instructions), cores, Python and system."""
    cpu = platform.processor() or platform.machine()
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, sep, value = line.partition(":")
            if not sep:
                if fields:
                    break  # the first processor's block is enough
                continue
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    cpu = fields.get("model name", cpu)
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    detail = [f"family {fields['cpu family']} model {fields['model']}"] if "cpu family" in fields and "model" in fields else []
    detail += [name for flag, name in SIMD_LEVELS if flag in flags][:1]
    if detail:
        cpu += f" ({', '.join(detail)})"
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"


_started: list[str] = []


def run_started() -> str:
    """The checkout's commit as this process's run starts: the first call takes it (:func:`head_commit`), later
    ones and every report this process writes without a ``commit`` of its own name that one, whatever HEAD is
    by then. A ``benchmarks/`` script calls it first thing in its ``main``."""
    if not _started:
        _started.append(head_commit())
    return _started[0]


def run_metadata(command: str | None = None, commit: str | None = None) -> dict[str, Any]:
    """A report's provenance: ``commit`` as :func:`head_commit` gave it when the run started (else the one
    :func:`run_started` took, else now), the date, the machine and its load when written."""
    return {
        "command": command or shlex.join(sys.argv),
        "commit": commit or (_started[0] if _started else head_commit()),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def write_script_report(
    out: Path, stem: str, title: str, command: str, context: str, rows: list[dict[str, Any]], *,
    text_columns: int = 1, notes: tuple[str, ...] = (), extra: Mapping[str, Any] | None = None,
) -> str:
    """A one-off script's result as ``<stem>.md`` (title; date, command, commit, machine and load with
    ``context``; ``notes``; one table with the first ``text_columns`` columns left-aligned, the rest
    right-aligned) and ``<stem>.json`` (:func:`run_metadata`, then ``extra``, then rows). Returns the Markdown.

    The commit is recorded like every other report's: without it a script's result could not be traced to
    the code that produced it (startup, shutdown and embed-throughput named none)."""
    columns = list(rows[0])
    meta = run_metadata(command)
    lines = [f"# {title}", "",
             f"- date: {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC; command: `{command}`; commit"
             f" {meta['commit']}; machine: {meta['machine']}; 1-min load {os.getloadavg()[0]:.1f}; {context}", ""]
    lines += [line for n in notes for line in (f"- {n}", "")]
    lines += ["| " + " | ".join(columns) + " |",
              "|" + " --- |" * text_columns + " ---: |" * (len(columns) - text_columns)]
    lines += ["| " + " | ".join(str(r[c]) for c in columns) + " |" for r in rows]
    text = "\n".join(lines) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.md").write_text(text, encoding="utf-8")
    (out / f"{stem}.json").write_text(json.dumps({**meta, **(extra or {}), "rows": rows}, indent=2)
                                      + "\n", encoding="utf-8")
    return text


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}"
    return "-" if v is None else str(v)


def to_markdown(report: Mapping[str, Any]) -> str:
    """The report as a Markdown section: provenance, then one table."""
    # A latency report has no dataset: its heading names the catalogs and the encoder instead.
    what = (f"{report.get('dataset', '')} {report.get('split', '')}".strip()
            or ", ".join(str(c.get("catalog")) for c in report.get("catalogs", []))
            + (f" ({report['encoder']})" if report.get("encoder") else ""))
    head = [
        f"## {report.get('kind', 'benchmark')}: {what}".rstrip(": "),
        "",
        f"- command: `{report.get('command', '')}`",
        (f"- commit {report.get('commit')}, {report.get('date')}, {report.get('machine')}"
         f" (1-min load average {report.get('load_average_1m', '-')} when written)"),
    ]
    if report.get("kind") == "relevance":
        head.append(f"- {report['queries']} judged queries"
                    + (f" (first {report['max_queries']} by id)" if report.get("max_queries") else "")
                    + f", {report['corpus']} documents, "
                    + (f"encoder {report['encoder']}" if report.get("encoder") else "no encoder (lexical modes only:"
                       " nothing embedded)"))
        head.append(f"- settings: `{json.dumps(report.get('settings', {}), sort_keys=True)}`")
        if report.get("test_split_overrides"):
            head.append(f"- ranking settings overridden on the {report['split']} split (tune on dev): "
                        f"`{json.dumps(report['test_split_overrides'], sort_keys=True)}`")
        metrics = list(report["metrics"])
        lines = ["| mode | " + " | ".join(metrics) + " |", "| --- |" + " --- |" * len(metrics)]
        for mode, values in report["modes"].items():
            lines.append(f"| {mode} | " + " | ".join(_fmt(values.get(m)) for m in metrics) + " |")
        return "\n".join([*head, "", *lines, ""])
    rows = report.get("rows", [])
    cols = list(rows[0]) if rows else []
    lines = ["| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    lines += ["| " + " | ".join(_fmt(r.get(c)) for c in cols) + " |" for r in rows]
    notes = [f"- {n}" for n in report.get("notes", [])]
    builds = [{k: v for k, v in c.items() if k != "search"}
              | {"serve_peak_rss_mb": c["search"]["peak_rss_mb"],
                 "serve_peak_rss_mb_before_update": c["search"].get("peak_rss_mb_searching"),
                 "serve_update_ms": c["search"].get("update_in_server_ms"), "serve_open_s": c["search"].get("open_s")}
              for c in report.get("catalogs", [])]
    bcols = list(builds[0]) if builds else []
    btable = ["| " + " | ".join(bcols) + " |", "|" + " --- |" * len(bcols)] if builds else []
    btable += ["| " + " | ".join(_fmt(b.get(c)) for c in bcols) + " |" for b in builds]
    return "\n".join([*head, *notes, "", *lines, "", *btable, ""])


def _chart(report: Mapping[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.2), dpi=110)
    if report.get("kind") == "relevance":
        metrics = list(report["metrics"])
        modes = list(report["modes"])
        width = 0.8 / max(len(modes), 1)
        for i, mode in enumerate(modes):
            xs = [j + (i - (len(modes) - 1) / 2) * width for j in range(len(metrics))]
            ax.bar(xs, [report["modes"][mode][m] for m in metrics], width, label=mode)
        ax.set_xticks(range(len(metrics)), metrics)
        ax.set_ylim(0, 1)
        ax.set_ylabel("score")
        ax.set_title(f"{report['dataset']} {report['split']} ({report['queries']} queries)")
        ax.legend(fontsize=7, ncol=4, loc="lower right")
    else:
        rows = [r for r in report.get("rows", []) if r.get("p50_ms") is not None]
        labels = [f"{r['catalog']}\n{r['mode']}" for r in rows]
        for key, colour in (("p50_ms", "tab:blue"), ("p95_ms", "tab:orange"), ("p99_ms", "tab:red")):
            ax.plot(range(len(rows)), [r[key] for r in rows], "o-", label=key, color=colour)
        ax.set_xticks(range(len(rows)), labels, fontsize=6, rotation=60)
        ax.set_yscale("log")
        ax.set_ylabel("ms (log)")
        ax.set_title("search latency, in process")
        ax.legend(fontsize=7)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_results(
    report: Mapping[str, Any], out_dir: Path, stem: str,
    markdown: Callable[[Mapping[str, Any]], str] | None = None,
    chart: Callable[[Mapping[str, Any], Path], None] | None = None,
) -> list[Path]:
    """Write ``<stem>.md``, ``<stem>.json`` and ``<stem>.png`` under ``out_dir``; returns the paths written
    (a ``chart`` that writes nothing leaves out the PNG). ``markdown`` and ``chart`` render another kind of
    report (the skills dev set's) the same way.

    All or none: every file is first written under a hidden temporary name beside its target, and renamed
    into place only once all are written, so a failure leaves neither a partial set nor temporary files."""
    out_dir.mkdir(parents=True, exist_ok=True)
    exts = ("md", "json", "png")
    targets = [out_dir / f"{stem}.{ext}" for ext in exts]
    temps = [out_dir / f".{stem}.{os.getpid()}.tmp.{ext}" for ext in exts]  # the chart's format is its suffix
    try:
        temps[0].write_text((markdown or to_markdown)(report), encoding="utf-8")
        temps[1].write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        (chart or _chart)(report, temps[2])
        written = [(t, target) for t, target in zip(temps, targets, strict=True) if t.exists()]
        blocked = [str(target) for _, target in written if target.exists() and not target.is_file()]
        if blocked:
            raise IsADirectoryError(f"not a file, cannot be replaced: {', '.join(blocked)}")
        for temp, target in written:
            os.replace(temp, target)
    finally:
        for temp in temps:
            temp.unlink(missing_ok=True)
    return [target for _, target in written]


def skills_chart(report: Mapping[str, Any], path: Path) -> None:
    """The skills dev-set report's PNG: hit@1/hit@5/MRR@10 by group, and the reliability diagram."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = report["scores"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=110)
    groups = [("English", s["english"]), ("x-lingual", s["crosslingual"]),
              *((k, v) for k, v in s["by_style"].items() if k != "crosslingual")]
    metrics = ("hit@1", "hit@5", "mrr@10")
    width = 0.8 / len(metrics)
    for i, m in enumerate(metrics):
        xs = [j + (i - 1) * width for j in range(len(groups))]
        left.bar(xs, [float(g.get(m) or 0.0) for _, g in groups], width, label=m)
    left.set_xticks(range(len(groups)), [name for name, _ in groups], fontsize=8)
    left.set_ylim(0, 1)
    left.set_title(f"{report['dataset']} {report['split']}: positives ({report['encoder'].split('/')[-1]})", fontsize=9)
    left.legend(fontsize=7, loc="lower right")
    left.grid(axis="y", alpha=0.3)
    bins = [r for r in s["reliability"] if r["hits"]]
    right.plot([0, 1], [0, 1], "--", color="grey", lw=1, label="perfect calibration")
    if bins:
        right.plot([r["mean_confidence"] for r in bins], [r["right"] for r in bins], "o-", label="hits")
        for r in bins:
            right.annotate(str(r["hits"]), (r["mean_confidence"], r["right"]), fontsize=6,
                           textcoords="offset points", xytext=(3, -8))
    right.set_xlim(0, 1)
    right.set_ylim(0, 1)
    right.set_xlabel("confidence (bin mean)")
    right.set_ylabel("share of hits that are wanted")
    right.set_title("reliability (numbers: hits per bin)", fontsize=9)
    right.legend(fontsize=7, loc="upper left")
    right.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
