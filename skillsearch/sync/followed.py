"""The local sources as ``sync.toml`` says now, for a server that keeps them while it runs.

``sources add`` and ``sources remove`` (or an editor) change the file under a running ``serve`` or ``mcp``;
:class:`FollowedSources` reads it again whenever its size, modification time or inode moved (a stat per
look, so a status request or the keeper's check every couple of seconds costs no parse), so the keeper
runs and watches the sources the file holds, and the status shows them. A file that does not read (half
written by an editor, a mistake) changes nothing: the last good sources stay, and the problem is logged
once. A file that is gone configures no source (as :func:`~skillsearch.sync.sources.load_sources` says).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from skillsearch.core.errors import ValidationError
from skillsearch.sync.sources import SourceConfig, load_sources

__all__ = ["FollowedSources"]

log = logging.getLogger("skillsearch.sync")

_Signature = tuple[int, int, int, int] | None


def _signature(path: Path) -> _Signature:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError:  # unreadable for now: as good as unchanged
        return (-1, -1, -1, -1)
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class FollowedSources:
    """``current()``: the sources ``path`` holds now; ``initial``: those read from it at start."""

    def __init__(self, path: Path, initial: Sequence[SourceConfig]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._seen = _signature(self.path)
        self._sources = tuple(initial)

    def current(self) -> tuple[SourceConfig, ...]:
        signature = _signature(self.path)
        with self._lock:
            if signature == self._seen or signature == (-1, -1, -1, -1):
                return self._sources
            self._seen = signature
            try:
                self._sources = load_sources(self.path)
            except ValidationError as exc:
                log.warning("%s: %s; the sources stay as they were until it reads", self.path, exc.message)
            return self._sources
