"""Which live processes use a data directory: ``fcntl.flock`` on ``<data-dir>/in-use.lock``.

Every ``skillsearch serve`` process (each worker of ``--workers N``), ``skillsearch mcp`` and every command that
writes the directory (``import``, ``reindex``, ``sync``, ``sources sync``/``remove``, ``calibrate``, and the reads
``search``, ``list``, ``get``, ``resolve`` on a directory they may write, which they seed or repair:
``cli/common.in_use``) holds a shared lock on it for its whole life, taken before it opens anything
(:func:`hold_in_use`; a caller of ``main(argv)`` in its own process lets go when the command returns,
:func:`release_in_use`); ``snapshot restore`` takes it exclusively around its swap
(:func:`exclusive`), so it refuses a directory in use, naming the processes (from ``/proc/locks``), and no
server starts on the old files meanwhile: one that starts then waits for the swap and opens the new ones.
The kernel drops a dead process's lock, so a killed server never leaves the directory marked in use.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from skillsearch.retrieval.writelock import open_lock_file

__all__ = ["IN_USE_FILE", "exclusive", "hold_in_use", "lock_pids", "release_in_use"]

IN_USE_FILE = "in-use.lock"
_held: dict[Path, int] = {}  # data directory -> the open file whose shared lock this process keeps


def hold_in_use(data_dir: Path) -> bool:
    """Mark ``data_dir`` used by this process until it exits or :func:`release_in_use` (idempotent: ``False``
    when this process held it already). Waits while a restore swaps it."""
    data_dir = Path(data_dir).absolute()
    if data_dir in _held:
        return False
    path = data_dir / IN_USE_FILE
    while True:
        fd = open_lock_file(path, "the in-use lock")
        fcntl.flock(fd, fcntl.LOCK_SH)
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:  # not the file of contents a restore has just swapped out
            _held[data_dir] = fd
            return True
        os.close(fd)


def release_in_use(data_dir: Path) -> None:
    """Let go of this process's mark on ``data_dir`` (nothing when it holds none): for a caller of a one-shot
    command in its own process (``cli/main.main(argv)``), which goes on, and would otherwise keep an open file
    per data directory, and its own restore of that directory refused."""
    fd = _held.pop(Path(data_dir).absolute(), None)
    if fd is not None:
        os.close(fd)  # the lock goes with the last descriptor of its open file


def lock_pids(path: Path) -> list[int]:
    """The processes holding a ``flock`` on ``path``, as ``/proc/locks`` lists them (empty elsewhere)."""
    try:
        st = os.stat(path)
        lines = Path("/proc/locks").read_text(encoding="ascii", errors="replace").splitlines()
    except OSError:
        return []
    pids: set[int] = set()
    for line in lines:
        fields = line.split()
        if "->" in fields:  # a waiter, not a holder
            continue
        if len(fields) < 6 or fields[1] != "FLOCK":
            continue
        inode = fields[5].rsplit(":", 1)[-1]  # MAJ:MIN:INODE; the inode alone (overlay file systems
        if inode.isdigit() and int(inode) == st.st_ino and fields[4].isdigit():  # list another device)
            pids.add(int(fields[4]))
    pids.discard(os.getpid())
    return sorted(pids)


@contextlib.contextmanager
def exclusive(data_dir: Path, *, create: bool = True, name: str = IN_USE_FILE) -> Iterator[list[int] | None]:
    """Hold ``data_dir``'s in-use lock (or the lock file ``name``) alone if no other live process holds it:
    yields ``None`` then; else holds nothing and yields the pids of the processes that do (empty where
    ``/proc/locks`` is not read). ``create=False``: a directory without the file (no server ever started
    there) is just free."""
    path = Path(data_dir) / name
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0), 0o644)
    except FileNotFoundError:
        yield None
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield lock_pids(path)
            return
        try:
            yield None
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
