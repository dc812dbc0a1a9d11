"""A write's embedding, :data:`EMBED_CHUNK` skills per encoder call, longest texts first, stopped between batches.

Once ``stopping`` is set (SIGTERM, a server's shutdown) no chunk starts, and the chunk in progress is left
after the encoder's current batch (the progress callback raises out of it): the caller keeps the skills
embedded so far and saves them (``indexer.SearchIndex``), and the next open embeds the rest.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from skillsearch.core.errors import StopFlag
from skillsearch.retrieval.encoder import Encoder

__all__ = ["EMBED_CHUNK", "ProgressFactory", "embed_in_chunks"]

ProgressFactory = Callable[[int, str], Callable[[int], None]]

# Skills embedded per encoder call. A stopped write keeps the chunks it finished; the chunks are cut from the
# texts sorted longest first (what the encoder does within one call, so no more padding than one call), and a
# stop waits for its current batch only (32 MiniLM texts, one e5 text).
EMBED_CHUNK = 128


class _Stop(Exception):  # raised by the progress callback: leave the encoder between two batches
    pass


def embed_in_chunks(encoder: Encoder, texts: list[str], to_embed: list[int], out: np.ndarray,
                    progress: ProgressFactory | None, stopping: StopFlag) -> list[int]:
    """``out[j]`` = the vector of ``texts[j]`` for each ``j`` of ``to_embed``, :data:`EMBED_CHUNK` at a time;
    once ``stopping`` is set, no chunk starts and the current one is left after the encoder's batch in
    progress. The ``j`` embedded: all of them unless stopped."""
    tick = progress(len(to_embed), "embedding") if progress else None
    # Longest first across all chunks, as the encoder sorts one call: chunks of like lengths pad no more.
    to_embed = sorted(to_embed, key=lambda j: -len(texts[j]))
    done: list[int] = []
    for start in range(0, len(to_embed), EMBED_CHUNK):
        if stopping.is_set():
            break
        chunk = to_embed[start : start + EMBED_CHUNK]
        seen = 0

        def checked(n: int, size: int = len(chunk)) -> None:
            nonlocal seen
            seen += n
            if tick is not None:
                tick(n)
            if stopping.is_set() and seen < size:
                raise _Stop

        try:
            out[chunk] = encoder.encode_documents([texts[j] for j in chunk], checked)
        except _Stop:
            break
        done.extend(chunk)
    return done

