"""skillsearch: a search-first skill catalog for LLM agents.

The public API is the composition root :class:`Catalog`, its settings, the request and answer models and the
error tree. Everything else is internal and may change.

The names load on first use (PEP 562): ``import skillsearch`` runs nothing but this file, so the command's
entry point (``skillsearch/__main__.py``) can take a Ctrl-C that arrives while the rest loads.
"""

import os as _os
import typing as _typing

# numpy's products in search (a routed index's half, e5's centered cosines; the rest goes through torch,
# see ``cosines.max_cosines``) are memory-bound, so OpenBLAS threads only contend with the encoder's torch
# threads. Measured on 2 cores with 4,076 rows: 11 ms per product with the default thread pool, 0.2 ms
# with one thread (docs/benchmarks.md). A value set by the user wins.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

if _typing.TYPE_CHECKING:
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

# Each public name and the module that defines it.
_HOMES = {
    "Principal": "skillsearch.core.domain",
    **dict.fromkeys((
        "AccessDeniedError", "IndexMismatchError", "IndexNotReadyError", "ResourceNotFoundError",
        "RevisionNotFoundError", "RevisionPinningError", "SkillArchivedError", "SkillInvalidError",
        "SkillNotFoundError", "SkillSearchError", "SnapshotEncoderError", "SnapshotInvalidError",
        "UnauthenticatedError", "UpstreamUnavailableError", "ValidationError",
    ), "skillsearch.core.errors"),
    "Settings": "skillsearch.core.settings",
    "SearchRequest": "skillsearch.retrieval.search_types",
    "SearchResult": "skillsearch.retrieval.search_types",
    "Catalog": "skillsearch.service",
    "ImportReport": "skillsearch.service",
}

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


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'skillsearch' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
