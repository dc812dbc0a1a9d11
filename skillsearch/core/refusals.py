"""What to do about a write the system refused, by its cause (the error number): one piece of advice for
every layer that reports one (the snapshot's copy and restore, the index's vectors and manifest, the
catalog's online backup). "Free space" is wrong advice for a file size limit (``EFBIG``, ``ulimit -f``):
the disk may be nearly empty; so is "make the folder writable" for a full disk.
"""

from __future__ import annotations

import errno

__all__ = ["refusal_advice"]

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
