"""skillsearch: a search-first skill catalog for LLM agents.

The public API is the composition root :class:`Catalog`, its settings, the request and answer models and the
error tree. Everything else is internal and may change.
"""

import os as _os

# numpy's products in search (a routed index's half, e5's centered cosines; the rest goes through torch,
# see ``cosines.max_cosines``) are memory-bound, so OpenBLAS threads only contend with the encoder's torch
# threads. Measured on 2 cores with 4,076 rows: 11 ms per product with the default thread pool, 0.2 ms
# with one thread (docs/benchmarks.md). A value set by the user wins.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from skillsearch.core.domain import Principal
from skillsearch.core.errors import (
    AccessDeniedError,
    IndexMismatchError,
    IndexNotReadyError,
    ResourceNotFoundError,
    RevisionNotFoundError,
    RevisionPinningError,
    SkillArchivedError,
    SkillInvalidError,
    SkillNotFoundError,
    SkillSearchError,
    SnapshotEncoderError,
    SnapshotInvalidError,
    UnauthenticatedError,
    UpstreamUnavailableError,
    ValidationError,
)
from skillsearch.core.settings import Settings
from skillsearch.retrieval.search_types import SearchRequest, SearchResult
from skillsearch.service import Catalog, ImportReport

__version__ = "0.1.0"

__all__ = [
    "AccessDeniedError",
    "Catalog",
    "ImportReport",
    "IndexMismatchError",
    "IndexNotReadyError",
    "Principal",
    "ResourceNotFoundError",
    "RevisionNotFoundError",
    "RevisionPinningError",
    "SearchRequest",
    "SearchResult",
    "Settings",
    "SkillArchivedError",
    "SkillInvalidError",
    "SkillNotFoundError",
    "SkillSearchError",
    "SnapshotEncoderError",
    "SnapshotInvalidError",
    "UnauthenticatedError",
    "UpstreamUnavailableError",
    "ValidationError",
]
