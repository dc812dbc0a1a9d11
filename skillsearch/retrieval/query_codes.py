"""What a scan of the compact copy (``retrieval/vector_scan.py``) scores of a request's query vectors: whether
the first vector is the normalised sum of the others (:func:`derived_first`), so that its scores are derived
from theirs, and the int8 codes and shared scale of the vectors scanned (:func:`quantised`, kept for the last
few requests: a search's int4 scan and its rescan both ask).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from skillsearch.retrieval.compact import quantise_together

__all__ = ["DERIVED_WITHIN", "QUANTISED_KEPT", "Quantised", "derived_error", "derived_first", "quantised"]

# A request of several sentences is embedded as its sentences and, first, their normalised sum standing in for
# the whole request (``encoder.encode_query_parts``). That first vector's product with a row is the sum of the
# sentences' products over the sum's norm, so the scan derives it from their columns instead of scoring a
# column of its own (:func:`derived_first`): one vector fewer to scan, a third of the kernel's work for a
# request of two sentences. Derived when the first vector is within this distance of the sentences' sum
# normalised (float32 rounding is some 1e-7); the distance is added to the error margin.
DERIVED_WITHIN = 1e-4

# Requests' query vectors whose codes are kept (:func:`quantised`): a search's scans ask within a millisecond,
# a few searches may run at once.
QUANTISED_KEPT = 16

# Whether the first vector is derived (its sum's norm and distance, :func:`derived_first`), the int8 codes of
# the vectors scanned and their one scale (repeated per vector).
Quantised = tuple[tuple[float, float] | None, np.ndarray, np.ndarray]


def derived_first(queries: np.ndarray) -> tuple[float, float] | None:
    """When ``queries[0]`` is the normalised sum of the rest (a request and its sentences, two or more, as
    search embeds them; within :data:`DERIVED_WITHIN`): the norm of that sum and the distance between the
    two, so a scan derives the first vector's scores from the others' instead of scanning it. None
    otherwise (one vector, or a first vector embedded on its own)."""
    if queries.shape[0] < 3:
        return None
    total = queries[1:].sum(axis=0, dtype=np.float64)
    norm = float(np.linalg.norm(total))
    if norm == 0.0:
        return None
    distance = float(np.linalg.norm(total / norm - queries[0]))
    return (norm, distance) if distance <= DERIVED_WITHIN else None


def derived_error(derived: tuple[float, float], sentences: int) -> tuple[float, float]:
    """What the derived first vector (:func:`derived_first`) does to a margin: the factor on the query's
    rounding term (the sentences' rounding errors summed over the norm: variance m / N^2 times one's; the
    row's term is as for any unit vector) and the distance to add (the first vector's from the sum)."""
    total_norm, distance = derived
    return float(np.sqrt(sentences)) / total_norm, distance


def quantised(queries: np.ndarray) -> Quantised:
    """What every scan scores: whether the first vector is derived from the others (:func:`derived_first`),
    and the int8 codes and shared scale of the vectors scanned (all of them, or the others when it is); read
    only. Kept for the last few requests' vectors (:data:`QUANTISED_KEPT`): the int4 tier's scan and the
    rescan of the same search both ask, and the dozen numpy calls cost 0.1 ms after a forward pass."""
    queries = np.ascontiguousarray(queries)
    return _quantised_of(queries.tobytes(), queries.dtype.str, queries.shape)


@lru_cache(maxsize=QUANTISED_KEPT)
def _quantised_of(data: bytes, dtype: str, shape: tuple[int, ...]) -> Quantised:
    queries = np.frombuffer(data, dtype=dtype).reshape(shape)
    derived = derived_first(queries)
    q_codes, q_scales = quantise_together(queries[1:] if derived is not None else queries)
    q_codes.setflags(write=False)
    q_scales.setflags(write=False)
    return derived, q_codes, q_scales
