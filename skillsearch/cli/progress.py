"""Progress of long work (reading, embedding, indexing skills) on stderr: a bar on a terminal, lines elsewhere.

A bar redraws itself with carriage returns, which a log (a CI job's, a container's, an MCP host's log of its
server's stderr) keeps as one long line of frames. Off a terminal each stage says instead, in plain lines,
where it starts, how far it is at most every :data:`EVERY_S` seconds, and when it is done.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

__all__ = ["EVERY_S", "progress_factory"]

EVERY_S = 10.0

Tick = Callable[[int], None]


def progress_factory(enabled: bool) -> Callable[[int, str], Tick] | None:
    """What a catalog's long work reports to (``Catalog.open(progress=...)``); ``None`` when ``-q``."""
    if not enabled:
        return None
    return _bar if sys.stderr.isatty() else _lines


def _bar(total: int, label: str) -> Tick:
    from tqdm import tqdm

    bar = tqdm(total=total, desc=label, unit="skill", file=sys.stderr, leave=False, dynamic_ncols=True)

    def tick(n: int) -> None:
        bar.update(n)
        if bar.n >= total:
            bar.close()

    return tick


def _lines(total: int, label: str) -> Tick:
    if total <= 0:
        return lambda n: None
    started = said = time.monotonic()
    done = 0
    _say(f"{label}: {total} skill(s)")

    def tick(n: int) -> None:
        nonlocal done, said
        if done >= total:
            return
        done += n
        now = time.monotonic()
        if done >= total:
            _say(f"{label}: done, {total} skill(s) in {now - started:.1f} s")
        elif now - said >= EVERY_S:
            said = now
            _say(f"{label}: {done} of {total} skill(s) ({100 * done // max(total, 1)} %)")

    return tick


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
