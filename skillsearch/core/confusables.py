"""Names that differ only by look-alike letters (Cyrillic U+043E for Latin ``o``, Greek U+0391 for ``A``).

Two skills of one grant named ``Git bisect`` and ``G\u0456t bisect`` (a Cyrillic i) look the same to a
person choosing among search hits, which is how a malicious skill passes for a trusted one. ``skeleton``
maps a name to a comparison key: NFKC, case-folded, the common Cyrillic and Greek homoglyphs of Latin
letters replaced, invisible format characters dropped. Two different names with one skeleton are
confusable. (A reduced form of Unicode TR 39's skeleton: the letters that matter for Latin names.)
"""

from __future__ import annotations

import hashlib
import unicodedata

__all__ = ["SKELETON_VERSION", "confusable", "skeleton"]

_HOMOGLYPHS = str.maketrans({
    # Cyrillic
    "а": "a", "в": "b", "е": "e", "ё": "e", "һ": "h", "і": "i", "ї": "i", "ј": "j", "к": "k", "м": "m",
    "н": "h", "о": "o", "р": "p", "с": "c", "ѕ": "s", "т": "t", "у": "y", "х": "x", "ԁ": "d", "ԛ": "q",
    "ԝ": "w", "ӏ": "l", "ɡ": "g",
    # Greek
    "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p", "τ": "t",
    "υ": "u", "χ": "x", "ω": "w", "ϲ": "c",
    # Latin look-alikes of other letters
    "ı": "i", "ℓ": "l",
})


# The catalog stores every name's skeleton (``skills.name_key``) and computes every key again when this
# changes. Its parts: the fold's own revision (raise it when ``skeleton``'s steps change), the Unicode
# database NFKC and case folding read (a new Python can move them) and the homoglyph table.
_TABLE_DIGEST = hashlib.sha256(repr(sorted(_HOMOGLYPHS.items())).encode()).hexdigest()[:12]
SKELETON_VERSION = f"1:unicode-{unicodedata.unidata_version}:{_TABLE_DIGEST}"


def skeleton(name: str) -> str:
    """The comparison key of ``name``. An ASCII name (nearly every one) takes a short path with the same
    answer: NFKC leaves ASCII as it is, no ASCII character is a format character or a homoglyph key, and
    ASCII case-folds as ``lower`` does. A catalog computes it for every name when its keys are (re)built
    (``CatalogStore.ensure_name_keys``): 1.2 s the long way at 100k skills (docs/benchmarks.md)."""
    if name.isascii():
        return " ".join(name.lower().split())
    return _skeleton_of_any(name)


def _skeleton_of_any(name: str) -> str:
    folded = unicodedata.normalize("NFKC", name).casefold()
    visible = "".join(c for c in folded if unicodedata.category(c) != "Cf")
    return " ".join(visible.translate(_HOMOGLYPHS).split())


def confusable(a: str, b: str) -> bool:
    """Different names that a reader would take for the same one."""
    return a != b and skeleton(a) == skeleton(b)
