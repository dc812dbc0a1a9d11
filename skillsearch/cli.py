"""The ``skillsearch`` command line.

Contract relied on by scripts: a global ``--data-dir`` (env ``SKILLSEARCH_DATA_DIR``, default ``./index``);
``--json`` prints exactly one JSON object on stdout; errors in ``--json`` mode are
``{"error": {"code", "message", "details"}}``; the exit code is 0 on success, 1 on an error (or an import
with invalid entries), 2 on a usage error. Progress bars and logs go to stderr. With one or more
``--grant`` the caller sees only those grants; without any, the CLI is the local operator.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from skillsearch.domain import SCOPE_MEMORY_READ, Parameter, Principal
from skillsearch.errors import SkillSearchError, ValidationError
from skillsearch.search import SearchRequest
from skillsearch.service import Catalog
from skillsearch.settings import Settings
from skillsearch.templates import coerce_text_value

__all__ = ["build_parser", "main"]

log = logging.getLogger("skillsearch")


def _progress_factory(enabled: bool) -> Callable[[int, str], Callable[[int], None]] | None:
    if not enabled:
        return None

    def factory(total: int, label: str) -> Callable[[int], None]:
        from tqdm import tqdm

        bar = tqdm(total=total, desc=label, unit="skill", file=sys.stderr, leave=False, dynamic_ncols=True)

        def tick(n: int) -> None:
            bar.update(n)
            if bar.n >= total:
                bar.close()

        return tick

    return factory


def principal_from_args(args: argparse.Namespace) -> Principal:
    grants = getattr(args, "grant", None) or []
    if not grants:
        return Principal.operator()
    return Principal(name="cli", grants=frozenset(grants), scopes=frozenset({SCOPE_MEMORY_READ}))


def settings_from_args(args: argparse.Namespace) -> Settings:
    return Settings.from_env(data_dir=args.data_dir, encoder=args.encoder)


def _open(args: argparse.Namespace) -> Catalog:
    return Catalog.open(settings_from_args(args), progress=_progress_factory(not args.quiet))


def _emit(out: TextIO, args: argparse.Namespace, payload: Any, text: Callable[[], str]) -> None:
    if args.json:
        out.write(json.dumps(payload, ensure_ascii=False, default=str) + "\n")
    else:
        out.write(text() + "\n")


# -- commands -------------------------------------------------------------------------------------------


def cmd_import(args: argparse.Namespace, out: TextIO) -> int:
    catalog = Catalog(settings_from_args(args))
    report = catalog.import_path(Path(args.path), args.source, args.grant, _progress_factory(not args.quiet))
    for problem in report.problems:
        print(f"invalid: {problem}", file=sys.stderr)
    payload = report.to_dict()
    _emit(out, args, payload, lambda: (
        f"imported into {report.source} ({report.grant}): {len(report.created)} created, "
        f"{len(report.updated)} updated, {len(report.unchanged)} unchanged, {len(report.problems)} invalid"
    ))
    return 0 if report.ok else 1


def cmd_search(args: argparse.Namespace, out: TextIO) -> int:
    catalog = _open(args)
    request = SearchRequest(
        query=args.query, limit=args.limit, mode=args.mode, kind=args.kind, tags=tuple(args.tag or ()),
        fusion=args.fusion, semantic_weight=args.semantic_weight,
    )
    view = catalog.search_view(principal_from_args(args), request)

    def text() -> str:
        if view.no_match:
            return "no good match"
        lines = []
        for i, h in enumerate(view.hits, start=1):
            e = h.explanation
            lines.append(f"{i:>2}. {h.name}  [{h.kind}]  {h.skill_id}  score={h.score:.3f}")
            lines.append(f"    {h.description[:160]}")
            lines.append(f"    why: lexical rank {e.lexical_rank or '-'}, semantic rank {e.semantic_rank or '-'}"
                         f" (cos {e.semantic_score if e.semantic_score is not None else '-'})")
        return "\n".join(lines)

    _emit(out, args, view.model_dump(), text)
    return 0


def cmd_list(args: argparse.Namespace, out: TextIO) -> int:
    catalog = _open(args)
    page = catalog.list_skills(
        principal_from_args(args), kind=args.kind, tags=args.tag or (), cursor=args.cursor, limit=args.limit
    )
    _emit(out, args, page.model_dump(), lambda: "\n".join(
        [f"{s.skill_id}  {s.kind:<13}  {s.name}" for s in page.items]
        + ([f"(more: --cursor {page.next_cursor})"] if page.next_cursor else [])
    ))
    return 0


def cmd_get(args: argparse.Namespace, out: TextIO) -> int:
    catalog = _open(args)
    detail = catalog.get_skill(principal_from_args(args), args.skill_id)

    def text() -> str:
        lines = [f"# {detail.name}  ({detail.kind}, {detail.skill_id}, revision {detail.revision_id})",
                 detail.description, ""]
        if detail.parameters is not None:
            lines.append("Parameters:")
            lines += [f"  {p.name}: {p.type}{' (required)' if p.required else ''}"
                      f"{f' default={p.default!r}' if p.default is not None else ''}"
                      f"{f' one of {p.enum}' if p.enum else ''}  {p.description}" for p in detail.parameters]
            lines.append("Steps:")
            lines += [f"  {i}. {s.tool} {json.dumps(s.args, ensure_ascii=False)}"
                      for i, s in enumerate(detail.steps or [], start=1)]
        if detail.instructions:
            lines += ["", detail.instructions]
        if detail.resources:
            lines += ["", "Resources:"] + [f"  {r.path} ({r.kind}, {r.size} bytes)" for r in detail.resources]
        return "\n".join(lines)

    _emit(out, args, detail.model_dump(), text)
    return 0


def _parse_params(catalog: Catalog, args: argparse.Namespace) -> dict[str, Any]:
    detail = catalog.get_skill(principal_from_args(args), args.skill_id)
    schema = {p.name: p for p in (detail.parameters or [])}
    values: dict[str, Any] = {}
    for item in args.param or []:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise ValidationError(f"--param takes NAME=VALUE, got {item!r}")
        p = schema.get(name)
        values[name] = coerce_text_value(Parameter(**p.model_dump()) if p else None, text)
    return values


def cmd_resolve(args: argparse.Namespace, out: TextIO) -> int:
    catalog = _open(args)
    values = _parse_params(catalog, args)
    flow = catalog.resolve(principal_from_args(args), args.skill_id, values)
    _emit(out, args, flow.model_dump(), lambda: "\n".join(
        f"{i}. {s.tool} {json.dumps(s.args, ensure_ascii=False)}" for i, s in enumerate(flow.steps, start=1)
    ))
    return 0


def cmd_reindex(args: argparse.Namespace, out: TextIO) -> int:
    catalog = Catalog(settings_from_args(args))
    stats = catalog.reindex(_progress_factory(not args.quiet))
    payload = {"documents": stats.upserted, "embedded": stats.embedded, "seconds": round(stats.seconds, 3)}
    _emit(out, args, payload, lambda: (
        f"reindexed {stats.upserted} skills ({stats.embedded} embedded) in {stats.seconds:.1f}s"
    ))
    return 0


def cmd_bench_relevance(args: argparse.Namespace, out: TextIO) -> int:
    from skillsearch.bench.relevance import ALL_MODES, RelevanceOptions, run_relevance
    from skillsearch.bench.report import to_markdown, write_results

    modes = [m for chunk in (args.modes or [",".join(ALL_MODES)]) for m in chunk.split(",") if m]
    overrides = {k: v for k, v in (("encoder", args.encoder), ("fusion", args.fusion),
                                   ("semantic_weight", args.semantic_weight), ("rrf_k", args.rrf_k)) if v is not None}
    options = RelevanceOptions(
        dataset=Path(args.dataset), split=args.split, modes=modes, max_queries=args.max_queries,
        cache_dir=None if args.no_cache else Path(args.cache_dir), settings=overrides,
        command="skillsearch " + " ".join(sys.argv[1:]) if args.record_command else None,
    )
    try:
        report = run_relevance(options, progress=_progress_factory(not args.quiet))
    except ValueError as exc:
        raise ValidationError(str(exc)) from None
    if not args.no_save:
        stem = f"relevance-{report['dataset']}-{args.split}" + (f"-{args.tag}" if args.tag else "")
        report["files"] = [str(p) for p in write_results(report, Path(args.out), stem)]
    _emit(out, args, report, lambda: to_markdown(report))
    return 0


def cmd_bench_latency(args: argparse.Namespace, out: TextIO) -> int:
    from skillsearch.bench.latency import run_latency
    from skillsearch.bench.report import to_markdown, write_results

    catalogs = [c for chunk in args.skills for c in chunk.split(",") if c]
    bad = [c for c in catalogs if c != "real" and not c.isdigit()]
    if bad:
        raise ValidationError(f"--skills takes a number of synthetic skills or 'real', got {bad}")
    report = run_latency(
        catalogs, data_root=Path(args.data_root) if args.data_root else None,
        cache_dir=None if args.no_cache else Path(args.cache_dir), queries=args.queries,
        stand_in_above=args.stand_in_above, encoder_name=args.encoder or "minilm",
        command="skillsearch " + " ".join(sys.argv[1:]),
        log=(lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True)),
    )
    if not args.no_save:
        stem = "latency" + (f"-{args.tag}" if args.tag else "")
        report["files"] = [str(p) for p in write_results(report, Path(args.out), stem)]
    _emit(out, args, report, lambda: to_markdown(report))
    return 0


def _add_bench(sub: Any) -> None:
    bench = sub.add_parser("bench", help="relevance and latency benchmarks (needs the 'bench' extra)",
                           description="Relevance and latency benchmarks; results go to benchmarks/results/.")
    inner = bench.add_subparsers(dest="bench_command", required=True, metavar="BENCH")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--json", action="store_true", help="print one JSON object")
        p.add_argument("--out", default="benchmarks/results", help="folder for the .md/.json/.png results")
        p.add_argument("--no-save", action="store_true", help="print only, write no result files")
        p.add_argument("--tag", help="suffix for the result file names")
        p.add_argument("--cache-dir", default="benchmarks/.cache", help="on-disk embedding cache")
        p.add_argument("--no-cache", action="store_true", help="encode everything, cache nothing")

    p = inner.add_parser("relevance", help="nDCG@10, Recall@10/50, MRR@10, P@1 on a BEIR-layout folder")
    p.set_defaults(func=cmd_bench_relevance, record_command=True)
    common(p)
    p.add_argument("--dataset", required=True, help="folder with corpus.jsonl, queries.jsonl, qrels.<split>.tsv")
    p.add_argument("--split", default="test", choices=["dev", "test", "all"])
    p.add_argument("--modes", action="append", metavar="M,M",
                   help="modes to run (default all): lexical, semantic, hybrid, hybrid-<fusion>, bm25s")
    p.add_argument("--max-queries", type=int, help="only the first N judged queries by id")
    p.add_argument("--fusion", choices=["zscore", "minmax", "rrf"], help="override the default fusion")
    p.add_argument("--semantic-weight", type=float, help="override the default semantic weight")
    p.add_argument("--rrf-k", type=int, help="override RRF k")

    p = inner.add_parser("latency", help="search/encode percentiles, build throughput, update time, RSS")
    p.set_defaults(func=cmd_bench_latency)
    common(p)
    p.add_argument("--skills", action="append", required=True, metavar="N|real",
                   help="catalog size (repeatable or comma-separated); 'real' = the 883 real skills")
    p.add_argument("--data-root", default=os.environ.get("SKILLSEARCH_BENCH_DATA", "../shared/data"),
                   help="folder with metatool/, sealtools/, skills-catalog/ (text pool, queries, real skills)")
    p.add_argument("--queries", type=int, default=300, help="queries per run (split over the modes)")
    p.add_argument("--stand-in-above", type=int, default=20_000,
                   help="above this size, uncached texts get stand-in vectors instead of being encoded")


# -- parser ---------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="skillsearch", description="Search-first skill catalog for LLM agents.")
    parser.add_argument("--data-dir", default=os.environ.get("SKILLSEARCH_DATA_DIR", "index"),
                        help="data directory (env SKILLSEARCH_DATA_DIR, default ./index)")
    parser.add_argument("--encoder", default=None, help="embedding model: minilm (default), e5, hashing")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level on stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, func: Callable[[argparse.Namespace, TextIO], int], help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(func=func)
        p.add_argument("--json", action="store_true", help="print one JSON object")
        return p

    def add_grants(p: argparse.ArgumentParser) -> None:
        p.add_argument("--grant", action="append", metavar="G",
                       help="see only this grant (repeatable); default: every grant (local operator)")

    p = add("import", cmd_import, "import a folder of Agent Skills or a JSON/JSONL bundle")
    p.add_argument("path")
    p.add_argument("--source", required=True, help="name of the local source the skills belong to")
    p.add_argument("--grant", required=True, help="grant key: sub:<id>, team:<id> or user:<id>")

    p = add("search", cmd_search, "search skills (hybrid by default)")
    p.add_argument("query")
    add_grants(p)
    p.add_argument("--mode", default="hybrid", choices=["hybrid", "lexical", "semantic"])
    p.add_argument("--kind", choices=["knowledge", "flow_template"])
    p.add_argument("--tag", action="append", metavar="T", help="require this tag (repeatable)")
    p.add_argument("--limit", type=int, default=10)
    p.add_argument("--fusion", choices=["zscore", "minmax", "rrf"], help="fusion method (hybrid mode)")
    p.add_argument("--semantic-weight", type=float, help="weight of the semantic side in [0, 1]")

    p = add("list", cmd_list, "list visible skills, paged")
    add_grants(p)
    p.add_argument("--kind", choices=["knowledge", "flow_template"])
    p.add_argument("--tag", action="append", metavar="T")
    p.add_argument("--limit", type=int, default=50)
    p.add_argument("--cursor")

    p = add("get", cmd_get, "show a skill: instructions, or steps and parameters")
    p.add_argument("skill_id")
    add_grants(p)

    p = add("resolve", cmd_resolve, "resolve a flow template's steps with parameter values (never runs them)")
    p.add_argument("skill_id")
    add_grants(p)
    p.add_argument("--param", action="append", metavar="NAME=VALUE")

    add("reindex", cmd_reindex, "rebuild the search index from the catalog")
    _add_bench(sub)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        return int(args.func(args, out))
    except SkillSearchError as exc:
        if getattr(args, "json", False):
            out.write(json.dumps({"error": exc.to_dict()}, ensure_ascii=False, default=str) + "\n")
        else:
            print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
