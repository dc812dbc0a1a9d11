"""What the first search over an index snapshot would make, made as soon as the snapshot is.

A large index's first search made the int4 copy its scan reads first (``vector_scan.prepare``: 0.34 s at 1M
rows, and again after a removal makes new parts), and the first request in another language made the e5
route's document languages (``RequestRoute.language_codes``, a scan of the int8 copy). Servers
(``Catalog.prepare_in_background``) have each snapshot warmed in a background thread instead:
``SearchIndex.warm_snapshots`` starts :func:`warm_in_background` for every snapshot it makes from then on.
"""

from __future__ import annotations

import logging
from threading import Thread
from typing import TYPE_CHECKING

from skillsearch.retrieval.vector_scan import prepare

if TYPE_CHECKING:
    from skillsearch.retrieval.indexer import IndexSnapshot

__all__ = ["warm", "warm_in_background"]

log = logging.getLogger("skillsearch")


def warm(snapshot: IndexSnapshot) -> None:
    """Each centered route's document languages (carried to the snapshots later made from this one) and the
    int4 copy that an uncentered route scans first, where it reads one."""
    compact = snapshot.vectors.compact
    for route in snapshot.routing.routes():
        if route.centering is not None:
            _ = route.language_codes
        elif compact is not None:
            prepare(compact, route.columns)


def warm_in_background(snapshot: IndexSnapshot) -> None:
    """:func:`warm` in a daemon thread; a failure there is logged, and the first search makes what it needs
    as it would have."""

    def run() -> None:
        try:
            warm(snapshot)
        except Exception:  # the searches still work without it
            log.exception("warming index generation %s failed; its first search does the work", snapshot.generation)

    Thread(target=run, name="index-warm", daemon=True).start()
