"""The vector stage of a large snapshot (``retrieval/vector_stage.py``): the int8 scan with exact re-scoring
finds the exact scan's top 100, returns exact float32 cosines, filters by grant inside (never an invisible
row, ``k`` rows whenever ``k`` visible ones exist, however few and scattered), and keeps doing so for
several query vectors, a route's columns, language centering, one-skill updates and a reopened index whose
matrix is a file mapping."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from skillsearch.bench.synthetic import stand_in_vectors
from skillsearch.core.errors import IndexNotReadyError
from skillsearch.retrieval import compact as compact_module
from skillsearch.retrieval import int8_kernels, vector_files, vector_saves, vector_stage, vector_updates, vectors
from skillsearch.retrieval.compact import Compact, nibbles, quantise, quantise_together
from skillsearch.retrieval.cosines import max_cosines, zero_tiny
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.int8_kernels import KERNELS, scan_kernel
from skillsearch.retrieval.key_index import KeyIndex
from skillsearch.retrieval.query_codes import derived_first
from skillsearch.retrieval.routing import RequestRoute
from skillsearch.retrieval.vector_scan import (
    INT4_FROM,
    SPLIT_FROM,
    Shift,
    first_pass,
    int4_scan,
    rescan,
    scan,
)
from skillsearch.retrieval.vector_stage import BOUND_SLACK, COMPACT_FROM, _depth_and_near, hide, nearest_compact, select_kept
from skillsearch.retrieval.vectors import VectorRow, VectorSnapshot

# Past the int8 copy's threshold, the background's sample size and the two-thread split.
ROWS = 42_000
REQUESTS = [
    "roll back a bad deploy", "clean a pandas dataframe", "review a pull request for security problems",
    "plan a database migration with a rollback", "write release notes from the changelog",
    "find the slowest endpoint in production. Profile it and report the hot spots.",
    "translate the user interface strings", "rotate the TLS certificates before they expire",
]
POOL_TEXTS = [
    "Deploy a service to Kubernetes with a rolling update", "Roll back a failed release to the last good version",
    "Clean and type a pandas DataFrame from a CSV export", "Review code changes for security vulnerabilities",
    "Plan a PostgreSQL schema migration with zero downtime", "Write a changelog and release notes",
    "Profile a slow API endpoint and find hot paths", "Translate application strings with gettext",
    "Renew and rotate TLS certificates automatically", "Summarise meeting notes into action items",
    "Build a React component library with Storybook", "Tune a machine learning model's hyperparameters",
    "Audit a website for accessibility problems", "Write unit tests for a Python package",
    "Set up continuous integration on GitHub Actions", "Analyse server logs to find the root cause of an outage",
    "Design a REST API with OpenAPI", "Back up and restore a database", "Optimise SQL queries with indexes",
    "Scrape a website politely and store the pages", "Draft a marketing email campaign",
    "Monitor services with Prometheus alerts", "Manage secrets in a vault", "Create a Terraform module",
]


def grant_of(i: int) -> str:
    # A grant whose 38 rows are scattered over the whole matrix, one with 150, and the rest.
    return "team:few" if i % 1_129 == 7 else "team:some" if i % 280 == 3 else "team:all"


@pytest.fixture(scope="module")
def world(encoder: Encoder) -> tuple[VectorSnapshot, list[np.ndarray]]:
    """A snapshot past ``COMPACT_FROM`` rows of real MiniLM vectors and stand-ins mixed from them, and the
    query vectors of real requests as search embeds them (several for a request of several sentences)."""
    pool = encoder.encode_documents(POOL_TEXTS)
    keys = np.random.default_rng(5).integers(0, 2**63, ROWS, dtype=np.uint64)
    matrix = np.concatenate([pool, stand_in_vectors(pool, keys[len(pool):])])
    rows = [VectorRow(f"sk_{i}", grant_of(i), "knowledge", (), f"d{i}", f"e{i}") for i in range(ROWS)]
    snapshot = VectorSnapshot.build(encoder.dim, matrix, rows)
    queries = [np.atleast_2d(encoder.encode_query(r)) for r in REQUESTS]
    queries.append(np.asarray(encoder.encode_query_parts(REQUESTS[5], ["find the slowest endpoint in production.",
                                                                       "Profile it and report the hot spots."])))
    return snapshot, queries


def exact(snapshot: VectorSnapshot, queries: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    scores = max_cosines(np.asarray(snapshot.matrix), queries)
    if mask is not None:
        scores[~mask] = -np.inf
    return scores


def recall_at(got: np.ndarray, scores: np.ndarray, k: int) -> float:
    """Tie-aware: a returned row counts when its exact score is at least the exact k-th best."""
    kth = np.sort(scores[np.isfinite(scores)])[-k]
    return float((scores[got[:k]] >= kth - 1e-6).mean())


def test_a_large_snapshot_scans_its_int8_copy_and_finds_the_exact_top_100(world: tuple[VectorSnapshot, list[np.ndarray]]
                                                                           ) -> None:
    """The scan reads the int8 copy (from ``INT4_FROM`` rows with our kernel's VNNI path, its int4 copy
    first: the next tests). The top 100 are the exact ones, with exact cosines, and every other row's
    approximate score lies within its error margin."""
    snapshot, queries = world
    compact = snapshot.compact
    assert compact is not None and compact.codes.dtype == np.int8
    two_tiers = first_pass(compact, None, queries[0]) is not None
    assert two_tiers == (ROWS >= INT4_FROM and int8_kernels.scans_int4(scan_kernel()))
    recalls = []
    for q in queries:
        want = exact(snapshot, q)
        rows, scores = snapshot.nearest(q, 100)
        assert rows.size == 100 and len(set(rows.tolist())) == 100
        recalls.append(recall_at(rows, want, 100))
        # What fusion sees is the exact float32 cosine, best first.
        np.testing.assert_allclose(scores[rows], want[rows], rtol=0, atol=1e-6)
        assert (np.diff(scores[rows]) <= 1e-7).all()
        # Every other row's approximate score is within its error margin: int8's (under 0.02), or int4's.
        first = first_pass(compact, None, np.ascontiguousarray(q, dtype=np.float32))
        if first is None:
            assert np.abs(scores - want).max() < 0.02
        else:
            approximate, margins = first
            assert (np.abs(approximate - want) <= margins.every()).all()
            assert np.abs(scores - want).max() < margins.widest()
    assert min(recalls) == 1.0


@pytest.mark.parametrize("grant", [None, "team:few", "team:some"])
def test_two_tiers_keep_the_exact_top_100_and_filter_inside(world: tuple[VectorSnapshot, list[np.ndarray]],
                                                            grant: str | None) -> None:
    """The int4 tier (``int4_scan``, run here whatever the core; the stage takes it from ``INT4_FROM`` rows on
    our VNNI path) keeps every row within its own margin of its exact best cosine; ``select_kept`` re-scores
    in int8 only the rows whose upper bound reaches the 100th best lower bound among the visible ones, and
    returns the exact top 100 of the rows the caller may see (every one of them when fewer), with exact
    cosines, the named rows exact too and hidden rows ``-inf``."""
    snapshot, queries = world
    compact = snapshot.compact
    assert compact is not None
    matrix = np.asarray(snapshot.matrix)
    mask = None if grant is None else snapshot.mask([grant])
    named = np.asarray([11, 20_000, ROWS - 1], dtype=np.int64)
    for q in queries:
        q = np.ascontiguousarray(q, dtype=np.float32)
        want = exact(snapshot, q)
        approximate, margins = int4_scan(compact, None, q)
        assert (np.abs(approximate - want) <= margins.every()).all()
        assert margins.widest() == margins.every().max() < 0.1  # far wider than int8's, narrower than the spread
        rows, scores = select_kept(matrix, compact, None, approximate.copy(), margins, q, 100, mask, named)
        visible = want if mask is None else np.where(mask, want, -np.inf)
        count = min(100, int(np.isfinite(visible).sum()))
        assert rows.size == count and len(set(rows.tolist())) == count
        assert recall_at(rows, visible, count) == 1.0
        np.testing.assert_allclose(scores[rows], want[rows], rtol=0, atol=1e-6)
        seen = named if mask is None else named[mask[named]]
        np.testing.assert_allclose(scores[seen], want[seen], rtol=0, atol=1e-6)
        if mask is not None:
            assert mask[rows].all() and np.isneginf(scores[~mask]).all()


@pytest.mark.parametrize("grant", [None, "team:some"])
def test_two_tiers_rescore_exactly_the_rows_whose_upper_bound_reaches_the_100th_lower_bound(
        world: tuple[VectorSnapshot, list[np.ndarray]], grant: str | None) -> None:
    """``select_kept`` scores again (int8, then float32 for the chosen) exactly the visible rows whose int4
    score plus margin reaches the 100th largest score minus margin among the visible rows, written out here
    over every row; every other row keeps its int4 score."""
    snapshot, queries = world
    compact = snapshot.compact
    assert compact is not None
    matrix = np.asarray(snapshot.matrix)
    mask = None if grant is None else snapshot.mask([grant])
    for q in queries:
        q = np.ascontiguousarray(q, dtype=np.float32)
        approximate, margins = int4_scan(compact, None, q)
        visible = approximate if mask is None else np.where(mask, approximate, -np.inf)
        lower = np.sort(visible - margins.every())[::-1][99]
        want_kept = np.flatnonzero(visible + margins.every() >= lower)
        int8_scores = scan(compact, None, q, threads=1)[0]
        _, scores = select_kept(matrix, compact, None, approximate.copy(), margins, q, 100, mask)
        rest = np.setdiff1d(np.flatnonzero(np.isfinite(visible)), want_kept)
        np.testing.assert_array_equal(scores[rest], approximate[rest])
        redone = (scores[want_kept] == int8_scores[want_kept]) | np.isclose(
            scores[want_kept], exact(snapshot, q)[want_kept], rtol=0, atol=1e-6)
        assert redone.all() and want_kept.size > 100


def test_two_tiers_read_an_updated_rows_new_codes(world: tuple[VectorSnapshot, list[np.ndarray]]) -> None:
    """After a one-skill update the row's codes live in the int8 patch (the int4 copy of the shared part is
    stale there): the int4 tier scores the patch from int8, so the changed row is found with its new cosine
    and the int4 copy is made once for the part that both snapshots share."""
    snapshot, queries = world
    target = 30_001
    row = snapshot.rows[target]
    updated = snapshot.apply([(VectorRow(row.skill_id, row.grant, row.kind, row.tags, "d-new", "e-new"),
                               queries[0][0])], [])
    compact, before = updated.compact, snapshot.compact
    assert compact is not None and before is not None and compact.patch_rows.tolist() == [target]
    assert compact.parts[0] is before.parts[0]
    q = np.ascontiguousarray(queries[0], dtype=np.float32)
    want = exact(updated, q)
    approximate, margins = int4_scan(compact, None, q)
    every = margins.every()
    assert (np.abs(approximate - want) <= every).all()
    # The patch's row, scored from its int8 codes, has the int8 scan's margin, far under its int4 one.
    assert every[target] == np.float32(margins.patch) < compact.int4_margins[target]
    assert margins.widest() >= every.max()
    rows, scores = select_kept(np.asarray(updated.matrix), compact, None, approximate, margins, q, 100, None)
    assert rows[0] == target and abs(float(scores[target]) - float(want[target])) < 1e-6
    assert recall_at(rows, want, 100) == 1.0
    assert nibbles(compact.parts[0]) is nibbles(before.parts[0])


def test_a_rescan_gives_the_rows_it_reads_the_scans_own_numbers(world: tuple[VectorSnapshot, list[np.ndarray]]
                                                                 ) -> None:
    """``rescan`` (the kept rows read in place, ``_int8dots.best`` with ``at``) writes into ``scores`` exactly
    what ``scan`` gives those rows, for one vector and for a request whose first vector is derived from its
    sentences, leaves every other row alone (the patch's rows included: ``int4_scan`` scored them in int8
    already), and returns the margin a scan of just those rows would have."""
    snapshot, queries = world
    target = 30_001
    row = snapshot.rows[target]
    updated = snapshot.apply([(VectorRow(row.skill_id, row.grant, row.kind, row.tags, "d-new", "e-new"),
                               queries[0][0])], [])
    compact = updated.compact
    assert compact is not None and compact.patch_rows.tolist() == [target]
    rows = np.asarray([0, 5, 7, 999, target, 20_000, ROWS - 1], dtype=np.int64)
    several = [q for q in queries if len(q) >= 3 and derived_first(np.ascontiguousarray(q, np.float32))]
    assert several, "the world's requests include one with its first vector derived"
    for q in (queries[0][:1], several[0]):
        q = np.ascontiguousarray(q, dtype=np.float32)
        want, _ = scan(compact, None, q, threads=1)
        scores = np.full(len(compact), np.nan, dtype=np.float32)
        scores[target] = want[target]  # as int4_scan leaves the patch's rows
        err = rescan(compact, None, rows, scores, q)
        np.testing.assert_array_equal(scores[rows], want[rows])
        assert np.isnan(np.delete(scores, rows)).all()
        sub = Compact.of_codes(compact.rows(rows), compact.scales[rows])
        assert err == scan(sub, None, q, threads=1)[1]


def test_the_stage_reads_int4_first_only_where_it_was_measured_to_pay() -> None:
    """``first_pass`` takes the int4 tier from ``INT4_FROM`` rows, over one part, without a shift, with our
    kernel on its VNNI path; elsewhere None (int8 only)."""
    rng = np.random.default_rng(3)
    big = Compact.of_codes(rng.integers(-127, 128, (INT4_FROM, 384), dtype=np.int8),
                           np.full(INT4_FROM, 1 / 127 / 20, dtype=np.float32))
    small = Compact.of_codes(np.ascontiguousarray(big.parts[0][: INT4_FROM - 1]), big.scales[: INT4_FROM - 1])
    q = rng.standard_normal((1, 384)).astype(np.float32)
    q /= np.linalg.norm(q)
    ours = int8_kernels.scans_int4(scan_kernel())
    assert (first_pass(big, None, q) is not None) == ours
    assert first_pass(small, None, q) is None
    assert first_pass(big, None, q, kernel="numkong-cdist") is None
    assert first_pass(big, None, q, Shift(np.zeros((1, 1), np.float32), np.zeros(INT4_FROM, np.int64))) is None
    wide = Compact.of_codes(np.hstack([big.parts[0], big.parts[0]]), big.scales)
    assert first_pass(wide, None, np.hstack([q, q]) / np.sqrt(2, dtype=np.float32)) is None  # two parts
    if ours:
        scores, margins = first_pass(big, None, q) or (None, None)
        assert scores is not None and margins is not None
        assert scores.shape == margins.every().shape == (INT4_FROM,)


def test_the_rows_the_caller_names_get_exact_cosines_too(world: tuple[VectorSnapshot, list[np.ndarray]]) -> None:
    snapshot, queries = world
    named = np.asarray([11, 20_000, ROWS - 1], dtype=np.int64)  # lexical candidates far from the vector's top
    _, scores = snapshot.nearest(queries[0], 10, exact_rows=named)
    np.testing.assert_allclose(scores[named], exact(snapshot, queries[0])[named], rtol=0, atol=1e-6)


@pytest.mark.parametrize("grant", ["team:few", "team:some"])
def test_grant_filtering_happens_inside_the_stage(world: tuple[VectorSnapshot, list[np.ndarray]], grant: str) -> None:
    snapshot, queries = world
    mask = snapshot.mask([grant])
    visible = sum(grant_of(i) == grant for i in range(ROWS))
    assert int(mask.sum()) == visible and (visible < 100) == (grant == "team:few")
    for q in queries:
        for k in (10, 100):
            rows, scores = snapshot.nearest(q, k, mask)
            assert mask[rows].all()  # a row the caller may not see never comes back
            assert rows.size == min(k, visible)  # k rows whenever k visible rows exist
            assert np.isneginf(scores[~mask]).all()
            assert recall_at(rows, exact(snapshot, q, mask), rows.size) == 1.0
            np.testing.assert_allclose(scores[rows], exact(snapshot, q)[rows], atol=1e-6)


def test_a_scan_split_over_threads_scores_and_filters_exactly_as_one_thread(
    world: tuple[VectorSnapshot, list[np.ndarray]],
) -> None:
    """Two threads share the int8 scan (each its own rows) and come to the same bits as one thread, with
    several query vectors and with language centering; the branch-free filter hides the same rows as
    boolean indexing and nothing else."""
    snapshot, queries = world
    compact = snapshot.compact
    assert compact is not None and len(compact) >= SPLIT_FROM
    groups = (np.arange(ROWS) % 3).astype(np.int64)
    for q in (queries[0], queries[-1]):
        for shift in (None, Shift(np.full((len(q), 3), 0.01, np.float32) * np.arange(3), groups)):
            one, err_one = scan(compact, None, q, shift, threads=1)
            for threads in (2, 3):
                split, err = scan(compact, None, q, shift, threads)
                assert err == err_one and np.array_equal(split, one)
    mask = snapshot.mask(["team:some"])
    hidden = one.copy()
    hide(hidden, mask)
    want = one.copy()
    want[~mask] = -np.inf
    assert np.array_equal(hidden, want) and np.isfinite(hidden[mask]).all()
    for threads in (1, 2):
        rows, scores = nearest_compact(snapshot.matrix, compact, None, queries[-1], 100, mask, threads=threads)
        assert mask[rows].all() and rows.size == 100 and np.isneginf(scores[~mask]).all()


def test_every_kernel_scores_several_query_vectors_as_the_exact_integer_products(
    world: tuple[VectorSnapshot, list[np.ndarray]],
) -> None:
    """Several query vectors go through our own ``_int8dots`` (on AVX-512 VNNI or AVX2 cores) or numkong's
    ``cdist`` (``scan_kernel``), or numkong's packed kernel when pinned; all three come to the same bits, which are
    each row's best exact integer product times the two scales, over all the columns and over one route's
    part. An unknown kernel name is an error."""
    snapshot, queries = world
    compact = snapshot.compact
    assert compact is not None
    several = np.vstack([queries[0], queries[-1][1:]])  # three vectors, none derived from the others
    q_codes, q_scales = quantise_together(several)
    wide = Compact.of_codes(np.hstack([compact.codes, compact.codes[::-1]]), compact.scales)
    for c, columns in ((compact, None), (wide, None), (wide, slice(snapshot.dim, 2 * snapshot.dim))):
        codes = c.codes if columns is None else c.codes[:, columns]
        q = several if columns is None else np.hstack([several, several])[:, columns]
        if columns is None and c is wide:
            q = np.hstack([several, several]) / np.sqrt(2, dtype=np.float32)
        q_codes, q_scales = quantise_together(np.ascontiguousarray(q, dtype=np.float32))
        best = (codes.astype(np.int64) @ q_codes.T.astype(np.int64)).max(axis=1).astype(np.float32)
        want = best * q_scales[0] * c.scales
        for threads in (1, 2):
            for kernel in KERNELS:
                got, _ = scan(c, columns, q, threads=threads, kernel=kernel)
                np.testing.assert_array_equal(got, want, err_msg=kernel)
    assert scan_kernel() in KERNELS
    with pytest.raises(ValueError, match="unknown scan kernel 'simsimd'"):
        scan(compact, None, several, kernel="simsimd")


def test_our_kernel_scores_a_language_shift_as_the_numpy_steps_do(world: tuple[VectorSnapshot, list[np.ndarray]]
                                                                    ) -> None:
    """Under a language shift the stage's scan on our kernel (``best_shifted``: each product scaled and shifted
    in the kernel) gives the same numbers as the products shifted by numpy (numkong's ``cdist``): the same bits
    for vectors scanned each on its own, and within float32 rounding of the sum for a first vector derived
    from its sentences (our kernel sums the exact integers); more than 8 vectors take numpy's steps."""
    snapshot, queries = world
    compact = snapshot.compact
    assert compact is not None
    groups = (np.arange(ROWS) % 3).astype(np.int64)
    rng = np.random.default_rng(12)
    many = rng.standard_normal((9, snapshot.dim)).astype(np.float32)
    many /= np.linalg.norm(many, axis=1, keepdims=True)
    for q in (queries[0][:1], queries[0], queries[-1], many):
        q = np.ascontiguousarray(q, dtype=np.float32)
        shift = Shift((rng.standard_normal((len(q), 3)) * 0.05).astype(np.float32), groups)
        ours, err = scan(compact, None, q, shift, threads=2, kernel="int8dots")
        theirs, err_theirs = scan(compact, None, q, shift, threads=2, kernel="numkong-cdist")
        assert err == err_theirs
        if derived_first(q) is None:
            np.testing.assert_array_equal(ours, theirs)
        else:
            np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-6)


