"""The relevance harness end to end on a tiny BEIR folder, with the real encoder and real engines."""

from __future__ import annotations

import io
import json
import os
import shutil
from contextlib import redirect_stderr
from pathlib import Path
from typing import Any

import pytest

from skillsearch.bench.beir import load_beir, write_bundle
from skillsearch.bench.lodo_report import lodo_markdown
from skillsearch.bench.metrics import METRICS, evaluate
from skillsearch.bench.relevance import ALL_MODES, RelevanceOptions, run_relevance
from skillsearch.bench.report import write_results, write_script_report
from skillsearch.core.errors import ValidationError
from skillsearch.retrieval.encoder import Encoder

CORPUS = [
    {"_id": "kubeCrashLoop", "title": "kubeCrashLoop", "text": "Debug a Kubernetes pod stuck in CrashLoopBackOff."},
    {"_id": "tls_renew", "title": "Renew TLS certificates", "text": "Renew expiring TLS certificates and check the chain.",
     "tags": ["Security"]},
    {"_id": "pandas clean", "title": "Pandas cleaning", "text": "Clean a messy CSV with pandas: types, nulls, duplicates."},
    {"_id": "Pandas-Clean", "title": "P" * 80, "text": "Profile slow Python code. " + "Measure before optimising. " * 60},
    {"_id": "sqlTuning", "title": "sqlTuning", "text": "Speed up a slow SQL query by reading its plan and adding indexes."},
]
QUERIES = [
    {"_id": "q1", "text": "my pod keeps restarting with CrashLoopBackOff in kubernetes"},
    {"_id": "q2", "text": "certificate expired, renew TLS"},
    {"_id": "q3", "text": "SQL query is slow, which index should I add"},
]
QRELS = [("q1", "kubeCrashLoop"), ("q2", "tls_renew"), ("q3", "sqlTuning")]


@pytest.fixture
def beir_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in CORPUS) + "\n")
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in QUERIES) + "\n")
    rows = "".join(f"{q}\t{d}\t1\n" for q, d in QRELS)
    (folder / "qrels.test.tsv").write_text("query-id\tcorpus-id\tscore\n" + rows)
    return folder


def test_bundle_keeps_catalog_limits_and_maps_back(beir_dir: Path, tmp_path: Path) -> None:
    ds = load_beir(beir_dir, "test")
    slugs = write_bundle(ds, tmp_path / "b.jsonl")
    entries = [json.loads(line) for line in (tmp_path / "b.jsonl").read_text().splitlines()]
    assert sorted(slugs.values()) == sorted(d["_id"] for d in CORPUS)
    assert {"pandas-clean", "pandas-clean-2"} <= set(slugs)
    long = next(e for e in entries if slugs[e["slug"]] == "Pandas-Clean")
    assert len(long["name"]) <= 64 and len(long["description"]) <= 1024
    assert long["instructions"].startswith("P" * 80)
    assert "Measure before optimising." in long["instructions"]


@pytest.mark.parametrize(("file", "text", "said"), [
    ("queries.jsonl", '{"_id": "q1", "text": "clean data"}\n{"text": "no id"}\n',
     "queries.jsonl:2: expected an object with _id, text"),
    ("corpus.jsonl", '{"_id": "d1", "text": "x"}\n{not json\n', "corpus.jsonl:2: not JSON"),
    ("qrels.test.tsv", "query-id\tcorpus-id\tscore\nq1\tPandas-Clean\tlots\n",
     "qrels.test.tsv:2: the score 'lots' is not a number"),
    ("qrels.test.tsv", "query-id\tcorpus-id\tscore\nnobody\tnothing\t1\n", "judges no query of"),
])
def test_a_bad_dataset_file_is_refused_naming_the_file_and_line(beir_dir: Path, file: str, text: str,
                                                                 said: str) -> None:
    """A query without _id was INTERNAL (KeyError), a JSON error named no file, and qrels that judge nothing
    gave a report of zeros (audit)."""
    (beir_dir / file).write_text(text)
    with pytest.raises(ValidationError) as refused:
        load_beir(beir_dir, "test")
    assert said in refused.value.message and refused.value.details["problems"]


