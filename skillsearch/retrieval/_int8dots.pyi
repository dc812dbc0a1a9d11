"""Typing for the C extension ``_int8dots.c`` (the vector stage's int8 kernel on AVX2 cores)."""

from typing import Literal

import numpy as np

def dots(rows: np.ndarray, queries: np.ndarray, out: np.ndarray, *, portable: bool = False) -> None:
    """``out[i, j] = rows[i] . queries[j]``, exact: int8 rows (n, d) and queries (q, d), float32 out (n, q), all
    C-contiguous, d at most 1024. The GIL is released while it runs."""

def best(
    rows: np.ndarray, queries: np.ndarray, best: np.ndarray, sum: np.ndarray | None = None, *, portable: bool = False,
) -> None:
    """Each row's largest product over the query vectors into ``best`` (n,), exact, and their sum into ``sum``
    (n,) when given (rounded to float32): :func:`dots` without writing every product. At least one query
    vector."""

def kernel() -> Literal["avx2", "portable"]:
    """The path :func:`dots` takes on this core."""
