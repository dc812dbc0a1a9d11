"""torch's home: the one matrix product search takes from torch (see :func:`max_cosines`).

Why torch and not numpy: OpenBLAS (numpy, held to one thread, see ``skillsearch/__init__.py``) multiplies
a tall matrix by a few vectors slowly, and torch's matrix-vector path is slower than its GEMM. Measured on
2 cores with the matrix out of cache as it is between searches (10k x 384 / 100k x 384, ms): one vector
1.3 / 12.6 with numpy, 0.65 / 4.8 with torch; five vectors 3.1 / 30.9 against 1.0 / 7.5
(docs/benchmarks.md, "Speed work"). torch is loaded with the encoder's library (sentence-transformers)
already, so a search never has two thread pools (OpenBLAS's and torch's) spinning. It is imported on the
first product, never at import time.
"""

from __future__ import annotations

import warnings

import numpy as np

__all__ = ["max_cosines", "set_intra_op_threads"]


def set_intra_op_threads(threads: int) -> None:
    """torch's intra-op threads for this whole process (``retrieval/batching.py`` chooses the number)."""
    import torch

    if threads > 0 and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def max_cosines(matrix: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Each row's best product over the query vectors: ``(matrix @ queries.T).max(axis=1)`` as float32, for
    a C-contiguous float32 ``matrix`` and a C-contiguous float32 ``queries`` of shape ``(n, dim)``.

    A single vector is given twice: torch's GEMM beats its matrix-vector path."""
    import torch

    columns = queries if len(queries) > 1 else np.vstack([queries, queries])
    with warnings.catch_warnings():
        # The snapshot's matrix is read-only; torch only reads it here.
        warnings.simplefilter("ignore", UserWarning)
        rows = torch.from_numpy(matrix)
    with torch.inference_mode():
        best: np.ndarray = torch.mm(rows, torch.from_numpy(columns).T).amax(dim=1).numpy()
    return best
