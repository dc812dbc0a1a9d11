"""The git command line's one home: fetch a source repository into a local bare cache and export a tree.

Every call is the ``git`` program in a subprocess with a time limit, no terminal prompt, and only the
``https`` and ``file`` transports allowed (``GIT_ALLOW_PROTOCOL``), so a configured URL can never make git
run a helper program or open an ssh session (:mod:`skillsearch.sync.git_runs`: each run in its own process
group, ended at SIGTERM). The URL always follows ``--``, never in an option's place.
Each source has its own bare cache, ``<data-dir>/sources/<name>.git``, where the fetched commit is kept
under ``refs/skillsearch/fetched`` and earlier fetched commits under ``refs/skillsearch/seen/<sha>`` (so
"did the ref move backwards?" can still be answered after the remote rewrote its history).

A tree is exported byte for byte as committed: the cache's ``info/attributes`` turns off every attribute
``git archive`` would apply (``export-subst``, ``export-ignore``, end-of-line and encoding conversions,
``ident``, filters), whatever the tree's ``.gitattributes`` say. Before anything is exported,
``git ls-tree -r -t -l`` gives every blob's size and every folder (the archive gives each a header too): a
tree over ``max_bytes`` (files' bytes plus 512 per entry, ``Limits.max_source_bytes``), over
``Limits.max_source_entries`` entries, or holding a path over ``MAX_PATH_BYTES``, is refused without a byte
of it being read. The archive is then streamed through :mod:`tarfile` into a temporary folder (regular files
and folders only: no links, devices or paths outside the folder) with a hard stop at the limit, so memory
stays flat whatever the tree holds. Committed
symbolic links and submodules are listed (:class:`Tree`) so the caller can report them.

Each export runs in ``<cache-dir>/export-*`` under a shared ``flock`` of ``<cache-dir>/exports.lock``;
folders left by a killed run are removed by the next run that finds no other export in progress.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from skillsearch.core.errors import StopFlag, UpstreamUnavailableError, ValidationError
from skillsearch.core.limits import Limits
from skillsearch.core.wellformed import printable
from skillsearch.sync.git_runs import GIT_ENV, POLL_S, GitRuns, git_message

__all__ = ["GitCache", "Tree", "export_folder"]

FETCHED = "refs/skillsearch/fetched"
ENTRY_BYTES = 512  # what each tree entry counts towards the limit (a tar header)
MAX_PATH_BYTES = 4096
# Everything git archive could rewrite, switched off (info/attributes overrides the tree's own).
ATTRIBUTES = "* -text -eol -ident -filter -working-tree-encoding -export-subst -export-ignore\n"
_CHUNK = 1024 * 1024
# tempfile's names (never a source's cache, which ends in ".git", even for a source named "export-...")
_EXPORT_NAME = re.compile(r"export-[a-z0-9_]{8}")


@dataclass(frozen=True)
class Tree:
    """What ``git ls-tree`` says of an exported tree: its size as counted against the limit, and the
    entries the export leaves out (paths relative to the exported folder)."""

    entries: int
    bytes: int
    links: tuple[str, ...] = ()
    submodules: tuple[str, ...] = ()


class _Capped:
    """A read-only stream that stops with ``ValidationError`` once more than ``limit`` bytes came through."""

    def __init__(self, raw: IO[bytes], limit: int) -> None:
        self._raw, self._limit, self.read_bytes = raw, limit, 0

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size if size >= 0 else _CHUNK)
        self.read_bytes += len(data)
        if self.read_bytes > self._limit:
            raise ValidationError(f"git archive wrote more than {self._limit} bytes, over the limit",
                                  {"limit": self._limit})
        return data


class GitCache:
    """The bare cache of one git source."""

    def __init__(self, git_dir: Path, timeout_s: float = 120.0, max_bytes: int | None = None,
                 stopping: StopFlag | None = None) -> None:
        self.git_dir = Path(git_dir)
        self.timeout_s = timeout_s
        limits = Limits.from_env()
        self.max_bytes = max_bytes if max_bytes is not None else limits.max_source_bytes
        self.max_entries = limits.max_source_entries
        # Set when the process stops (SIGTERM, a server's shutdown): a git run in progress is ended (SIGTERM to
        # its process group, then SIGKILL after TERM_WAIT_S) and ``WriteStopped`` raised; nothing was applied.
        self.stopping = stopping
        self.runs = GitRuns(self.git_dir, timeout_s, stopping)

    @contextmanager
    def _writing(self, what: str) -> Iterator[None]:
        """Hold the cache's own ``flock`` (``.<name>.git.writing`` beside it) while git writes its refs: the
        processes of a data directory may fetch one source together. Held, no git of ours is writing the
        cache, so a ``*.lock`` file git keeps while it updates a ref is one a killed git left behind (SIGKILL
        between taking and renaming it): removed, else every later fetch fails on it ("File exists")."""
        self.git_dir.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.git_dir.with_name(f".{self.git_dir.name}.writing"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                     0o600)
        try:
            # Another process's fetch may hold it up to its time limit: a stop (SIGTERM) does not wait for it.
            while not _try_flock(fd):
                if self.stopping is not None and self.stopping.is_set():
                    raise self.runs.stopped(f"{what} (it waited for another process's fetch of this cache)")
                time.sleep(POLL_S)
            for stale in [*self.git_dir.glob("*.lock"), *(self.git_dir / "refs").rglob("*.lock")]:
                stale.unlink(missing_ok=True)
            yield
        finally:
            os.close(fd)  # the lock goes with it

    def fetch(self, url: str, ref: str) -> str:
        """Fetch ``ref`` of ``url`` and return the commit it names now."""
        with self._writing("fetch"):
            return self._fetch(url, ref)

    def _fetch(self, url: str, ref: str) -> str:
        if not self.git_dir.exists():
            self.git_dir.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["git", "init", "--bare", "--quiet", str(self.git_dir)], capture_output=True,
                           timeout=self.timeout_s, check=False, env={**os.environ, **GIT_ENV})
            if not (self.git_dir / "HEAD").exists():
                raise UpstreamUnavailableError(f"cannot create the git cache {self.git_dir}")
        self._attributes()
        self.runs.run("fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", url, f"+{ref}:{FETCHED}")
        try:
            return self.commit_of(FETCHED)
        except UpstreamUnavailableError:  # a tag of a tree or a blob: name it, not our own ref
            kind = self.runs.run("cat-file", "-t", f"{FETCHED}^{{}}", check=False).stdout.decode().strip()
            raise UpstreamUnavailableError(f"{ref!r} names a {kind or 'object'}, not a commit: a git source reads a "
                                           "branch, a tag of a commit or a commit") from None

    def _attributes(self) -> None:
        """Make ``git archive`` export the committed bytes (also in a cache made before this rule)."""
        path = self.git_dir / "info" / "attributes"
        try:
            if path.read_text(encoding="utf-8") == ATTRIBUTES:
                return
        except (FileNotFoundError, UnicodeDecodeError):
            pass
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name("attributes.tmp")
        tmp.write_text(ATTRIBUTES, encoding="utf-8")
        tmp.replace(path)

    def commit_of(self, rev: str) -> str:
        out = self.runs.run("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        return out.stdout.decode().strip()

    def has_commit(self, sha: str) -> bool:
        return self.runs.run("cat-file", "-e", f"{sha}^{{commit}}", check=False).returncode == 0

    def is_ancestor(self, older: str, newer: str) -> bool:
        """``True`` when ``older`` is in ``newer``'s history (equal commits included)."""
        proc = self.runs.run("merge-base", "--is-ancestor", older, newer, check=False)
        if proc.returncode not in (0, 1):
            raise UpstreamUnavailableError(f"git merge-base failed: {git_message(proc.stderr, proc.returncode)}")
        return proc.returncode == 0

    def keep(self, sha: str) -> None:
        """Keep ``sha`` reachable in the cache (a later fetch of a rewritten ref must not lose it)."""
        with self._writing("update-ref"):
            self.runs.run("update-ref", f"refs/skillsearch/seen/{sha}", sha)

    def has_path(self, sha: str, subdir: str) -> bool:
        proc = self.runs.run("cat-file", "-t", f"{sha}:{subdir}", check=False)
        return proc.returncode == 0 and proc.stdout.strip() == b"tree"

    def tree(self, sha: str, subdir: str | None) -> Tree:
        """The size of the tree of ``sha`` (or its ``subdir``) and its links and submodules, read from
        ``git ls-tree`` as it streams; over ``max_bytes`` raises ``ValidationError`` at once."""
        where = f"{sha}:{subdir}" if subdir else sha
        shown = f"{sha[:12]}" + (f":{subdir}" if subdir else "")

        def consume(out: IO[bytes]) -> Tree:
            entries, total, largest = 0, 0, ("", 0)
            links: list[str] = []
            submodules: list[str] = []
            rest = b""
            while chunk := out.read(_CHUNK):
                records = (rest + chunk).split(b"\0")
                rest = records.pop()
                if len(rest) > MAX_PATH_BYTES + 100:
                    raise ValidationError(f"the tree at {shown} holds a path over {MAX_PATH_BYTES} bytes")
                for record in records:
                    meta, _, raw_path = record.partition(b"\t")
                    mode, kind, _obj, size = meta.split()
                    path = raw_path.decode("utf-8", "surrogateescape")
                    if len(raw_path) > MAX_PATH_BYTES:  # in the middle of a chunk too, not only at its end
                        raise ValidationError(f"the tree at {shown} holds a path over {MAX_PATH_BYTES} bytes "
                                              f"({printable(path[:60])!r}...): nothing was exported",
                                              {"limit": MAX_PATH_BYTES})
                    entries += 1
                    if entries > self.max_entries:
                        raise ValidationError(
                            f"the tree at {shown} has more than {self.max_entries} entries (files and folders;"
                            " SKILLSEARCH_MAX_SOURCE_ENTRIES): nothing was exported", {"limit": self.max_entries})
                    blob = int(size) if kind == b"blob" else 0
                    total += ENTRY_BYTES + blob
                    if blob > largest[1]:
                        largest = (path, blob)
                    if mode == b"120000":
                        links.append(path)
                    elif kind == b"commit":
                        submodules.append(path)
                    if total > self.max_bytes:
                        raise ValidationError(
                            f"the tree at {shown} is over the limit of {self.max_bytes} bytes "
                            f"(SKILLSEARCH_MAX_SOURCE_BYTES; the largest file seen: {largest[0]!r}, "
                            f"{largest[1]} bytes): nothing was exported",
                            {"limit": self.max_bytes})
            return Tree(entries, total, tuple(links), tuple(submodules))

        return self.runs.stream(["ls-tree", "-r", "-t", "-l", "-z", where], consume)

    def export(self, sha: str, subdir: str | None, dest: Path) -> tuple[Path, Tree]:
        """Write the tree of ``sha`` (or its ``subdir``) into ``dest``; returns the folder that holds it and
        what ``git ls-tree`` said of it. Nothing is exported when the tree is over the limit."""
        args = ["archive", "--format=tar", sha]
        if subdir:
            if not self.has_path(sha, subdir):
                raise UpstreamUnavailableError(f"{subdir!r} is not a folder at commit {sha[:12]}")
            args += ["--", subdir]
        tree = self.tree(sha, subdir)
        dest.mkdir(parents=True, exist_ok=True)
        root = dest.resolve()
        # The tar stream's own bytes: headers, padding and long-path records beside the files' bytes.
        cap = tree.bytes + (tree.entries + 8) * (3 * ENTRY_BYTES + MAX_PATH_BYTES)

        def consume(out: IO[bytes]) -> None:
            stream = _Capped(out, cap)
            self._unpack(stream, root)
            while stream.read(_CHUNK):  # the end-of-archive padding: git must not die of a closed pipe
                pass

        self.runs.stream(args, consume)
        return (root.joinpath(*PurePosixPath(subdir).parts) if subdir else root), tree

    def _unpack(self, stream: _Capped, root: Path) -> None:
        written = 0
        with tarfile.open(fileobj=stream, mode="r|") as tar:  # type: ignore[call-overload]
            while (member := tar.next()) is not None:
                tar.members = []  # a stream is read once: keep no list of every member seen
                rel = PurePosixPath(member.name)
                if rel.is_absolute() or ".." in rel.parts or not (member.isfile() or member.isdir()):
                    continue
                target = root.joinpath(*rel.parts)
                try:
                    if member.isdir():
                        target.mkdir(parents=True, exist_ok=True)
                        continue
                    written += ENTRY_BYTES + member.size
                    if written > self.max_bytes:
                        raise ValidationError(f"the exported tree is over the limit of {self.max_bytes} bytes",
                                              {"limit": self.max_bytes})
                    target.parent.mkdir(parents=True, exist_ok=True)
                    handle = tar.extractfile(member)
                    if handle is None:
                        continue
                    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
                except (FileExistsError, NotADirectoryError):
                    # Only a crafted tree names a path twice (git itself never writes one): the temporary
                    # folder's path in "File exists: ..." would be no help to whoever reads the error.
                    raise ValidationError(f"the tree names {printable(member.name)!r} more than once (a malformed "
                                          "tree, which git fsck reports): nothing of this commit was applied",
                                          {"path": printable(member.name)}) from None
                except OSError as exc:
                    if exc.errno != errno.ENAMETOOLONG:
                        raise
                    raise ValidationError(f"the path {printable(member.name[:60])!r}... ({len(member.name)} bytes) "
                                          f"is too long for this system under {root.parent.parent}: nothing of this commit was"
                                          " applied", {"path": printable(member.name)}) from None
                with os.fdopen(fd, "wb") as out:
                    shutil.copyfileobj(handle, out, _CHUNK)


def _try_flock(fd: int) -> bool:
    """Take ``fd``'s exclusive ``flock`` if no other holds it: whether it was taken."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@contextmanager
def export_folder(parent: Path) -> Iterator[Path]:
    """A temporary folder ``parent/export-*`` for one export, removed afterwards.

    Each run holds a shared ``flock`` on ``parent/exports.lock`` while its folder exists (the kernel drops
    it when the process dies, even after ``kill -9``); a run that can take the lock exclusively knows no
    export is in progress anywhere, so every ``export-*`` left there was left by a killed run: it removes
    them first."""
    parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(parent / "exports.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pass  # another run is exporting: the folders there may be its own
        else:
            for stale in parent.glob("export-*"):
                if _EXPORT_NAME.fullmatch(stale.name) and stale.is_dir() and not stale.is_symlink():
                    shutil.rmtree(stale, ignore_errors=True)
        fcntl.flock(fd, fcntl.LOCK_SH)
        with tempfile.TemporaryDirectory(prefix="export-", dir=parent) as tmp:
            yield Path(tmp)
    finally:
        os.close(fd)