def test_a_requests_first_vector_is_derived_from_its_sentences_within_the_margin(
    world: tuple[VectorSnapshot, list[np.ndarray]],
) -> None:
    """Search embeds a request of several sentences as the sentences' normalised sum, then each sentence; the
    scan derives the sum's scores from the sentences' columns instead of scanning it. Every row's approximate
    score stays within the scan's margin of its exact best cosine over all the vectors (the first included),
    with either kernel, one thread or two, with language centering, and for sentences pointing apart (a
    small sum, a wider margin); a first vector embedded on its own is scanned as before."""
    snapshot, queries = world
    compact = snapshot.compact
    assert compact is not None
    matrix = np.asarray(snapshot.matrix)
    parts = queries[-1]
    derived = derived_first(parts)
    assert len(parts) == 3 and derived is not None and derived[1] < 1e-6  # the real encoder's request
    rng = np.random.default_rng(4)
    apart = rng.standard_normal((6, snapshot.dim)).astype(np.float32)
    apart[3:] = -apart[:3] + 0.3 * apart[3:]  # sentences nearly opposite: their sum is short
    apart /= np.linalg.norm(apart, axis=1, keepdims=True)
    first = apart.sum(axis=0)
    spread_out = np.vstack([first / np.linalg.norm(first), apart]).astype(np.float32)
    on_its_own = np.vstack([queries[0], parts[1:]]).astype(np.float32)
    assert derived_first(spread_out) is not None and derived_first(on_its_own) is None
    groups = (np.arange(ROWS) % 3).astype(np.int64)
    centroids = rng.standard_normal((3, snapshot.dim)).astype(np.float32) * 0.05
    margins = {}
    for name, q in (("parts", parts), ("apart", spread_out), ("own", on_its_own)):
        for shift in (None, Shift(np.asarray(q @ centroids.T, np.float32), groups)):
            want = max_cosines(matrix, q) if shift is None else (q @ matrix.T - shift.by[:, groups]).max(axis=0)
            for threads, kernel in ((1, "int8dots"), (2, "numkong-packed"), (2, "numkong-cdist"), (2, None)):
                got, err = scan(compact, None, q, shift, threads=threads, kernel=kernel)
                assert np.abs(got - want).max() <= err, (name, threads, kernel)
                margins[name] = err
            rows, scores = nearest_compact(matrix, compact, None, q, 100, None, shift=shift)
            assert recall_at(rows, want, 100) == 1.0
            np.testing.assert_allclose(scores[rows], want[rows], atol=1e-5)
    assert margins["apart"] > margins["parts"]


