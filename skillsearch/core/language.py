"""Cheap language guesses: is this text French, is this request English, does it hold CJK characters?

No model and no dependency: French is told from English by its function words and accented letters,
which is reliable on a skill's name + description and good enough on a short request. A wrong guess costs
little: it only decides whether the French-analysed field is filled (documents) or queried (requests).

``is_foreign`` routes a request between the two models of the ``minilm+e5`` encoder (multilingual-e5 for a
request with positive evidence of another language, MiniLM for the rest) and decides the "multilingual
search is off" notice. Given the English model's vocabulary (the route passes MiniLM's), a request of
content words alone ("Datenbank-Passwort rotieren": no function word, no accent) is foreign when none of
them is a word that model knows; the notice does not pass it, so gibberish or rare English words on a
MiniLM-only index are refused as before rather than told that multilingual search is off. A wrong guess
there costs relevance, not correctness: e5 also reads English (0.06-0.16 nDCG@10 weaker on MetaTool),
MiniLM reads Latin-script languages poorly and CJK not at all.
(The stricter ``is_english``, "English" only on positive evidence, routed ``minilm+e5`` until English
keyword requests and cue-less ones were measured going to e5 for nothing: docs/benchmarks.md, "Routing".)
"""

from __future__ import annotations

import re
from collections.abc import Set

__all__ = ["CJK_RANGES", "FRENCH_WORDS", "UNKNOWN_WORDS_MIN", "cjk_runs", "is_foreign", "is_french", "unknown_words_only"]

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
# The CJK characters, as (first, last) code points: kana, CJK ideographs and their compatibility forms, hangul,
# half-width katakana. Their runs go into the lexical index's ``cjk`` n-gram field, never into its words
# (``lexical_schema.WORD_PATTERN``), and French is never guessed for text made of them.
CJK_RANGES = ((0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0xAC00, 0xD7AF), (0xFF66, 0xFF9F))
_CJK = re.compile("[" + "".join(f"{chr(first)}-{chr(last)}" for first, last in CJK_RANGES) + "]+")


def cjk_runs(text: str) -> list[str]:
    return _CJK.findall(text)


def is_french(text: str) -> bool:
    """True when ``text`` reads as French rather than English (or another language without these cues)."""
    head = text[:4000]
    words = [w.lower() for w in _WORDS.findall(head)]
    if not words or sum(map(len, cjk_runs(head))) > len(words):
        return False
    fr = sum(w in FRENCH_WORDS for w in words) + len(_ELISION.findall(head))
    en = sum(w in ENGLISH_WORDS for w in words)
    accents = len(_FRENCH_LETTERS.findall(head))
    score = fr + min(accents, len(words)) * 0.5
    return score >= 1.0 and score > en


