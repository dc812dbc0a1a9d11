"""BEIR-layout datasets: loading them, and turning their corpus into a skill bundle for the normal import.

A BEIR folder holds ``corpus.jsonl`` (``_id``, ``title``, ``text``, optional ``tags``), ``queries.jsonl``
(``_id``, ``text``) and ``qrels.<split>.tsv`` (``query-id``, ``corpus-id``, ``score``, with a header).

The corpus enters the catalog the way any customer's skills do: as a JSONL bundle of flat entries
(``slug``, ``name``, ``description``, ``tags``, ``instructions``) read by :mod:`skillsearch.catalog.importer`. The
mapping keeps within the catalog's limits: the slug is the slugified ``_id`` (with a numeric suffix when
two ids slugify alike), a title over 64 characters is truncated for ``name``, and text beyond the
1,024-character description limit continues in ``instructions``.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillsearch.catalog.importer import MAX_NAME, slugify
from skillsearch.core.errors import ValidationError, problem

__all__ = ["BeirDataset", "load_beir", "write_bundle"]

MAX_DESCRIPTION = 1024
MAX_SLUG = 64


@dataclass(frozen=True)
class BeirDataset:
    name: str
    corpus: dict[str, dict[str, Any]]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    split: str

    def query_ids(self, max_queries: int | None = None) -> list[str]:
        """Judged query ids of the split, sorted, optionally the first ``max_queries`` of them."""
        ids = sorted(q for q in self.qrels if q in self.queries)
        return ids[:max_queries] if max_queries else ids


def _read_jsonl(path: Path, fields: tuple[str, ...]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each line's object with its line number; a line that is not a JSON object holding ``fields`` is a
    ``VALIDATION_ERROR`` naming the file and the line."""
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError as exc:
                raise _bad(path, lineno, f"not JSON ({exc})") from None
            if not isinstance(entry, dict) or any(k not in entry for k in fields):
                raise _bad(path, lineno, f"expected an object with {', '.join(fields)}")
            yield lineno, entry


def _bad(path: Path, lineno: int, why: str) -> ValidationError:
    return ValidationError(f"{path}:{lineno}: {why}", {"problems": [problem(f"{path.name}:{lineno}", why)]})


def load_beir(folder: Path, split: str) -> BeirDataset:
    """Read a BEIR folder; ``split`` picks ``qrels.<split>.tsv`` (``all`` reads ``qrels.tsv``). A folder whose
    qrels judge no query of its queries over its corpus is refused: its report would be all zeros."""
    folder = Path(folder)
    if not folder.is_dir():  # relative to the current folder: say which one was looked for
        raise ValidationError(f"{folder} ({os.path.abspath(folder)}) is not a folder: --dataset names a BEIR folder"
                              " (corpus.jsonl, queries.jsonl, qrels.<split>.tsv)", {"missing": [str(folder)]})
    qrels_path = folder / ("qrels.tsv" if split == "all" else f"qrels.{split}.tsv")
    missing = [p.name for p in (folder / "corpus.jsonl", folder / "queries.jsonl", qrels_path) if not p.is_file()]
    if missing:
        raise ValidationError(f"{folder} is not a BEIR folder for split {split!r}: missing {', '.join(missing)}",
                              {"missing": missing})
    corpus = {str(d["_id"]): d for _, d in _read_jsonl(folder / "corpus.jsonl", ("_id",))}
    queries = {str(q["_id"]): str(q["text"]) for _, q in _read_jsonl(folder / "queries.jsonl", ("_id", "text"))}
    qrels: dict[str, dict[str, int]] = {}
    with qrels_path.open(encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter="\t")
        for lineno, row in enumerate(reader, start=1):
            if len(row) < 3 or row[0] == "query-id":
                continue
            try:
                score = int(float(row[2]))
            except ValueError:
                raise _bad(qrels_path, lineno, f"the score {row[2][:20]!r} is not a number") from None
            if row[1] in corpus:
                qrels.setdefault(row[0], {})[row[1]] = score
    dataset = BeirDataset(folder.name, corpus, queries, qrels, split)
    if not dataset.query_ids():
        raise ValidationError(f"{qrels_path} judges no query of {folder / 'queries.jsonl'} against a document of"
                              f" {folder / 'corpus.jsonl'}: nothing to score", {"problems": [
                                  problem(qrels_path.name, "judges no known query against a known document")]})
    return dataset


def _entry(doc: dict[str, Any], slug: str) -> dict[str, Any]:
    title = str(doc.get("title") or "").strip() or str(doc["_id"])
    text = str(doc.get("text") or "").strip() or title
    name = title if len(title) <= MAX_NAME else title[: MAX_NAME - 1].rstrip() + "…"
    instructions = ""
    if len(title) > MAX_NAME:
        instructions = title + "\n\n"
    description = text
    if len(text) > MAX_DESCRIPTION:
        cut = text.rfind(" ", 0, MAX_DESCRIPTION)
        cut = cut if cut > MAX_DESCRIPTION // 2 else MAX_DESCRIPTION
        description, rest = text[:cut].rstrip(), text[cut:].strip()
        instructions += rest
    tags = [str(t) for t in doc.get("tags") or [] if str(t).strip()]
    return {"slug": slug, "name": name, "description": description, "tags": tags, "instructions": instructions}


def write_bundle(dataset: BeirDataset, path: Path) -> dict[str, str]:
    """Write the corpus as a JSONL skill bundle; returns slug -> BEIR ``_id``."""
    slugs: dict[str, str] = {}
    with Path(path).open("w", encoding="utf-8") as f:
        for doc_id, doc in dataset.corpus.items():
            base = slugify(doc_id) or "doc"
            slug, n = base, 1
            while slug in slugs:
                n += 1
                suffix = f"-{n}"
                slug = base[: MAX_SLUG - len(suffix)].strip("-") + suffix
            slugs[slug] = doc_id
            f.write(json.dumps(_entry(doc, slug), ensure_ascii=False) + "\n")
    return slugs