def test_a_dataset_folder_that_does_not_exist_is_said_with_its_absolute_path(tmp_path: Path) -> None:
    """``bench relevance --dataset ../shared/data/x`` from a clone without that data listed the three files as
    "missing", as if the folder were there but incomplete; the path it looked at, made absolute, says where."""
    absent = tmp_path / "nowhere" / "sealtools"
    with pytest.raises(ValidationError) as refused:
        load_beir(absent, "test")
    assert "is not a folder" in refused.value.message and str(absent) in refused.value.message
    assert "missing corpus.jsonl" not in refused.value.message


def test_metrics_come_from_trec_eval() -> None:
    qrels = {"a": {"d1": 1}, "b": {"d2": 1, "d3": 1}}
    perfect = evaluate(qrels, {"a": ["d1"], "b": ["d2", "d3"]})
    assert all(perfect[m] == pytest.approx(1.0) for m in METRICS)
    half = evaluate(qrels, {"a": ["x", "d1"]})
    assert half["mrr@10"] == pytest.approx(0.25)
    assert half["p@1"] == 0.0 and half["recall@10"] == pytest.approx(0.5)


def test_relevance_end_to_end(beir_dir: Path, tmp_path: Path, encoder: Encoder) -> None:
    options = RelevanceOptions(dataset=beir_dir, split="test", cache_dir=None, command="test")
    report = run_relevance(options, encoder=encoder)
    assert list(report["modes"]) == list(ALL_MODES)
    assert report["queries"] == 3 and report["corpus"] == len(CORPUS)
    for values in report["modes"].values():
        assert set(values) == set(METRICS)
        assert all(0.0 <= v <= 1.0 for v in values.values())
    assert report["modes"]["hybrid"]["ndcg@10"] == pytest.approx(1.0)
    assert report["modes"]["semantic"]["p@1"] == pytest.approx(1.0)
    paths = write_results(report, tmp_path / "results", "tiny")
    assert [p.suffix for p in paths] == [".md", ".json", ".png"]
    assert json.loads(paths[1].read_text())["modes"]["bm25s"] == report["modes"]["bm25s"]
    assert "| hybrid |" in paths[0].read_text() and paths[2].read_bytes()[:4] == b"\x89PNG"


class Recorder:
    """A progress factory that keeps, per label, the total announced and the ticks counted."""

    def __init__(self) -> None:
        self.bars: dict[str, list[int]] = {}

    def __call__(self, total: int, label: str) -> Any:
        bar = self.bars.setdefault(label, [0, 0])
        bar[0] += total

        def tick(n: int) -> None:
            bar[1] += n

        return tick


def test_a_relevance_run_shows_the_imports_embedding_and_the_query_embedding_as_progress(
        beir_dir: Path, tmp_path: Path, encoder: Encoder) -> None:
    """Audit (bench): only the search had a progress bar; the import (4,076 uncached Seal-Tools APIs: minutes)
    and the queries' embedding (3,000 MetaTool requests: over a minute) printed nothing. Two of the three
    query vectors cached: the count still reaches every text (it stopped at the one encoded)."""
    cache = tmp_path / "cache"
    run_relevance(RelevanceOptions(dataset=beir_dir, split="test", modes=["semantic"], max_queries=2,
                                   cache_dir=cache), encoder=encoder)  # two of three queries cached
    shown = Recorder()
    run_relevance(RelevanceOptions(dataset=beir_dir, split="test", modes=["lexical", "semantic"], cache_dir=cache),
                  encoder=encoder, progress=shown)
    assert shown.bars["embedding"] == [len(CORPUS), len(CORPUS)]
    assert shown.bars["embedding queries"] == [len(QUERIES), len(QUERIES)]
    assert shown.bars["searching"] == [2 * len(QUERIES), 2 * len(QUERIES)]


def test_unknown_mode_is_refused(beir_dir: Path, encoder: Encoder) -> None:
    with pytest.raises(ValueError, match="unknown modes"):
        run_relevance(RelevanceOptions(dataset=beir_dir, split="test", modes=["fancy"], cache_dir=None), encoder)


