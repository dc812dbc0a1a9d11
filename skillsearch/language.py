"""Cheap language guesses for the lexical side: is this text French, and does it hold CJK characters?

No model and no dependency: French is told from English by its function words and accented letters,
which is reliable on a skill's name + description and good enough on a short request. A wrong guess costs
little: it only decides whether the French-analysed field is filled (documents) or queried (requests).
"""

from __future__ import annotations

import re

__all__ = ["FRENCH_WORDS", "is_french"]

# Frequent French function words that are not also common English words ("a", "on", "in" are left out).
_FRENCH = (
    """le la les un une des du de au aux et est sont pour avec dans sur par qui que quoi dont ou où
    ce cet cette ces mon ma mes ton ta tes son sa ses notre nos votre vos leur leurs je tu il elle nous vous
    ils elles ne pas plus mais comme sans sous entre vers chez aussi très être avoir fait faire peut
    comment pourquoi quand quel quelle quels quelles lors avant après puis donc alors selon afin"""
)
FRENCH_WORDS = frozenset(_FRENCH.split())
_ENGLISH = (
    """the and of to is are for with in on by that this these those from into when how what which who
    your you it its be as at or not use using an was were will can should"""
)
ENGLISH_WORDS = frozenset(_ENGLISH.split())
_WORDS = re.compile(r"[a-zàâäçéèêëîïôöûùüÿœæ]+", re.IGNORECASE)
_FRENCH_LETTERS = re.compile(r"[àâçéèêëîïôûùüÿœæ]", re.IGNORECASE)
_ELISION = re.compile(r"\b[ldjnmstc]['’][a-zàâéèêîôûh]", re.IGNORECASE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


def is_french(text: str) -> bool:
    """True when ``text`` reads as French rather than English (or another language without these cues)."""
    head = text[:4000]
    words = [w.lower() for w in _WORDS.findall(head)]
    if not words or len(_CJK.findall(head)) > len(words):
        return False
    fr = sum(w in FRENCH_WORDS for w in words) + len(_ELISION.findall(head))
    en = sum(w in ENGLISH_WORDS for w in words)
    accents = len(_FRENCH_LETTERS.findall(head))
    score = fr + min(accents, len(words)) * 0.5
    return score >= 1.0 and score > en