def test_a_routes_columns_and_language_centering_scan_the_same_way(world: tuple[VectorSnapshot, list[np.ndarray]]
                                                                   ) -> None:
    snapshot, queries = world
    rng = np.random.default_rng(9)
    dim = snapshot.dim
    # A routed matrix: this model's columns beside another's; the route scores only its own.
    other = np.ascontiguousarray(np.roll(np.asarray(snapshot.matrix), 1, axis=0))
    wide = np.concatenate([other, np.asarray(snapshot.matrix)], axis=1)
    routed = VectorSnapshot.build(2 * dim, wide, list(snapshot.rows))
    columns = slice(dim, 2 * dim)
    centroids = rng.standard_normal((3, dim)).astype(np.float32) * 0.05
    groups = (np.arange(ROWS) % 3).astype(np.int64)
    for q in queries[:4] + queries[-1:]:
        for shift in (None, Shift(np.asarray(q @ centroids.T, np.float32), groups)):
            want = max_cosines(wide[:, columns], q) if shift is None else \
                (q @ wide[:, columns].T - shift.by[:, groups]).max(axis=0)
            rows, scores = routed.nearest(q, 100, columns=columns, shift=shift)
            assert recall_at(rows, want, 100) >= 0.98
            np.testing.assert_allclose(scores[rows], want[rows], atol=1e-5)


def test_a_routes_document_languages_come_from_the_int8_copy_as_the_exact_argmax_gives_them(
    world: tuple[VectorSnapshot, list[np.ndarray]], tmp_path: Path, encoder: Encoder, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A centering route's document languages (each row's nearest reference vector) are the argmax of the
    exact products (float64 over the float32 values, :func:`_argmax`) over the route's columns, row for row,
    close calls included, however many rows each call holds; an opened large index computes them from its
    int8 copy and the few close rows it reads by ``pread``, mapping no page of its float32 matrix (the argmax
    over the matrix read all of it into the process: 3 GB at 1M rows of ``minilm+e5``)."""
    snapshot, _ = world
    dim = snapshot.dim
    matrix = np.asarray(snapshot.matrix)
    wide = np.concatenate([np.roll(matrix, 1, axis=0), matrix], axis=1)
    routed = VectorSnapshot.build(2 * dim, wide, list(snapshot.rows))
    rng = np.random.default_rng(8)
    # Four languages' reference vectors, two of them close together: many rows are near ties.
    reference = rng.standard_normal((4, dim)).astype(np.float32)
    reference[3] = reference[2] + 0.02 * rng.standard_normal(dim).astype(np.float32)
    reference /= np.linalg.norm(reference, axis=1, keepdims=True)
    columns = slice(dim, 2 * dim)
    want = _argmax(wide[:, columns], reference)
    assert np.unique(want).size == 4
    compact = routed.compact
    assert compact is not None
    for kernel in KERNELS:  # whichever kernel approximates, the close calls make the answer exact
        np.testing.assert_array_equal(vector_stage.nearest_of(wide[:, columns], compact, columns, reference, kernel),
                                      want, err_msg=kernel)
    np.testing.assert_array_equal(routed.nearest_of(reference, columns), want)
    np.testing.assert_array_equal(routed.nearest_of(reference[:, :dim], slice(0, dim)),
                                  _argmax(wide[:, :dim], reference))
    vector_saves.save(routed, tmp_path)
    monkeypatch.setattr(vectors, "PREAD_FROM_BYTES", 0)
    # The close rows (thousands: references 2 and 3 nearly agree) are read and re-scored in many chunks.
    monkeypatch.setattr(vector_stage, "RESCORE_ROWS", 100)
    loaded = vector_saves.load(tmp_path)
    calibration = {"centering": {"reference": reference.tolist(), "centroids": (reference * 0.1).tolist()}}
    route = RequestRoute("other", encoder, loaded.matrix[:, columns], calibration, columns, loaded.nearest_of)
    matrix_file = (tmp_path / "vectors.npy").resolve()
    before = mapped_kib(matrix_file)
    codes = route.language_codes
    assert mapped_kib(matrix_file) - before <= 64
    assert codes is not None
    np.testing.assert_array_equal(codes, want)
    # Carried to the next snapshot: the kept rows' languages as they were, the batch's computed from their vectors.
    row = snapshot.rows[11]
    moved_to = np.concatenate([np.roll(reference[1], 5), reference[1]])
    batch = [(VectorRow(row.skill_id, row.grant, row.kind, row.tags, "d", "e"), moved_to),
             (VectorRow("sk_new", "team:all", "knowledge", (), "dn", "en"), np.concatenate([reference[0], reference[3]]))]
    updated = loaded.apply(batch, ["sk_3"])
    assert len(updated.nearest_cache) == 1  # carried, not computed again
    again = updated.nearest_of(reference, columns)
    np.testing.assert_array_equal(again, _argmax(np.asarray(updated.matrix)[:, columns], reference))
    assert again[10] == 1 and again[ROWS - 1] == 3  # row 11 moved up by one; the new row last
    plain = RequestRoute("other", encoder, loaded.matrix[:, columns], calibration, columns)
    np.testing.assert_array_equal(plain.language_codes, want)  # the argmax over the matrix, as before
    assert mapped_kib(matrix_file) - before > 64


def _argmax(rows: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Each row's nearest reference vector by its exact products (float64: a float32 product's rounding
    depends on how many rows the BLAS call holds, which can flip a near tie)."""
    return np.argmax(rows.astype(np.float64) @ reference.astype(np.float64).T, axis=1)


