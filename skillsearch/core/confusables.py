"""Names that differ only by look-alike letters (Cyrillic U+043E for Latin ``o``, Greek U+0391 for ``A``).

Two skills of one grant named ``Git bisect`` and ``G\u0456t bisect`` (a Cyrillic i) look the same to a
person choosing among search hits, which is how a malicious skill passes for a trusted one. ``skeleton``
maps a name to a comparison key: NFKC, case-folded, the common Cyrillic and Greek homoglyphs of Latin
letters replaced, invisible format characters dropped. Two different names with one skeleton are
confusable. (A reduced form of Unicode TR 39's skeleton: the letters that matter for Latin names.)
"""

from __future__ import annotations

import unicodedata

__all__ = ["LookAlikes", "confusable", "skeleton"]

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


def skeleton(name: str) -> str:
    """The comparison key of ``name``. An ASCII name (nearly every one) takes a short path with the same
    answer: NFKC leaves ASCII as it is, no ASCII character is a format character or a homoglyph key, and
    ASCII case-folds as ``lower`` does. An import checks every name of its grant, so at 100k skills this is
    1.2 s of a one-skill update the long way and about 0.05 s the short way (docs/benchmarks.md)."""
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


class LookAlikes:
    """The names of one grant by skeleton, to refuse a newcomer that only looks like one of them."""

    def __init__(self, names: dict[str, str]) -> None:
        self._by_skeleton = {skeleton(n): (sid, n) for sid, n in names.items()}

    def clash(self, skill_id: str, name: str) -> tuple[str, str] | None:
        """(skill id, name) of another skill whose different name looks like ``name``; else records it."""
        key = skeleton(name)
        seen = self._by_skeleton.get(key)
        if seen is not None and seen[0] != skill_id and confusable(seen[1], name):
            return seen
        self._by_skeleton[key] = (skill_id, name)
        return None
