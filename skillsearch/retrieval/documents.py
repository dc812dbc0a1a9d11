"""What the index keeps of a catalog row: the text the encoder embeds, the lexical document and the
freshness key that says whether a row changed since it was indexed."""

from __future__ import annotations

from skillsearch.catalog.rows import IndexRow
from skillsearch.core.hashing import canonical_json, sha256_hex
from skillsearch.retrieval.lexical import LexicalDoc, split_identifiers

__all__ = ["doc_hash", "embedded_text", "lexical_doc"]


def embedded_text(row: IndexRow, instructions_chars: int) -> str:
    """What the encoder sees of a skill: ``<name in words>: <description>``, then the first
    ``instructions_chars`` characters of the instructions (the default is 0: none; on the skills dev set the
    start of the body did not help the vector and made it 1.75x slower to embed, docs/benchmarks.md).

    Measured on the dev splits (docs/benchmarks.md): writing identifier names as words and joining them to
    the description with a colon raised nDCG@10 of exact cosine search by 1.7 (MetaTool) and 1.1
    (Seal-Tools) points; a ``Tags:`` line cost MetaTool 5 points, so tags stay out of the embedded text
    (they remain a lexical field and a filter).
    """
    parts = [f"{split_identifiers(row.name.strip())}: {row.description.strip()}"]
    if row.instructions and instructions_chars > 0:
        parts.append(row.instructions[:instructions_chars].strip())
    return "\n".join(p for p in parts if p)


def doc_hash(row: IndexRow) -> str:
    return sha256_hex(canonical_json([row.canonical_hash, row.slug, row.grant, row.kind, list(row.tags)]))


def lexical_doc(r: IndexRow) -> LexicalDoc:
    return LexicalDoc(r.skill_id, r.grant, r.kind, r.tags, r.name, r.slug, r.description, r.instructions)
