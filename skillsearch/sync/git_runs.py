"""One run of the ``git`` program for a source's cache: in a process group of its own, bounded in time, and ended
when the process stops.

A run is a subprocess with no terminal prompt and only the ``https`` and ``file`` transports
(``GIT_ALLOW_PROTOCOL``), its output collected in temporary files (:meth:`GitRuns.run`) or read as it comes
(:meth:`GitRuns.stream`, never held whole). A watcher looks every ``_POLL_S`` at the time limit and at the
stop flag (SIGTERM, a server's shutdown): past the limit git is killed (``UpstreamUnavailableError``); at a
stop its process group gets SIGTERM (git removes its lock files and temporary packs), SIGKILL after
:data:`TERM_WAIT_S`, and :class:`WriteStopped` says nothing was applied. What git said on failure is one
bounded line (:func:`git_message`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TypeVar

from skillsearch.core.errors import SkillSearchError, StopFlag, UpstreamUnavailableError, WriteStopped

__all__ = ["GIT_ENV", "POLL_S", "TERM_WAIT_S", "GitRuns", "git_message"]

# How often a git run looks at its stop flag and deadline, and how long a stopped one is given to end after
# SIGTERM (git removes its lock files and temporary packs on it) before SIGKILL.
POLL_S = 0.1
TERM_WAIT_S = 5.0
GIT_ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ALLOW_PROTOCOL": "https:file",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_ASKPASS": "",
    "SSH_ASKPASS": "",
    "LC_ALL": "C",
    # An automatic gc runs inside the fetch that starts it, not detached: under the cache's lock too.
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "gc.autoDetach",
    "GIT_CONFIG_VALUE_0": "false",
}
T = TypeVar("T")


class GitRuns:
    """The runs of git on the cache ``git_dir``, each within ``timeout_s`` and ended once ``stopping`` is set."""

    def __init__(self, git_dir: Path, timeout_s: float, stopping: StopFlag | None) -> None:
        self.git_dir = git_dir
        self.timeout_s = timeout_s
        self.stopping = stopping

    def _start(self, args: Sequence[str], stdout: IO[bytes] | int, stderr: IO[bytes]) -> subprocess.Popen[bytes]:
        """git in a process group of its own (its helpers, ``index-pack`` and ``git-remote-https``, end with it)."""
        try:
            return subprocess.Popen(["git", f"--git-dir={self.git_dir}", *args], stdout=stdout, stderr=stderr,
                                    stdin=subprocess.DEVNULL, env={**os.environ, **GIT_ENV}, start_new_session=True)
        except FileNotFoundError:
            raise UpstreamUnavailableError("git is not installed: a git source needs the git program") from None

    def _watch(self, proc: subprocess.Popen[bytes], done: threading.Event | None = None) -> str | None:
        """Wait for ``proc`` (or ``done``) within the time limit, ending it when the limit passes or the
        process stops: ``"expired"``, ``"stopped"``, or None when it ended (``done`` was set) first."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            if done is not None:
                if done.wait(POLL_S):
                    return None
            else:
                try:
                    proc.wait(POLL_S)
                    return None
                except subprocess.TimeoutExpired:
                    pass
            if self.stopping is not None and self.stopping.is_set():
                _end(proc)
                return "stopped"
            if time.monotonic() > deadline:
                _end(proc, term_wait_s=0.0)
                return "expired"

    def stopped(self, what: str) -> WriteStopped:
        return WriteStopped(f"stopped git {what} in {self.git_dir} (the process is stopping); nothing of this"
                            " source was applied, its cache is kept: the next sync runs it again")

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = self._start(args, out, err)
            try:
                ended = self._watch(proc)
            except BaseException:
                _end(proc, term_wait_s=0.0)
                raise
            if ended == "stopped":
                raise self.stopped(args[0])
            if ended == "expired":
                raise UpstreamUnavailableError(f"git {args[0]} took longer than {self.timeout_s:.0f} s")
            out.seek(0)
            err.seek(0)
            result = subprocess.CompletedProcess(proc.args, proc.returncode, out.read(), err.read())
        if check and result.returncode != 0:
            raise UpstreamUnavailableError(f"git {args[0]} failed: {git_message(result.stderr, result.returncode)}")
        return result

    def stream(self, args: list[str], consume: Callable[[IO[bytes]], T]) -> T:
        """Run git with its output read by ``consume`` as it comes (never held whole), within the time
        limit; git is killed when ``consume`` stops early."""
        with tempfile.TemporaryFile() as err:
            proc = self._start(args, subprocess.PIPE, err)
            # A watcher ends git when the time limit passes or the process stops (``consume`` then sees the
            # stream end, or fails on it).
            done, ended = threading.Event(), [""]

            def watch() -> None:
                ended[0] = self._watch(proc, done) or ""

            watcher = threading.Thread(target=watch, name="skillsearch-git-watch", daemon=True)
            watcher.start()
            assert proc.stdout is not None
            try:
                result = consume(proc.stdout)
                proc.stdout.close()
                proc.wait()
            except BaseException as exc:
                done.set()
                watcher.join()
                _end(proc, term_wait_s=0.0)
                proc.stdout.close()
                if ended[0] == "stopped":
                    raise self.stopped(args[0]) from None
                if ended[0] == "expired":
                    raise UpstreamUnavailableError(f"git {args[0]} took longer than {self.timeout_s:.0f} s") from None
                if isinstance(exc, SkillSearchError) or not isinstance(exc, Exception):
                    raise
                err.seek(0)
                raise UpstreamUnavailableError(f"git {args[0]} failed: {git_message(err.read(), None) or exc}") from None
            finally:
                done.set()
                watcher.join()
            if ended[0] == "stopped":
                raise self.stopped(args[0])
            if ended[0] == "expired":
                raise UpstreamUnavailableError(f"git {args[0]} took longer than {self.timeout_s:.0f} s")
            if proc.returncode != 0:
                err.seek(0)
                raise UpstreamUnavailableError(f"git {args[0]} failed: {git_message(err.read(), proc.returncode)}")
            return result