# Words that mark a request as English: function words and the verbs requests open with. Words other
# languages share with English are left out ("in", "an", "was", "will", "die", "also", "so", "me", "a").
_CUES = (
    """i i'm i've i'd i'll my mine we our us they them their he she his her there here do does did don't
    doesn't can't have has had need needs want wants would could may might must please help find get give
    show tell make let know about any some all each every more most than then if whether because while
    after before between without where why whose one two new best good like just up out over only other
    such very much many own same what's how's it's looking create generate retrieve provide recommend
    suggest search check calculate translate play book send convert compare explain write add remove
    delete update set build buy order analyze analyse fetch track schedule summarize summarise lookup"""
)
_ENGLISH_CUES = ENGLISH_WORDS - {"in", "an", "was", "will"} | frozenset(_CUES.split())
# Frequent function words of other Latin-script languages, none of them common in English.
_OTHER = (
    """der die das und ist nicht ein eine einen einem mit für auf ich sie wir ihr von dem des im wie wo
    warum bitte kann können meine mein meinen wird sind oder aber auch noch nach bei zum zur über
    el los las y es una con para por qué del como cómo donde dónde mis tu su sus está estoy quiero
    necesito puedo puede puedes hay muy pero más sobre cuál cuando tengo quisiera
    il lo gli della dei degli delle che non sono come dove perché voglio posso questo questa nel nella
    os um uma não você eu meu minha posso quero preciso isso esse essa no na
    het een ik je niet met voor zijn wat hoe waar mijn kan ook naar
    jak nie jest się czy gdzie och att är det som jag inte hur"""
)
_OTHER_LATIN = frozenset(_OTHER.split())
_LATIN_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)?", re.UNICODE)
_ACCENTED = re.compile("[\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u1e00-\u1eff¿¡]")
_NON_LATIN = re.compile(r"[^\x00-\u024f\u1e00-\u1eff\u2000-\u2bff\W\d_]", re.UNICODE)
# A product or code name rather than a word of some language: CamelCase, two capitals, a digit
# ("PostgreSQL", "README", "ViewModels", "BRCA1", "ASP.NET").
_NAME_SHAPED = re.compile(r"[a-z][A-Z]|[A-Z]{2}|\d")
_LETTER_RUN = re.compile(r"[^\W\d_]+", re.UNICODE)
_TOKEN_EDGES = ".,;:!?()[]{}\"'«»¿¡“”‘’"
# The fewest content words (of 4+ letters) a cue-less request needs, all unknown to the English model, to
# read as foreign: one unknown word alone is as often an English product name ("Spotify playlist").
UNKNOWN_WORDS_MIN = 2


def _known(word: str, known_words: Set[str]) -> bool:
    """``word`` or, for an English plural the vocabulary holds only in the singular ("tokens", "dashboards",
    "retries"), its singular is in ``known_words``."""
    if word in known_words:
        return True
    if word.endswith("ies") and word[:-3] + "y" in known_words:
        return True
    return word.endswith("s") and (word[:-1] in known_words or (word.endswith("es") and word[:-2] in known_words))


def unknown_words_only(text: str, known_words: Set[str]) -> bool:
    """True when ``text`` holds at least ``UNKNOWN_WORDS_MIN`` Latin-script words of 4+ letters and none of
    them is in ``known_words`` (lower case), an English plural counting as known when its singular is
    (``_known``: MiniLM's vocabulary holds "token" and "dashboard" but not their plurals, so "jwt refresh
    tokens" went to e5); name-shaped tokens are left out of the count."""
    unknown = 0
    for token in text.split():
        token = token.strip(_TOKEN_EDGES)
        if _NAME_SHAPED.search(token):
            continue
        for part in _LETTER_RUN.findall(token):
            if len(part) < 4 or _NON_LATIN.search(part):
                continue
            if _known(part.lower(), known_words):
                return False
            unknown += 1
    return unknown >= UNKNOWN_WORDS_MIN


def is_foreign(text: str, known_words: Set[str] | None = None) -> bool:
    """True when a request shows positive evidence of another language than English: mostly non-Latin
    script, French, more function words of another Latin-script language than English cues, or accented
    letters beside fewer than two English cues. A run of English keywords without a function word
    ("academic CV publications list"), or a request with no cue at all, is not foreign; a quoted Japanese or
    Greek word in an English sentence, or an accented loanword beside clear English ("résumé"), is not
    either. With ``known_words`` (the English model's vocabulary, lower case), a request with no English
    cue whose content words are all unknown to it is foreign too (``unknown_words_only``: "Datenbank-Passwort
    rotieren", "Optimiza plan entrenamiento"); measured in docs/rules.md, "Routing"."""
    head = text[:4000]
    words = [w.lower().replace("’", "'") for w in _LATIN_WORD.findall(head) if not _NON_LATIN.search(w)]
    foreign = len(_NON_LATIN.findall(head))
    if foreign and foreign >= len(words):
        return True
    if not words:
        return False
    if is_french(head):
        return True
    en = sum(w in _ENGLISH_CUES or (len(w) > 5 and w.endswith("ing")) for w in words)
    other = sum(w in _OTHER_LATIN for w in words)
    if other > en or (bool(_ACCENTED.findall(head)) and en < 2):
        return True
    return known_words is not None and en == 0 and unknown_words_only(head, known_words)
