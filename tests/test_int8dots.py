"""The vector stage's own int8 kernel (``skillsearch/retrieval/_int8dots.c``): exact integer products of int8
rows with several int8 query vectors (every product, or each row's best and their sum), the same from each of
its paths this core runs (AVX-512 VNNI, AVX2, the portable loop), over the whole int8 range, widths that are
not a multiple of its 16- or 64-column step, row counts that are not a multiple of the rows it takes at once,
more query vectors than it holds in registers at once, and rows picked by number; bad arguments are typed
errors, never a crash or a read or write out of bounds."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from skillsearch.retrieval import _int8dots


def _exact(rows: np.ndarray, queries: np.ndarray) -> np.ndarray:
    return (rows.astype(np.int64) @ queries.T.astype(np.int64)).astype(np.float32)


@pytest.mark.parametrize("dim", [1, 7, 16, 33, 63, 64, 65, 384, 1000, 1024])
@pytest.mark.parametrize("vectors", [1, 3, 8, 9, 17])
def test_every_path_gives_the_exact_integer_products(dim: int, vectors: int) -> None:
    rng = np.random.default_rng(dim * 100 + vectors)
    rows = rng.integers(-128, 128, size=(301, dim), dtype=np.int8)
    queries = rng.integers(-128, 128, size=(vectors, dim), dtype=np.int8)
    rows[0] = -128  # the extremes: -128 * -128 summed over every column
    queries[0] = -128
    want = _exact(rows, queries)
    assert "portable" in _int8dots.paths()
    for path in (None, *_int8dots.paths()):
        out = np.full((301, vectors), np.nan, dtype=np.float32)
        _int8dots.dots(rows, queries, out, path=path)
        np.testing.assert_array_equal(out, want, err_msg=f"path={path}")
        # Only each row's best and the sum of its products: the best exact, the sum within float32 rounding.
        best = np.full(301, np.nan, dtype=np.float32)
        total = np.full(301, np.nan, dtype=np.float32)
        _int8dots.best(rows, queries, best, total, path=path)
        np.testing.assert_array_equal(best, want.max(axis=1))
        exact_sum = (rows.astype(np.int64) @ queries.T.astype(np.int64)).sum(axis=1)
        np.testing.assert_allclose(total, exact_sum, rtol=1e-6, atol=0)
        alone = np.full(301, np.nan, dtype=np.float32)
        _int8dots.best(rows, queries, alone, path=path)
        np.testing.assert_array_equal(alone, best)
        # Rows picked by number, out of order and repeated, read in place: the same numbers as those rows'.
        at = np.asarray([300, 0, 7, 7, 150, *range(1, 300, 13)], dtype=np.int64)
        picked = np.full(at.size, np.nan, dtype=np.float32)
        picked_sum = np.full(at.size, np.nan, dtype=np.float32)
        _int8dots.best(rows, queries, picked, picked_sum, at=at, path=path)
        np.testing.assert_array_equal(picked, best[at])
        np.testing.assert_array_equal(picked_sum, total[at])


@pytest.mark.parametrize("dim", [1, 33, 64, 65, 384, 1024])
@pytest.mark.parametrize("vectors", [1, 3, 8])
def test_every_path_scores_a_language_shift_as_numpy_does(dim: int, vectors: int) -> None:
    """``best_shifted``: each row's best of ``p * factor * scale - by[j, group]`` and, with ``whole_by``, of
    the products' sum over the norm shifted the same way: bit for bit what numpy gives step by step in
    float32 (the extension is built without fused multiply-adds), on every path."""
    rng = np.random.default_rng(dim * 10 + vectors)
    n, groups_n = 301, 4
    rows = rng.integers(-128, 128, size=(n, dim), dtype=np.int8)
    queries = rng.integers(-128, 128, size=(vectors, dim), dtype=np.int8)
    rows[0], queries[0] = -128, -128
    scales = rng.uniform(0.5, 1.5, n).astype(np.float32) / 127
    groups = rng.integers(0, groups_n, n).astype(np.int64)
    by = (rng.standard_normal((vectors, groups_n)) * 0.01).astype(np.float32)
    whole_by = (rng.standard_normal(groups_n) * 0.01).astype(np.float32)
    factor, inv_norm = np.float32(1 / 127 / 3), np.float32(1 / 1.7)
    exact = rows.astype(np.int64) @ queries.T.astype(np.int64)
    shifted = exact.astype(np.float32) * factor
    shifted *= scales[:, None]
    shifted -= by[:, groups].T
    want = shifted.max(axis=1)
    whole = exact.sum(axis=1).astype(np.float32) * inv_norm
    whole *= factor
    whole *= scales
    whole -= whole_by[groups]
    for path in (None, *_int8dots.paths()):
        got = np.full(n, np.nan, dtype=np.float32)
        _int8dots.best_shifted(rows, queries, got, scales, float(factor), groups, by, path=path)
        np.testing.assert_array_equal(got, want, err_msg=f"path={path}")
        _int8dots.best_shifted(rows, queries, got, scales, float(factor), groups, by, whole_by, float(inv_norm),
                               path=path)
        np.testing.assert_array_equal(got, np.maximum(want, whole), err_msg=f"path={path}")


def test_a_shifts_arguments_are_checked() -> None:
    rows = np.ones((4, 32), dtype=np.int8)
    q = np.ones((2, 32), dtype=np.int8)
    best = np.zeros(4, dtype=np.float32)
    scales = np.ones(4, dtype=np.float32)
    groups = np.zeros(4, dtype=np.int64)
    by = np.zeros((2, 3), dtype=np.float32)
    with pytest.raises(IndexError, match=r"groups\[2\] = 3 is not one of the 3 groups"):
        _int8dots.best_shifted(rows, q, best, scales, 1.0, np.asarray([0, 1, 3, 0], dtype=np.int64), by)
    with pytest.raises(IndexError, match="is not one of the 3 groups"):
        _int8dots.best_shifted(rows, q, best, scales, 1.0, np.asarray([0, -1, 0, 0], dtype=np.int64), by)
    with pytest.raises(ValueError, match="between 1 and 8 query vectors"):
        _int8dots.best_shifted(rows, np.ones((9, 32), dtype=np.int8), best, scales, 1.0, groups,
                               np.zeros((9, 3), dtype=np.float32))
    with pytest.raises(ValueError, match=r"by must be \(2, groups\), got \(3, 3\)"):
        _int8dots.best_shifted(rows, q, best, scales, 1.0, groups, np.zeros((3, 3), dtype=np.float32))
    with pytest.raises(ValueError, match="best and scales must hold 4 values"):
        _int8dots.best_shifted(rows, q, best, np.ones(3, dtype=np.float32), 1.0, groups, by)
    with pytest.raises(ValueError, match="groups must hold 4 values"):
        _int8dots.best_shifted(rows, q, best, scales, 1.0, np.zeros(5, dtype=np.int64), by)
    with pytest.raises(ValueError, match="whole_by must hold 3 values"):
        _int8dots.best_shifted(rows, q, best, scales, 1.0, groups, by, np.zeros(2, dtype=np.float32), 1.0)
    with pytest.raises(TypeError, match="groups must be a 1-d array of int64"):
        _int8dots.best_shifted(rows, q, best, scales, 1.0, groups.astype(np.int32), by)
    with pytest.raises(TypeError, match="scales must be a 1-d array of float32"):
        _int8dots.best_shifted(rows, q, best, scales.astype(np.float64), 1.0, groups, by)
    np.testing.assert_array_equal(best, 0.0)  # nothing was written by a refused call


def _int4_tiles(codes: np.ndarray) -> np.ndarray:
    """int4 codes (n, 2h) in ``best4``'s layout, made here by numpy: row byte k holds column k low and column
    h + k high, each plus 8, padded with 0x88 to a multiple of 4 bytes; sixteen rows a tile (the last padded
    with rows of 0x88), each tile's rows interleaved four bytes at a time."""
    n, half = codes.shape[0], codes.shape[1] // 2
    padded = -(-half // 4) * 4
    tiles = -(-n // 16)
    rows = np.full((tiles * 16, padded), 0x88, dtype=np.uint8)
    rows[:n, :half] = (codes[:, :half] + 8).astype(np.uint8) | ((codes[:, half:] + 8).astype(np.uint8) << 4)
    return np.ascontiguousarray(rows.reshape(tiles, 16, padded // 4, 4).transpose(0, 2, 1, 3).reshape(tiles, -1))


@pytest.mark.parametrize("dim", [2, 14, 62, 64, 66, 128, 130, 384, 1000, 1024])
@pytest.mark.parametrize("vectors", [1, 3, 8, 9, 17])
def test_every_path_gives_the_exact_integer_products_of_int4_rows(dim: int, vectors: int) -> None:
    """``best4``: the same best and sum as ``best`` over int4 rows (two codes a byte), on every path, over the
    whole int4 range against the whole int8 range, widths around its 32- and 64-byte steps."""
    rng = np.random.default_rng(dim * 100 + vectors)
    codes = rng.integers(-7, 8, size=(301, dim)).astype(np.int8)
    codes[0], codes[1] = -7, 7
    queries = rng.integers(-128, 128, size=(vectors, dim), dtype=np.int8)
    queries[0] = -128
    want = codes.astype(np.int64) @ queries.T.astype(np.int64)
    for path in (None, *_int8dots.paths()):
        best = np.full(301, np.nan, dtype=np.float32)
        total = np.full(301, np.nan, dtype=np.float32)
        _int8dots.best4(_int4_tiles(codes), queries, best, total, path=path)
        np.testing.assert_array_equal(best, want.max(axis=1).astype(np.float32), err_msg=f"path={path}")
        np.testing.assert_allclose(total, want.sum(axis=1), rtol=1e-6, atol=0)
        # A run of rows starting at a tile's first row reads its tiles only (a scan thread's share).
        run = np.full(301 - 32, np.nan, dtype=np.float32)
        _int8dots.best4(_int4_tiles(codes)[2:], queries, run, path=path)
        np.testing.assert_array_equal(run, best[32:], err_msg=f"path={path}")


@pytest.mark.parametrize("vectors", [1, 2, 3, 8])
@pytest.mark.parametrize("derived", [False, True])
def test_best4_finishes_each_rows_score_as_numpy_does(vectors: int, derived: bool) -> None:
    """``best4`` with ``scales``: the scan's score of each row, bit for bit what numpy makes of the kernel's best
    and sum (``vector_scan._finished``: the sum times ``inv_norm`` where larger, times ``factor``, times the
    row's scale, each a float32 step), on every path; nine vectors or scales of the wrong length are refused."""
    rng = np.random.default_rng(vectors * 10 + derived)
    codes = rng.integers(-7, 8, size=(301, 384)).astype(np.int8)
    queries = rng.integers(-127, 128, size=(vectors, 384), dtype=np.int8)
    scales = rng.uniform(0.001, 0.02, 301).astype(np.float32)
    factor, inv_norm = np.float32(0.0123 * 127 / 7), (float(np.float32(1 / 2.37)) if derived else 0.0)
    best = np.empty(301, dtype=np.float32)
    total = np.empty(301, dtype=np.float32)
    _int8dots.best4(_int4_tiles(codes), queries, best, total)
    if derived:
        total *= np.float32(inv_norm)
        np.maximum(best, total, out=best)
    best *= factor
    best *= scales
    for path in (None, *_int8dots.paths()):
        got = np.full(301, np.nan, dtype=np.float32)
        _int8dots.best4(_int4_tiles(codes), queries, got, scales=scales, factor=float(factor), inv_norm=inv_norm,
                        path=path)
        np.testing.assert_array_equal(got, best, err_msg=f"path={path}")
    with pytest.raises(ValueError, match="at most 8 query vectors with scales"):
        _int8dots.best4(_int4_tiles(codes), np.ones((9, 384), dtype=np.int8), got, scales=scales)
    with pytest.raises(ValueError, match="scales must hold 301 values"):
        _int8dots.best4(_int4_tiles(codes), queries, got, scales=scales[:300])
    with pytest.raises(TypeError, match="best must be a 1-d array of float32"):  # not "scales must hold -1"
        _int8dots.best4(_int4_tiles(codes), queries, got.reshape(301, 1), scales=scales)


def test_int8_codes_become_the_nearest_int4_codes_in_best4s_layout() -> None:
    """``to_int4``: every int8 code (the whole range, -128 included) rounded to ``code * 7 / 127`` as numpy
    rounds it, plus 8, column k low and column w / 2 + k high, in the tiles numpy makes of them (17 rows: a
    second tile of one row); an odd width or a wrong shape is refused."""
    codes = np.arange(-128, 128, dtype=np.int16).astype(np.int8).reshape(1, 256)
    codes = np.vstack([codes, codes[:, ::-1]] * 8 + [codes[:, ::3].repeat(3, axis=1)[:, :256]])
    assert _int8dots.tile_shape(17, 256) == (2, 16 * 128)
    out = np.zeros(_int8dots.tile_shape(17, 256), dtype=np.uint8)
    _int8dots.to_int4(codes, out)
    nearest = np.clip(np.rint(codes.astype(np.float64) * 7 / 127), -7, 7).astype(np.int8)
    np.testing.assert_array_equal(out, _int4_tiles(nearest))
    assert _int8dots.tile_shape(5, 14) == (1, 16 * 8)  # 7 bytes a row, padded to 8
    with pytest.raises(ValueError, match="an even number of columns"):
        _int8dots.to_int4(np.ones((2, 3), dtype=np.int8), np.zeros((1, 32), dtype=np.uint8))
    with pytest.raises(ValueError, match=r"out must be \(2, 2048\)"):
        _int8dots.to_int4(codes, np.zeros((17, 128), dtype=np.uint8))
    with pytest.raises(ValueError, match="an even number of columns"):
        _int8dots.tile_shape(4, 3)


def test_int4_arguments_are_checked() -> None:
    tiles = np.full((1, 16 * 16), 0x88, dtype=np.uint8)  # every code 0
    q = np.ones((2, 32), dtype=np.int8)
    best = np.zeros(4, dtype=np.float32)
    with pytest.raises(TypeError, match="tiles must be a 2-d array of uint8"):
        _int8dots.best4(tiles.view(np.int8), q, best)
    with pytest.raises(ValueError, match="an even number of columns"):
        _int8dots.best4(tiles, np.ones((2, 31), dtype=np.int8), best)
    with pytest.raises(ValueError, match=r"4 rows of 22 columns are \(1, 192\) tiles, got \(1, 256\)"):
        _int8dots.best4(tiles, np.ones((2, 22), dtype=np.int8), best)
    with pytest.raises(ValueError, match=r"17 rows of 32 columns are \(2, 256\) tiles"):
        _int8dots.best4(tiles, q, np.zeros(17, dtype=np.float32))
    with pytest.raises(ValueError, match="at least one query vector"):
        _int8dots.best4(tiles, np.ones((0, 32), dtype=np.int8), best)
    with pytest.raises(ValueError, match="best and sum must hold 4 values"):
        _int8dots.best4(tiles, q, best, np.zeros(3, dtype=np.float32))
    np.testing.assert_array_equal(best, 0.0)
    _int8dots.best4(tiles, q, best)
    np.testing.assert_array_equal(best, 0.0)  # codes of 0: every product 0


def test_the_default_path_is_the_widest_the_core_has() -> None:
    """``kernel()`` is the first of ``paths()``: AVX-512 VNNI where the core lists it (with AVX-512 BW), else
    AVX2 where it lists that, else the portable loop; every listed path runs; an unknown path is refused."""
    paths = _int8dots.paths()
    assert _int8dots.kernel() == paths[0] and paths[-1] == "portable"
    assert set(paths) <= {"avx512vnni", "avx2", "portable"}
    cpuinfo = Path("/proc/cpuinfo")
    flags = set(cpuinfo.read_text().split()) if cpuinfo.exists() else set()
    if {"avx512_vnni", "avx512bw", "avx512f"} <= flags:
        assert paths[0] == "avx512vnni"
    elif "avx2" in flags:
        assert paths[0] == "avx2"
    if "avx2" in flags:
        assert "avx2" in paths
    rows = np.ones((3, 8), dtype=np.int8)
    out = np.zeros((3, 1), dtype=np.float32)
    for bad in ("sse", 3):
        with pytest.raises(ValueError, match="unknown path"):
            _int8dots.dots(rows, rows[:1], out, path=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="unknown path"):
            _int8dots.best(rows, rows[:1], out[:, 0], path=bad)  # type: ignore[arg-type]
    np.testing.assert_array_equal(out, 0.0)


def test_empty_inputs_write_nothing_and_views_of_whole_rows_are_read_in_place() -> None:
    rows = np.ones((0, 384), dtype=np.int8)
    out = np.empty((0, 2), dtype=np.float32)
    _int8dots.dots(rows, np.ones((2, 384), dtype=np.int8), out)
    none = np.empty((5, 0), dtype=np.float32)
    _int8dots.dots(np.ones((5, 384), dtype=np.int8), np.ones((0, 384), dtype=np.int8), none)
    many = np.arange(40 * 384, dtype=np.int64).astype(np.int8).reshape(40, 384)
    block = many[10:20]  # a slice of whole rows is C-contiguous: no copy needed
    q = many[:2].copy()
    out = np.zeros((10, 2), dtype=np.float32)
    _int8dots.dots(block, q, out)
    np.testing.assert_array_equal(out, _exact(block, q))


def test_bad_arguments_are_typed_errors() -> None:
    rows = np.ones((4, 32), dtype=np.int8)
    q = np.ones((2, 32), dtype=np.int8)
    out = np.zeros((4, 2), dtype=np.float32)
    with pytest.raises(TypeError, match="rows must be a C-contiguous array of int8"):
        _int8dots.dots(np.ones((4, 64), dtype=np.int8)[:, ::2], q, out)
    with pytest.raises(TypeError, match="queries must be a 2-d array of int8"):
        _int8dots.dots(rows, q.astype(np.int16), out)
    with pytest.raises(TypeError, match="queries must be a 2-d array of int8"):
        _int8dots.dots(rows, q[0], out)
    with pytest.raises(TypeError, match="out must be a C-contiguous writable array of float32"):
        frozen = out.copy()
        frozen.flags.writeable = False
        _int8dots.dots(rows, q, frozen)
    with pytest.raises(TypeError, match="out must be a 2-d array of float32"):
        _int8dots.dots(rows, q, out.astype(np.float64))
    with pytest.raises(ValueError, match="rows have 32 columns, queries 16"):
        _int8dots.dots(rows, np.ones((2, 16), dtype=np.int8), out)
    with pytest.raises(ValueError, match=r"out must be \(4, 2\), got \(4, 3\)"):
        _int8dots.dots(rows, q, np.zeros((4, 3), dtype=np.float32))
    with pytest.raises(ValueError, match="at most 1024 columns"):
        _int8dots.dots(np.ones((1, 1025), dtype=np.int8), np.ones((1, 1025), dtype=np.int8),
                       np.zeros((1, 1), dtype=np.float32))
    best = np.zeros(4, dtype=np.float32)
    with pytest.raises(ValueError, match="at least one query vector"):
        _int8dots.best(rows, np.ones((0, 32), dtype=np.int8), best)
    with pytest.raises(ValueError, match="best and sum must hold 4 values"):
        _int8dots.best(rows, q, best, np.zeros(3, dtype=np.float32))
    with pytest.raises(TypeError, match="best must be a 1-d array of float32"):
        _int8dots.best(rows, q, out)
    with pytest.raises(TypeError, match="sum must be a C-contiguous writable array of float32"):
        _int8dots.best(rows, q, best, np.zeros(8, dtype=np.float32)[::2])
    # ``at`` names rows of ``rows``: a number outside them would read outside the array.
    for bad in ([4], [-1], [0, 1, 2**40]):
        with pytest.raises(IndexError, match="is not one of the 4 rows"):
            _int8dots.best(rows, q, np.zeros(len(bad), dtype=np.float32), at=np.asarray(bad, dtype=np.int64))
    with pytest.raises(TypeError, match="at must be a 1-d array of int64"):
        _int8dots.best(rows, q, best, at=np.arange(4, dtype=np.int32))
    with pytest.raises(TypeError, match="at must be a 1-d array of int64"):
        _int8dots.best(rows, q, best, at=np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(ValueError, match="best and sum must hold 2 values"):
        _int8dots.best(rows, q, best, at=np.asarray([0, 1], dtype=np.int64))
    np.testing.assert_array_equal(out, 0.0)  # nothing was written by a refused call
    np.testing.assert_array_equal(best, 0.0)


def test_a_call_releases_the_gil_so_two_threads_share_a_scan() -> None:
    """The stage splits a large scan over two Python threads (``vector_scan.SCAN_THREADS``): that only helps
    if the kernel lets go of the GIL while it runs. Another thread sees the output half written, which it
    could never see if the call held the GIL from its first product to its last."""
    rows = np.random.default_rng(5).integers(-128, 128, size=(400_000, 384), dtype=np.int8)
    queries = np.ones((8, 384), dtype=np.int8)
    out = np.full((rows.shape[0], 8), np.nan, dtype=np.float32)
    started, done = threading.Event(), threading.Event()

    def call() -> None:
        started.set()
        _int8dots.dots(rows, queries, out, path="portable")  # one long call: rows in order, the last row last
        done.set()

    worker = threading.Thread(target=call)
    worker.start()
    started.wait()
    half_written = False
    while worker.is_alive() and not done.is_set() and not half_written:
        half_written = not np.isnan(out[1_000, 0]) and bool(np.isnan(out[-1, -1]))
    worker.join()
    assert half_written
    np.testing.assert_array_equal(out[-3:], _exact(rows[-3:], queries))
