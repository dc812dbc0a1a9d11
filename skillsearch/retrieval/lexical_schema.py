"""The lexical index's fields and their analysis: the Tantivy schema, the analysers, and a skill's document.

``lexical.py`` searches and writes the index; what its fields are, how each analyses text and what a skill
puts in them is decided here (with ``tantivy``, its second home). Design points:
- English text fields share one analyzer (words of 2+ letters or digits, lowercase, stop words, English
  stemmer).
- CJK text has no spaces, so runs of CJK characters also go into a ``cjk`` field analysed into character
  1- and 2-grams; a query's CJK runs are matched there by their bigrams, which finds a word inside a
  sentence (of the name, description, tags and head of the instructions). Tantivy does not save custom
  analyzers with the index: they are registered on every open.
- French text gets its own fields (``fr`` for name, description and tags; ``fr_body`` for the instructions)
  analysed with French stop words, the French Snowball stemmer and ASCII folding, so "requêtes", "requete"
  and "requête" meet. Which documents fill them and which queries search them is the ``french`` mode:
  ``both`` (default: every document is indexed both ways, French-looking requests search the French
  fields; the French stemmer also meets cognates in English text, "certificat" ~ "certificate"), ``detect``
  (French documents only), ``docs`` (French documents, every request), ``all`` (every document and
  request) or ``off``. On the multilingual dev set, French hit@5 in lexical mode is 0.79 (both, all),
  0.58 (detect), 0.38 (off); English requests are untouched by ``both`` (see ``docs/benchmarks.md``).
  The mode is recorded in the index manifest; a change rebuilds the lexical side.
- Only the head of the instructions (``head_chars``, 3,000 by default) is weighed with the name, description
  and tags: BM25 saturates term frequency and normalises length only partly, so a 90 kB body outranked the
  skills requests wanted (docs/benchmarks.md, "The head of the instructions"). The rest goes into ``rest``
  (English-analysed), searched only for a request's terms no document's ``all`` holds, so a word only a deep
  body holds still finds its skill. The CJK and French fields hold the head only.
- Each document carries ``key``, a 60-bit number derived from its skill id and kept as a fast field, so a
  hit maps back to its skill without loading stored documents.
"""

from __future__ import annotations

from typing import Any

import tantivy

from skillsearch.core.hashing import sha256_hex
from skillsearch.core.language import CJK_RANGES, cjk_runs, is_french
from skillsearch.retrieval.documents import LexicalDoc, split_identifiers, split_instructions
from skillsearch.retrieval.text_terms import caseless, fold

__all__ = [
    "FRENCH_FIELDS", "FRENCH_MODES", "HEAD_CHARS", "LEXICAL_FIELDS_VERSION", "REST_FIELD", "TEXT_FIELDS", "WORD_PATTERN",
    "document", "english_analyzer", "french_analyzer", "recipe_change", "register_analyzers", "schema", "skill_key",
]

# Bumped when the lexical schema gains fields (2: the French fields ``fr`` and ``fr_body``; 3: ``all``; 4:
# ``rest``, the instructions after their head; 5: words of two characters or more, the name once, in ``name``;
# 6: a CJK character ends a word, so "Stripeで" holds the word "stripe"; 7: every text folded to NFKC; 8: the
# tags' CJK runs in ``cjk``, so a tag written only in CJK characters is found; 9: Cyrillic yo folded to ie;
# 10: the text fields case-folded, ``text_terms.caseless``: "ß" is "ss", a final sigma is sigma).
LEXICAL_FIELDS_VERSION = 10


def recipe_change(built: Any, now: dict[str, Any]) -> str:
    """What differs between the lexical recipe an index was built with and this process's
    (``SearchIndex.lexical_config``), for a log line: ``fields 4, now 5``."""
    if not isinstance(built, dict):
        return "no recipe recorded"
    keys = [*now, *(key for key in built if key not in now)]
    return "; ".join(f"{key} {built.get(key, 'unset')}, now {now.get(key, 'unset')}" for key in keys
                     if built.get(key) != now.get(key))

