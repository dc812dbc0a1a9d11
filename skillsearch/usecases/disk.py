"""The disk a snapshot is copied onto (``snapshot create`` and ``restore``): whether the files fit before
anything is copied (:func:`check_room`), and, when the system refused a write all the same, what its cause
was and the way out (:func:`refusal_advice`). "Free space" is wrong advice for a file size limit (``EFBIG``,
``ulimit -f``): the disk may be nearly empty; so is "make the folder writable" for a full disk.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from skillsearch.core.errors import IndexNotReadyError

__all__ = ["check_room", "refusal_advice"]

_WRITABLE = "this user may not write there: make the folder writable (or choose one it may write)"
_ADVICE = {
    errno.ENOSPC: "its disk is full: free space on it",
    errno.EDQUOT: "this user's disk quota is used up: free space or raise the quota",
    errno.EFBIG: "a file is larger than this process may write (a file size limit, `ulimit -f`): raise the limit,"
                 " or run it where none applies",
    errno.EACCES: _WRITABLE,
    errno.EPERM: _WRITABLE,
    errno.EROFS: "its file system is read-only: choose a folder on a writable one",
    errno.ENOTDIR: "a part of the path is a file, not a folder: choose another path",
    errno.EEXIST: "that path exists already (a file where a folder is needed?): move it away or choose another path",
}


def refusal_advice(exc: OSError) -> str:
    """What to do about the write the system refused with ``exc``, by its cause; the causes this does not know
    (an I/O error, ...) get both usual ways out."""
    return _ADVICE.get(exc.errno or 0, "free space on its disk (or make its folder writable)")


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
