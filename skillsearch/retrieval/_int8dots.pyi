"""Typing for the C extension ``_int8dots.c`` (the vector stage's int8 kernel: AVX-512 VNNI, AVX2 or portable)."""

from typing import Literal

import numpy as np

Path = Literal["avx512vnni", "avx2", "portable"]

def dots(rows: np.ndarray, queries: np.ndarray, out: np.ndarray, *, path: str | None = None) -> None:
    """``out[i, j] = rows[i] . queries[j]``, exact: int8 rows (n, d) and queries (q, d), float32 out (n, q), all
    C-contiguous, d at most 1024. The GIL is released while it runs. ``path``: one of :func:`paths` (default
    :func:`kernel`); another is a ``ValueError``."""

def best(
    rows: np.ndarray, queries: np.ndarray, best: np.ndarray, sum: np.ndarray | None = None, *,
    at: np.ndarray | None = None, path: str | None = None,
) -> None:
    """Each row's largest product over the query vectors into ``best`` (n,), exact, and their sum into ``sum``
    (n,) when given (rounded to float32): :func:`dots` without writing every product. ``at``: int64 row
    numbers (m,), each checked (IndexError outside the rows): only those rows, read in place, into ``best``
    and ``sum`` (m,). At least one query vector."""

def best_shifted(
    rows: np.ndarray, queries: np.ndarray, best: np.ndarray, scales: np.ndarray, factor: float, groups: np.ndarray,
    by: np.ndarray, whole_by: np.ndarray | None = None, inv_norm: float = 0.0, *, path: str | None = None,
) -> None:
    """:func:`best` under a language shift, for 1 to 8 query vectors: each row's largest of
    ``p * factor * scales[i] - by[j, groups[i]]`` over the vectors ``j`` (``p`` the exact product) and, with
    ``whole_by``, of ``sum(p) * inv_norm * factor * scales[i] - whole_by[groups[i]]``, each step rounded to
    float32, into ``best`` (n,). ``scales`` float32 (n,), ``groups`` int64 (n,) each in ``0..G-1`` (checked:
    IndexError), ``by`` float32 (q, G), ``whole_by`` float32 (G,)."""


def best4(
    tiles: np.ndarray, queries: np.ndarray, best: np.ndarray, sum: np.ndarray | None = None, *,
    scales: np.ndarray | None = None, factor: float = 1.0, inv_norm: float = 0.0, path: str | None = None,
) -> None:
    """:func:`best` for int4 rows in :func:`to_int4`'s tiles: uint8 tiles (ceil(n / 16), 16 * hp) of the
    ``n = len(best)`` rows; int8 queries (q, d), d even. With float32 ``scales`` (n,), for at most 8 query
    vectors, each row's best finished as the scan scores it: ``b * factor * scales[i]``, ``b`` the best product
    or, when ``inv_norm`` is not 0, the sum of the products times ``inv_norm`` where larger, each step rounded
    to float32."""

def to_int4(codes: np.ndarray, out: np.ndarray) -> None:
    """int8 codes (n, w), w even, as :func:`best4`'s int4 tiles into uint8 ``out`` of :func:`tile_shape`
    ``(n, w)``: each code rounded to ``code * 7 / 127``, plus 8; row byte k holds column k in its low four bits
    and column w / 2 + k in its high four; sixteen rows a tile, interleaved four bytes at a time (row r's
    bytes 4g..4g+3 at 64 g + 4 r), the padding 0x88."""

def tile_shape(rows: int, width: int) -> tuple[int, int]:
    """``(ceil(rows / 16), 16 * hp)``, ``hp`` = ``width / 2`` rounded up to a multiple of 4."""

def kernel() -> Path:
    """The path :func:`dots` and :func:`best` take on this core by default: the widest it runs."""

def paths() -> list[Path]:
    """Every path this core runs, widest first."""
