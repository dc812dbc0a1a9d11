"""The skills dev set: real Agent Skills imported as ``skillsearch import`` does, requests scored through search.

The dataset folder holds one folder per skill (``SKILL.md`` and its resources) and ``queries.dev.jsonl``
(``_id``, ``q``, ``want``: the skill folders that satisfy the request, ``[]`` for a request no skill fits,
``lang``, ``style``). The harness:

1. imports the folder with :meth:`Catalog.import_path` (the very path of ``skillsearch import``) into a
   data directory kept under the cache folder, ``<cache>/skills-index/<encoder>-<folder key>-<content key>``
   (:func:`skills_index_dir`): keyed by the folder's path and by its files' paths, sizes and modification
   times, so a rerun over unchanged skills reuses the index as it is, and a folder that gained, lost, renamed
   or edited a skill gets a fresh index holding exactly its skills (the folder's earlier index is removed; an
   import only adds and updates, so reusing it would keep skills the folder no longer has);
2. runs every request through :meth:`Catalog.search` as the operator, default settings, limit 10;
3. scores positives by hit@1, hit@5 and MRR@10 (an abstention counts as a miss) per style and per
   language, counts ``no_match`` answers among negatives (right) and positives (wrong), and tabulates how
   well each hit's ``confidence`` predicts that it is a wanted skill (the reliability table).

Slugs are the skill folder names, so a hit's slug is the ``want`` vocabulary.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillsearch.bench.cache import BenchEncoder, folder_name
from skillsearch.bench.report import head_commit, run_metadata
from skillsearch.core.domain import Principal
from skillsearch.core.settings import Settings
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.encoders import make_encoder
from skillsearch.retrieval.indexer import ProgressFactory
from skillsearch.retrieval.search import QUERY_SENTENCES
from skillsearch.retrieval.search_types import SearchRequest, SearchResult
from skillsearch.service import Catalog

__all__ = [
    "QUERIES_FILE", "SkillQuery", "SkillsOptions", "answer_queries", "is_skills_dataset", "load_queries",
    "open_skills_catalog", "run_skills", "score_answers", "skills_index_dir",
]

QUERIES_FILE = "queries.dev.jsonl"
SOURCE = "skills-catalog"
GRANT = "team:bench"
LIMIT = 10
# Reliability bins over [0, 1]: the share of hits that are right among hits whose confidence falls in each.
BINS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


@dataclass(frozen=True)
class SkillQuery:
    qid: str
    text: str
    want: tuple[str, ...]
    lang: str
    style: str


@dataclass
class Answer:
    """One request's answer: the hit slugs best first, each hit's confidence, the abstention."""

    qid: str
    slugs: list[str]
    confidences: list[float | None]
    no_match: bool
    notice: str | None = None
    features: list[dict[str, float]] = field(default_factory=list)


@dataclass
class SkillsOptions:
    dataset: Path
    queries_file: str = QUERIES_FILE
    cache_dir: Path | None = Path("benchmarks/.cache")
    settings: dict[str, Any] = field(default_factory=dict)
    command: str | None = None


def is_skills_dataset(path: Path) -> bool:
    """A folder of skills with labelled requests (rather than a BEIR ``corpus.jsonl``)."""
    return (Path(path) / QUERIES_FILE).is_file() and not (Path(path) / "corpus.jsonl").is_file()


def _content_key(dataset: Path) -> str:
    """A digest of every file under ``dataset`` but its request files (``queries.*``, at the top): relative
    path, size and modification time, so adding, removing, renaming or editing a skill changes it."""
    digest = hashlib.sha256()
    for path in sorted(p for p in dataset.rglob("*") if p.is_file()):
        relative = path.relative_to(dataset)
        if len(relative.parts) == 1 and relative.name.startswith("queries."):
            continue
        stat = path.stat()
        digest.update(f"{relative.as_posix()}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()[:16]


def skills_index_dir(cache_dir: Path, encoder_name: str, dataset: Path) -> Path:
    """Where the index of ``dataset``'s skills is kept under ``cache_dir`` for that encoder: one folder per
    dataset folder and content (see the module's docstring). Earlier indexes of the same folder, from before
    its skills changed, are removed."""
    root = Path(dataset).resolve()
    prefix = f"{folder_name(encoder_name)}-{hashlib.sha256(str(root).encode('utf-8', 'surrogateescape')).hexdigest()[:12]}-"
    parent = Path(cache_dir) / "skills-index"
    current = parent / (prefix + _content_key(root))
    if parent.is_dir():
        for stale in parent.iterdir():
            if stale.name.startswith(prefix) and stale != current and stale.is_dir():
                shutil.rmtree(stale, ignore_errors=True)
    return current


def load_queries(path: Path) -> list[SkillQuery]:
    out: list[SkillQuery] = []
    for lineno, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            out.append(SkillQuery(str(row["_id"]), str(row["q"]), tuple(row.get("want") or ()),
                                  str(row.get("lang", "en")), str(row.get("style", ""))))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{lineno}: expected {{_id, q, want, lang, style}} ({exc})") from None
    return out


def open_skills_catalog(
    dataset: Path, encoder: Encoder, data_dir: Path, settings: Mapping[str, Any] | None = None,
    progress: ProgressFactory | None = None,
) -> tuple[Catalog, int]:
    """The skills folder imported into ``data_dir`` (kept between runs); returns the catalog and how many
    skill folders failed validation. ``progress`` shows the import (883 uncached skills take minutes)."""
    catalog = Catalog(Settings(data_dir=data_dir, seed_sample=False, **dict(settings or {})), encoder=encoder)
    report = catalog.import_path(Path(dataset), SOURCE, GRANT, progress)
    catalog.index(progress)
    return catalog, len(report.problems)


def _answer(result: SearchResult, qid: str) -> Answer:
    return Answer(
        qid=qid,
        slugs=[h.skill.slug for h in result.hits],
        confidences=[h.confidence for h in result.hits],
        no_match=result.no_match,
        notice=result.notice,
        features=[dict(h.features) for h in result.hits],
    )


def answer_queries(
    catalog: Catalog, queries: Sequence[SkillQuery], limit: int = LIMIT, min_confidence: float | None = None,
) -> list[Answer]:
    principal = Principal.operator()
    return [
        _answer(catalog.search(principal, SearchRequest(q.text, limit=limit, min_confidence=min_confidence)), q.qid)
        for q in queries
    ]


def _rank(answer: Answer, want: Sequence[str]) -> int | None:
    return next((i for i, s in enumerate(answer.slugs, start=1) if s in want), None)


def _positives(rows: Sequence[tuple[SkillQuery, Answer]]) -> dict[str, Any]:
    n = len(rows)
    if not n:
        return {"n": 0}
    ranks = [_rank(a, q.want) for q, a in rows]
    return {
        "n": n,
        "hit@1": sum(r == 1 for r in ranks) / n,
        "hit@5": sum(r is not None and r <= 5 for r in ranks) / n,
        "mrr@10": sum(1.0 / r for r in ranks if r is not None and r <= 10) / n,
        "no_match": sum(a.no_match for _, a in rows),
    }


def reliability(rows: Sequence[tuple[SkillQuery, Answer]]) -> list[dict[str, Any]]:
    """Per confidence bin: how many hits, their mean confidence, the share that are wanted skills.

    Every returned hit of every request counts (a negative's hits are all wrong)."""
    pairs = [(c, s in q.want) for q, a in rows for s, c in zip(a.slugs, a.confidences, strict=True) if c is not None]
    table = []
    for lo, hi in itertools.pairwise(BINS):
        inside = [(c, ok) for c, ok in pairs if lo <= c < hi or (hi == 1.0 and c == 1.0)]
        table.append({
            "bin": f"{lo:.1f}-{hi:.1f}", "hits": len(inside),
            "mean_confidence": sum(c for c, _ in inside) / len(inside) if inside else None,
            "right": sum(ok for _, ok in inside) / len(inside) if inside else None,
        })
    return table


def confident_precision(rows: Sequence[tuple[SkillQuery, Answer]], at: float = 0.8) -> dict[str, Any]:
    pairs = [s in q.want for q, a in rows for s, c in zip(a.slugs, a.confidences, strict=True)
             if c is not None and c >= at]
    return {"at": at, "hits": len(pairs), "right": sum(pairs) / len(pairs) if pairs else None}


def score_answers(queries: Sequence[SkillQuery], answers: Sequence[Answer]) -> dict[str, Any]:
    """Every number of the report from the answers (also used by the fitting, on cross-validated answers)."""
    by_id = {a.qid: a for a in answers}
    rows = [(q, by_id[q.qid]) for q in queries if q.qid in by_id]
    pos = [(q, a) for q, a in rows if q.want]
    neg = [(q, a) for q, a in rows if not q.want]
    english = [(q, a) for q, a in pos if q.lang == "en"]
    styles = sorted({q.style for q, _ in pos})
    langs = sorted({q.lang for q, _ in pos})
    return {
        "english": _positives(english),
        "crosslingual": _positives([(q, a) for q, a in pos if q.lang != "en"]),
        "by_style": {s: _positives([(q, a) for q, a in pos if q.style == s]) for s in styles},
        "by_language": {lang: _positives([(q, a) for q, a in pos if q.lang == lang]) for lang in langs},
        "negatives": {
            "n": len(neg), "no_match": sum(a.no_match for _, a in neg),
            "abstention": sum(a.no_match for _, a in neg) / len(neg) if neg else None,
            "english_n": sum(q.lang == "en" for q, _ in neg),
            "english_no_match": sum(a.no_match for q, a in neg if q.lang == "en"),
            "with_notice": sum(a.notice is not None for _, a in neg),
        },
        "positives": {
            "n": len(pos), "no_match": sum(a.no_match for _, a in pos),
            "false_abstention": sum(a.no_match for _, a in pos) / len(pos) if pos else None,
            "with_notice": sum(a.notice is not None for _, a in pos),
        },
        "reliability": reliability(rows),
        "confident_precision": confident_precision(rows),
    }


def _decisions(calibration: dict[str, Any]) -> dict[str, Any]:
    """What the index's fitted decision is, in short; for ``minilm+e5`` one entry per route."""
    def short(stored: Any) -> dict[str, Any]:
        d = dict(stored or {})
        out = {k: d.get(k) for k in ("version", "fitted_on") if k in d}
        if "no_match_below" in d:
            out["no_match_below"] = d["no_match_below"]
        return out
    routes = calibration.get("routes")
    if isinstance(routes, dict):
        return {key: short((route or {}).get("decision")) for key, route in routes.items()}
    return short(calibration.get("decision"))


def run_skills(options: SkillsOptions, encoder: Encoder | None = None,
               log: Callable[[str], None] | None = None, progress: ProgressFactory | None = None) -> dict[str, Any]:
    """Import, search every request, score; returns the report (kind ``skills-relevance``)."""
    started, commit = time.time(), head_commit()  # the code that runs: HEAD may move before the report
    say = log or (lambda _s: None)
    queries = load_queries(Path(options.dataset) / options.queries_file)
    settings = Settings(**options.settings)
    bench_encoder = BenchEncoder(encoder or make_encoder(settings.encoder), options.cache_dir)
    timing: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="skillsearch-skills-") as tmp:
        data_dir = (skills_index_dir(Path(options.cache_dir), bench_encoder.name, Path(options.dataset))
                    if options.cache_dir else Path(tmp) / "data")
        t = time.perf_counter()
        say(f"importing {options.dataset} into {data_dir}")
        catalog, invalid = open_skills_catalog(Path(options.dataset), bench_encoder, data_dir, options.settings,
                                               progress)
        timing["import_s"] = time.perf_counter() - t
        try:
            t = time.perf_counter()
            texts = [q.text.strip()[: settings.max_query_chars] for q in queries]
            tick = progress(len(set(texts)), "embedding queries") if progress and texts else None
            bench_encoder.prime_queries(texts, QUERY_SENTENCES, tick)
            timing["encode_queries_s"] = time.perf_counter() - t
            t = time.perf_counter()
            answers = answer_queries(catalog, queries)
            timing["search_ms_per_query"] = (time.perf_counter() - t) * 1000 / max(len(queries), 1)
            skills = catalog.store.count()
            decision = _decisions(catalog.index().calibration)
        finally:
            catalog.close()
    return {
        **run_metadata(options.command, commit),
        "kind": "skills-relevance",
        "dataset": Path(options.dataset).name,
        "dataset_path": str(options.dataset),
        "split": Path(options.queries_file).stem.removeprefix("queries.") or "dev",
        "queries": len(queries),
        "skills": skills,
        "invalid_skills": invalid,
        "encoder": bench_encoder.name,
        "decision": decision,
        "scores": score_answers(queries, answers),
        "answers": [{"qid": a.qid, "slugs": a.slugs[:5], "confidences": a.confidences[:5],
                     "no_match": a.no_match} for a in answers],
        "timing": {k: round(v, 3) for k, v in timing.items()},
        "seconds": round(time.time() - started, 1),
    }
