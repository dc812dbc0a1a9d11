"""What the default encoder costs to build: importing real skills with ``minilm`` and with ``minilm+e5``.

Imports the first ``--skills`` skill folders of ``skills-catalog`` (copied to a temporary folder) into a fresh
data directory per configuration through ``Catalog.import_path`` (the path of ``skillsearch import``), timing
the whole import (store, lexical, vectors, calibration), with models loaded beforehand (their load is timed
apart). Configurations, in one process, alternated over ``--rounds`` so each ratio is paired:

- ``minilm``: all-MiniLM-L6-v2 alone (English only);
- ``minilm+e5``: the default, both models, e5 embedding one document per call (``E5Encoder.batch_size`` 1);
- ``minilm+e5 (e5 batch 16)``: the same with the batches of 16 used before.

Usage: ``PYTHONPATH=. python benchmarks/default_encoder.py [--skills 883] [--rounds 1]
[--out benchmarks/results/default-encoder]``. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from skillsearch.bench.report import run_metadata  # noqa: E402
from skillsearch.core.settings import Settings  # noqa: E402
from skillsearch.retrieval.e5 import E5Encoder  # noqa: E402
from skillsearch.retrieval.minilm import MiniLMEncoder  # noqa: E402
from skillsearch.retrieval.routed_encoder import RoutedEncoder  # noqa: E402
from skillsearch.service import Catalog  # noqa: E402


def _import(skills: Path, encoder: Any, tmp: Path, label: str) -> float:
    data = tmp / f"data-{label.replace(' ', '-').replace('(', '').replace(')', '')}"
    shutil.rmtree(data, ignore_errors=True)
    catalog = Catalog(Settings(data_dir=data, seed_sample=False), encoder=encoder)
    started = time.perf_counter()
    report = catalog.import_path(skills, "bench", "team:bench")
    catalog.index()
    seconds = time.perf_counter() - started
    catalog.close()
    assert report.ok or report.created, report.problems[:3]
    return seconds


def main() -> None:
    from skillsearch.bench.report import run_started

    run_started()  # the commit its report names: HEAD as the run starts, not when it writes
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", type=Path, default=Path("../shared/data"))
    parser.add_argument("--skills", type=int, default=883)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    source = args.data_root / "skills-catalog"
    folders = sorted(p for p in source.iterdir() if (p / "SKILL.md").is_file())[: args.skills]
    loads: dict[str, float] = {}
    # The encoders read their weights on first use (``LazyModel``): loaded here, or the first import timed
    # would pay each model's load.
    t = time.perf_counter()
    minilm = MiniLMEncoder()
    minilm.encode_documents(["warm up the model"])  # its first pass too
    loads["minilm"] = time.perf_counter() - t
    t = time.perf_counter()
    e5 = E5Encoder()
    e5.encode_documents(["warm up the model"])  # its first pass too
    loads["e5"] = time.perf_counter() - t
    e5_batched = E5Encoder()
    e5_batched.encode_documents(["warm up the model"])  # its first pass too
    e5_batched.batch_size = 16
    configs = {"minilm": minilm, "minilm+e5": RoutedEncoder(minilm, e5),
               "minilm+e5 (e5 batch 16)": RoutedEncoder(minilm, e5_batched)}
    seconds: dict[str, list[float]] = {k: [] for k in configs}
    with tempfile.TemporaryDirectory(prefix="default-encoder-") as tmp:
        skills = Path(tmp) / "skills"
        skills.mkdir()
        for f in folders:
            shutil.copytree(f, skills / f.name, symlinks=True)
        for _ in range(args.rounds):
            for label, encoder in configs.items():
                seconds[label].append(_import(skills, encoder, Path(tmp), label))
                print(label, round(seconds[label][-1], 1), "s", flush=True)
    base = min(seconds["minilm"])
    rows = [{"encoder": k, "skills": len(folders), "import_s": round(min(v), 1), "vs_minilm": round(min(v) / base, 2),
             "skills_per_s": round(len(folders) / min(v), 1)} for k, v in seconds.items()]
    report = {**run_metadata(" ".join(["python", *sys.argv])), "kind": "default-encoder", "model_load_s": loads,
              "rows": rows, "load_average": os.getloadavg()}
    lines = ["| encoder | skills | import s | x MiniLM | skills/s |", "| --- | --- | --- | --- | --- |"]
    lines += [f"| {r['encoder']} | {r['skills']} | {r['import_s']} | {r['vs_minilm']} | {r['skills_per_s']} |" for r in rows]
    print("\n".join(lines))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        args.out.with_suffix(".md").write_text(
            f"# Default encoder: build cost\n\nCommand: `{report['command']}`\n\n" + "\n".join(lines) + "\n",
            encoding="utf-8")


if __name__ == "__main__":
    main()
