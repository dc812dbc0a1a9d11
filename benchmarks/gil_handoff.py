"""The GIL hand-off: MiniLM module by module (sentence-transformers' ``encode``) against the traced forward
(``skillsearch.retrieval.torch_ops.TracedForward``), alone and beside one Python thread that only spins.

Why it matters (docs/benchmarks.md, "The traced forward and the GIL"): in a server, request threads run
Python while a batching worker runs the model; every tensor operation of an eager forward gives up the GIL
and must take it back, and waits whenever another thread is running Python. One torch intra-op thread, as
the batching service runs it; the dev requests of ``queries.dev.jsonl``; medians of repeated calls.

Run: ``HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/gil_handoff.py`` (writes
``benchmarks/results/gil-handoff.{md,json}``). Not collected by pytest.
Output: an experiment record behind a past choice, not a current result; the last run is in git at b290c07.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEV = ROOT.parent / "shared" / "data" / "skills-catalog" / "queries.dev.jsonl"


def main() -> None:
    from skillsearch.bench.report import run_started

    run_started()  # the commit its report names: HEAD as the run starts, not when it writes
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from skillsearch.bench.report import median_ms, write_script_report
    from skillsearch.retrieval.minilm import MiniLMEncoder

    torch.set_num_threads(1)
    encoder = MiniLMEncoder()
    assert encoder.forward is not None, "the traced forward was not built"
    queries = [json.loads(line)["q"] for line in DEV.read_text(encoding="utf-8").splitlines() if line.strip()]
    batch, one = queries[:8], queries[:1]

    def eager(texts: list[str]) -> Callable[[], object]:
        return lambda: encoder.model.encode(texts, batch_size=8, normalize_embeddings=True, show_progress_bar=False)

    def traced(texts: list[str]) -> Callable[[], object]:
        assert encoder.forward is not None
        forward = encoder.forward
        return lambda: forward.encode(texts, 8)

    stop = threading.Event()

    def spin() -> None:
        x = 0
        while not stop.is_set():
            for i in range(1000):
                x += i

    rows = []
    for label, make in (("module by module (encode)", eager), ("traced forward", traced)):
        row = {"path": label, "8 requests alone": median_ms(make(batch), 30), "1 request alone": median_ms(make(one), 30)}
        stop.clear()
        spinner = threading.Thread(target=spin, daemon=True)
        spinner.start()
        row["8 requests, one spinning thread"] = median_ms(make(batch), 10)
        row["1 request, one spinning thread"] = median_ms(make(one), 10)
        stop.set()
        spinner.join()
        rows.append(row)
    print(write_script_report(
        ROOT / "benchmarks" / "results", "gil-handoff",
        "GIL hand-off: the model module by module against the traced forward (ms, median)",
        "python benchmarks/gil_handoff.py", "one torch thread; dev requests of queries.dev.jsonl", rows), end="")


if __name__ == "__main__":
    main()