def _end(proc: subprocess.Popen[bytes], term_wait_s: float = TERM_WAIT_S) -> None:
    """End git and its process group: SIGTERM (git removes its lock files and temporary packs), then SIGKILL
    once ``term_wait_s`` passed; waits for git itself."""
    if proc.poll() is not None:
        return
    for sig in ((signal.SIGTERM,) if term_wait_s > 0 else ()) + (signal.SIGKILL,):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(term_wait_s if sig == signal.SIGTERM else None)
            return
        except subprocess.TimeoutExpired:
            continue


MAX_MESSAGE_CHARS = 600


def git_message(stderr: bytes, returncode: int | None) -> str:
    """What git said went wrong, whole: its ``fatal:``/``error:`` lines (``'/x' does not appear to be a git
    repository; Could not read from remote repository.``), else everything it wrote but hints, as one line
    of whole sentences (at most ``MAX_MESSAGE_CHARS``; what is left out is counted); else how it ended."""
    lines = [line.strip() for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    errors = [line.split(": ", 1)[1] for line in lines if line.startswith(("fatal: ", "error: "))]
    pieces = errors or [line for line in lines if not line.startswith("hint:")]
    if pieces:
        kept: list[str] = []
        for piece in pieces:
            if kept and sum(len(k) + 2 for k in kept) + len(piece) > MAX_MESSAGE_CHARS:
                break
            kept.append(piece if len(piece) <= MAX_MESSAGE_CHARS else piece[:MAX_MESSAGE_CHARS] + "...")
        more = len(pieces) - len(kept)
        text = ("; " if errors else " ").join(kept)
        return text + (f" (and {more} more line{'s' if more > 1 else ''})" if more else "")
    if returncode is None:
        return ""
    if returncode < 0:
        try:
            return f"killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"
