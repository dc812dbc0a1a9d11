"""What the index keeps of a catalog row: the text the encoder embeds, the lexical document and the
freshness key that says whether a row changed since it was indexed."""

from __future__ import annotations

import re
from dataclasses import dataclass

from skillsearch.catalog.rows import IndexRow
from skillsearch.core.hashing import canonical_json, sha256_hex

__all__ = ["LexicalDoc", "doc_hash", "embedded_text", "lexical_doc", "split_identifiers", "split_instructions"]

_IDENTIFIER_BREAK = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|_+")


@dataclass(frozen=True)
class LexicalDoc:
    """What ``retrieval/lexical.py`` indexes of a skill."""

    skill_id: str
    grant: str
    kind: str
    tags: tuple[str, ...]
    name: str
    slug: str
    description: str
    instructions: str


def split_identifiers(text: str) -> str:
    """``getCloudSlaInfo`` -> ``get Cloud Sla Info``, ``Horoscopes_by_Self`` -> ``Horoscopes by Self``.

    Tool and API names are often identifiers; people ask for them in words. Other text is unchanged.
    """
    return " ".join(_IDENTIFIER_BREAK.sub(" ", text).split())


def split_instructions(text: str, head_chars: int) -> tuple[str, str]:
    """The instructions' head (up to ``head_chars`` characters, cut at a space or line break when one is in
    its last fifth) and the rest; ``head_chars`` 0 keeps them whole (the lexical side weighs only the head,
    ``retrieval/lexical.py``)."""
    if head_chars <= 0 or len(text) <= head_chars:
        return text, ""
    cut = max(text.rfind(" ", 0, head_chars + 1), text.rfind("\n", 0, head_chars + 1))
    cut = cut if cut >= head_chars * 4 // 5 else head_chars
    return text[:cut], text[cut:]


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
