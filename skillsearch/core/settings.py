"""Settings: where data lives, which encoder, and the search defaults the dev data supports.

Values come from keyword arguments, else ``SKILLSEARCH_*`` environment variables (every field but the
search constants of ``NOT_FROM_ENV``), else the defaults below.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

__all__ = ["NOT_FROM_ENV", "Settings"]


def _env_default(name: str, default: Any) -> Any:
    raw = os.environ.get(f"SKILLSEARCH_{name.upper()}")
    if raw is None:
        return default
    try:
        if default is None:
            return float(raw) if raw.strip() else None
        if isinstance(default, bool):
            return raw.strip().lower() in ("1", "true", "yes", "on")
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
    except ValueError:
        kind = "an integer" if isinstance(default, int) else "a number"
        raise ValueError(f"SKILLSEARCH_{name.upper()}={raw[:40]!r}: not {kind}") from None
    if isinstance(default, Path):
        return Path(raw)
    return raw


# Fields the benchmarks and tests set but no operator needs: no ``SKILLSEARCH_*`` variable reads them.
NOT_FROM_ENV = frozenset({"fusion", "semantic_weight", "no_match_cosine", "abstain"})


@dataclass(frozen=True)
class Settings:
    data_dir: Path = Path("index")
    # "minilm+e5" (both: English requests answered by MiniLM, the others by multilingual-e5; embeds every
    # document twice), "minilm" (English only, builds faster), "e5" or "hashing" (fast tests only). Empty:
    # the encoder the data directory's index was built with, else "minilm+e5" (retrieval/encoders.py).
    encoder: str = ""
    # Search constants, each kept by the leave-one-dataset-out ablation (docs/rules.md); set here for the
    # benchmarks, never from the environment (see ``NOT_FROM_ENV``). A request may name its own fusion and
    # semantic weight.
    fusion: str = "zscore"
    semantic_weight: float = 0.6
    # Characters of the instructions that go into the embedded text after name and description. 0: none
    # (chosen on the skills dev set, the only one with instructions: 600 gave the same English hit@1, one
    # fewer hit@5, worse cross-lingual ranks, and embedded 1.75x slower; docs/benchmarks.md). The
    # instructions stay in the lexical index either way.
    embed_instructions_chars: int = 0
    # Characters of the instructions the lexical side weighs with name, description and tags; the rest is
    # searched only for the request's terms no skill's head holds. 0: the whole instructions alike. 3,000 was
    # chosen on the skills dev set, the only one with instructions (English hit@1 0.869 -> 0.912 with the whole
    # body; 2,000-5,000 all gain; docs/benchmarks.md, "The head of the instructions"). A change rebuilds the
    # lexical side.
    lexical_instructions_chars: int = 3000
    # Which documents fill / which requests search the French-analysed lexical fields:
    # both (default: every document, French-looking requests), detect, docs, all, off (see lexical_schema.py).
    french_analysis: str = "both"
    query_cache_size: int = 1024
    # Query encoding as a batching service (retrieval/batching.py): concurrent searches share model calls
    # of up to ``query_batch_max`` texts; a worker waits up to ``query_batch_wait_ms`` for company, and only
    # while batches are forming. ``encoder_workers`` worker threads x ``encoder_threads`` torch intra-op
    # threads (process-wide); 0 picks the measured default (docs/benchmarks.md, "Serving under load").
    query_batching: bool = True
    query_batch_max: int = 16
    query_batch_wait_ms: float = 2.0
    encoder_workers: int = 0
    encoder_threads: int = 0
    # Answers kept for repeated requests (same text, options and caller grants, store unchanged); 0: none.
    result_cache_size: int = 512
    # Cosine under which a top hit that shares no word with the request is no good match; None: the
    # encoder's dev-measured value, else the index's calibration (search.no_match_threshold).
    no_match_cosine: float | None = None
    # False: a search never answers no_match from its scores (the benchmarks read every request's hits).
    abstain: bool = True
    max_query_chars: int = 2000
    max_limit: int = 100
    # Seed an empty data directory with the bundled sample catalog when it is opened for reading.
    seed_sample: bool = True
    # Servers (serve, mcp) answer at once and load the embedding model in the background; a search that
    # arrives first waits for it up to this many seconds, then gets INDEX_NOT_READY (retrieval/loading.py).
    # Under the 60 s an MCP host commonly waits for an answer (the TypeScript SDK's default request timeout):
    # past it the host shows its own timeout, never the INDEX_NOT_READY that says why and what to do.
    model_wait_s: float = 50.0
    # For tests and demos only: the background model load starts this many seconds late. 0 in service.
    model_load_delay_s: float = 0.0
    # Every HTTP server (serve, mcp --http, upstream) bounds each connection before any request handling
    # (http/server.py): a request head (request line and header fields) of at most this many bytes, else 431;
    http_max_header_bytes: int = 32 * 1024
    # the whole head received within this many seconds of the connection opening or the last response,
    # else the connection is closed (an idle or slowly trickling client holds nothing);
    http_head_timeout_s: float = 10.0
    # the whole body a request declared received within this many seconds of its head, else 408 and the
    # connection is closed (the body is read before authentication);
    http_body_timeout_s: float = 30.0
    # an idle keep-alive connection closed after this many seconds; at most this many open connections
    # (at the limit requests get 503; a connection beyond it is closed at once).
    http_keep_alive_s: int = 5
    http_max_connections: int = 1000

    @classmethod
    def from_env(cls, **overrides: Any) -> Settings:
        values: dict[str, Any] = {f.name: f.default if f.name in NOT_FROM_ENV else _env_default(f.name, f.default)
                                  for f in fields(cls)}
        values.update({k: v for k, v in overrides.items() if v is not None})
        values["data_dir"] = Path(values["data_dir"])
        return cls(**values)