def test_a_routed_index_scans_each_routes_int8_columns_as_one_contiguous_part(
    world: tuple[VectorSnapshot, list[np.ndarray]], tmp_path: Path,
) -> None:
    """A routed index's rows hold both models' columns; its int8 copy keeps each model's columns as one
    contiguous part, so a route scans an array, not a strided half (twice as slow from some 30k rows). A
    scan of all the columns adds the parts' products, and a slice that cuts a part still scores exactly; the
    parts survive a save and a reopen."""
    snapshot, queries = world
    dim = snapshot.dim
    matrix = np.asarray(snapshot.matrix)
    wide = np.concatenate([np.roll(matrix, 1, axis=0), matrix], axis=1)
    routed = VectorSnapshot.build(2 * dim, wide, list(snapshot.rows))
    compact = routed.compact
    assert compact is not None and len(compact.parts) == 2
    assert all(p.flags.c_contiguous and p.shape == (ROWS, dim) for p in compact.parts)
    np.testing.assert_array_equal(compact.codes, quantise(wide)[0])
    [(part, cols)] = compact.pieces(slice(dim, 2 * dim))
    assert part is compact.parts[1] and cols == slice(0, dim)
    for columns in (None, slice(dim, 2 * dim), slice(100, 500)):
        width = len(range(2 * dim)[columns]) if columns is not None else 2 * dim
        for q in queries[:2] + queries[-1:]:
            full = np.hstack([q, q])
            qc = full if columns is None else full[:, columns]
            qc = np.ascontiguousarray(qc / np.linalg.norm(qc, axis=1, keepdims=True), dtype=np.float32)
            assert qc.shape[1] == width
            want = max_cosines(np.ascontiguousarray(wide if columns is None else wide[:, columns]), qc)
            rows, scores = routed.nearest(qc, 100, columns=columns)
            assert recall_at(rows, want, 100) >= 0.98
            np.testing.assert_allclose(scores[rows], want[rows], atol=1e-5)
    vector_saves.save(routed, tmp_path)
    reopened = vector_saves.load(tmp_path)
    assert reopened.compact is not None
    assert [p.shape for p in reopened.compact.parts] == [(ROWS, dim), (ROWS, dim)]
    np.testing.assert_array_equal(reopened.compact.codes, compact.codes)


def test_quantising_is_deterministic_and_bounded() -> None:
    rng = np.random.default_rng(2)
    m = rng.standard_normal((500, 64)).astype(np.float32)
    m[3] = 0.0
    codes, scales = quantise(m)
    assert codes.dtype == np.int8 and scales[3] == 0 and not codes[3].any()
    err = np.abs(codes * scales[:, None] - m)
    assert (err <= scales[:, None] / 2 + 1e-7).all()
    again = Compact.of(m)
    np.testing.assert_array_equal(again.codes, codes)


def test_quantising_in_blocks_gives_the_codes_of_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """``quantise`` works a block of rows at a time (bounded float temporaries for a large import's batch):
    the codes and scales are those of one pass over the whole batch, a zero row included, whatever the cut."""
    rng = np.random.default_rng(5)
    m = rng.standard_normal((1_000, 48)).astype(np.float32)
    m[999] = 0.0
    peak = np.abs(m).max(axis=1)
    want_scales = (peak / 127.0).astype(np.float32)
    safe = np.where(want_scales > 0, want_scales, 1.0).astype(np.float32)[:, None]
    want_codes = np.rint(m / safe).clip(-127, 127).astype(np.int8)
    for rows in (7, 256, 4_096):
        monkeypatch.setattr(compact_module, "QUANTISE_ROWS", rows)
        codes, scales = quantise(m)
        np.testing.assert_array_equal(codes, want_codes)
        np.testing.assert_array_equal(scales, want_scales)
    assert quantise(np.zeros((0, 48), np.float32))[0].shape == (0, 48)