def test_skills_relevance_reports_scores_abstention_and_the_fitted_decision(tmp_path: Path, encoder: Encoder) -> None:
    """``bench relevance`` on a skills folder (the issue-14 dev layout): scores by group and the decision used."""
    from skillsearch.bench.skills import QUERIES_FILE, SkillsOptions, run_skills
    from skillsearch.catalog.sample import sample_catalog_dir
    from skillsearch.retrieval.confidence import packaged_decision

    folder = tmp_path / "skills"
    for slug in ("kubernetes-crashloop-debugging", "tls-certificate-renewal", "postgres-failover", "linux-disk-full"):
        shutil.copytree(sample_catalog_dir() / "ops" / slug, folder / slug)
    rows = [
        {"_id": "p1", "q": "my pod keeps restarting with CrashLoopBackOff", "want": ["kubernetes-crashloop-debugging"],
         "lang": "en", "style": "task"},
        {"_id": "p2", "q": "tls certificate renewal", "want": ["tls-certificate-renewal"], "lang": "en",
         "style": "keyword"},
        {"_id": "n1", "q": "bake a sourdough loaf with a crisp crust", "want": [], "lang": "en", "style": "negative"},
    ]
    (folder / QUERIES_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    shown = Recorder()
    report = run_skills(SkillsOptions(dataset=folder, cache_dir=None), encoder=encoder, progress=shown)
    assert report["kind"] == "skills-relevance" and report["skills"] == 4 and report["queries"] == 3
    # Audit (bench): the 883 skills' import (minutes) and the queries' embedding showed no progress.
    assert shown.bars["embedding"] == [4, 4] and shown.bars["embedding queries"] == [3, 3]
    english = report["scores"]["english"]
    assert english["n"] == 2 and english["hit@1"] == 1.0 and english["no_match"] == 0
    shipped = packaged_decision(encoder.name)
    assert shipped is not None
    assert report["decision"] == {"version": shipped["version"], "fitted_on": shipped["fitted_on"],
                                  "no_match_below": shipped["no_match_below"]}
    negative = next(a for a in report["answers"] if a["qid"] == "n1")
    assert negative["no_match"] and negative["slugs"] == []


def test_a_script_report_is_one_table_in_markdown_and_its_rows_in_json(tmp_path: Path) -> None:
    rows = [{"rows": 10, "product": "torch", "ms": 1.5}, {"rows": 20, "product": "numpy", "ms": 2.25}]
    text = write_script_report(tmp_path / "out", "demo", "Demo (ms)", "python demo.py", "one thread", rows,
                               text_columns=2, notes=("two rows",), extra={"dims": [1, 2]})
    lines = (tmp_path / "out" / "demo.md").read_text(encoding="utf-8").splitlines()
    assert text.splitlines() == lines and lines[0] == "# Demo (ms)"
    assert "command: `python demo.py`" in lines[2] and lines[2].endswith("; one thread") and lines[4] == "- two rows"
    assert lines[6:] == ["| rows | product | ms |", "| --- | --- | ---: |", "| 10 | torch | 1.5 |", "| 20 | numpy | 2.25 |"]
    saved = json.loads((tmp_path / "out" / "demo.json").read_text(encoding="utf-8"))
    assert saved["command"] == "python demo.py" and saved["dims"] == [1, 2] and saved["rows"] == rows


def test_a_script_report_names_the_commit_date_and_machine_like_every_other_report(tmp_path: Path) -> None:
    """Bench audit: ``startup``, ``shutdown`` and ``embed-throughput`` (written by ``write_script_report``)
    named no commit, and their JSON no date or machine, though docs/benchmarks.md promises every result file
    all four: a number could not be traced to the code that produced it."""
    from skillsearch.bench.report import run_metadata

    expected = run_metadata("python demo.py")
    text = write_script_report(tmp_path, "demo", "Demo", "python demo.py", "x", [{"a": 1}])
    assert f"; commit {expected['commit']}; machine: {expected['machine']};" in text.splitlines()[2]
    saved = json.loads((tmp_path / "demo.json").read_text(encoding="utf-8"))
    assert saved["commit"] == expected["commit"] and saved["machine"] == expected["machine"]
    assert saved["date"][:10] == expected["date"][:10] and "load_average_1m" in saved


def test_a_reports_machine_names_the_cores_widest_vector_instructions(tmp_path: Path) -> None:
    """The int8 scan's kernels differ by instruction set several times over, and two machines called
    "AMD EPYC" differed by AVX-512: every report's machine line says which this one has."""
    from skillsearch.bench.report import SIMD_LEVELS, machine

    cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    flags = set(next(line for line in cpuinfo.splitlines() if line.startswith(("flags", "Features"))).split(":", 1)[1].split())
    widest = next(name for flag, name in SIMD_LEVELS if flag in flags)
    described = machine()
    assert f", {widest})" in described and described.endswith("Linux")
    text = write_script_report(tmp_path, "m", "M", "c", "x", [{"a": 1}])
    assert f"machine: {described};" in text


def test_a_partial_run_never_takes_the_canonical_result_name(beir_dir: Path, tmp_path: Path) -> None:
    """Issue 32: ``bench relevance --max-queries 200`` overwrote ``relevance-<dataset>-test.md``."""
    from skillsearch.cli import main

    out = tmp_path / "results"
    canonical = out / "relevance-tiny-test.md"
    out.mkdir()
    canonical.write_text("the whole split's result\n")
    argv = ["--data-dir", str(tmp_path / "d"), "--encoder", "hashing", "-q", "bench", "relevance", "--dataset",
            str(beir_dir), "--modes", "lexical", "--no-cache", "--out", str(out), "--json"]
    assert main([*argv, "--max-queries", "2"], out=io.StringIO()) == 0
    assert canonical.read_text() == "the whole split's result\n"
    assert sorted(p.name for p in out.iterdir() if p.stem.endswith("partial-2")) == [
        "relevance-tiny-test-partial-2.json", "relevance-tiny-test-partial-2.md", "relevance-tiny-test-partial-2.png"]
    assert main([*argv, "--max-queries", "2", "--canonical"], out=io.StringIO()) == 0  # asked for
    assert canonical.read_text() != "the whole split's result\n"


def _skills_folder(root: Path, slugs: tuple[str, ...], want: str) -> Path:
    from skillsearch.bench.skills import QUERIES_FILE
    from skillsearch.catalog.sample import sample_catalog_dir

    for slug in slugs:
        shutil.copytree(sample_catalog_dir() / "ops" / slug, root / slug)
    row = {"_id": "p1", "q": "tls certificate renewal", "want": [want], "lang": "en", "style": "keyword"}
    (root / QUERIES_FILE).write_text(json.dumps(row) + "\n", encoding="utf-8")
    return root


def test_the_skills_dev_set_scores_only_the_skills_of_the_folder_it_is_given(tmp_path: Path) -> None:
    """Audit 2, item 1: the cached index was keyed by encoder alone and imports never remove skills, so a
    run over a 3-skill folder scored the 882 of an earlier run. Two folders, one cache: each run scores its
    own skills; a skill removed from a folder is gone from its next run."""
    from skillsearch.bench.skills_report import skills_markdown
    from skillsearch.cli import main

    first = _skills_folder(tmp_path / "first", ("kubernetes-crashloop-debugging", "tls-certificate-renewal",
                                                "postgres-failover", "linux-disk-full"), "tls-certificate-renewal")
    second = _skills_folder(tmp_path / "second", ("tls-certificate-renewal",), "tls-certificate-renewal")
    cache = tmp_path / "cache"

    def skills_run(folder: Path) -> dict[str, Any]:
        out = io.StringIO()
        argv = ["--data-dir", str(tmp_path / "d"), "--encoder", "hashing", "-q", "bench", "relevance",
                "--dataset", str(folder), "--cache-dir", str(cache), "--no-save", "--json"]
        assert main(argv, out=out) == 0
        report: dict[str, Any] = json.loads(out.getvalue())
        return report

    assert skills_run(first)["skills"] == 4
    assert skills_run(second)["skills"] == 1
    shutil.rmtree(first / "linux-disk-full")
    report = skills_run(first)
    assert report["skills"] == 3
    assert "linux-disk-full" not in {s for a in report["answers"] for s in a["slugs"]}
    assert "over 3 skills, the folder's own" in skills_markdown(report)
    # one index per folder: the first folder's index from before the removal is gone
    assert len(list((cache / "skills-index").iterdir())) == 2



@pytest.mark.parametrize("flag", [["--max-queries", "10"], ["--modes", "lexical"], ["--canonical"], ["--split", "test"],
                                  ["--split", "all"]])
def test_a_skills_folder_refuses_the_options_its_run_would_ignore(tmp_path: Path, flag: list[str],
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Asking a skills folder for 10 lexical requests ran all 260 in hybrid, for 155 s (audit)."""
    from skillsearch.cli import main

    folder = _skills_folder(tmp_path / "one", ("tls-certificate-renewal",), "tls-certificate-renewal")
    argv = ["--data-dir", str(tmp_path / "d"), "--encoder", "hashing", "-q", "bench", "relevance", "--dataset",
            str(folder), "--cache-dir", str(tmp_path / "cache"), "--no-save", *flag]
    assert main(argv, out=io.StringIO()) == 2
    assert f"argument {flag[0]}: a skills folder's dev set runs every request" in capsys.readouterr().err
    assert not (tmp_path / "cache").exists()  # refused before any work


@pytest.mark.parametrize(("extra", "reason"), [
    (["--sets", "metatool,gorilla"], "fitted on all four sets"), (["--no-save"], "not allowed with --no-save"),
    (["--sets", "metatool,metatool"], "named twice")])
def test_lodo_refuses_to_ship_a_decision_fitted_on_fewer_than_four_sets(
        tmp_path: Path, extra: list[str], reason: str) -> None:
    """Audit 2, item 2: ``--write-decision --sets metatool,gorilla`` rewrote the packaged decisions.json
    (even with --no-save). The refusal is a usage error before any work: the data root does not even exist,
    and the packaged decision file is untouched."""
    from skillsearch.bench.decision import DECISIONS
    from skillsearch.cli import main

    before = DECISIONS.read_bytes()
    err = io.StringIO()
    argv = ["-q", "bench", "lodo", "--data-root", str(tmp_path / "absent"), "--cache-dir", str(tmp_path / "c"),
            "--out", str(tmp_path / "out"), "--write-decision", *extra]
    with redirect_stderr(err):
        assert main(argv, out=io.StringIO()) == 2
    assert reason in err.getvalue()
    assert DECISIONS.read_bytes() == before
    assert not (tmp_path / "out").exists() and not (tmp_path / "c").exists()


def test_lodo_refuses_an_encoder_it_would_not_use_and_its_report_names_the_one_it_used(tmp_path: Path) -> None:
    """Bench audit: ``skillsearch --encoder e5 bench lodo`` ran MiniLM without a word, and the Markdown report
    named no encoder at all."""
    from skillsearch.cli import main

    err = io.StringIO()
    with redirect_stderr(err):
        code = main(["--encoder", "e5", "-q", "bench", "lodo", "--data-root", str(tmp_path / "absent"),
                     "--cache-dir", str(tmp_path / "c"), "--out", str(tmp_path / "out")], out=io.StringIO())
    assert code == 2 and "argument --encoder: the dev sets are searched with minilm" in err.getvalue()
    assert not (tmp_path / "c").exists() and not (tmp_path / "out").exists()
    report = json.loads((Path(__file__).resolve().parent.parent / "benchmarks/results/lodo-dev.json").read_text())
    metric_line = next(line for line in lodo_markdown(report).splitlines() if line.startswith("Metric:"))
    assert metric_line.endswith("; encoder sentence-transformers/all-MiniLM-L6-v2.")


def test_lodo_refuses_a_data_root_that_lacks_a_set_before_any_work(tmp_path: Path, beir_dir: Path) -> None:
    """Audit (bench): a data root without gorilla/ was found only after MetaTool, Seal-Tools and the skills
    set had been imported and searched (minutes), and said as "--dataset names a BEIR folder", an option
    lodo does not have."""
    from skillsearch.cli import main

    root = tmp_path / "data"
    shutil.copytree(beir_dir, root / "metatool")
    (root / "metatool" / "qrels.test.tsv").rename(root / "metatool" / "qrels.dev.tsv")
    err = io.StringIO()
    with redirect_stderr(err):
        code = main(["-q", "bench", "lodo", "--data-root", str(root), "--sets", "metatool,gorilla",
                     "--cache-dir", str(tmp_path / "c"), "--out", str(tmp_path / "out")], out=io.StringIO())
    assert code == 1
    said = err.getvalue()
    assert f"--data-root {root} lacks {root / 'gorilla' / 'corpus.jsonl'}" in said and "metatool/" not in said
    assert not (tmp_path / "c").exists() and not (tmp_path / "out").exists()


def test_lodo_says_which_set_it_imports_before_the_import(tmp_path: Path, beir_dir: Path, encoder: Encoder) -> None:
    """Audit (bench): lodo's first line for a set came after its import (Seal-Tools' 4,076 APIs, the 883
    skills: minutes each when not cached), so a fresh run printed nothing for its first minutes."""
    from skillsearch.bench.cache import BenchEncoder
    from skillsearch.bench.lodo_data import collect_set

    shutil.copytree(beir_dir, tmp_path / "data" / "gorilla")
    (tmp_path / "data" / "gorilla" / "qrels.test.tsv").rename(tmp_path / "data" / "gorilla" / "qrels.dev.tsv")
    said: list[str] = []
    data = collect_set("gorilla", tmp_path / "data", BenchEncoder(encoder, None), tmp_path / "c", said.append)
    assert len(data.qids) == len(QUERIES)
    assert said[0] == f"gorilla: importing {len(CORPUS)} documents ({len(QUERIES)} requests)"


def test_the_relevance_script_refuses_an_unknown_split_as_usage() -> None:
    """Audit (bench): ``python benchmarks/relevance.py nosuch`` ended in a ValidationError traceback."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "benchmarks/relevance.py", "nosuch"], cwd=root, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(root)}, timeout=120)
    assert done.returncode == 2 and "invalid choice: 'nosuch'" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_relevance_script_reads_the_data_root_it_is_given_or_skillsearch_bench_data(tmp_path: Path) -> None:
    """Bench audit: ``python benchmarks/relevance.py`` (``make bench``) read only ``../shared/data`` beside the
    repository: no ``--data-root``, and SKILLSEARCH_BENCH_DATA, which every other bench command reads, ignored."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root), "SKILLSEARCH_BENCH_DATA": str(tmp_path / "from-env")}
    helped = subprocess.run([sys.executable, "benchmarks/relevance.py", "--help"], cwd=root, capture_output=True,
                            text=True, env=env, timeout=120)
    assert helped.returncode == 0 and str(tmp_path / "from-env") in "".join(helped.stdout.split())  # help wraps it
    done = subprocess.run([sys.executable, "benchmarks/relevance.py", "dev", "--data-root", str(tmp_path / "given")],
                          cwd=root, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: VALIDATION_ERROR: " + str(tmp_path / "given" / "metatool"))


@pytest.mark.parametrize(("script", "said"), [
    (["benchmarks/tuning/fusion_dev.py", "nosuch"], "error: VALIDATION_ERROR: "),
    (["benchmarks/tuning/lexical_vs_bm25s.py", "--split", "nosuch", "metatool"], "missing qrels.nosuch.tsv"),
    (["benchmarks/tuning/e5_blend.py", "--data-root", "/nonexistent"], "error: [Errno 2] No such file"),
])
def test_a_tuning_script_says_missing_data_in_one_line(script: list[str], said: str) -> None:
    """Audit (bench): a dataset name, split or data root that is not there ended the tuning scripts in a
    traceback (ValidationError, FileNotFoundError)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, *script], cwd=root, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1"}, timeout=300)
    assert done.returncode == 1 and said in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("argv", "named"), [
    (["relevance", "--max-queries", "0"], "--max-queries: 0 is out of range"),
    (["relevance", "--max-queries", "-5"], "--max-queries: -5 is out of range"),
    (["relevance", "--lexical-instructions-chars", "-1"], "--lexical-instructions-chars: -1 is out of range"),
    (["relevance", "--semantic-weight", "7"], "--semantic-weight: 7 is out of range: give a weight between 0 and 1"),
    (["relevance", "--semantic-weight", "nan"], "--semantic-weight: nan is out of range"),
    (["latency", "--skills", "20", "--queries", "0"], "--queries: 0 is out of range"),
    (["latency", "--skills", "20", "--queries", "-5"], "--queries: -5 is out of range"),
    (["latency", "--skills", "0"], "argument --skills: give numbers of synthetic skills (1 or more)"),
    (["latency", "--skills", "20,-3"], "argument --skills"),
    (["latency", "--skills", "20", "--stand-in-above", "-1"], "--stand-in-above: -1 is out of range"),
])
def test_bench_counts_below_their_least_are_usage_errors_before_any_work(
        tmp_path: Path, beir_dir: Path, argv: list[str], named: str) -> None:
    """Audit 2, item 4: --max-queries 0 ran every query under the canonical name, -5 ran all but five,
    latency --queries -5 ran 23,080 queries and --queries 0 died in the child with a traceback."""
    from skillsearch.cli import main

    where = ["--dataset", str(beir_dir)] if argv[0] == "relevance" else ["--data-root", str(tmp_path / "none")]
    err = io.StringIO()
    with redirect_stderr(err):
        code = main(["-q", "bench", *argv, *where, "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "c")],
                    out=io.StringIO())
    assert code == 2 and named in err.getvalue()
    assert not (tmp_path / "out").exists() and not (tmp_path / "c").exists()


@pytest.mark.parametrize(("extra", "named"), [
    (["--tag", "a/b"], "argument --tag: 'a/b' is not a file-name part"),
    (["--tag", "../up"], "argument --tag"),
    (["--out", "{dataset}/corpus.jsonl/sub"], "argument --out: cannot write results to"),
])
def test_a_bad_out_or_tag_is_refused_before_the_run(tmp_path: Path, beir_dir: Path, extra: list[str],
                                                    named: str) -> None:
    """Audit 2, item 5: these were found only after the whole run, as INTERNAL errors."""
    from skillsearch.cli import main

    extra = [a.replace("{dataset}", str(beir_dir)) for a in extra]
    err = io.StringIO()
    with redirect_stderr(err):
        code = main(["--data-dir", str(tmp_path / "d"), "--encoder", "hashing", "-q", "bench", "relevance",
                     "--dataset", str(beir_dir), "--modes", "lexical", "--cache-dir", str(tmp_path / "c"),
                     "--out", str(tmp_path / "out"), *extra], out=io.StringIO())
    assert code == 2 and named in err.getvalue()
    assert not (tmp_path / "c").exists() and not (tmp_path / "d").exists()  # nothing ran


def test_the_tag_help_names_every_character_a_tag_may_hold() -> None:
    """Audit (bench): ``--tag``'s help listed ". _ -" while tags take ``+`` too (``--tag 1m-minilm+e5``, the
    committed latency stems)."""
    from skillsearch.cli.bench import tag_arg
    from skillsearch.cli.main import build_parser

    assert tag_arg("1m-minilm+e5") == "1m-minilm+e5"
    bench = next(a for a in build_parser()._subparsers._group_actions[0].choices["bench"]._actions
                 if a.dest == "bench_command")
    for name, sub in bench.choices.items():
        tag = next(a for a in sub._actions if "--tag" in a.option_strings)
        assert all(c in (tag.help or "") for c in "._-+"), name


def test_the_dataset_help_names_the_encoder_each_kind_of_folder_is_searched_with() -> None:
    """Audit (bench): the README said "bench uses minilm unless told", but a skills folder's dev set runs with
    the default encoder (``run_skills``: ``make_encoder(settings.encoder)``, minilm+e5), a cold run embedding
    every skill with both models; neither the README nor ``--dataset``'s help said so."""
    from skillsearch.cli.main import build_parser
    from skillsearch.retrieval.encoders import DEFAULT_ENCODER

    bench = next(a for a in build_parser()._subparsers._group_actions[0].choices["bench"]._actions
                 if a.dest == "bench_command")
    dataset = next(a for a in bench.choices["relevance"]._actions if "--dataset" in a.option_strings)
    said = dataset.help or ""
    assert "minilm unless --encoder" in said and f"the default encoder, {DEFAULT_ENCODER}" in said


def test_sigterm_during_a_bench_run_removes_its_temporary_catalog(tmp_path: Path, beir_dir: Path) -> None:
    """Audit (bench): SIGTERM (``timeout``'s default signal) ended a run at once and left its temporary
    catalog in the temp folder (``/tmp/skillsearch-bench-*``; a 1M-skill latency run's is gigabytes). It now
    unwinds as Ctrl-C does and exits 143; under ``--json`` its one object is an ``INTERRUPTED`` error."""
    import signal
    import subprocess
    import sys
    import time

    many = [{"_id": f"q{i}", "text": f"{q['text']} number {i}"} for i in range(20_000) for q in QUERIES[:1]]
    (beir_dir / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in many))
    (beir_dir / "qrels.test.tsv").write_text("query-id\tcorpus-id\tscore\n"
                                             + "".join(f"{q['_id']}\tkubeCrashLoop\t1\n" for q in many))
    temp, err, got = tmp_path / "tmp", tmp_path / "err.txt", tmp_path / "out.json"
    temp.mkdir()
    root = Path(__file__).resolve().parents[1]
    with err.open("w") as stderr, got.open("w") as stdout:
        child = subprocess.Popen(
            [sys.executable, "-m", "skillsearch.cli", "--encoder", "hashing", "bench", "relevance", "--json",
             "--dataset", str(beir_dir), "--modes", "lexical", "--no-save", "--no-cache"], cwd=root, stdout=stdout,
            stderr=stderr, env={**os.environ, "PYTHONPATH": str(root), "TMPDIR": str(temp), "HF_HUB_OFFLINE": "1"})
        try:
            deadline = time.monotonic() + 120
            while "searching" not in err.read_text() and child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            assert child.poll() is None and any(temp.iterdir())  # searching, its catalog in the temp folder
            child.send_signal(signal.SIGTERM)
            assert child.wait(timeout=60) == 143
        finally:
            child.kill()
    assert "terminated" in err.read_text() and "Traceback" not in err.read_text()
    assert list(temp.iterdir()) == []
    # --json: the one object on stdout says why there is no result (it was empty before)
    assert json.loads(got.read_text())["error"] == {
        "code": "INTERRUPTED", "message": "stopped by SIGTERM: the benchmark wrote no result",
        "details": {"signal": "SIGTERM"}}


