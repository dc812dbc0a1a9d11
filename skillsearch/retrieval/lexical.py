"""The lexical side of search: a Tantivy BM25 index with field boosts and raw filter fields.

It opens the index (its schema, analysers and documents are ``lexical_schema.py``'s), writes batches of
documents, and builds and runs the queries; it and ``lexical_schema.py`` are the modules that import
``tantivy``, whose errors become ours here. Design points:
- Tantivy sums the fields' BM25, each with its own IDF; a term's queries are scaled so that every field
  weighs it with one IDF, that of its largest document frequency over the fields (``term_weights.blended_idf``).
- A long request's terms found in more than half of the documents are left out of its query (they weigh
  little in BM25 and cost the most to search); a short request keeps every term.
- A full build is written as one segment (the writer's arena is sized to the batch): Tantivy searches
  segments one after the other, so fewer segments prune better.
- User text never reaches the query parser raw: it is reduced to words first, so quotes, ``AND``, ``:``
  or ``*`` are searched as text and never raise.
- The visibility filter, kind and tags are ``Must`` clauses with a constant score of 0, so they restrict
  without changing BM25 scores, and the top k are k visible documents.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from threading import Lock
from typing import Any, NamedTuple

import numpy as np
import tantivy

from skillsearch.core.errors import IndexNotReadyError, StopFlag
from skillsearch.core.language import FRENCH_WORDS, cjk_runs, is_french
from skillsearch.retrieval import term_weights
from skillsearch.retrieval.documents import LexicalDoc
from skillsearch.retrieval.lexical_schema import (
    FRENCH_FIELDS,
    FRENCH_MODES,
    HEAD_CHARS,
    REST_FIELD,
    TEXT_FIELDS,
    document,
    english_analyzer,
    french_analyzer,
    register_analyzers,
    schema,
)
from skillsearch.retrieval.term_weights import (
    blended_idf,
    doc_freqs,
    field_doc_freqs,
    idf,
    informative_terms,
    largest,
)
from skillsearch.retrieval.text_terms import NON_WORD, TextTerms, caseless, fold

__all__ = ["FIELD_BOOSTS", "FRENCH_BOOSTS", "LexicalHits", "LexicalIndex", "Searcher"]

FIELD_BOOSTS: dict[str, float] = {"all": 1.0, "name": 1.0}
CJK_BOOST = 1.0
FRENCH_BOOSTS: dict[str, float] = {"fr": 2.0, "fr_body": 1.0}
# Tantivy writes a new segment whenever the writer's arena fills, and searches the segments one after the
# other, each with its own pruning threshold: 100k skills written as 4 segments (a 50 MB arena) take 1.3
# ms per query, written as one 1.05 ms. So a batch gets an arena sized to its text (about 2.7 bytes per
# character were used), and a full build is written as one segment up to the cap. The arena is allocated
# as it fills, so a small batch costs no more than before.
WRITER_HEAP_MIN = 50_000_000
WRITER_HEAP_MAX = 1_000_000_000
WRITER_HEAP_PER_CHAR = 4
# Documents a write adds between two looks at its stop flag (SIGTERM, a server's shutdown): a full rebuild of
# 100k skills takes seconds, so a stop waits for one chunk, not for the whole rebuild. One commit at the end:
# still one segment.
APPLY_CHUNK = 1000

# What one search reads (a point-in-time view of the index), for modules that hold one without using tantivy.
Searcher = tantivy.Searcher

_HIRAGANA = re.compile(r"[\u3040-\u309f]+")


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


class LexicalHits(NamedTuple):
    keys: np.ndarray
    scores: np.ndarray


def _remove_folder(path: Path) -> None:
    """Delete an index folder, first moving it aside: a reader of the old index still open in this
    process (its meta watcher) may create a lock file in the folder while it is being deleted, which
    makes a plain ``rmtree`` fail with "directory not empty". Leftovers of a crash are removed too."""
    for stale in path.parent.glob(f"{path.name}.old-*"):
        shutil.rmtree(stale, ignore_errors=True)
    if path.exists():
        trash = path.with_name(f"{path.name}.old-{os.getpid()}-{time.monotonic_ns()}")
        os.replace(path, trash)
        shutil.rmtree(trash, ignore_errors=True)


def _writer_heap(docs: Sequence[LexicalDoc]) -> int:
    chars = sum(len(d.name) + len(d.slug) + len(d.description) + len(d.instructions) + sum(map(len, d.tags)) for d in docs)
    return max(WRITER_HEAP_MIN, min(WRITER_HEAP_MAX, WRITER_HEAP_PER_CHAR * chars))


# The files Tantivy writes through a private temporary file (mode 0600 whatever the umask), which another
# user who may read the folder could then not open.
PRIVATE_FILES = ("meta.json", ".managed.json")


def share_like_folder(folder: Path) -> None:
    """Give :data:`PRIVATE_FILES` the read and write bits of ``folder`` itself (a folder others may read
    shares its index with them, as SQLite's files and ours are shared by the umask), so another user may
    search a catalog it may read (``read_only_open.py``)."""
    mode = folder.stat().st_mode & 0o666
    for name in PRIVATE_FILES:
        path = folder / name
        try:
            if path.stat().st_mode & 0o777 != mode:
                path.chmod(mode)
        except OSError:  # gone, or not this user's file to change: the write stands, shared or not
            continue


def read_only_view(folder: Path) -> Path:
    """A new private folder of links to ``folder``'s files (its plain files only, never a link it holds), where
    Tantivy can make the lock file it takes to open an index: one in a folder this user may read but not
    write (a read-only catalog) opens through it. ``LexicalIndex.close`` removes it."""
    view = Path(tempfile.mkdtemp(prefix="skillsearch-lexical-"))
    source = folder.resolve()
    try:
        for entry in os.scandir(source):
            if entry.is_file(follow_symlinks=False) and not entry.name.endswith(".lock"):
                (view / entry.name).symlink_to(source / entry.name)
    except OSError:
        shutil.rmtree(view, ignore_errors=True)
        raise
    return view


class LexicalIndex:
    """A Tantivy index in a folder. One writer, explicit commits, reload after each commit."""

    def __init__(self, path: Path, create: bool = False, french: str = "both", head_chars: int = HEAD_CHARS,
                 read_only: bool = False) -> None:
        """``read_only``: open the index of a folder this user cannot write through :func:`read_only_view`;
        nothing is ever written (``apply`` refuses)."""
        if french not in FRENCH_MODES:
            raise IndexNotReadyError(f"unknown french mode {french!r}; choose one of {', '.join(FRENCH_MODES)}")
        self.french = french
        self.head_chars = head_chars
        self.path = Path(path)
        self.schema = schema()
        self.read_only = read_only and not create
        # Removes the read-only view's links at ``close``, else when the index is collected or the process exits.
        self._drop_view: weakref.finalize[Any, Any] | None = None
        # A reader who cannot write the folder cannot reindex it either (``read_only_open.py`` says who can).
        fix = "" if self.read_only else "; run `skillsearch reindex`"
        try:
            if create:
                _remove_folder(self.path)
                self.path.mkdir(parents=True, exist_ok=True)
                self.index = tantivy.Index(self.schema, path=str(self.path))
                share_like_folder(self.path)
            else:
                if not tantivy.Index.exists(str(self.path)):
                    raise IndexNotReadyError(f"no lexical index at {self.path}{fix}", {"path": str(self.path)})
                opened = self.path
                if self.read_only:
                    opened = read_only_view(self.path)
                    self._drop_view = weakref.finalize(self, shutil.rmtree, opened, True)
                self.index = tantivy.Index.open(str(opened))
                self.schema = self.index.schema
        except (ValueError, OSError) as exc:
            self._remove_view()
            raise IndexNotReadyError(f"the lexical index at {self.path} cannot be opened ({exc}){fix}",
                                     {"path": str(self.path)}) from exc
        register_analyzers(self.index)
        self._english = english_analyzer()
        self._french = french_analyzer()
        # A request's and each hit's card's terms for the judge (``retrieval/text_terms.py``), cached per index.
        self._terms = TextTerms(self._english.analyze)
        self.card_terms = self._terms.card
        self.field_boosts: dict[str, float] = dict(FIELD_BOOSTS)
        self._writer: Any = None
        self._lock = Lock()

    def drops_a_matching_term(self, text: str, searcher: tantivy.Searcher) -> bool:
        """Whether the common-term rule leaves out of this request a term that some document matches
        (what ``benchmarks/tuning/common_terms.py`` counts)."""
        terms = sorted(set(self._english.analyze(caseless(text))))
        df = doc_freqs(terms, searcher, TEXT_FIELDS)
        matching = {t for t in terms if df[t] > 0}
        if len(terms) <= term_weights.SHORT_REQUEST_TERMS or not matching:
            return False
        return set(informative_terms(terms, df, searcher.num_docs)) != matching

    # -- writes -----------------------------------------------------------------------------------

    def apply(self, upserts: Sequence[LexicalDoc], deletes: Iterable[str], stopping: StopFlag | None = None,
              tick: Callable[[int], None] | None = None) -> bool:
        """Replace or remove documents and commit once; on a failed commit the writer is rebuilt.

        ``stopping`` is looked at before each :data:`APPLY_CHUNK` documents: once set, nothing is committed
        (the writer rolls back, the index stays as its last commit left it) and this returns ``False``.
        ``tick(n)``: ``n`` more documents were added."""
        if self.read_only:
            raise IndexNotReadyError(f"the lexical index at {self.path} is open read-only", {"path": str(self.path)})
        with self._lock:
            if self._writer is None:
                self._writer = self.index.writer(heap_size=_writer_heap(upserts), num_threads=1)
            w = self._writer
            try:
                for skill_id in deletes:
                    w.delete_documents_by_term("skill_id", skill_id)
                for start in range(0, len(upserts), APPLY_CHUNK):
                    if stopping is not None and stopping.is_set():
                        w.rollback()
                        self._writer = None
                        return False
                    chunk = upserts[start : start + APPLY_CHUNK]
                    for d in chunk:
                        w.delete_documents_by_term("skill_id", d.skill_id)
                        w.add_document(document(d, self.schema, self.french, self.head_chars))
                    if tick is not None:
                        tick(len(chunk))
                w.commit()
                share_like_folder(self.path)
            except ValueError as exc:
                self._writer = None
                raise IndexNotReadyError(f"lexical index update failed ({exc}); run `skillsearch reindex`") from exc
            self.index.reload()
            return True

    def close(self) -> None:
        with self._lock:
            if self._writer is not None:
                self._writer.wait_merging_threads()
                self._writer = None
        self._remove_view()

    def _remove_view(self) -> None:
        if self._drop_view is not None:
            self._drop_view()  # ``rmtree`` of the links only, never of what they point to; once

    # -- reads ------------------------------------------------------------------------------------

    def num_docs(self) -> int:
        return int(self.index.searcher().num_docs)

    def searcher(self) -> tantivy.Searcher:
        return self.index.searcher()

    def build_query(
        self, text: str, grants: Sequence[str] | None, kind: str | None = None, tags: Sequence[Sequence[str]] = (),
        searcher: tantivy.Searcher | None = None,
    ) -> tantivy.Query | None:
        """The whole lexical query, filters included, or ``None`` when the text has no searchable word.

        ``grants=None`` means no filter at all (the caller sees every grant and asked for no kind or tag):
        the query is then a plain disjunction of terms, which Tantivy answers with block-max WAND, visiting
        a fraction of the postings; any ``Must`` filter clause turns that pruning off. ``searcher`` gives the
        document frequencies that decide which terms of a long request are too common to search
        (``term_weights.COMMON_TERM_SHARE``); without it every term is kept."""
        text = fold(text)
        words = NON_WORD.sub(" ", caseless(text)).strip()
        should: list[tuple[tantivy.Occur, tantivy.Query]] = []
        french = self.french in ("all", "docs") or (self.french in ("detect", "both") and is_french(text))
        if words:
            # A French request's function words ("de", "la", "pour") would match every French document
            # through the English fields, whose stop list is English: they are left to the French fields.
            en_words = " ".join(w for w in words.split() if w not in FRENCH_WORDS) if french else words
            # One flat disjunction of (field, term) queries: nested per-term clauses, as the query parser
            # builds them, would keep Tantivy from pruning with block-max WAND.
            terms = sorted(set(self._english.analyze(en_words))) if en_words else []
            blend: dict[str, dict[str, float]] = {}
            if searcher is not None:
                per_field = field_doc_freqs(terms, searcher, TEXT_FIELDS)
                df = largest(per_field)
                blend = blended_idf(per_field, df, searcher.num_docs)
                # Terms no document's head holds are looked up in the rest of the instructions (``REST_FIELD``).
                should.extend((tantivy.Occur.Should, tantivy.Query.term_query(self.schema, REST_FIELD, t))
                              for t in terms if df[t] == 0)
                if len(terms) > term_weights.SHORT_REQUEST_TERMS:
                    terms = informative_terms(terms, df, searcher.num_docs)
            for field_name, boost in self.field_boosts.items():
                if boost <= 0:
                    continue
                for term in terms:
                    q = tantivy.Query.term_query(self.schema, field_name, term)
                    b = boost * blend.get(field_name, {}).get(term, 1.0)
                    should.append((tantivy.Occur.Should, q if b == 1.0 else tantivy.Query.boost_query(q, b)))
            if french and self._french.analyze(words):
                fr_query, _errors = self.index.parse_query_lenient(
                    words, list(FRENCH_FIELDS), field_boosts=FRENCH_BOOSTS
                )
                should.append((tantivy.Occur.Should, fr_query))
        # Bigrams of hiragana alone are inflections and particles ("した", "ので", "たい"): they match every
        # Japanese document, so a request's are left out (kanji and katakana carry its content).
        grams = sorted({g for run in cjk_runs(text) for g in _bigrams(run) if not _HIRAGANA.fullmatch(g)})
        if grams:
            bigrams = [(tantivy.Occur.Should, tantivy.Query.term_query(self.schema, "cjk", g)) for g in grams]
            cjk_q = tantivy.Query.boost_query(tantivy.Query.boolean_query(bigrams), CJK_BOOST)
            should.append((tantivy.Occur.Should, cjk_q))
        if not should or (grants is not None and not grants):
            return None
        if grants is None:
            return should[0][1] if len(should) == 1 else tantivy.Query.boolean_query(should)
        must: list[tuple[tantivy.Occur, tantivy.Query]] = [
            (tantivy.Occur.Must, tantivy.Query.boolean_query(should)),
            (tantivy.Occur.Must, self._filter("grant", list(grants))),
        ]
        if kind:
            must.append((tantivy.Occur.Must, self._filter("kind", [kind])))
        for spellings in tags:  # each requested tag, as the spellings of it the index holds
            must.append((tantivy.Occur.Must, self._filter("tag", list(spellings))))
        return tantivy.Query.boolean_query(must)

    def terms(self, text: str) -> set[str]:
        """The English-analysed terms of ``text`` (what the ``all`` field holds of it; ``text_terms.TextTerms``)."""
        return self._terms.of(text)

    def query_idf(self, text: str, searcher: tantivy.Searcher) -> dict[str, float]:
        """Each English term of a request and its BM25 IDF in the ``all`` field (a term no document holds
        gets the highest IDF): what a perfect match of every term would be worth."""
        n = int(searcher.num_docs)
        return {t: idf(n, searcher.doc_freq("all", t)) for t in self.terms(text)}

    def _filter(self, field: str, values: list[str]) -> tantivy.Query:
        return tantivy.Query.const_score_query(tantivy.Query.term_set_query(self.schema, field, values), 0.0)

    def search(
        self,
        text: str,
        grants: Sequence[str] | None,
        limit: int,
        kind: str | None = None,
        tags: Sequence[Sequence[str]] = (),
        searcher: tantivy.Searcher | None = None,
    ) -> LexicalHits:
        if grants is None and (kind or tags):
            raise ValueError("an unfiltered lexical search takes no kind or tags")
        s = searcher or self.index.searcher()
        query = self.build_query(text, grants, kind, tags, s)
        if query is None or limit <= 0:
            return LexicalHits(np.zeros(0, np.uint64), np.zeros(0, np.float32))
        try:
            result = s.search(query, limit=limit, count=False)
        except ValueError as exc:
            raise IndexNotReadyError(f"lexical search failed: {exc}") from exc
        hits = [(score, addr) for score, addr in result.hits if score > 0.0]
        if not hits:
            return LexicalHits(np.zeros(0, np.uint64), np.zeros(0, np.float32))
        keys = s.fast_field_values("key", [addr for _, addr in hits])
        return LexicalHits(np.asarray(keys, dtype=np.uint64), np.asarray([h[0] for h in hits], dtype=np.float32))