def unit_rows(rng: np.random.Generator, n: int, dim: int = 768) -> np.ndarray:
    m = rng.standard_normal((n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_an_update_shares_the_int8_parts_and_scans_exactly_as_a_copy_made_anew() -> None:
    """A one-skill update's int8 copy keeps the parts it came from (copied, they held the codes twice while
    both snapshots lived: 768 MB at 1M rows of ``minilm+e5``) and its changed and added rows in a patch; its
    scan, with one query vector or a request's derived first one, per route's columns, with a shift, and its
    nearest rows are those of a copy quantised anew from the changed matrix. A removal, or a patch past its
    limit, folds the patch into new parts."""
    rng = np.random.default_rng(9)
    m = unit_rows(rng, 3_000)
    base = Compact.of(m)
    changed, new, added = [5, 1_700], unit_rows(rng, 2), unit_rows(rng, 3)
    up = base.replaced(changed, new, added)
    assert up.parts is base.parts and up.patch_rows.tolist() == [5, 1_700, 3_000, 3_001, 3_002]
    m2 = m.copy()
    m2[changed] = new
    m2 = np.vstack([m2, added])
    fresh = Compact.of(m2)
    np.testing.assert_array_equal(up.codes, fresh.codes)
    np.testing.assert_array_equal(up.scales, fresh.scales)
    sentences = unit_rows(rng, 3)
    request = np.vstack([sentences.sum(axis=0) / np.linalg.norm(sentences.sum(axis=0)), sentences])
    groups = rng.integers(0, 3, len(m2))
    for columns in (None, slice(0, 384), slice(384, 768)):
        width = 768 if columns is None else columns.stop - columns.start
        for queries in (unit_rows(rng, 1, width), request[:, columns or slice(None)]):
            q = np.ascontiguousarray(queries / np.linalg.norm(queries, axis=1, keepdims=True))
            for shift in (None, Shift(rng.random((len(q), 3)).astype(np.float32) * 0.1, groups)):
                got, err = scan(up, columns, q, shift, threads=1)
                want, want_err = scan(fresh, columns, q, shift, threads=1)
                np.testing.assert_array_equal(got, want)
                assert err == want_err
        rows = m2 if columns is None else m2[:, columns]
        refs = unit_rows(rng, 4, width)
        np.testing.assert_array_equal(vector_stage.nearest_of(rows, up, columns, refs), _argmax(rows, refs))
    # A second update of a patched row replaces its patch entry; the parts are still shared.
    again = up.replaced([1_700], unit_rows(rng, 1))
    assert again.parts is base.parts and again.patch_rows.tolist() == up.patch_rows.tolist()
    assert not np.array_equal(again.rows(np.asarray([1_700])), up.rows(np.asarray([1_700])))
    # A removal folds the patch into new parts: rows kept in order, patched rows at their new places.
    keep = np.setdiff1d(np.arange(3_003), [7, 3_001])
    removed = up.replaced([], np.zeros((0, 768), np.float32), None, keep)
    assert removed.patch_rows.size == 0 and removed.parts[0] is not base.parts[0]
    np.testing.assert_array_equal(removed.codes, fresh.codes[keep])
    np.testing.assert_array_equal(removed.scales, fresh.scales[keep])
    # So does a patch past its limit.
    many = list(range(0, 3_000, 2))
    assert len(many) > compact_module.patch_limit(3_000)
    folded = base.replaced(many, m[many])
    assert folded.patch_rows.size == 0 and folded.parts[0] is not base.parts[0]
    np.testing.assert_array_equal(folded.codes, base.codes)


def test_a_one_skill_update_and_a_reopen_keep_the_stage_exact(world: tuple[VectorSnapshot, list[np.ndarray]],
                                                              tmp_path: Path) -> None:
    snapshot, queries = world
    saved = vector_saves.save(snapshot, tmp_path)
    assert (tmp_path / "codes.npy").is_file()
    assert saved.base is not None and isinstance(saved.matrix, np.memmap)  # the copy in memory can go
    np.testing.assert_array_equal(saved.nearest(queries[0], 10)[0], snapshot.nearest(queries[0], 10)[0])
    loaded = vector_saves.load(tmp_path)
    assert isinstance(loaded.matrix, np.memmap) and loaded.base is not None  # only re-scored rows are read
    assert loaded.compact is not None and not isinstance(loaded.compact.parts[0], np.memmap)  # read, not mapped
    np.testing.assert_array_equal(loaded.compact.codes, snapshot.compact.codes if snapshot.compact else None)
    # One skill now says what the first request asks for: it comes first, in memory and after a reopen.
    target = 30_001
    row = snapshot.rows[target]
    batch = [(VectorRow(row.skill_id, row.grant, row.kind, row.tags, "d-new", "e-new"), queries[0][0])]
    updated = loaded.apply(batch, [])
    assert updated.base is loaded.base and updated.overlay == {target}
    assert updated.nearest(queries[0], 5)[0][0] == target
    assert loaded.nearest(queries[0], 5)[0][0] != target  # the older snapshot is unchanged
    vector_saves.save_changes(updated, tmp_path, batch, [])
    again = vector_saves.load(tmp_path)
    rows, scores = again.nearest(queries[0], 100)
    assert rows[0] == target and scores[target] == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_allclose(scores[rows], exact(again, queries[0])[rows], atol=1e-6)
    # A saved int8 copy that does not belong to the matrix is not trusted.
    np.save(tmp_path / "codes.npy", np.zeros((ROWS, snapshot.dim), np.int8))
    fresh = vector_saves.load(tmp_path)
    assert fresh.compact is not None and fresh.compact.codes.any()
    assert fresh.nearest(queries[0], 1)[0][0] == target


def test_a_skill_added_to_an_opened_index_goes_into_its_files_room_and_survives_a_reopen(
    world: tuple[VectorSnapshot, list[np.ndarray]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A saved large matrix keeps zero rows of room after its own (``vector_files.spare_rows``): a skill
    added to the opened index is written there, in the snapshot's private mapping, its int8 copy extended,
    not made again, and its row table and key index extended; it is found first for what it says, under a
    new grant too, also when the stage reads rows by ``pread`` and after the change log is replayed."""
    snapshot, queries = world
    vector_saves.save(snapshot, tmp_path)
    loaded = vector_saves.load(tmp_path)
    assert loaded.base is not None and loaded.base.capacity == ROWS + vector_files.spare_rows(ROWS) > ROWS
    new = [(VectorRow("sk_new_a", "team:new", "tool", ("fresh",), "a" * 64, "b" * 64), queries[0][0]),
           (VectorRow("sk_new_b", "team:all", "knowledge", (), "dnb", "enb"), queries[2][0])]
    added = loaded.apply(new, [])
    assert added.base is loaded.base and isinstance(added.matrix, np.memmap) and len(added) == ROWS + 2
    assert {ROWS, ROWS + 1} <= added.overlay and len(loaded) == ROWS  # the opened snapshot is unchanged
    assert added.rows == [*loaded.rows, *(r for r, _ in new)]
    assert added.row_of("sk_new_a") == ROWS and added.row_of("sk_new_b") == ROWS + 1 and added.row_of("sk_9") == 9
    assert added.key_to_row == KeyIndex(added.keys) and len(added.keys) == ROWS + 2
    assert np.flatnonzero(added.mask(["team:new"])).tolist() == [ROWS] and added.tag_rows["fresh"].tolist() == [ROWS]
    whole = Compact.of(np.asarray(added.matrix))
    assert added.compact is not None
    np.testing.assert_array_equal(added.compact.codes, whole.codes)
    np.testing.assert_array_equal(added.compact.scales, whole.scales)
    assert added.nearest(queries[0], 5)[0][0] == ROWS
    assert added.nearest(queries[0], 5, mask=added.mask(["team:new"]))[0].tolist() == [ROWS]
    vector_saves.save_changes(added, tmp_path, new, [])
    monkeypatch.setattr(vectors, "PREAD_FROM_BYTES", 0)  # re-scored rows read by pread, added ones from memory
    again = vector_saves.load(tmp_path)
    assert again.base is not None and len(again) == ROWS + 2 and again.rows == added.rows
    for q, row in ((queries[0], ROWS), (queries[2], ROWS + 1)):
        got, scores = again.nearest(q, 100)
        assert got[0] == row and scores[row] == pytest.approx(1.0, abs=1e-5)
        np.testing.assert_allclose(scores[got], exact(again, q)[got], atol=1e-6)


def test_more_added_rows_than_the_room_copy_the_matrix_once_and_the_next_save_maps_it_again(
    world: tuple[VectorSnapshot, list[np.ndarray]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    snapshot, queries = world
    for module in (vector_updates, vector_saves):
        monkeypatch.setattr(module, "spare_rows", lambda rows: 2)
    vector_saves.save(snapshot, tmp_path)
    loaded = vector_saves.load(tmp_path)
    assert loaded.base is not None and loaded.base.capacity == ROWS + 2
    new = [(VectorRow(f"sk_more_{j}", "team:all", "knowledge", (), f"d{j}", f"e{j}"), queries[j][0]) for j in range(3)]
    grown = loaded.apply(new, [])
    assert grown.base is None and not isinstance(grown.matrix, np.memmap) and len(grown) == ROWS + 3
    assert [grown.nearest(queries[j], 1)[0][0] for j in range(3)] == [ROWS, ROWS + 1, ROWS + 2]
    kept = vector_saves.save_changes(grown, tmp_path, new, [])
    assert kept.base is not None and isinstance(kept.matrix, np.memmap) and not (tmp_path / "changes.log").exists()
    assert kept.base.capacity == ROWS + 5 and len(vector_saves.load(tmp_path)) == ROWS + 3


def test_the_writers_growth_past_the_room_writes_the_next_file_instead_of_copying_the_matrix_into_memory(
    world: tuple[VectorSnapshot, list[np.ndarray]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Given the store's folder (the indexer's writer), more added rows than the saved file's room go the
    removal's way: the saved rows copied file to file into the next matrix file, with room after the new
    size, the batch's rows in the mapping's private pages until the save names that file. No copy of the
    matrix comes into memory (a large import's batches held 3 GB more at 1M rows of ``minilm+e5``), and the
    result is the in-memory growth's."""
    snapshot, queries = world
    for module in (vector_updates, vector_saves):
        monkeypatch.setattr(module, "spare_rows", lambda rows: 2)
    vector_saves.save(snapshot, tmp_path)
    loaded = vector_saves.load(tmp_path)
    replaced = (VectorRow("sk_4", "team:all", "knowledge", (), "d4x", "e4x"), queries[7][0])
    new = [(VectorRow(f"sk_more_{j}", "team:all", "knowledge", (), f"d{j}", f"e{j}"), queries[j][0]) for j in range(3)]
    matrix_file = (tmp_path / "vectors.npy").resolve()
    before = mapped_kib(matrix_file)
    grown = loaded.apply([replaced, *new], [], tmp_path)
    assert mapped_kib(matrix_file) - before <= 64  # the saved rows went file to file
    assert grown.base is not None and grown.base.pending and isinstance(grown.matrix, np.memmap)
    in_memory = loaded.apply([replaced, *new], [])
    assert in_memory.base is None and grown.rows == in_memory.rows and len(grown) == ROWS + 3
    np.testing.assert_array_equal(grown.matrix, in_memory.matrix)
    assert grown.compact is not None and in_memory.compact is not None
    np.testing.assert_array_equal(grown.compact.codes, in_memory.compact.codes)
    assert [grown.nearest(queries[j], 1)[0][0] for j in range(3)] == [ROWS, ROWS + 1, ROWS + 2]
    assert grown.nearest(queries[7], 1)[0][0] == 4
    inode = os.stat(tmp_path / "vectors.npy.tmp").st_ino
    kept = vector_saves.save_changes(grown, tmp_path, [replaced, *new], [])
    assert os.stat(tmp_path / "vectors.npy").st_ino == inode and not (tmp_path / "changes.log").exists()
    assert kept.base is not None and kept.base.capacity == ROWS + 3 + 2
    again = vector_saves.load(tmp_path)
    assert again.rows == in_memory.rows
    np.testing.assert_array_equal(again.matrix, np.asarray(in_memory.matrix))


def mapped_kib(path: Path) -> int:
    """KiB of ``path`` mapped into this process (``Rss`` of its mappings in /proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if re.match(r"[0-9a-f]+-[0-9a-f]+ ", line):  # a mapping's header line
            inside = line.rstrip().endswith(str(path))
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


def opened_and_changed(
    world: tuple[VectorSnapshot, list[np.ndarray]], folder: Path,
) -> tuple[VectorSnapshot, VectorSnapshot, list[tuple[VectorRow, np.ndarray]]]:
    """The world saved into ``folder`` and opened; that snapshot with row 5 replaced and ``sk_extra`` added
    since (rows written over its mapping); and a batch that replaces row 9 and adds ``sk_late``."""
    snapshot, queries = world
    vector_saves.save(snapshot, folder)
    loaded = vector_saves.load(folder)
    five, nine = snapshot.rows[5], snapshot.rows[9]
    moved = loaded.apply([(VectorRow(five.skill_id, five.grant, five.kind, five.tags, "d5", "e5"), queries[3][0]),
                          (VectorRow("sk_extra", "team:extra", "tool", ("x",), "dx", "ex"), queries[4][0])], [])
    batch = [(VectorRow(nine.skill_id, "team:some", nine.kind, nine.tags, "d9", "e9"), queries[5][0]),
             (VectorRow("sk_late", "team:all", "knowledge", (), "dl", "el"), queries[6][0])]
    return loaded, moved, batch


def test_a_removal_from_an_opened_index_copies_the_kept_rows_by_pread_and_the_next_save_maps_them_again(
    world: tuple[VectorSnapshot, list[np.ndarray]], tmp_path: Path,
) -> None:
    """A batch that removes rows from an opened large index (with rows replaced and added since it was
    saved) copies the kept rows into memory from the file by ``pread`` (no page of the old file is mapped
    into the process), their int8 copy and row table gathered, not made again; the next save writes a new
    file and maps it."""
    snapshot, queries = world
    loaded, moved, batch = opened_and_changed(world, tmp_path)
    assert moved.base is loaded.base and moved.overlay == {5, ROWS}
    matrix_file = (tmp_path / "vectors.npy").resolve()
    before = mapped_kib(matrix_file)
    after = moved.apply(batch, ["sk_7", "sk_extra", "sk_unknown"])
    assert mapped_kib(matrix_file) - before <= 64  # the kept rows were read, not mapped
    assert after.base is None and not isinstance(after.matrix, np.memmap) and len(after) == ROWS
    want_rows = [r for i, r in enumerate(moved.rows) if i not in (7, ROWS)]
    want_rows[8] = batch[0][0]  # row 9 moved up by one
    assert after.rows == [*want_rows, batch[1][0]]
    want = np.delete(np.asarray(moved.matrix), [7, ROWS], axis=0)
    want[8] = zero_tiny(queries[5][0])  # as every vector the store keeps (tests/test_index.py)
    np.testing.assert_array_equal(after.matrix, np.vstack([want, zero_tiny(queries[6][0])[None]]))
    whole = Compact.of(np.asarray(after.matrix))
    assert after.compact is not None
    np.testing.assert_array_equal(after.compact.codes, whole.codes)
    np.testing.assert_array_equal(after.compact.scales, whole.scales)
    assert after.row_of("sk_7") is None and after.row_of("sk_extra") is None and after.row_of("sk_late") == ROWS - 1
    assert after.key_to_row == KeyIndex(after.keys) and after.row_of(snapshot.rows.skill_id(5)) == 5
    assert "team:extra" not in after.grant_names and after.rows[8].grant == "team:some"
    assert after.nearest(queries[3], 1)[0][0] == 5 and after.nearest(queries[6], 1)[0][0] == ROWS - 1
    kept = vector_saves.save_changes(after, tmp_path, batch, ["sk_7", "sk_extra"])
    assert kept.base is not None and isinstance(kept.matrix, np.memmap) and not (tmp_path / "changes.log").exists()
    again = vector_saves.load(tmp_path)
    assert again.rows == after.rows and again.nearest(queries[5], 1)[0][0] == 8


def test_a_writers_removal_copies_the_kept_rows_file_to_file_and_the_save_names_that_file(
    world: tuple[VectorSnapshot, list[np.ndarray]], tmp_path: Path,
) -> None:
    """Given the store's folder (as the indexer's writer gives it), a removal from an opened index writes the
    kept rows as the next matrix file, copied from the saved file in the kernel (``copy_file_range``): no
    page of either file comes into the process and no copy of the matrix into memory. The rows replaced and
    added since the save are in it; the batch's own live in the mapping's private pages until the save, which
    writes them into that file and names it (the same file, not the matrix written again). The result is the
    one the in-memory removal gives, and a file left under the temporary name by a crash is replaced by a new
    one, not truncated under a mapping that may still read it."""
    _, queries = world
    _, moved, batch = opened_and_changed(world, tmp_path)
    gone = ["sk_7", "sk_extra", "sk_unknown"]
    stale = tmp_path / "vectors.npy.tmp"
    with open(stale, "wb") as f:
        np.save(f, np.arange(12, dtype=np.float32))
    stale_view = np.load(stale, mmap_mode="r")
    matrix_file = (tmp_path / "vectors.npy").resolve()
    before = mapped_kib(matrix_file)
    after = moved.apply(batch, gone, tmp_path)
    assert stale_view.tolist() == list(range(12))  # the crash's file lives on for its mapping; the name is new
    assert mapped_kib(matrix_file) - before <= 64 and mapped_kib(stale.resolve()) <= 4 * 4  # the pages of the batch's two rows
    assert after.base is not None and after.base.pending and isinstance(after.matrix, np.memmap)
    in_memory = moved.apply(batch, gone)
    assert in_memory.base is None and after.rows == in_memory.rows and len(after) == ROWS
    np.testing.assert_array_equal(after.matrix, in_memory.matrix)
    assert after.compact is not None and in_memory.compact is not None
    np.testing.assert_array_equal(after.compact.codes, in_memory.compact.codes)
    on_disk = np.load(stale)
    want = np.asarray(in_memory.matrix)
    keep = [i for i in range(ROWS) if i not in (8, ROWS - 1)]  # the batch's rows: not in the file before the save
    np.testing.assert_array_equal(on_disk[keep], want[keep])
    assert not on_disk[ROWS - 1].any() and on_disk[5].tolist() == want[5].tolist()  # row 5: replaced since the save
    for q in queries:
        mask = after.mask(["team:some"])
        assert after.nearest(q, 100, mask=mask)[0].tolist() == in_memory.nearest(q, 100, mask=mask)[0].tolist()
    inode = os.stat(stale).st_ino
    kept = vector_saves.save_changes(after, tmp_path, batch, gone)
    assert os.stat(tmp_path / "vectors.npy").st_ino == inode and not stale.exists()
    assert not (tmp_path / "changes.log").exists() and not after.base.pending
    assert kept.base is not None and kept.base.capacity == ROWS + vector_files.spare_rows(ROWS)
    np.testing.assert_array_equal(np.load(tmp_path / "vectors.npy"), want)
    again = vector_saves.load(tmp_path)
    assert again.rows == in_memory.rows and again.nearest(queries[5], 1)[0][0] == 8
    np.testing.assert_array_equal(again.matrix, want)


def test_a_writers_removal_copies_through_a_buffer_where_the_system_has_no_copy_file_range(
    world: tuple[VectorSnapshot, list[np.ndarray]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``copy_file_range`` is Linux's (and some file systems refuse it): without it the kept rows go through a
    bounded buffer, with the same result."""
    _, moved, batch = opened_and_changed(world, tmp_path)
    monkeypatch.delattr(os, "copy_file_range")
    after = moved.apply(batch, ["sk_7", "sk_extra"], tmp_path)
    assert after.base is not None and after.base.pending
    np.testing.assert_array_equal(after.matrix, moved.apply(batch, ["sk_7", "sk_extra"]).matrix)
    vector_saves.save_changes(after, tmp_path, batch, ["sk_7", "sk_extra"])
    np.testing.assert_array_equal(vector_saves.load(tmp_path).matrix, after.matrix)


def test_a_writers_removal_of_every_row_keeps_only_the_batchs_new_one(
    world: tuple[VectorSnapshot, list[np.ndarray]], tmp_path: Path,
) -> None:
    """The writer's removal with nothing kept (a row added since the save among the removed): the new file
    holds the batch's one new row, and the store reopens with it alone."""
    snapshot, queries = world
    vector_saves.save(snapshot, tmp_path)
    loaded = vector_saves.load(tmp_path)
    moved = loaded.apply([(VectorRow("sk_extra", "team:extra", "tool", (), "dx", "ex"), queries[4][0])], [])
    only = [(VectorRow("sk_only", "team:all", "knowledge", (), "do", "eo"), queries[6][0])]
    emptied = moved.apply(only, [*moved.rows.skill_ids()], tmp_path)
    assert emptied.base is not None and emptied.base.pending and len(emptied) == 1
    assert emptied.rows == [only[0][0]]
    np.testing.assert_array_equal(emptied.matrix, zero_tiny(queries[6][0])[None])
    vector_saves.save_changes(emptied, tmp_path, only, [*moved.rows.skill_ids()])
    again = vector_saves.load(tmp_path)
    assert again.rows == [only[0][0]] and again.nearest(queries[6], 1)[0].tolist() == [0]
    np.testing.assert_array_equal(again.matrix, zero_tiny(queries[6][0])[None])


OPEN_PEAK = """
import json, sys
from pathlib import Path
import numpy as np
from skillsearch.retrieval.vector_files import saved_compact

def peak_mb():
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024

folder = Path(sys.argv[1])
matrix = np.load(folder / "vectors.npy", mmap_mode="r")
before = peak_mb()
compact = saved_compact(folder, matrix)
print(json.dumps({"grew_mb": peak_mb() - before, "parts": [p.shape for p in compact.parts],
                  "row": compact.rows(np.asarray([len(matrix) // 3]))[0].tolist()}))
"""


def test_opening_a_saved_int8_copy_holds_its_codes_once(tmp_path: Path) -> None:
    """A routed index's saved ``codes.npy`` is read into its column parts without mapping the file: copied
    out of a mapping, the file's pages stayed counted in the process beside the copy (1.5 GB at 1M rows of
    ``minilm+e5`` while the index opened). Measured in a fresh process: its peak grows by the codes and a
    64 MiB read buffer, not by twice the codes. The files are sparse (zeros but one row), so the test writes
    little."""
    n, dim = 300_000, 768
    matrix = np.lib.format.open_memmap(tmp_path / "vectors.npy", mode="w+", dtype=np.float32, shape=(n, dim))
    codes = np.lib.format.open_memmap(tmp_path / "codes.npy", mode="w+", dtype=np.int8, shape=(n, dim))
    scales = np.zeros(n, dtype=np.float32)
    row = np.random.default_rng(5).standard_normal(dim).astype(np.float32)
    matrix[n // 3] = row
    codes[n // 3], scales[n // 3 : n // 3 + 1] = quantise(row[None, :])
    matrix.flush(), codes.flush()
    np.save(tmp_path / "scales.npy", scales)
    del matrix, codes
    child = subprocess.run([sys.executable, "-c", OPEN_PEAK, str(tmp_path)], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    out = json.loads(child.stdout)
    assert out["parts"] == [[n, 384], [n, 384]]
    assert out["row"] == quantise(row[None, :])[0][0].tolist()
    codes_mb = n * dim / 2**20  # 220 MB; mapped and copied, the peak grew by 440 MB
    assert out["grew_mb"] < 1.5 * codes_mb, out


def test_a_saved_int8_copy_cut_short_or_of_another_shape_is_not_used(tmp_path: Path) -> None:
    matrix = np.random.default_rng(6).standard_normal((1_000, 768)).astype(np.float32)
    codes, scales = quantise(matrix)
    np.save(tmp_path / "scales.npy", scales)
    np.save(tmp_path / "codes.npy", codes)
    whole = vector_files.saved_compact(tmp_path, matrix)
    assert whole is not None and [p.shape for p in whole.parts] == [(1_000, 384), (1_000, 384)]
    np.testing.assert_array_equal(whole.codes, codes)
    size = (tmp_path / "codes.npy").stat().st_size
    os.truncate(tmp_path / "codes.npy", size - 768 * 10)  # a copy killed while it was written
    assert vector_files.saved_compact(tmp_path, matrix) is None
    np.save(tmp_path / "codes.npy", codes[:, :384])
    assert vector_files.saved_compact(tmp_path, matrix) is None


def test_a_large_opened_index_reads_the_rows_it_re_scores_without_mapping_the_matrix(
    world: tuple[VectorSnapshot, list[np.ndarray]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An opened index past ``PREAD_FROM_BYTES`` (lowered here: a matrix of that size is 1.5 GB at 1M rows)
    re-scores from its saved file by ``pread`` (``vector_files.FileRows``), and a row updated since from the
    snapshot's own copy: the exact cosines are those of the current vectors, and searching maps no page of
    the float32 matrix into the process (read through the mapping, the kernel's fault-around mapped 64 KiB
    per re-scored row, most of the matrix after a few hundred searches)."""
    snapshot, queries = world
    vector_saves.save(snapshot, tmp_path)
    loaded = vector_saves.load(tmp_path)
    matrix_file = (tmp_path / "vectors.npy").resolve()
    assert loaded.matrix.nbytes <= vectors.PREAD_FROM_BYTES
    # Under the limit the rows are read through the mapping: its pages come into the process.
    before = mapped_kib(matrix_file)
    rows, scores = loaded.nearest(queries[0], 100)
    np.testing.assert_allclose(scores[rows], exact(snapshot, queries[0])[rows], atol=1e-6)
    assert mapped_kib(matrix_file) > before
    monkeypatch.setattr(vectors, "PREAD_FROM_BYTES", loaded.matrix.nbytes - 1)
    loaded = vector_saves.load(tmp_path)
    before = mapped_kib(matrix_file)
    for q in queries:
        rows, scores = loaded.nearest(q, 100, exact_rows=np.asarray([5, ROWS - 1]))
        loaded.background(q)
        np.testing.assert_allclose(scores[rows], exact(snapshot, q)[rows], atol=1e-6)
        np.testing.assert_allclose(scores[[5, ROWS - 1]], exact(snapshot, q)[[5, ROWS - 1]], atol=1e-6)
    assert mapped_kib(matrix_file) - before <= 64  # no re-scored row's page, nor its neighbours
    row = snapshot.rows[77]
    moved = loaded.apply([(VectorRow(row.skill_id, row.grant, row.kind, row.tags, "d", "e"), queries[1][0])], [])
    got, scores = moved.nearest(queries[1], 3)
    assert got[0] == 77 and scores[77] == pytest.approx(1.0, abs=1e-5)


def test_rows_are_saved_as_column_arrays_and_an_index_written_before_still_opens(tmp_path: Path) -> None:
    """``rows.npz`` holds the row table's columns and each row's key (opening a million rows parses no JSON
    line and hashes no id); a damaged one is a clear error; an index written before with ``rows.json``
    (one row per line, or before that one object) still opens, and its next save writes ``rows.npz``."""
    from skillsearch.retrieval.lexical_schema import skill_key
    from skillsearch.retrieval.vector_files import row_json

    rows = [VectorRow(f"sk_{i}", "team:a", "knowledge", ("ops", f"t{i}"), f"d{i}", f"{i:064x}") for i in range(3)]
    matrix = np.eye(3, 4, dtype=np.float32)
    snapshot = VectorSnapshot.build(4, matrix, rows)
    vector_saves.save(snapshot, tmp_path)
    assert not (tmp_path / "rows.json").exists()
    with np.load(tmp_path / "rows.npz", allow_pickle=False) as saved:
        assert json.loads(saved["header"].tobytes())["rows"] == 3
        np.testing.assert_array_equal(saved["keys"], [skill_key(r.skill_id) for r in rows])
    loaded = vector_saves.load(tmp_path)
    assert loaded.rows == tuple(rows) and loaded.row_of("sk_2") == 2 and loaded.mask(["team:a"]).all()
    # Keys that do not belong to the ids are hashed again, not trusted.
    arrays = dict(np.load(tmp_path / "rows.npz", allow_pickle=False))
    np.savez(tmp_path / "rows.npz", **{**arrays, "keys": arrays["keys"][::-1].copy()})
    assert vector_saves.load(tmp_path).row_of("sk_0") == 0
    # A code past its names, offsets past the ids, or a cut file: a clear error, not wrong rows.
    for damaged in ({**arrays, "grant_codes": np.full(3, 5, np.int32)}, {**arrays, "id_ends": arrays["id_ends"] + 1}):
        np.savez(tmp_path / "rows.npz", **damaged)
        with pytest.raises(IndexNotReadyError, match="unreadable"):
            vector_saves.load(tmp_path)
    # Compressed members (which could unpack to any size from a small file) or another member: refused.
    np.savez_compressed(tmp_path / "rows.npz", **arrays)
    with pytest.raises(IndexNotReadyError, match="other members"):
        vector_saves.load(tmp_path)
    np.savez(tmp_path / "rows.npz", **arrays, extra=np.zeros(3))
    with pytest.raises(IndexNotReadyError, match="other members"):
        vector_saves.load(tmp_path)
    (tmp_path / "rows.npz").write_bytes((tmp_path / "rows.npz").read_bytes()[:200])
    with pytest.raises(IndexNotReadyError, match="unreadable"):
        vector_saves.load(tmp_path)
    # The layouts before: a header line then one row per line; one object with every row.
    (tmp_path / "rows.npz").unlink()
    lines = [json.dumps({"dim": 4, "rows": 3, "layout": "lines"}), *(json.dumps(row_json(r)) for r in rows)]
    (tmp_path / "rows.json").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert vector_saves.load(tmp_path).rows == tuple(rows)
    (tmp_path / "rows.json").write_text(json.dumps({"dim": 4, "rows": [json.loads(x) for x in lines[1:]]}),
                                        encoding="utf-8")
    assert vector_saves.load(tmp_path).rows == tuple(rows)
    (tmp_path / "rows.json").write_text("\n".join(lines[:3]) + "\n", encoding="utf-8")  # cut short
    with pytest.raises(IndexNotReadyError, match="unreadable"):
        vector_saves.load(tmp_path)
    (tmp_path / "rows.json").write_text("\n".join(lines) + "\n", encoding="utf-8")
    vector_saves.save(vector_saves.load(tmp_path), tmp_path)
    assert (tmp_path / "rows.npz").exists() and not (tmp_path / "rows.json").exists()
    assert vector_saves.load(tmp_path).rows == tuple(rows)


def test_the_decisions_background_reads_the_whole_index_or_a_fixed_sample(
    world: tuple[VectorSnapshot, list[np.ndarray]],
) -> None:
    """``VectorSnapshot.background`` (the decision's ``cos_bg`` and ``cos_z`` scale): past ``BACKGROUND_ROWS``
    a fixed, evenly spaced sample of the rows, whoever asks, close to the whole index's own figures; up to
    it, exactly every row (so the leave-one-dataset-out fit, on catalogs of at most 4,076 rows, holds)."""
    from skillsearch.retrieval.vectors import BACKGROUND_ROWS

    snapshot, queries = world
    assert len(snapshot) > BACKGROUND_ROWS
    for q in queries:
        every = max_cosines(np.ascontiguousarray(snapshot.matrix), np.ascontiguousarray(q))
        mean, std = snapshot.background(q)
        assert abs(mean - float(every.mean())) < 0.01 and abs(std - float(every.std())) < 0.01
        assert snapshot.background(q) == (mean, std)  # the same sample every time
    small = VectorSnapshot.build(snapshot.dim, np.asarray(snapshot.matrix[:500]), snapshot.rows[:500])
    q = queries[0]
    whole = max_cosines(np.ascontiguousarray(small.matrix), np.ascontiguousarray(q))
    assert small.background(q) == (float(whole.mean(dtype=np.float64)), float(whole.std(dtype=np.float64)))


def test_the_search_reads_its_background_from_the_stages_own_scan(
    world: tuple[VectorSnapshot, list[np.ndarray]],
) -> None:
    """``nearest_and_background`` (what search calls) scans once: its rows, scores and background are
    exactly those of ``nearest`` and ``background`` called apart, for every caller, so the decision's
    background is the same whoever asks."""
    snapshot, queries = world
    some = snapshot.mask(["team:some"])
    named = np.asarray([11, 20_000], dtype=np.int64)
    for q in queries:
        alone = snapshot.background(q)
        for mask in (None, some):
            rows, scores, background = snapshot.nearest_and_background(q, 100, mask, exact_rows=named)
            want_rows, want_scores = snapshot.nearest(q, 100, mask, exact_rows=named)
            np.testing.assert_array_equal(rows, want_rows)
            np.testing.assert_array_equal(scores, want_scores)
            assert background == alone


def test_a_compact_snapshot_under_the_background_size_reads_every_rows_scan(
    world: tuple[VectorSnapshot, list[np.ndarray]],
) -> None:
    """Between ``COMPACT_FROM`` and ``BACKGROUND_ROWS`` rows the background is every row's int8 score: the
    same for every caller and from either call, and within the quantisation error of the exact figures."""
    from skillsearch.retrieval.vectors import BACKGROUND_ROWS

    snapshot, queries = world
    n = COMPACT_FROM + 2_000
    assert n <= BACKGROUND_ROWS
    small = VectorSnapshot.build(snapshot.dim, np.asarray(snapshot.matrix[:n]), snapshot.rows[:n])
    assert small.compact is not None
    some = small.mask(["team:some"])
    for q in queries:
        alone = small.background(q)
        every = max_cosines(np.ascontiguousarray(small.matrix), np.ascontiguousarray(q))
        assert abs(alone[0] - float(every.mean())) < 1e-3 and abs(alone[1] - float(every.std())) < 1e-3
        for mask in (None, some):
            rows, _, background = small.nearest_and_background(q, 10, mask)
            assert background == alone
            assert recall_at(rows, exact(small, q, mask), rows.size) == 1.0


def test_row_metadata_is_kept_as_columns_and_reads_like_a_tuple_of_rows() -> None:
    """``vector_rows.RowTable`` holds a million rows' metadata in numpy columns (no object per row) and
    reads, compares and changes like the tuple of ``VectorRow`` it replaced; ``KeyIndex`` finds a row by its
    id's key like the dict it replaced."""
    from skillsearch.retrieval.lexical_schema import skill_key
    from skillsearch.retrieval.vector_rows import RowTable

    rows = [VectorRow(f"sk_{i}" if i % 5 else f"ünï/{i}", "team:a" if i % 3 else "team:b", "knowledge",
                      ("ops", f"t{i % 4}") if i % 2 else (), f"d{i}" * 8, f"e{i}") for i in range(2_000)]
    table = RowTable.of(rows)
    assert table == tuple(rows) and list(table) == rows and len(table) == len(rows)
    assert table[-1] == rows[-1] and table[3:9] == rows[3:9] and table.skill_ids() == [r.skill_id for r in rows]
    with pytest.raises(IndexError):
        table[len(rows)]
    assert table.nbytes < 80 * len(rows)  # about 60 bytes a row here; a VectorRow object alone is 400
    # The usual update: a row of the same id with new hashes; a new grant or a longer hash makes new columns.
    changed = {7: VectorRow("sk_7", "team:a", "knowledge", ("ops", "t3"), "new", "e-new"),
               10: VectorRow("ünï/10", "team:new", "tool", ("x",), "d" * 300, "e")}
    for change in ({7: changed[7]}, changed):
        replaced = table.replaced(change)
        want = list(rows)
        for i, r in change.items():
            want[i] = r
        assert replaced == want and table == tuple(rows)  # the old table is unchanged
    with pytest.raises(ValueError, match="keep its id"):
        table.replaced({1: rows[2]})
    keep = np.asarray([0, 5, 1_999], dtype=np.int64)
    assert table.take(keep) == [rows[i] for i in keep] and table.extended(rows[:2]) == rows + rows[:2]
    for picked in (np.asarray([1_999, 3, 4, 5, 0], np.int64), np.arange(0, 2_000, 3)):  # any order; names kept used
        taken, whole = table.take(picked), RowTable.of([rows[i] for i in picked])
        assert taken == whole and taken.skill_ids() == whole.skill_ids()
        assert (taken.grant_names, taken.kind_names, taken.tag_sets) == (whole.grant_names, whole.kind_names,
                                                                         whole.tag_sets)
        np.testing.assert_array_equal(taken.grant_codes, whole.grant_codes)
        np.testing.assert_array_equal(taken.tag_codes, whole.tag_codes)
    assert RowTable.of([]) == () and RowTable.of([]).skill_ids() == []
    # Appending joins the columns (a new grant, kind or tag set renumbers the codes); the result is the
    # table made from all the rows, code for code.
    more = [VectorRow("ïd/z", "team:0", "agent", ("ops", "t1"), "dz", "ez"), VectorRow("sk_y", "team:a", "knowledge",
                                                                                     (), "d" * 40, "ey")]
    for extra in (more[1:], more):
        grown, whole = table.extended(extra), RowTable.of(rows + extra)
        assert grown == whole and grown.skill_ids() == whole.skill_ids()
        for name in ("grant_names", "kind_names", "tag_sets"):
            assert getattr(grown, name) == getattr(whole, name)
        for name in ("grant_codes", "kind_codes", "tag_codes"):
            np.testing.assert_array_equal(getattr(grown, name), getattr(whole, name))
    # sha256 hashes are kept as their 32 bytes, and read back as the same lowercase hex.
    hexed = [VectorRow(r.skill_id, r.grant, r.kind, r.tags, f"{i:064x}", f"{i * 7:064x}") for i, r in enumerate(rows)]
    packed = RowTable.of(hexed)
    assert packed == hexed and packed.nbytes < 100 * len(rows)  # two 64-character hashes as text: 128 bytes
    assert packed.extended(hexed[:1]) == hexed + hexed[:1] and packed.extended(rows[:1]) == hexed + rows[:1]
    for hashes in (("ab" * 32, "cd" * 32), ("AB" * 32, "short")):  # in place, or new columns
        r = hexed[4]
        assert packed.replaced({4: VectorRow(r.skill_id, r.grant, r.kind, r.tags, *hashes)})[4].doc_hash == hashes[0]
    keys = np.fromiter((skill_key(r.skill_id) for r in rows), np.uint64, len(rows))
    index = KeyIndex(keys)
    assert index == dict(zip(keys.tolist(), range(len(rows)), strict=True))
    assert index[int(keys[1_234])] == 1_234 and index.get(12345, -1) == -1 and int(keys[9]) in index
    np.testing.assert_array_equal(index.rows_of(np.asarray([keys[5], 12345, keys[0]], np.uint64)), [5, -1, 0])
    assert KeyIndex(np.zeros(0, np.uint64)).rows_of(np.asarray([1], np.uint64)).tolist() == [-1]
    extra_keys = np.asarray([3, 2**63 + 5, int(keys.max()) + 1, 0], np.uint64)
    assert index.extended(extra_keys) == KeyIndex(np.concatenate([keys, extra_keys])) and len(index) == len(rows)


def test_a_snapshot_with_tags_grants_and_deletes_keeps_its_columns_in_step(tmp_path: Path) -> None:
    """Deleting, adding and replacing rows (with a new grant) through ``VectorSnapshot.apply`` leaves the
    row columns, the key index, the grant codes and the tag lists matching the rows, also after a reopen."""
    rng = np.random.default_rng(3)
    dim, n = 16, 300
    rows = [VectorRow(f"sk_{i}", "team:a", "knowledge", (f"t{i % 3}",), f"d{i}", f"e{i}") for i in range(n)]
    snapshot = VectorSnapshot.build(dim, rng.standard_normal((n, dim)).astype(np.float32), rows)
    add = [(VectorRow("sk_new", "team:z", "tool", ("t9",), "dn", "en"), rng.standard_normal(dim).astype(np.float32))]
    swap = [(VectorRow("sk_4", "team:z", "knowledge", ("t9",), "d4b", "e4b"), rng.standard_normal(dim).astype(np.float32))]
    after = snapshot.apply(add + swap, ["sk_0", "sk_1"])
    for s in (after, vector_saves.save(after, tmp_path), vector_saves.load(tmp_path)):
        ids = [r.skill_id for r in s.rows]
        assert ids[-1] == "sk_new" and "sk_0" not in ids and len(ids) == n - 1
        assert all(s.row_of(i) == j for j, i in enumerate(ids)) and s.row_of("sk_0") is None
        assert s.rows[s.row_of("sk_4")].grant == "team:z"  # type: ignore[index]
        assert set(np.flatnonzero(s.mask(["team:z"])).tolist()) == {s.row_of("sk_4"), s.row_of("sk_new")}
        assert sorted(s.tag_rows["t9"].tolist()) == sorted([s.row_of("sk_4"), s.row_of("sk_new")])  # type: ignore[type-var]
        assert all(r.tags[0] in s.tag_rows and j in s.tag_rows[r.tags[0]] for j, r in enumerate(s.rows))


def test_the_int8_scan_leaves_nones_reference_count_alone(world: tuple[VectorSnapshot, list[np.ndarray]]) -> None:
    """simsimd 6.5's ``cdist(..., out=...)`` (the kernel used before numkong) dropped a reference to None per
    call; a server that scanned with it died after a few thousand kernel calls (``Fatal Python error:
    none_dealloc``) on Python 3.11. The scan must leave None's count where it was, however many blocks it
    reads, with one query vector and with several."""
    snapshot, queries = world
    compact = snapshot.compact
    assert compact is not None
    for q in (queries[0], queries[-1]):  # their codes kept (query_codes.quantised) before counting
        scan(compact, None, q, threads=1)
    before = sys.getrefcount(None)
    for _ in range(50):
        scan(compact, None, queries[0], threads=1)
        scan(compact, None, queries[-1], threads=1)
    assert sys.getrefcount(None) >= before


@pytest.mark.parametrize("n", [50, 1_000, 100_000])
@pytest.mark.parametrize("hidden", [0.0, 0.5, 0.999, 1.0])
def test_the_depth_and_the_rows_near_it_are_found_in_one_pass(n: int, hidden: float) -> None:
    """``_depth_and_near``: the ``k``-th largest score and exactly the rows within twice the widest margin of
    it, as the sort of every score gives them, whatever share of rows is hidden (``-inf``), fewer than ``k``
    visible rows included (then no rows), with the sample's estimate (large arrays) and without (small)."""
    rng = np.random.default_rng(n + int(hidden * 1000))
    for widest in (0.0, 0.004, 0.05):
        scores = rng.normal(0.2, 0.08, n).astype(np.float32)
        scores[rng.random(n) < hidden] = -np.inf
        finite = np.sort(scores[np.isfinite(scores)])[::-1]
        best, near = _depth_and_near(scores, 100, widest)
        if finite.size < 100:
            assert best == -np.inf and near.size == 0
            continue
        assert best == float(finite[99])
        np.testing.assert_array_equal(near, np.flatnonzero(scores >= best - 2.0 * widest - BOUND_SLACK))