EN_ANALYZER = "skill_en"
CJK_ANALYZER = "skill_cjk"
# ``name`` holds the name in words (``getCloudSlaInfo`` -> ``get Cloud Sla Info``, once); ``all`` the slug's
# words, the tags, the description and the head of the instructions. Each text is in one field once: Tantivy
# sums the fields' BM25 scores, each saturated on its own, so a name also in ``all`` (and written twice, as
# the identifier and in words) counted its terms three or four times over, and a name word the request
# used in another sense ("building" a tool vs a ``yolov8s-building-segmentation`` model) outranked the
# description that matched (docs/benchmarks.md, "Lexical analysis against bm25s"). Two fields beat five
# (name, slug, tags, description, instructions) on both tool dev splits and cost a fraction to search: a
# request's terms in 2 fields instead of 5 let Tantivy's block-max WAND skip most postings.
TEXT_FIELDS = ("all", "name")
# Words are runs of two or more letters or digits, as bm25s (scikit-learn's token pattern) has them: the
# one-letter pieces of "I'd", "user's", "I'm" and the pronoun "I" (not an English stop word) matched any
# document holding a stray letter, and cost lexical nDCG@10 on three of four dev sets (docs/benchmarks.md).
# CJK characters end a word (their runs are the ``cjk`` field's): Japanese and Chinese write a name against
# them ("Stripeで課金を実装したい", "把PDF文件转换成Markdown"), and the whole run was one token that matched
# nothing, so a request lost its most telling words, a document its product names.
WORD_PATTERN = r"[^\W_" + "".join(f"\\x{{{first:x}}}-\\x{{{last:x}}}" for first, last in CJK_RANGES) + "]{2,}"
# The instructions after their first ``HEAD_CHARS`` (``Settings.lexical_instructions_chars``); see above.
REST_FIELD, HEAD_CHARS = "rest", 3000
FR_ANALYZER = "skill_fr"
FRENCH_FIELDS = ("fr", "fr_body")

# Which documents fill the French fields / which requests search them:
#   detect: French documents / French-looking requests    both: every document / French-looking requests
#   docs:   French documents / every request              all:  every document / every request
FRENCH_MODES = ("detect", "both", "docs", "all", "off")


def skill_key(skill_id: str) -> int:
    return int(sha256_hex(skill_id.encode("utf-8"))[:15], 16)


def schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("skill_id", stored=True, tokenizer_name="raw")
    sb.add_unsigned_field("key", stored=False, indexed=False, fast=True)
    for raw in ("grant", "kind", "status", "tag"):
        sb.add_text_field(raw, stored=False, tokenizer_name="raw")
    for name in (*TEXT_FIELDS, REST_FIELD):
        sb.add_text_field(name, stored=False, tokenizer_name=EN_ANALYZER)
    sb.add_text_field("cjk", stored=False, tokenizer_name=CJK_ANALYZER)
    for name in FRENCH_FIELDS:
        sb.add_text_field(name, stored=False, tokenizer_name=FR_ANALYZER)
    return sb.build()


def english_analyzer() -> tantivy.TextAnalyzer:
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(WORD_PATTERN))
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stopword("english"))
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def register_analyzers(index: tantivy.Index) -> None:
    cjk = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.ngram(1, 2)).filter(tantivy.Filter.lowercase()).build()
    index.register_tokenizer(EN_ANALYZER, english_analyzer())
    index.register_tokenizer(CJK_ANALYZER, cjk)
    index.register_tokenizer(FR_ANALYZER, french_analyzer())


def french_analyzer() -> tantivy.TextAnalyzer:
    """Stop words and stemming see the accents (the Snowball rules need them); folding comes last."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stopword("french"))
        .filter(tantivy.Filter.stemmer("french"))
        .filter(tantivy.Filter.ascii_fold())
        .build()
    )


def document(d: LexicalDoc, fields_of: tantivy.Schema, french: str, head_chars: int) -> tantivy.Document:
    """The Tantivy document of a skill in the index's ``fields_of`` schema, its French fields filled as the
    ``french`` mode says, its instructions split after ``head_chars``."""
    # The texts folded (``text_terms.fold``); the raw filter fields (grant, kind, tag) as given.
    name, slug, description, tags = fold(d.name), fold(d.slug), fold(d.description), [fold(t) for t in d.tags]
    head, rest = split_instructions(fold(d.instructions), head_chars)
    text = " ".join((name, description, head))
    fields: dict[str, Any] = {
        "skill_id": d.skill_id,
        "key": skill_key(d.skill_id),
        "grant": d.grant,
        "kind": d.kind,
        "status": "active",
        "tag": list(d.tags),
        # Case-folded last (``text_terms.caseless``, as a request is): after the name's identifiers are split
        # at their capitals and the instructions at their head.
        "all": caseless("\n".join((slug.replace("-", " "), " ".join(tags), description, head))),
        "name": caseless(split_identifiers(name)),
        REST_FIELD: caseless(rest),
        # The tags too, as in ``all``: a tag written only in CJK characters has no word the English fields
        # hold, so without them a lexical search for it found nothing.
        "cjk": " ".join(cjk_runs("\n".join((text, *tags)))),
    }
    if french in ("all", "both") or (french in ("detect", "docs") and is_french(f"{name}\n{text}")):
        fields["fr"] = caseless(" ".join((name, slug.replace("-", " "), description, " ".join(tags))))
        fields["fr_body"] = caseless(head)
    return tantivy.Document.from_dict(fields, fields_of)
