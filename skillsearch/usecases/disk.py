"""The disk a snapshot is copied onto (``snapshot create`` and ``restore``): whether the files fit before
anything is copied (:func:`check_room`). When the system refuses a write all the same, its cause and the way
out are :func:`skillsearch.core.refusals.refusal_advice`.
"""

from __future__ import annotations

import os
from pathlib import Path

from skillsearch.core.errors import IndexNotReadyError

__all__ = ["check_room"]


def check_room(data_dir: Path, need: int) -> None:
    """Refuse before copying when ``need`` bytes do not fit on the disk of ``data_dir`` (or of the nearest folder
    above it that exists): the copy would fill the disk first."""
    folder = data_dir.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        st = os.statvfs(folder)
    except OSError:
        return
    free = st.f_bavail * st.f_frsize
    if need > free:
        raise IndexNotReadyError(
            f"the snapshot's files take {need / 1e6:.1f} MB but the disk of {data_dir} has {free / 1e6:.1f} MB free;"
            f" nothing was copied and {data_dir} is unchanged: free space there (or restore elsewhere), then run it"
            " again", {"data_dir": str(data_dir), "reason": "no_space", "bytes_needed": need, "bytes_free": free})
