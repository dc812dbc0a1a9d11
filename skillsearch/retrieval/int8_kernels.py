"""The int8 dot-product kernels of the vector stage's scan (``vector_scan.scan``), and the one this core runs.

Each gives the same exact integer products of int8 rows with a request's int8 query vectors (at most
384 * 127 * 127 per column part, exact in float32), so the choice changes speed only:

- ``int8dots``: our own C extension (``_int8dots.c``): each row read once and multiplied against every query
  vector from registers (AVX-512 VNNI or AVX2, chosen at run time; a portable loop elsewhere), and able to
  keep only each row's best product and their sum (:func:`best`) instead of writing every product;
- ``numkong-packed``: numkong's packed kernel, the query vectors packed once (kept for benchmarks: it paid on
  AVX-512 VNNI cores until our kernel had a path there);
- ``numkong-cdist``: numkong's ``cdist``, one pass per query vector.

This module is numkong's home and the extension's. Measured: docs/benchmarks.md, "The kernel by instruction
set", "Our own int8 kernel" and "Our kernel on AVX-512 VNNI".
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np

try:
    from skillsearch.retrieval import _int8dots
except ImportError as exc:  # a source checkout whose C extension was never built
    raise ImportError(
        "skillsearch's int8 kernel (skillsearch/retrieval/_int8dots.c) is not built: install the package "
        "(`make venv`, or `pip install -e .`)") from exc

__all__ = [
    "GROUP_VECTORS", "KERNELS", "TILE", "best", "best4", "best_shifted", "check", "described", "named",
    "numkong_capabilities", "our_path", "pin", "prepared", "products", "scan_kernel", "scans_int4", "tile_shape",
    "to_int4",
]

# The kernels a scan can run (:func:`scan_kernel` picks one per core).
KERNELS = ("int8dots", "numkong-packed", "numkong-cdist")
# The most query vectors our kernel holds in registers at once: :func:`best_shifted` and :func:`best4`, which
# finish each row's score themselves, take at most this many.
GROUP_VECTORS = 8
# Rows an int4 tile holds (:func:`to_int4`): a scan's runs of rows start at multiples of it.
TILE = 16
# The kernel every scan of this process runs when a benchmark pinned one (:func:`pin`).
_pinned: str | None = None
# Our kernel's path (``_int8dots.paths()``) when a benchmark held it to one (:func:`pin`); None: the widest.
_path: str | None = None


def best(rows: np.ndarray, queries: np.ndarray, out: np.ndarray, total: np.ndarray | None,
         at: np.ndarray | None = None) -> None:
    """Our kernel keeping only what a scan needs of each row's products with ``queries`` (int8, contiguous):
    the largest, exact, into ``out``, and their sum into ``total`` when given (float32 arrays, one value a
    row). ``at``: int64 row numbers; only those rows, read in place (each asked for a few rows ahead, as
    they come out of order), one value each."""
    _int8dots.best(np.ascontiguousarray(rows), queries, out, total, at=at, path=_path)


def best_shifted(
    rows: np.ndarray, queries: np.ndarray, out: np.ndarray, scales: np.ndarray, factor: float, groups: np.ndarray,
    by: np.ndarray, whole_by: np.ndarray | None, inv_norm: float,
) -> None:
    """:func:`best` under a language shift (``vector_scan.Shift``) for at most :data:`GROUP_VECTORS` query
    vectors: each row's best of ``p * factor * scales[i] - by[j, groups[i]]``, and with ``whole_by`` also of
    ``sum(p) * inv_norm * factor * scales[i] - whole_by[groups[i]]``, each step rounded to float32 as numpy
    rounds it, into ``out``: no block of products written for numpy to scale, shift and reduce."""
    _int8dots.best_shifted(np.ascontiguousarray(rows), queries, out, scales, factor, groups, by, whole_by, inv_norm,
                           path=_path)


def best4(
    tiles: np.ndarray, queries: np.ndarray, out: np.ndarray, scales: np.ndarray, factor: np.float32,
    inv_norm: float,
) -> None:
    """Each row's score over the query vectors (at most :data:`GROUP_VECTORS`) from the int4 tiles of
    ``len(out)`` rows (``compact.nibbles``: two codes a byte, half the bytes of int8 rows), finished in the
    kernel as ``vector_scan`` finishes an int8 row's best: the best product, or with ``inv_norm`` (not 0) the
    sum of the products times it where larger, times ``factor``, times the row's scale, each step rounded to
    float32 as numpy rounds it. Rows ``a:b`` of a part are its tiles ``a // TILE : ceil(b / TILE)``, ``a`` a
    multiple of :data:`TILE`."""
    _int8dots.best4(np.ascontiguousarray(tiles), queries, out, scales=scales, factor=float(factor),
                    inv_norm=inv_norm, path=_path)


def to_int4(codes: np.ndarray, out: np.ndarray) -> None:
    """int8 codes (n, w) as :func:`best4`'s int4 tiles into ``out`` (:func:`tile_shape`): each rounded to
    ``code * 7 / 127`` (0.34 s for 1M rows of 384 columns, where numpy's table look-ups took 1.4 s)."""
    _int8dots.to_int4(np.ascontiguousarray(codes), out)


def tile_shape(rows: int, width: int) -> tuple[int, int]:
    """The shape of the int4 tiles of ``rows`` rows of ``width`` columns (:func:`to_int4`)."""
    return _int8dots.tile_shape(rows, width)


def scans_int4(kernel: str) -> bool:
    """Whether a large scan reads the int4 copy first (``vector_scan.first_pass``): with our kernel on its
    AVX-512 VNNI path, where it was measured (docs/benchmarks.md, "Two tiers: int4, then int8")."""
    return kernel == "int8dots" and our_path() == "avx512vnni"


def prepared(pieces: list[tuple[np.ndarray, slice]], q_codes: np.ndarray, kernel: str) -> list[Any]:
    """Each column part's query vectors as ``kernel`` takes them: packed once for numkong's packed kernel,
    contiguous int8 codes for the others."""
    queries = [np.ascontiguousarray(q_codes[:, cols]) for _, cols in pieces]
    if kernel == "numkong-packed":
        nk = _numkong()
        return [nk.dots_pack(q, dtype="int8") for q in queries]
    return queries


def products(
    pieces: list[tuple[np.ndarray, slice]], queries: list[Any], start: int, end: int, kernel: str,
) -> np.ndarray:
    """The integer products of rows ``start:end`` with the query vectors (prepared per column part by
    :func:`prepared`), summed over the parts, as float32: (rows, vectors)."""
    products = None
    for (part, _), q in zip(pieces, queries, strict=True):
        block = part[start:end]
        if kernel == "int8dots":
            one = np.empty((end - start, q.shape[0]), dtype=np.float32)
            _int8dots.dots(np.ascontiguousarray(block), q, one, path=_path)
        elif kernel == "numkong-packed":
            one = np.asarray(_numkong().dots_packed(block, q))
        else:
            one = np.asarray(_numkong().cdist(block, q, metric="dot", out_dtype="float32"))
        products = one if products is None else products + one  # a row's dot product, part by part
    assert products is not None
    return products


@cache
def scan_kernel() -> str:
    """The kernel a scan runs on this core, one of :data:`KERNELS` (measured, docs/benchmarks.md, "Our own int8
    kernel" and "Our kernel on AVX-512 VNNI"): our own ``_int8dots`` where the core has AVX-512 VNNI or AVX2
    (on a Sapphire Rapids core its VNNI path scanned 1M rows for four vectors, keeping each row's best and
    sum, in 0.80-0.93 of the time numkong's packed kernel took with the best and sum read from its products;
    with numkong held to its AVX2 kernels, our AVX2 path scanned 100k rows in 0.42-0.79 of ``cdist``'s time
    for one to seven query vectors, 1M rows 0.47-0.92); else numkong's ``cdist`` (its kernels for other
    instruction sets, such as Arm's, rather than our portable loop)."""
    if _pinned is not None:
        return _pinned
    if our_path() in ("avx512vnni", "avx2"):
        return "int8dots"
    return "numkong-cdist"


def our_path() -> str:
    """The path our kernel runs in this process: the one a benchmark held it to (:func:`pin`), else the widest
    this core has (``_int8dots.kernel()``)."""
    return _path or _int8dots.kernel()


def described() -> str:
    """:func:`scan_kernel`, with our kernel's path when it is ours (``int8dots (avx512vnni)``): what a
    benchmark's report names."""
    kernel = scan_kernel()
    return f"{kernel} ({our_path()})" if kernel == "int8dots" else kernel


def named(name: str | None) -> str:
    """``name`` checked against :data:`KERNELS`, or this core's :func:`scan_kernel` for None."""
    if name is None:
        return scan_kernel()
    if name not in KERNELS:
        raise ValueError(f"unknown scan kernel {name!r}: one of {', '.join(KERNELS)}")
    return name


def numkong_capabilities() -> dict[str, bool]:
    """Every instruction-set capability numkong knows, and whether it runs that kernel here."""
    return dict(_numkong().get_capabilities())


def check(kernel: str | None, numkong_only: Sequence[str], path: str | None = None) -> None:
    """``ValueError`` for a kernel, numkong capability or path name :func:`pin` could not take (a benchmark
    checks its options with it before it builds anything)."""
    if kernel is not None:
        named(kernel)
    if path is not None and path not in _int8dots.paths():
        raise ValueError(f"our kernel has no {path!r} path on this core: one of {', '.join(_int8dots.paths())}")
    caps = numkong_capabilities()
    unknown = sorted(set(numkong_only) - set(caps))
    if unknown:
        raise ValueError(f"unknown numkong capability {', '.join(unknown)}: one of {', '.join(sorted(caps))}")


def pin(kernel: str | None = None, numkong_only: Sequence[str] = (), path: str | None = None) -> None:
    """For benchmarks: hold numkong to the capabilities ``numkong_only`` (and ``serial``) and our kernel to
    ``path``, as on a core that has no wider ones (``["haswell"]`` and ``"avx2"``: what an AVX2-only core
    runs and chooses), and/or make every scan of this process run ``kernel``. Unknown names raise
    ``ValueError`` (:func:`check`); nothing changes then."""
    global _pinned, _path
    check(kernel, numkong_only, path)
    if numkong_only:
        keep = {*numkong_only, "serial"}
        for name, on in numkong_capabilities().items():
            if on and name not in keep:
                _numkong().disable_capability(name)
    if kernel is not None:
        _pinned = kernel
    if path is not None:
        _path = path
    scan_kernel.cache_clear()


@cache
def _numkong() -> Any:
    """numkong, imported on the first scan: loading its kernels takes about 0.14 s, which commands that never
    scan (``list``, a lexical search) should not pay."""
    import numkong

    return numkong
