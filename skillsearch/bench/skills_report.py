"""The skills dev-set report as files: Markdown tables, the JSON report and a PNG (scores, reliability diagram).

Same provenance as every other report (:func:`skillsearch.bench.report.run_metadata`); the chart is drawn
by :func:`skillsearch.bench.report.skills_chart` (the one module that imports matplotlib).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skillsearch.bench.report import skills_chart, write_results

__all__ = ["skills_markdown", "write_skills_results"]

_COLS = ("n", "hit@1", "hit@5", "mrr@10", "no_match")


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}"
    return "-" if v is None else str(v)


def _group_rows(scores: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    rows: list[tuple[str, Mapping[str, Any]]] = [("English positives", scores["english"]),
                                                 ("cross-lingual positives", scores["crosslingual"])]
    rows += [(f"style {k}", v) for k, v in scores["by_style"].items()]
    rows += [(f"language {k}", v) for k, v in scores["by_language"].items()]
    return rows


def skills_markdown(report: Mapping[str, Any]) -> str:
    s = report["scores"]
    neg, pos, cp = s["negatives"], s["positives"], s["confident_precision"]
    lines = [
        f"## skills relevance: {report['dataset']} {report['split']}",
        "",
        f"- command: `{report.get('command', '')}`",
        (f"- commit {report.get('commit')}, {report.get('date')}, {report.get('machine')}"
         f" (1-min load average {report.get('load_average_1m', '-')} when written; the machine was shared)"),
        (f"- {report['queries']} requests over {report['skills']} skills, the folder's own (imported into an index"
         f" of this folder alone; {report['invalid_skills']} invalid left out), encoder {report['encoder']}, limit 10,"
         " operator view, default settings"),
        f"- fitted decision: `{json.dumps(report.get('decision') or None)}`",
        "",
        "| group | " + " | ".join(_COLS) + " |",
        "| --- |" + " --- |" * len(_COLS),
    ]
    lines += [f"| {name} | " + " | ".join(_fmt(v.get(c)) for c in _COLS) + " |" for name, v in _group_rows(s)]
    lines += [
        "",
        (f"- negatives answered `no_match`: {neg['no_match']} of {neg['n']} ({_fmt(neg['abstention'])}); "
         f"English negatives {neg['english_no_match']} of {neg['english_n']}; "
         f"with the multilingual-off notice {neg['with_notice']}"),
        (f"- positives answered `no_match` (false abstention): {pos['no_match']} of {pos['n']}"
         f" ({_fmt(pos['false_abstention'])}); with the notice {pos['with_notice']}"),
        f"- hits with confidence >= {cp['at']}: {cp['hits']}, right {_fmt(cp['right'])}",
        "",
        "| confidence | hits | mean confidence | share right |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| {r['bin']} | {r['hits']} | {_fmt(r['mean_confidence'])} | {_fmt(r['right'])} |"
              for r in s["reliability"]]
    return "\n".join([*lines, ""])


def write_skills_results(report: Mapping[str, Any], out_dir: Path, stem: str) -> list[Path]:
    """Write ``<stem>.md``, ``<stem>.json`` and ``<stem>.png`` under ``out_dir``; returns the paths."""
    return write_results(report, out_dir, stem, markdown=skills_markdown, chart=skills_chart)
