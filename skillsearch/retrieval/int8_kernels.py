"""The int8 dot-product kernels of the vector stage's scan (``vector_stage.scan``), and the one this core runs.

Each gives the same exact integer products of int8 rows with a request's int8 query vectors (at most
384 * 127 * 127 per column part, exact in float32), so the choice changes speed only:

- ``int8dots``: our own C extension (``_int8dots.c``): each row's codes widened to int16 once and multiplied
  against every query vector from registers (AVX2, chosen at run time; a portable loop elsewhere), and able
  to keep only each row's best product and their sum (:func:`best`) instead of writing every product;
- ``numkong-packed``: numkong's packed kernel, the query vectors packed once (AVX-512 VNNI pays for it);
- ``numkong-cdist``: numkong's ``cdist``, one pass per query vector.

This module is numkong's home and the extension's. Measured: docs/benchmarks.md, "The kernel by instruction
set" and "Our own int8 kernel".
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
    "KERNELS", "VNNI_CAPABILITIES", "best", "check", "named", "numkong_capabilities", "packs_queries", "pin",
    "prepared", "products", "scan_kernel",
]

# The kernels a scan can run (:func:`scan_kernel` picks one per core).
KERNELS = ("int8dots", "numkong-packed", "numkong-cdist")
# numkong's capability names of the x86 cores with AVX-512 VNNI, where its packed int8 kernel pays
# (:func:`packs_queries`).
VNNI_CAPABILITIES = ("icelake", "genoa", "sapphire", "sapphireamx", "turin", "graniteamx", "diamond")
# The kernel every scan of this process runs when a benchmark pinned one (:func:`pin`).
_pinned: str | None = None


def best(rows: np.ndarray, queries: np.ndarray, out: np.ndarray, total: np.ndarray | None) -> None:
    """Our kernel keeping only what a scan needs of each row's products with ``queries`` (int8, contiguous):
    the largest, exact, into ``out``, and their sum into ``total`` when given (float32 arrays, one value a
    row)."""
    _int8dots.best(np.ascontiguousarray(rows), queries, out, total)


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
            _int8dots.dots(np.ascontiguousarray(block), q, one)
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
    kernel" and "The kernel by instruction set"): numkong's packed kernel where numkong has AVX-512 VNNI
    (:func:`packs_queries`); else our own ``_int8dots`` where the core has AVX2 (with numkong held to its
    AVX2 kernels, the stage's scan of 100k rows took 0.42-0.79 of ``cdist``'s time for one to seven query
    vectors, 1M rows 0.47-0.92); else numkong's ``cdist`` (its kernels for other instruction sets, such as Arm's, rather than
    our portable loop)."""
    if _pinned is not None:
        return _pinned
    if packs_queries():
        return "numkong-packed"
    if _int8dots.kernel() == "avx2":
        return "int8dots"
    return "numkong-cdist"


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


def check(kernel: str | None, numkong_only: Sequence[str]) -> None:
    """``ValueError`` for a kernel or numkong capability name :func:`pin` could not take (a benchmark checks
    its options with it before it builds anything)."""
    if kernel is not None:
        named(kernel)
    caps = numkong_capabilities()
    unknown = sorted(set(numkong_only) - set(caps))
    if unknown:
        raise ValueError(f"unknown numkong capability {', '.join(unknown)}: one of {', '.join(sorted(caps))}")


def pin(kernel: str | None = None, numkong_only: Sequence[str] = ()) -> None:
    """For benchmarks: hold numkong to the capabilities ``numkong_only`` (and ``serial``), as on a core that has
    no wider ones (``["haswell"]``: numkong's AVX2 kernels, and the choice an AVX2-only core makes), and/or
    make every scan of this process run ``kernel``. Unknown names raise ``ValueError`` (:func:`check`);
    nothing changes then."""
    global _pinned
    check(kernel, numkong_only)
    if numkong_only:
        keep = {*numkong_only, "serial"}
        for name, on in numkong_capabilities().items():
            if on and name not in keep:
                _numkong().disable_capability(name)
        packs_queries.cache_clear()
    if kernel is not None:
        _pinned = kernel
    scan_kernel.cache_clear()


@cache
def packs_queries() -> bool:
    """Whether several query vectors go through numkong's packed kernel rather than ``cdist``: only where
    numkong runs its AVX-512 VNNI kernels. Measured (docs/benchmarks.md, "The kernel by instruction set"):
    on a Zen 4 core (numkong's ``genoa``) the packed kernel scanned 100k rows for four vectors in 6.4 ms
    against 10.7 for ``cdist``; on a Zen 2 core (``haswell``, AVX2 only) the stage's scan of 100k rows is
    slower with it for every count of vectors (two: 6.1 against 2.9 ms; three: 6.1 against 3.7)."""
    caps = numkong_capabilities()
    return any(caps.get(name, False) for name in VNNI_CAPABILITIES)


@cache
def _numkong() -> Any:
    """numkong, imported on the first scan: loading its kernels takes about 0.14 s, which commands that never
    scan (``list``, a lexical search) should not pay."""
    import numkong

    return numkong
