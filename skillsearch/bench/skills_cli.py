"""``skillsearch bench relevance --dataset <skills folder>``: the skills dev set from the command line."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from skillsearch.bench.skills import SkillsOptions, is_skills_dataset, run_skills
from skillsearch.bench.skills_report import skills_markdown, write_skills_results
from skillsearch.retrieval.indexer import ProgressFactory

__all__ = ["is_skills_dataset", "skills_command"]


def skills_command(args: argparse.Namespace, out: TextIO, overrides: dict[str, Any],
                   progress: ProgressFactory | None = None) -> int:
    options = SkillsOptions(
        dataset=Path(args.dataset), cache_dir=None if args.no_cache else Path(args.cache_dir), settings=overrides,
        command="skillsearch " + " ".join(sys.argv[1:]) if args.record_command else None,
    )
    quiet = getattr(args, "quiet", False)
    report = run_skills(options, log=None if quiet else (lambda s: print(s, file=sys.stderr, flush=True)),
                        progress=None if quiet else progress)
    if not args.no_save:
        stem = f"relevance-{report['dataset']}-{report['split']}" + (f"-{args.tag}" if args.tag else "")
        report["files"] = [str(p) for p in write_skills_results(report, Path(args.out), stem)]
    out.write((json.dumps(report, ensure_ascii=False) if args.json else skills_markdown(report)) + "\n")
    return 0
