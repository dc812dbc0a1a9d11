"""A text's English terms as the lexical side's analyser gives them (what the ``all`` field holds of it), for
the judge's features (``retrieval/confidence.py``: the terms of a request and of each hit's card).

Each distinct word of a text is analysed once per index and kept (:data:`WORD_TERMS_CACHE`): the analyser's
filters act on one token at a time and its tokens never cross a space, so the terms are the same as the
analyser gives the whole text (the 31,360 texts of the dev sets compared; ``tests/test_lexical.py``), and a
card's words are mostly ones other cards hold. A card of 70 words took 0.196 ms through the analyser whole,
0.049 ms once its words were known (docs/benchmarks.md). The cards themselves are kept too
(:data:`CARD_TERMS_CACHE`): every search analyses the card of each hit it returns, the same few hundred cards
again and again. The analyser comes from ``lexical_schema.py``, one of the two modules that import tantivy.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable

__all__ = ["CARD_TERMS_CACHE", "NON_WORD", "WORD_TERMS_CACHE", "TextTerms", "caseless", "fold", "has_words"]

# Analysed hit cards kept per index (a card is a few hundred bytes; 8,192 covers a 10k catalog's usual hits).
CARD_TERMS_CACHE = 8192
# Analysed words kept per index.
WORD_TERMS_CACHE = 32_768
# What separates words before a text is analysed (anything but letters, digits and the underscore).
NON_WORD = re.compile(r"[^\w]+", re.UNICODE)


_YO = str.maketrans("ёЁ", "еЕ")


def fold(text: str) -> str:
    """``text`` in Unicode's compatibility normal form (NFKC), as every text the lexical side indexes or
    searches: the forms people type for the same characters (full-width Latin letters and digits from a
    Japanese input method, half-width katakana, ligatures) are the characters they stand for, so they
    match. Cyrillic yo (U+0451) is ie (U+0435), as most Russian text writes it (``отчет`` and ``отчёт`` are
    one word; NFKC keeps them apart). ASCII text is returned as it is."""
    return text if text.isascii() else unicodedata.normalize("NFKC", text).translate(_YO)


def caseless(text: str) -> str:
    """``text`` folded (:func:`fold`) and case-folded (``str.casefold``), as the lexical side analyses every
    document and request: ``größe`` and ``GRÖSSE`` are one word (``ß`` is ``ss``), as are ``λόγος`` and
    ``ΛΌΓΟΣ`` (the final sigma U+03C2 is the sigma U+03C3), as the tag filter (``domain.tag_key``) already read them. Lowercasing
    alone did not make them one: ``str.lower`` keeps ``ß`` and writes a final capital sigma as U+03C2, and
    Tantivy's lowercaser writes every capital sigma as U+03C3, so the two sides disagreed. NFKC again after the
    case fold, as Unicode's compatibility caseless match has it (the fold decomposes a few letters, ``ΐ``)."""
    if text.isascii():
        return text.lower()
    return unicodedata.normalize("NFKC", fold(text).casefold())


class TextTerms:
    """The English terms of texts through ``analyse`` (the lexical side's English analyser), cached per
    index: :meth:`of` any text, :attr:`card` a hit's card (a frozenset, kept by text)."""

    def __init__(self, analyse: Callable[[str], list[str]]) -> None:
        self._word = functools.lru_cache(maxsize=WORD_TERMS_CACHE)(lambda word: tuple(analyse(word)))
        self.card: Callable[[str], frozenset[str]] = functools.lru_cache(maxsize=CARD_TERMS_CACHE)(
            lambda text: frozenset(self.of(text)))

    def of(self, text: str) -> set[str]:
        """The analyser's terms of ``text``, each distinct word analysed once per index."""
        return {t for word in set(NON_WORD.sub(" ", caseless(text)).split()) for t in self._word(word)}


def has_words(text: str) -> bool:
    """Whether ``text`` holds a letter or a digit of any script. A request of emoji, symbols and punctuation
    alone (``🚀🚀🚀``, ``???``) holds nothing a model reads as meaning: MiniLM makes every emoji ``[UNK]``,
    whose vector sits near every skill, so its cosine alone does not refuse it (search's floor rule)."""
    return any(unicodedata.category(ch)[0] in "LN" for ch in text)