def test_results_are_written_all_or_none(tmp_path: Path) -> None:
    """A failure while writing (the chart fails, a target is a folder) leaves no partial set and no temporary
    files; the earlier result stays as it was."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "r.md").write_text("earlier\n")

    def failing_chart(_report: Any, _path: Path) -> None:
        raise RuntimeError("chart failed")

    with pytest.raises(RuntimeError, match="chart failed"):
        write_results({"x": 1}, out, "r", lambda _r: "new\n", failing_chart)
    assert sorted(p.name for p in out.iterdir()) == ["r.md"] and (out / "r.md").read_text() == "earlier\n"
    (out / "r.png").mkdir()
    with pytest.raises(IsADirectoryError, match="r.png"):
        write_results({"x": 1}, out, "r", lambda _r: "new\n", lambda _r, p: p.write_bytes(b"png"))
    assert sorted(p.name for p in out.iterdir()) == ["r.md", "r.png"] and (out / "r.md").read_text() == "earlier\n"
    (out / "r.png").rmdir()
    written = write_results({"x": 1}, out, "r", lambda _r: "new\n", lambda _r, p: p.write_bytes(b"png"))
    assert written == [out / "r.md", out / "r.json", out / "r.png"] and (out / "r.md").read_text() == "new\n"
    assert sorted(p.name for p in out.iterdir()) == ["r.json", "r.md", "r.png"]


def test_a_latency_reports_heading_names_its_catalogs_and_encoder() -> None:
    """Audit 2, item 11: the heading was "## latency:" with nothing after it."""
    from skillsearch.bench.report import to_markdown

    report = {"kind": "latency", "encoder": "e", "catalogs": [{"catalog": "1k", "search": {"peak_rss_mb": 1}}], "rows": []}
    assert to_markdown(report).splitlines()[0] == "## latency: 1k (e)"


def test_every_lodo_table_has_as_many_header_cells_as_separator_cells_with_or_without_negatives() -> None:
    """A run without the skills set (no negatives) left the decision's two tables a header cell more than
    their separator (audit). Rendered from the committed report, then with every set's negatives taken out."""
    report = json.loads((Path(__file__).resolve().parent.parent / "benchmarks/results/lodo-dev.json").read_text())

    def without_negatives(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: (0 if k == "negatives" else without_negatives(v)) for k, v in value.items()}
        return [without_negatives(v) for v in value] if isinstance(value, list) else value

    machine_line = next(line for line in lodo_markdown(report).splitlines() if line.startswith("Commit:"))
    # The machine's state as measured, not a fixed claim ("shared by several engineers" was on every run).
    assert f"(1-min load average {report['load_average_1m']} when written)" in machine_line
    for variant in (report, without_negatives(report)):
        lines = lodo_markdown(variant).splitlines()
        separators = [i for i, line in enumerate(lines) if line.startswith("|---") or line.startswith("| ---")]
        assert len(separators) >= 4
        for i in separators:
            assert lines[i - 1].count("|") == lines[i].count("|"), (lines[i - 1], lines[i])
            assert lines[i + 1].count("|") == lines[i].count("|"), (lines[i + 1], lines[i])
