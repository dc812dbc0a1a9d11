"""Tuning the semantic weight on labelled requests (``skillsearch calibrate --queries``).

Each candidate weight is scored by MRR@10 over the requests, searched as the caller of ``search`` sees the
catalog; the result is the calibration entries the index stores beside its computed calibration.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from skillsearch.retrieval.calibration import tune_weight
from skillsearch.retrieval.search_types import SearchRequest, SearchResult

__all__ = ["tuned_weight"]


def tuned_weight(
    search: Callable[[SearchRequest], SearchResult], labelled: Sequence[tuple[str, Sequence[str]]]
) -> dict[str, Any]:
    """``semantic_weight`` (the grid weight with the best MRR@10 over ``labelled``: text, expected slugs)
    and ``tuned_on`` (how many requests, the MRR@10 of every weight tried)."""
    wanted = [(text, set(expected)) for text, expected in labelled]

    def mrr(weight: float) -> float:
        total = 0.0
        for text, expected in wanted:
            hits = search(SearchRequest(text, limit=10, semantic_weight=weight)).hits
            rank = next((i for i, h in enumerate(hits, start=1) if h.skill.slug in expected), None)
            total += 1.0 / rank if rank else 0.0
        return total / len(wanted)

    weight, scores = tune_weight(mrr)
    return {
        "semantic_weight": weight,
        "tuned_on": {"queries": len(wanted), "mrr@10": {str(w): round(v, 4) for w, v in scores.items()}},
    }
