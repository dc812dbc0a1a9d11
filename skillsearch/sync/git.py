"""The git command line's one home: fetch a source repository into a local bare cache and export a tree.

Every call is the ``git`` program in a subprocess with a time limit, no terminal prompt, and only the
``https`` and ``file`` transports allowed (``GIT_ALLOW_PROTOCOL``), so a configured URL can never make git
run a helper program or open an ssh session. The URL always follows ``--``, never in an option's place.
Each source has its own bare cache, ``<data-dir>/sources/<name>.git``, where the fetched commit is kept
under ``refs/skillsearch/fetched`` and earlier fetched commits under ``refs/skillsearch/seen/<sha>`` (so
"did the ref move backwards?" can still be answered after the remote rewrote its history).

A tree is exported with ``git archive`` and unpacked by :mod:`tarfile` into a temporary folder, keeping
regular files and folders only (no links, devices or paths outside the folder), within a size limit.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from pathlib import Path, PurePosixPath

from skillsearch.core.errors import UpstreamUnavailableError, ValidationError

__all__ = ["MAX_ARCHIVE_BYTES", "GitCache"]

MAX_ARCHIVE_BYTES = 512 * 1024 * 1024
FETCHED = "refs/skillsearch/fetched"
_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ALLOW_PROTOCOL": "https:file",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_ASKPASS": "",
    "SSH_ASKPASS": "",
    "LC_ALL": "C",
}


class GitCache:
    """The bare cache of one git source."""

    def __init__(self, git_dir: Path, timeout_s: float = 120.0) -> None:
        self.git_dir = Path(git_dir)
        self.timeout_s = timeout_s

    def _git(self, *args: str, check: bool = True, stdout_limit: int | None = None) -> subprocess.CompletedProcess[bytes]:
        env = {**os.environ, **_ENV}
        try:
            proc = subprocess.run(
                ["git", f"--git-dir={self.git_dir}", *args],
                capture_output=True, timeout=self.timeout_s, env=env, check=False, stdin=subprocess.DEVNULL,
            )
        except FileNotFoundError:
            raise UpstreamUnavailableError("git is not installed: a git source needs the git program") from None
        except subprocess.TimeoutExpired:
            raise UpstreamUnavailableError(f"git {args[0]} took longer than {self.timeout_s:.0f} s") from None
        if stdout_limit is not None and len(proc.stdout) > stdout_limit:
            raise ValidationError(f"the exported tree is over {stdout_limit} bytes", {"limit": stdout_limit})
        if check and proc.returncode != 0:
            message = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            raise UpstreamUnavailableError(
                f"git {args[0]} failed: {message[-1] if message else f'exit status {proc.returncode}'}"
            )
        return proc

    def fetch(self, url: str, ref: str) -> str:
        """Fetch ``ref`` of ``url`` and return the commit it names now."""
        if not self.git_dir.exists():
            self.git_dir.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["git", "init", "--bare", "--quiet", str(self.git_dir)], capture_output=True,
                           timeout=self.timeout_s, check=False, env={**os.environ, **_ENV})
            if not (self.git_dir / "HEAD").exists():
                raise UpstreamUnavailableError(f"cannot create the git cache {self.git_dir}")
        self._git("fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", url, f"+{ref}:{FETCHED}")
        return self.commit_of(FETCHED)

    def commit_of(self, rev: str) -> str:
        out = self._git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        return out.stdout.decode().strip()

    def has_commit(self, sha: str) -> bool:
        return self._git("cat-file", "-e", f"{sha}^{{commit}}", check=False).returncode == 0

    def is_ancestor(self, older: str, newer: str) -> bool:
        """``True`` when ``older`` is in ``newer``'s history (equal commits included)."""
        proc = self._git("merge-base", "--is-ancestor", older, newer, check=False)
        if proc.returncode not in (0, 1):
            raise UpstreamUnavailableError(f"git merge-base failed: {proc.stderr.decode('utf-8', 'replace')[-200:]}")
        return proc.returncode == 0

    def keep(self, sha: str) -> None:
        """Keep ``sha`` reachable in the cache (a later fetch of a rewritten ref must not lose it)."""
        self._git("update-ref", f"refs/skillsearch/seen/{sha}", sha)

    def has_path(self, sha: str, subdir: str) -> bool:
        proc = self._git("cat-file", "-t", f"{sha}:{subdir}", check=False)
        return proc.returncode == 0 and proc.stdout.strip() == b"tree"

    def export(self, sha: str, subdir: str | None, dest: Path) -> Path:
        """Write the tree of ``sha`` (or its ``subdir``) into ``dest``; returns the folder that holds it."""
        args = ["archive", "--format=tar", sha]
        if subdir:
            if not self.has_path(sha, subdir):
                raise UpstreamUnavailableError(f"{subdir!r} is not a folder at commit {sha[:12]}")
            args += ["--", subdir]
        tar_bytes = self._git(*args, stdout_limit=MAX_ARCHIVE_BYTES).stdout
        dest.mkdir(parents=True, exist_ok=True)
        root = dest.resolve()
        with tarfile.open(fileobj=io.BytesIO(tar_bytes), mode="r:") as tar:
            for member in tar.getmembers():
                rel = PurePosixPath(member.name)
                if rel.is_absolute() or ".." in rel.parts or not (member.isfile() or member.isdir()):
                    continue
                target = root.joinpath(*rel.parts)
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                handle = tar.extractfile(member)
                if handle is not None:
                    target.write_bytes(handle.read())
        return root.joinpath(*PurePosixPath(subdir).parts) if subdir else root
