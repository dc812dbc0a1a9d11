"""What an engineer running the benchmarks meets: a lexical run's cost, lodo's progress, overrides on a test
split, and the commit a report names. Tiny BEIR folders, the real encoder and engines, real git."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from contextlib import redirect_stderr
from pathlib import Path
from typing import Any

import pytest
from test_bench import CORPUS, QRELS, QUERIES, Recorder, beir_dir  # noqa: F401 (beir_dir: a fixture)
from test_sources import commit, init_repo

from skillsearch.bench.beir import load_beir
from skillsearch.bench.no_vectors import NoVectors
from skillsearch.bench.relevance import RelevanceOptions, open_bench_catalog, run_relevance, search_runs
from skillsearch.retrieval.encoder import Encoder

ROOT = Path(__file__).resolve().parents[1]
# Requests that match some documents only in part, so the lexical ranking has an order to keep.
MORE_QUERIES = [
    {"_id": "q4", "text": "slow python code, measure it"},
    {"_id": "q5", "text": "clean nulls and duplicates in a CSV"},
    {"_id": "q6", "text": "the query plan of a slow SQL statement and TLS"},
]
MORE_QRELS = [("q4", "Pandas-Clean"), ("q5", "pandas clean"), ("q6", "sqlTuning"), ("q6", "tls_renew")]


def _widen(folder: Path) -> None:
    with (folder / "queries.jsonl").open("a") as f:
        f.write("".join(json.dumps(q) + "\n" for q in MORE_QUERIES))
    with (folder / "qrels.test.tsv").open("a") as f:
        f.write("".join(f"{q}\t{d}\t1\n" for q, d in MORE_QRELS))


def test_a_lexical_run_embeds_nothing_and_scores_as_a_run_with_vectors(
        beir_dir: Path, tmp_path: Path, encoder: Encoder) -> None:  # noqa: F811
    """Audit (bench UX): ``bench relevance --modes lexical`` embedded the whole corpus (minutes of MiniLM on
    Seal-Tools) though no lexical result reads a vector. It now embeds nothing, and its numbers are those of
    a run whose catalog holds the real vectors, ranked list for ranked list."""
    _widen(beir_dir)
    with_vectors = run_relevance(RelevanceOptions(dataset=beir_dir, split="test", modes=["lexical", "semantic"],
                                                  cache_dir=None), encoder=encoder)
    shown = Recorder()
    lexical = run_relevance(RelevanceOptions(dataset=beir_dir, split="test", modes=["lexical", "bm25s"],
                                             cache_dir=tmp_path / "cache"), encoder=encoder, progress=shown)
    assert lexical["modes"]["lexical"] == with_vectors["modes"]["lexical"]
    assert "embedding" not in shown.bars and "embedding queries" not in shown.bars
    assert shown.bars["searching"] == [len(QUERIES) + len(MORE_QUERIES)] * 2
    assert lexical["encoder"] is None and with_vectors["encoder"] == encoder.name
    assert not (tmp_path / "cache").exists()  # nothing embedded, nothing cached

    ds = load_beir(beir_dir, "test")
    queries = {q: ds.queries[q] for q in ds.query_ids()}
    runs = []
    for name, enc in (("real", encoder), ("none", NoVectors())):
        catalog, id_map = open_bench_catalog(ds, tmp_path / name, enc)
        try:
            runs.append(search_runs(catalog, id_map, queries, ["lexical"])[0]["lexical"])
        finally:
            catalog.close()
    assert runs[0] == runs[1] and any(len(hits) > 1 for hits in runs[0].values())


def test_a_lexical_run_never_loads_the_model(beir_dir: Path) -> None:  # noqa: F811
    """A fresh process: a lexical-only run made no encoder and imported no torch (the model's library)."""
    script = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from skillsearch.bench.relevance import RelevanceOptions, run_relevance\n"
        "from skillsearch.retrieval import encoders\n"
        f"report = run_relevance(RelevanceOptions(dataset=Path({str(beir_dir)!r}), split='test',"
        " modes=['lexical'], cache_dir=None))\n"
        "print(json.dumps({'loaded': sorted(encoders._LOADED), 'torch': 'torch' in sys.modules,"
        " 'p@1': report['modes']['lexical']['p@1']}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"loaded": [], "torch": False, "p@1": 1.0}


def test_lodo_counts_the_embedding_of_each_sets_requests(tmp_path: Path, beir_dir: Path,  # noqa: F811
                                                         encoder: Encoder) -> None:
    """Audit (bench UX): lodo embedded each set's requests (1,500 MetaTool ones: a minute on 2 cores) and its
    corpus with no count on stderr, where ``bench relevance`` shows both."""
    from skillsearch.bench.cache import BenchEncoder
    from skillsearch.bench.lodo_data import collect_set

    shutil.copytree(beir_dir, tmp_path / "data" / "gorilla")
    (tmp_path / "data" / "gorilla" / "qrels.test.tsv").rename(tmp_path / "data" / "gorilla" / "qrels.dev.tsv")
    shown = Recorder()
    collect_set("gorilla", tmp_path / "data", BenchEncoder(encoder, None), tmp_path / "c", progress=shown)
    assert shown.bars["embedding"] == [len(CORPUS), len(CORPUS)]
    assert shown.bars["gorilla: embedding requests"] == [len(QUERIES), len(QUERIES)]
    assert shown.bars["gorilla: embedding requests' sentences"] == [len(QUERIES), len(QUERIES)]


def _relevance(beir: Path, tmp_path: Path, *extra: str) -> tuple[dict[str, Any], str]:
    from skillsearch.cli import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stderr(err):
        code = main(["--data-dir", str(tmp_path / "d"), "--encoder", "hashing", "-q", "bench", "relevance",
                     "--dataset", str(beir), "--modes", "lexical", "--no-save", "--no-cache", "--json", *extra], out=out)
    assert code == 0, err.getvalue()
    return json.loads(out.getvalue()), err.getvalue()


def test_ranking_overrides_on_a_test_split_are_warned_and_recorded(beir_dir: Path, tmp_path: Path) -> None:  # noqa: F811
    """Audit (bench UX): ``--split test --fusion rrf --semantic-weight 0.4`` ran without a word: tuning on a
    test set is what the project's standards forbid. Not refused (a published configuration may be
    reproduced): one warning line on stderr, and the report records the overrides. Dev, or no override:
    neither."""
    report, said = _relevance(beir_dir, tmp_path, "--fusion", "rrf", "--semantic-weight", "0.4")
    warnings = [line for line in said.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1
    assert "--fusion rrf, --semantic-weight 0.4 on the test split" in warnings[0] and "--split dev" in warnings[0]
    assert report["split"] == "test" and report["test_split_overrides"] == {"fusion": "rrf", "semantic_weight": 0.4}

    report, said = _relevance(beir_dir, tmp_path)
    assert "warning" not in said and report["test_split_overrides"] == {}
    shutil.copy(beir_dir / "qrels.test.tsv", beir_dir / "qrels.dev.tsv")
    report, said = _relevance(beir_dir, tmp_path, "--split", "dev", "--fusion", "rrf")
    assert "warning" not in said and report["test_split_overrides"] == {}


def test_a_report_names_the_commit_its_run_started_on(beir_dir: Path, tmp_path: Path,  # noqa: F811
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Audit (bench UX): the report took its commit when the run ended, so a commit made (or a branch
    checked out) during a long run was named as the code that produced it. Here the checkout the report
    reads is a real repository, and HEAD moves while the run searches."""
    repo = init_repo(tmp_path / "repo")
    (repo / "a.txt").write_text("one\n")
    first = commit(repo, "first")
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(repo))
    moved: list[str] = []

    def progress(total: int, label: str) -> Any:
        if label == "searching":  # mid-run: another commit lands
            (repo / "a.txt").write_text("two\n")
            moved.append(commit(repo, "second"))
        return lambda _n: None

    report = run_relevance(RelevanceOptions(dataset=beir_dir, split="test", modes=["lexical"], cache_dir=None),
                           progress=progress)
    assert moved and moved[0] != first
    assert report["commit"] == first[:12]


def test_a_scripts_report_names_the_commit_its_run_started_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``benchmarks/`` scripts (startup, shutdown, snapshot, vector_updates ...) wrote the commit HEAD was on
    when they wrote their report: each now calls ``run_started()`` first thing, and its report names that
    commit though HEAD moves before it is written."""
    from skillsearch.bench import report

    monkeypatch.setattr(report, "_started", [])  # a fresh process: nothing started yet
    repo = init_repo(tmp_path / "repo")
    (repo / "a.txt").write_text("one\n")
    first = commit(repo, "first")
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(repo))
    assert report.run_started() == first[:12]
    (repo / "a.txt").write_text("two\n")
    second = commit(repo, "second")  # the run measures meanwhile; HEAD moves
    assert report.head_commit() == second[:12] != first[:12]
    text = report.write_script_report(tmp_path / "out", "demo", "Demo", "python demo.py", "x", [{"a": 1}])
    assert f"; commit {first[:12]};" in text.splitlines()[2]
    assert json.loads((tmp_path / "out" / "demo.json").read_text(encoding="utf-8"))["commit"] == first[:12]
    assert report.run_metadata("python demo.py")["commit"] == first[:12]  # the extra= a script passes, too


def test_every_benchmark_script_that_writes_a_report_starts_its_run() -> None:
    """A script added later that writes a report without ``run_started()`` would name the commit at its end."""
    scripts = Path(__file__).resolve().parents[1] / "benchmarks"
    writers = [p for p in sorted(scripts.glob("*.py"))
               if "write_script_report(" in (t := p.read_text(encoding="utf-8")) or "run_metadata(" in t]
    assert len(writers) >= 10
    assert [p.name for p in writers if "run_started()" not in p.read_text(encoding="utf-8")] == []
