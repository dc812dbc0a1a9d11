"""The latency harness's search child (``skillsearch.bench.latency.serve_check``) on the real sample index and
the real model: every mode is timed, and the fresh hybrid searches are paired with the batching service
embedding the same texts, so the report's ratio compares the two in one run. Times are not compared, only
checked to be taken and consistent."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from skillsearch.bench.latency import _flat_rows, serve_check
from skillsearch.bench.synthetic import stand_in_vectors, write_synthetic_bundle, write_synthetic_bundles

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
