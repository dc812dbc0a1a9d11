"""The latency harness's search child (``skillsearch.bench.serving.serve_check``) on the real sample index and
the real model: every mode is timed, and the fresh hybrid searches are paired with the batching service
embedding the same texts, so the report's ratio compares the two in one run. Times are not compared, only
checked to be taken and consistent."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from skillsearch.bench.cache import BenchEncoder
from skillsearch.bench.latency import StandInEncoder, _flat_rows, run_latency
from skillsearch.bench.serving import serve_check
from skillsearch.bench.synthetic import stand_in_vectors, write_synthetic_bundle, write_synthetic_bundles
from skillsearch.retrieval import int8_kernels
from skillsearch.retrieval.hashing_encoder import HashingEncoder
from skillsearch.retrieval.query_cache import CachedQueryEncoder
from skillsearch.retrieval.routed_encoder import RoutedEncoder

# What this test process runs: a harness run pins only its search child.
CAPABILITIES_AT_START = int8_kernels.numkong_capabilities()
QUERIES = [
    "roll back a bad deploy", "clean a pandas dataframe", "write a changelog entry", "plan a database migration",
    "review a pull request. Check the tests first. Then the docs.", "find flaky tests in CI",
    "detect feature drift", "evaluate a classifier", "draft release notes for the next version",
    "check data quality before training. Flag missing values.", "analyse an A/B test", "set up alerts",
]


def test_serve_check_times_every_mode_and_pairs_each_hybrid_search_with_the_served_encoder(
        sample_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(sample_dir, data)
    out = serve_check(data, QUERIES)
    modes = ("encode_query", "encode_query_texts", "lexical", "semantic", "hybrid", "hybrid (cache hit)",
             "hybrid (query vectors cached)", "encode_query_texts (served threads)",
             "encode_query_texts (served, paired with hybrid)")
    for mode in modes:
        p = out[mode]
        assert 0 < p["p50_ms"] <= p["p95_ms"] <= p["p99_ms"], mode
    # The pairing ran: the batching service embedded each hybrid request's texts beside its search, and the
    # reported ratio is the ratio of the two medians as written (rounded to 3 places, the p50s to 3 as well).
    ratio = out["hybrid_over_paired_encode"]
    assert abs(ratio - out["hybrid"]["p50_ms"] / out["encode_query_texts (served, paired with hybrid)"]["p50_ms"]) < 0.02
    # The repeats are what they say: the same requests answered by the result cache, then the same texts with
    # another limit searched again (lexical and vector stages ran) with their query vectors cached.
    stages = out["stages_p50_ms"]
    assert stages["hybrid (cache hit):result_cache_hit"] == 1.0
    assert {"hybrid:encode_ms", "hybrid:lexical_ms", "hybrid:vector_ms", "hybrid:recheck_ms"} <= set(stages)
    assert {"hybrid (query vectors cached):vector_ms", "hybrid (query vectors cached):lexical_ms"} <= set(stages)
    assert out["documents"] > 0 and out["peak_rss_mb"] > 0 and out["open_s"] > 0
    # The serving process applied a one-skill change and found it; its peak is the footprint with it.
    assert out["update_in_server_ms"] > 0 and out["peak_rss_mb"] >= out["peak_rss_mb_searching"] > 0
    # Every fresh request was embedded by the search itself, no repeat was: the floor and the pairing above
    # left the search's query LRU alone.
    third = len(QUERIES) // 3
    assert out["query_vectors_embedded"] == {"lexical": 0, "semantic": third, "hybrid": len(QUERIES) - 2 * third,
                                             "hybrid (cache hit)": 0, "hybrid (query vectors cached)": 0}
    rows = _flat_rows([{"catalog": "sample", "search": out}])
    assert [r["mode"] for r in rows if r["mode"].startswith("encode_query_texts (served")] == [
        "encode_query_texts (served threads)", "encode_query_texts (served, paired with hybrid)"]


def test_a_large_synthetic_catalog_is_written_in_batches_that_add_up_to_the_whole(tmp_path: Path) -> None:
    whole = write_synthetic_bundle(tmp_path / "whole.jsonl", 25, None).read_text(encoding="utf-8")
    parts = write_synthetic_bundles(tmp_path / "cut.jsonl", 25, None, per_file=10)
    assert [p.name for p in parts] == ["cut-0.jsonl", "cut-1.jsonl", "cut-2.jsonl"]
    assert "".join(p.read_text(encoding="utf-8") for p in parts) == whole


def test_stand_in_vectors_are_unit_nearly_all_distinct_and_the_same_for_the_same_key() -> None:
    pool = np.random.default_rng(1).standard_normal((40, 16)).astype(np.float32)
    keys = np.random.default_rng(2).integers(0, 2**63, 2_000, dtype=np.uint64)
    vectors = stand_in_vectors(pool, keys)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert len(np.unique(vectors.round(6), axis=0)) >= 0.99 * len(keys)  # not ties by the thousand
    np.testing.assert_array_equal(stand_in_vectors(pool, keys[:5]), vectors[:5])


OTHER = ["証明書の期限が切れたので更新したい", "Trouve le commit qui a cassé la compilation",
         "Wie plane ich eine Datenbankmigration ohne Ausfallzeit?"]


def test_with_the_default_encoder_each_route_is_timed_on_its_own_requests_and_every_fresh_one_is_embedded(
        default_sample_dir: Path, tmp_path: Path, encoder: CachedQueryEncoder, e5: CachedQueryEncoder) -> None:
    data = tmp_path / "data"
    shutil.copytree(default_sample_dir, data)
    # The session's loaded models, behind query LRUs of this test's own.
    pair = RoutedEncoder(english=encoder.inner, other=e5.inner)
    out = serve_check(data, [*QUERIES, OTHER[0]], "minilm+e5", [*OTHER, "write tests"], encoder=pair)
    # The English modes take the requests MiniLM answers; the other-language mode those e5 answers.
    assert out["dropped_queries"] == {"not_english_route": 1, "other_languages_not_routed": 1}
    assert out["other_language_queries"] == len(OTHER)
    for mode in ("hybrid", "hybrid (other languages)", "encode_query_texts (other languages, paired)",
                 "vector stage (other languages)"):
        assert 0 < out[mode]["p50_ms"] <= out[mode]["p95_ms"], mode
    ratio = out["hybrid_other_over_paired_encode"]
    assert abs(ratio - out["hybrid (other languages)"]["p50_ms"]
               / out["encode_query_texts (other languages, paired)"]["p50_ms"]) < 0.05
    # Neither the floors nor the pairing went through the routes' LRUs: each fresh request was embedded by
    # its search, on either route, and no repeat was.
    third = len(QUERIES) // 3
    assert out["query_vectors_embedded"] == {
        "lexical": 0, "semantic": third, "hybrid": len(QUERIES) - 2 * third, "hybrid (cache hit)": 0,
        "hybrid (query vectors cached)": 0, "hybrid (other languages)": len(OTHER)}
    modes = [r["mode"] for r in _flat_rows([{"catalog": "sample", "search": out}])]
    assert {"hybrid (other languages)", "vector stage (other languages)"} <= set(modes)


def test_stand_ins_of_a_routed_pair_are_unit_in_each_models_columns() -> None:
    pool = np.random.default_rng(3).standard_normal((30, 12)).astype(np.float32)
    keys = np.arange(500, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    parts = (slice(0, 8), slice(8, 12))
    vectors = stand_in_vectors(pool, keys, parts)
    for cols in parts:
        np.testing.assert_allclose(np.linalg.norm(vectors[:, cols], axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), np.sqrt(2), atol=1e-5)


def test_a_routed_stand_in_encoder_keeps_real_vectors_and_fills_the_rest_per_model(tmp_path: Path) -> None:
    pair = RoutedEncoder(english=HashingEncoder(), other=HashingEncoder())
    stand_in = StandInEncoder(BenchEncoder(pair, tmp_path / "cache"), pool=6)
    texts = [f"skill number {i} renews certificates" for i in range(9)]
    vectors = stand_in.encode_documents(texts)
    assert stand_in.stand_ins == 3
    np.testing.assert_array_equal(vectors[:6], pair.encode_documents(texts[:6]))  # the pool, real
    for cols in pair.columns.values():
        np.testing.assert_allclose(np.linalg.norm(vectors[6:, cols], axis=1), 1.0, atol=1e-5)


def test_the_stand_in_pool_fills_over_several_calls_and_then_nothing_more_is_encoded_for_real(tmp_path: Path) -> None:
    # An index write embeds in chunks (128 skills per call): only the pool's first texts are real, not every
    # call's.
    encoder = HashingEncoder()
    stand_in = StandInEncoder(BenchEncoder(encoder, tmp_path / "cache"), pool=6)
    texts = [f"skill number {i} renews certificates" for i in range(12)]
    chunks = [stand_in.encode_documents(texts[i : i + 4]) for i in range(0, 12, 4)]
    assert stand_in.stand_ins == 6
    assert stand_in.pool is not None and len(stand_in.pool) == 6
    np.testing.assert_array_equal(np.concatenate(chunks)[:6], encoder.encode_documents(texts[:6]))
    assert stand_in.inner.cached_documents(texts[6:]) == [None] * 6  # never encoded


def test_the_harness_builds_updates_and_searches_with_the_default_encoder(tmp_path: Path) -> None:
    # The search process runs the kernel and the numkong capabilities it is given (pinned there, not here).
    report = run_latency(["40"], data_root=None, cache_dir=tmp_path / "cache", queries=24, stand_in_above=20,
                         encoder_name="minilm+e5", scan_kernel="numkong-cdist", numkong_only=["serial"])
    (row,) = report["catalogs"]
    assert row["search"]["scan_kernel"] == "numkong-cdist"
    assert "scan kernel in the search process: numkong-cdist (numkong held to serial)" in " ".join(report["notes"])
    assert int8_kernels.numkong_capabilities() == CAPABILITIES_AT_START
    assert report["encoder_choice"] == "minilm+e5" and report["encoder"].endswith("+intfloat/multilingual-e5-small")
    assert row["skills"] == 40 and row["import_problems"] == 0
    # The child opened the index with the encoder it was built with (it failed on an encoder mismatch before).
    assert row["search"]["encoder_choice"] == "minilm+e5" and row["search"]["documents"] == 40 + 3  # 3 added
    assert row["search"]["hybrid"]["p50_ms"] > 0 and row["update_to_searchable_ms"] > 0


def test_unknown_kernel_or_numkong_names_are_refused_before_anything_is_built() -> None:
    with pytest.raises(ValueError, match="unknown scan kernel 'simsimd'"):
        run_latency(["40"], data_root=None, cache_dir=None, scan_kernel="simsimd")
    with pytest.raises(ValueError, match="unknown numkong capability avx9000"):
        int8_kernels.check(None, ["avx9000"])
    bad = subprocess.run([sys.executable, "-m", "skillsearch.cli", "-q", "bench", "latency", "--skills", "40",
                          "--scan-kernel", "simsimd", "--no-save"], capture_output=True, text=True, timeout=120)
    # A typed error, before any catalog is written.
    assert bad.returncode == 1 and "error: VALIDATION_ERROR: unknown scan kernel 'simsimd'" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_pinning_holds_numkong_to_the_named_kernels_and_the_scan_to_one_kernel() -> None:
    """In a process of its own (pinning lasts for the process): held to ``serial``, numkong reports no other
    kernel; the stage takes ours where its widest path is AVX-512 VNNI or AVX2 and ``cdist`` elsewhere, and
    held to its portable loop (a core with neither) it takes ``cdist``; a pinned kernel wins over the
    choice; an unknown name changes nothing."""
    code = (
        "import json; from skillsearch.retrieval import int8_kernels as k, _int8dots\n"
        "k.pin(numkong_only=['serial'])\n"
        "held = [n for n, on in k.numkong_capabilities().items() if on]\n"
        "chosen, told = k.scan_kernel(), k.described()\n"
        "try:\n    k.pin('numkong-packed', ['avx9000'])\nexcept ValueError as e:\n    refused = str(e)\n"
        "try:\n    k.pin(path='sse')\nexcept ValueError as e:\n    refused_path = str(e)\n"
        "after_refusal = k.scan_kernel()\n"
        "k.pin(path='portable')\n"
        "portable = k.scan_kernel()\n"
        "k.pin('numkong-packed')\n"
        "print(json.dumps([held, chosen, told, refused, refused_path, after_refusal, portable, k.scan_kernel(),\n"
        "                  _int8dots.kernel()]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    held, chosen, told, refused, refused_path, after_refusal, portable, pinned, path = json.loads(out.stdout)
    assert held == ["serial"]
    assert chosen == ("int8dots" if path in ("avx512vnni", "avx2") else "numkong-cdist") == after_refusal
    assert told == (f"int8dots ({path})" if chosen == "int8dots" else chosen)
    assert "our kernel has no 'sse' path on this core" in refused_path and portable == "numkong-cdist"
    assert "unknown numkong capability avx9000" in refused and pinned == "numkong-packed"


def _latency_cli(tmp_path: Path, *argv: str) -> tuple[int, str]:
    import io
    from contextlib import redirect_stderr

    from skillsearch.cli import main

    err = io.StringIO()
    with redirect_stderr(err):
        code = main(["-q", "bench", "latency", "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "c"),
                     *argv], out=io.StringIO())
    return code, err.getvalue()


def test_latency_refuses_a_data_root_without_the_requests_or_texts_it_times(tmp_path: Path) -> None:
    """Audit 2, item 3: a wrong --data-root silently timed generated requests over a built-in sentence pool.
    Refused before anything is built, naming what is missing and what the default is relative to."""
    code, err = _latency_cli(tmp_path, "--skills", "50", "--queries", "9", "--data-root", str(tmp_path / "nowhere"))
    assert code == 1 and f"{tmp_path / 'nowhere'}/ (no such folder)" in err
    assert "relative to the current folder" in err
    root = tmp_path / "data"
    (root / "metatool").mkdir(parents=True)
    (root / "metatool" / "queries.jsonl").write_text('{"_id": "q", "text": "renew a certificate"}\n')
    code, err = _latency_cli(tmp_path, "--skills", "50,real", "--data-root", str(root))
    assert code == 1
    assert str(root / "sealtools" / "queries.jsonl") in err and "*/corpus.jsonl" in err and "skills-catalog" in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "c").exists()
    (root / "sealtools").mkdir()
    (root / "sealtools" / "queries.jsonl").write_text('{"_id": "q", "text": "book a flight"}\n')
    (root / "sealtools" / "corpus.jsonl").write_text('{"_id": "d", "text": "Books flights."}\n')
    from skillsearch.bench.latency import missing_data

    assert missing_data(root, ["50"]) == []
    assert missing_data(root, ["real"]) == [f"{root / 'skills-catalog'}/ (the real catalog)"]
