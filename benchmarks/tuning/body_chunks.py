"""Would the skill body, embedded in chunks, put the right skill first? (skills dev set only)

    PYTHONPATH=. .venv/bin/python benchmarks/tuning/body_chunks.py [--pool 100] [--chunk-chars 800] [--max-chunks 8]

A go/no-go replay before any product code: every English positive of ``queries.dev.jsonl`` is searched through
``Catalog.search`` (abstention off, ``--pool`` hits); each hit's body (its instructions) is cut into chunks of
paragraphs up to ``--chunk-chars`` (at most ``--max-chunks``, each prefixed with the skill's name in words) and
embedded (cached in ``benchmarks/.cache``). The pool is then re-fused as search fused when this was measured
(z-score over the pool, a fixed semantic weight 0.6; search's weight now follows the candidates' lexical
share, ``core/fusion.adapted_weight``) with the semantic score replaced by a blend of the description vector's cosine
and the best chunk's. The first row re-fuses the unchanged scores over the same pool, so the rows compare like
with like (MetaTool and Seal-Tools have no bodies: a blend leaves them unchanged by construction).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from skillsearch.bench.cache import BenchEncoder
from skillsearch.bench.script import run_script
from skillsearch.bench.skills import load_queries, open_skills_catalog, skills_index_dir
from skillsearch.core.domain import Principal
from skillsearch.core.fusion import zscore
from skillsearch.retrieval.documents import split_identifiers
from skillsearch.retrieval.encoders import make_encoder
from skillsearch.retrieval.search import QUERY_SENTENCES, query_texts
from skillsearch.retrieval.search_types import SearchRequest

ROOT = Path(__file__).resolve().parents[2]
W = 0.6


def chunks(name: str, body: str, size: int, most: int) -> list[str]:
    """Paragraphs packed into pieces of at most ``size`` characters (a longer paragraph is cut)."""
    out: list[str] = []
    cur = ""
    for para in (p.strip() for p in re.split(r"\n\s*\n", body)):
        while para:
            piece, para = para[:size], para[size:]
            if cur and len(cur) + len(piece) + 1 > size:
                out.append(cur)
                cur = ""
            cur = f"{cur}\n{piece}" if cur else piece
    if cur:
        out.append(cur)
    words = split_identifiers(name)
    return [f"{words}: {c}" for c in out[:most]]


BLENDS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "description only (re-fused pool)": lambda d, c: d,
    "max(description, best chunk)": lambda d, c: np.maximum(d, c),
    "0.75 description + 0.25 best chunk": lambda d, c: 0.75 * d + 0.25 * c,
    "0.5 description + 0.5 best chunk": lambda d, c: 0.5 * d + 0.5 * c,
    "description + 0.5 max(0, chunk - description)": lambda d, c: d + 0.5 * np.maximum(0.0, c - d),
    "best chunk only": lambda d, c: c,
}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data-root", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--cache-dir", default=str(ROOT / "benchmarks" / ".cache"))
    parser.add_argument("--pool", type=int, default=100)
    parser.add_argument("--chunk-chars", type=int, default=800)
    parser.add_argument("--max-chunks", type=int, default=8)
    args = parser.parse_args()
    cache = Path(args.cache_dir)
    dataset = Path(args.data_root) / "skills-catalog"
    encoder = BenchEncoder(make_encoder("minilm"), cache)
    queries = [q for q in load_queries(dataset / "queries.dev.jsonl") if q.want and q.lang == "en"]
    catalog, _ = open_skills_catalog(dataset, encoder, skills_index_dir(cache, encoder.name, dataset),
                                     {"abstain": False})
    try:
        bodies = {r.slug: (r.name, r.instructions) for r in catalog.store.index_rows()}
        encoder.prime_queries([q.text for q in queries], QUERY_SENTENCES)
        pools = []
        for q in queries:
            hits = catalog.search(Principal.operator(), SearchRequest(q.text, limit=args.pool)).hits
            pools.append((q, hits))
    finally:
        catalog.close()
    slugs = sorted({h.skill.slug for _, hits in pools for h in hits})
    texts = {s: chunks(*bodies[s], args.chunk_chars, args.max_chunks) for s in slugs}
    flat = [t for s in slugs for t in texts[s]]
    print(f"{len(slugs)} skills in the pools, {len(flat)} chunks", file=sys.stderr, flush=True)
    vecs = encoder.encode_documents(flat)
    at, by_slug = 0, {}
    for s in slugs:
        by_slug[s] = vecs[at: at + len(texts[s])]
        at += len(texts[s])
    print("| semantic score | hit@1 | hit@5 | MRR@10 | by style hit@1 |")
    print("| --- | --- | --- | --- | --- |")
    for label, blend in BLENDS.items():
        ranks: list[tuple[str, int | None]] = []
        for q, hits in pools:
            qv = encoder.encode_query_parts(q.text, query_texts(q.text, 6)[1:])
            desc = np.asarray([h.explanation["semantic_score"] for h in hits], np.float64)
            lex = np.asarray([h.explanation["lexical_score"] or 0.0 for h in hits], np.float64)
            best = np.asarray([float((by_slug[h.skill.slug] @ qv.T).max()) if len(by_slug[h.skill.slug]) else d
                               for h, d in zip(hits, desc, strict=True)])
            fused = (1 - W) * zscore(lex) + W * zscore(blend(desc, best))
            order = [hits[i].skill.slug for i in np.argsort(-fused, kind="stable")]
            ranks.append((q.style, next((i for i, s in enumerate(order, 1) if s in q.want), None)))
        n = len(ranks)
        styles = sorted({s for s, _ in ranks})
        by_style = ", ".join(f"{s} {sum(r == 1 for t, r in ranks if t == s) / sum(t == s for t, _ in ranks):.3f}"
                             for s in styles)
        print(f"| {label} | {sum(r == 1 for _, r in ranks) / n:.3f} |"
              f" {sum(r is not None and r <= 5 for _, r in ranks) / n:.3f} |"
              f" {sum(1 / r for _, r in ranks if r is not None and r <= 10) / n:.3f} | {by_style} |", flush=True)
    return 0


if __name__ == "__main__":
    run_script(main)
