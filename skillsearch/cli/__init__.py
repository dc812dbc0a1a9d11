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
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from skillsearch.core.domain import GRANT_PATTERN, SCOPE_MEMORY_READ, Parameter, Principal
from skillsearch.core.errors import SkillSearchError, ValidationError
from skillsearch.core.settings import Settings
from skillsearch.core.templates import coerce_text_value
from skillsearch.retrieval.search import SearchRequest
from skillsearch.service import Catalog
from skillsearch.sync.config import SyncConfig, default_config_path, load_config

if TYPE_CHECKING:
    from fastapi import APIRouter, FastAPI
    from mcp.server.mcpserver import MCPServer

    from skillsearch.http.app import Lifespan
    from skillsearch.http.auth import PrincipalRegistry
    from skillsearch.mcp.server import ServerState
    from skillsearch.retrieval.encoder import Encoder

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


def _sync_config(args: argparse.Namespace) -> SyncConfig:
    return load_config(Path(args.config) if args.config else default_config_path(Path(args.data_dir)))


def cmd_sync(args: argparse.Namespace, out: TextIO) -> int:
    config = _sync_config(args)
    catalog = Catalog(settings_from_args(args))
    if args.status:
        status = catalog.sync_status(config)
        _emit(out, args, status.model_dump(), lambda: "\n".join(
            f"{s.subscription_id}: cursor={s.cursor or '-'} last_success={s.last_success or '-'}"
            f" active={s.skills_active} archived={s.skills_archived}{' REVOKED' if s.revoked else ''}"
            + (f"\n  last error: {s.last_error}" if s.last_error else "")
            for s in status.subscriptions
        ) or "no subscriptions configured")
        return 0
    log.info("sync: opening the index in %s", args.data_dir)
    catalog.index(_progress_factory(not args.quiet))
    reports = catalog.sync_once(config, args.subscription or None)
    for r in reports:
        for rej in r.outcome.rejected:
            print(f"rejected: {r.subscription_id}: {rej}", file=sys.stderr)
        if r.error:
            print(f"error: {r.subscription_id}: {r.error['code']}: {r.error['message']}", file=sys.stderr)
    payload = {"subscriptions": [r.to_dict() for r in reports]}

    def text() -> str:
        return "\n".join(
            f"{r.subscription_id}: failed" if r.error else
            f"{r.subscription_id}: {'full' if r.full else 'incremental'}{' REVOKED' if r.revoked else ''},"
            f" {r.pages} page(s): {len(r.outcome.created)} created, {len(r.outcome.updated)} updated,"
            f" {len(r.outcome.archived)} archived, {len(r.outcome.deleted)} deleted,"
            f" {len(r.outcome.rejected)} rejected, {r.embedded} embedded in {r.seconds:.1f}s"
            for r in reports
        ) or "no subscriptions configured"

    _emit(out, args, payload, text)
    return 1 if any(r.error or r.outcome.rejected for r in reports) else 0


def cmd_upstream(args: argparse.Namespace, out: TextIO) -> int:
    from skillsearch.upstream.app import run_upstream

    tokens = args.token or [os.environ.get("SKILLSEARCH_UPSTREAM_TOKEN", "demo-token")]
    run_upstream(args.sources, host=args.host, port=args.port, tokens=tokens, webhook_url=args.webhook_url,
                 webhook_secret=args.webhook_secret or os.environ.get("SKILLSEARCH_WEBHOOK_SECRET"))
    return 0


def principal_from_file(data_dir: Path, name: str) -> Principal:
    """The principal ``name`` of ``<data-dir>/principals.toml`` (tables ``[principals.NAME]`` with
    ``grants = [...]``, ``"*"`` for every grant, and ``scopes = [...]``; other keys such as the HTTP
    app's ``token_sha256`` are ignored): the stdio server runs as a principal named on the command line."""
    from skillsearch.http.auth import PRINCIPALS_FILE, read_entries

    path = Path(data_dir) / PRINCIPALS_FILE
    if not path.is_file():
        raise ValidationError(f"--principal {name}: no principals file at {path}", {"path": str(path)})
    entry = read_entries(path).get(name)
    if entry is None:
        raise ValidationError(f"--principal {name}: no [principals.{name}] table in {path}",
                              {"path": str(path), "principal": name})
    return entry.principal


def mcp_principal_from_args(args: argparse.Namespace) -> Principal:
    """``--principal NAME`` (from the principals file), else ``--grant``/``--scope``, else the operator."""
    grants, scopes = args.grant or [], args.scope
    if args.principal and (grants or scopes is not None):
        raise ValidationError("use either --principal or --grant/--scope, not both")
    if args.principal:
        return principal_from_file(Path(args.data_dir), args.principal)
    if scopes is not None and not grants:
        raise ValidationError("--scope needs --grant (the local operator has every grant and memory:read)")
    if not grants:
        return Principal.operator()
    bad = [g for g in grants if not GRANT_PATTERN.match(g)]
    if bad:
        raise ValidationError(f"invalid grant(s) {', '.join(bad)}: use sub:<id>, team:<id> or user:<id>")
    chosen = {SCOPE_MEMORY_READ} if scopes is None else {s for s in scopes if s}
    return Principal(name="cli", grants=frozenset(grants), scopes=frozenset(chosen))


def mcp_server_from_args(args: argparse.Namespace, encoder: Encoder | None = None) -> MCPServer[ServerState]:
    """The server ``skillsearch mcp`` runs: its principal, data directory and host tool names."""
    from skillsearch.mcp.server import build_mcp_server

    principal = mcp_principal_from_args(args)
    settings = settings_from_args(args)
    progress = _progress_factory(not args.quiet)
    log.info("MCP server as principal %s (%s)", principal.name,
             "every grant" if principal.grants is None else ", ".join(sorted(principal.grants)))
    return build_mcp_server(
        lambda: Catalog.open(settings, encoder=encoder, progress=progress),
        principal,
        known_tools=args.host_tool,
        log_level="INFO" if args.verbose else "WARNING",
    )


def cmd_mcp(args: argparse.Namespace, out: TextIO) -> int:
    """Serve the MCP tools over stdio (stdout carries nothing but protocol) or streamable HTTP."""
    from skillsearch.mcp.server import run_streamable_http

    server = mcp_server_from_args(args)
    if args.http:
        run_streamable_http(server, host=args.host, port=args.port)
    else:
        server.run("stdio")
    return 0

def _principals_path(args: argparse.Namespace) -> Path:
    from skillsearch.http.auth import PRINCIPALS_FILE

    return Path(args.principals) if args.principals else Path(args.data_dir) / PRINCIPALS_FILE


def _serve_banner(url: str, demo: bool, principals: Path) -> str:
    from skillsearch.http.auth import DEMO_TOKEN

    lines = [f"skillsearch is serving on {url}", f"  search page:  {url}/", f"  MCP:          {url}/mcp (streamable HTTP)",
             f"  API:          {url}/openapi.json  (Swagger UI at {url}/docs needs internet for its assets)"]
    if demo:
        lines += [
            f"  demo token:   {DEMO_TOKEN}   (sample catalog only: sees sub:starter-pack and team:data-science)",
            f"  try:          curl -H 'Authorization: Bearer {DEMO_TOKEN}' '{url}/v1/search?q=profile+python+code'",
        ]
    else:
        lines += [
            f"  principals:   {principals}",
            "  add a token:  skillsearch token add NAME --grant sub:<id> --scope skills:read",
            f"  try:          curl -H 'Authorization: Bearer <token>' '{url}/v1/search?q=profile+python+code'",
        ]
    return "\n".join(lines)


def build_serve_app(catalog: Catalog, registry: PrincipalRegistry, host: str = "127.0.0.1",
                    sync: SyncConfig | None = None) -> FastAPI:
    """What ``skillsearch serve`` runs: the HTTP app with MCP's streamable HTTP transport at ``/mcp``, both
    authenticated by the same bearer tokens (the MCP catalog tools need ``skills:read`` as the REST routes
    do; recall needs ``memory:read`` on both). With ``sync``, a background poller keeps the subscriptions in
    sync, and ``POST /v1/sync/webhook`` (HMAC-signed) and ``GET /v1/sync/status`` (bearer token) are served."""
    from skillsearch.http.app import create_app
    from skillsearch.http.auth import SCOPE_SKILLS_READ
    from skillsearch.mcp.server import build_mcp_server, mountable

    def principal_of(headers: Mapping[str, str] | None) -> Principal:
        return registry.authenticate_header((headers or {}).get("authorization"))

    mcp_app, mcp_lifespan = mountable(build_mcp_server(catalog, principal_of, catalog_scope=SCOPE_SKILLS_READ),
                                      host=host)
    routers: list[APIRouter] = []
    lifespans: list[Lifespan] = [lambda _app: mcp_lifespan()]
    if sync is not None:
        from skillsearch.http.sync_routes import make_sync_router

        poller = catalog.make_poller(sync)
        routers.append(make_sync_router(catalog, sync, poller, authenticate=registry.authenticate_header))
        lifespans.append(lambda _app: poller.lifespan())
    return create_app(catalog, principals=registry, mounts=[("/mcp", mcp_app)], routers=routers,
                      lifespans=lifespans)


def cmd_serve(args: argparse.Namespace, out: TextIO) -> int:
    from skillsearch.http.auth import PrincipalRegistry
    from skillsearch.http.middleware import configure_json_logging
    from skillsearch.http.server import serve

    sync_path = Path(args.sync_config) if args.sync_config else default_config_path(Path(args.data_dir))
    sync = load_config(sync_path) if not args.no_sync and (args.sync_config or sync_path.exists()) else None
    # A synced catalog is not seeded with the sample: its demo subscriptions would collide with real ones.
    catalog = Catalog.open(settings_from_args(args), seed=False if sync else None,
                           progress=_progress_factory(not args.quiet))
    principals = _principals_path(args)
    registry = PrincipalRegistry.for_catalog(catalog, principals)
    app = build_serve_app(catalog, registry, args.host, sync)
    configure_json_logging(logging.DEBUG if args.verbose else logging.INFO)

    def started(url: str) -> None:
        out.write(_serve_banner(url, registry.demo, principals) + "\n")
        out.flush()

    try:
        serve(app, host=args.host, port=args.port, on_started=started)
    finally:
        catalog.close()
    return 0


def cmd_token_add(args: argparse.Namespace, out: TextIO) -> int:
    from skillsearch.http.auth import KNOWN_SCOPES, add_principal

    path = _principals_path(args)
    scopes = args.scope or list(KNOWN_SCOPES)
    token = add_principal(path, args.name, args.grant or [], scopes)
    payload = {"name": args.name, "token": token, "grants": args.grant, "scopes": scopes, "file": str(path)}
    _emit(out, args, payload, lambda: (
        f"{token}\n"
        f"(principal {args.name!r} in {path}; this token is shown once and only its sha256 is stored)"
    ))
    return 0


def cmd_token_list(args: argparse.Namespace, out: TextIO) -> int:
    from skillsearch.http.auth import PrincipalRegistry

    registry = PrincipalRegistry(_principals_path(args))
    rows = []
    for name in registry.names():
        p = registry.principal(name)
        rows.append({"name": name, "grants": ["*"] if p.grants is None else sorted(p.grants),
                     "scopes": sorted(p.scopes)})
    _emit(out, args, {"principals": rows}, lambda: "\n".join(
        f"{r['name']}  grants={','.join(r['grants'])}  scopes={','.join(r['scopes'])}" for r in rows
    ) or "(no principals)")
    return 0


def cmd_token_remove(args: argparse.Namespace, out: TextIO) -> int:
    from skillsearch.http.auth import remove_principal

    removed = remove_principal(_principals_path(args), args.name)
    _emit(out, args, {"name": args.name, "removed": removed},
          lambda: f"removed {args.name}" if removed else f"no principal {args.name!r}")
    return 0 if removed else 1


def cmd_calibrate(args: argparse.Namespace, out: TextIO) -> int:
    catalog = _open(args)
    labelled: list[tuple[str, list[str]]] = []
    if args.queries:
        try:
            lines = Path(args.queries).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ValidationError(f"cannot read {args.queries}: {exc}") from None
        for lineno, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                labelled.append((str(entry["query"]), [str(s) for s in entry["expected"]]))
            except (ValueError, KeyError, TypeError) as exc:
                raise ValidationError(f"{args.queries}:{lineno}: expected {{query, expected: [slugs]}} ({exc})") from None
    calibration = catalog.calibrate(labelled)
    _emit(out, args, calibration, lambda: "\n".join(f"{k}: {v}" for k, v in calibration.items()))
    return 0

def cmd_bench_relevance(args: argparse.Namespace, out: TextIO) -> int:
    from skillsearch.bench.relevance import ALL_MODES, RelevanceOptions, run_relevance
    from skillsearch.bench.report import to_markdown, write_results
    from skillsearch.bench.skills_cli import is_skills_dataset, skills_command

    overrides = {k: v for k, v in (("encoder", args.encoder), ("fusion", args.fusion),
                                   ("semantic_weight", args.semantic_weight), ("rrf_k", args.rrf_k)) if v is not None}
    if is_skills_dataset(Path(args.dataset)):
        return skills_command(args, out, overrides)
    modes = [m for chunk in (args.modes or [",".join(ALL_MODES)]) for m in chunk.split(",") if m]
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
    p.add_argument("--dataset", required=True, help="folder with corpus.jsonl, queries.jsonl, qrels.<split>.tsv,"
                   " or a folder of skills with queries.dev.jsonl (the skills dev set)")
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
    parser.add_argument("--encoder", default=None,
                        help="embedding model: minilm (default), e5, minilm+e5 (by the request's language), hashing")
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

    p = add("sync", cmd_sync, "pull every waiting change from the subscription platform once")
    p.add_argument("--config", help="sync settings (TOML); default <data-dir>/sync.toml")
    p.add_argument("--subscription", action="append", metavar="ID", help="only this subscription (repeatable)")
    p.add_argument("--status", action="store_true", help="show cursor, last success, last error, counts")

    p = add("upstream", cmd_upstream, "serve folders of skills as a reference subscription platform")
    p.add_argument("--from", dest="sources", action="append", required=True, metavar="[ID=]PATH",
                   help="a folder of Agent Skills or a JSON/JSONL bundle, served as subscription ID (repeatable)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--token", action="append", help="accepted bearer token (env SKILLSEARCH_UPSTREAM_TOKEN,"
                   " default demo-token)")
    p.add_argument("--webhook-url", help="where to POST signed webhooks, e.g. http://127.0.0.1:8000/v1/sync/webhook")
    p.add_argument("--webhook-secret", help="shared webhook secret (env SKILLSEARCH_WEBHOOK_SECRET)")

    p = add("mcp", cmd_mcp, "serve the MCP tools over stdio (default) or streamable HTTP (--http)")
    p.add_argument("--data-dir", default=argparse.SUPPRESS, help="data directory (same as the global option)")
    p.add_argument("--principal", metavar="NAME", help="run as this principal of <data-dir>/principals.toml")
    add_grants(p)
    p.add_argument("--scope", action="append", metavar="S",
                   help="scope of the --grant principal (repeatable; default memory:read; '' for none)")
    p.add_argument("--host-tool", action="append", metavar="TOOL",
                   help="a tool name the host provides (repeatable): resolving a template that names any other"
                        " tool is SKILL_INVALID; default: no check")
    p.add_argument("--http", action="store_true", help="streamable HTTP on --host/--port at /mcp instead of stdio")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)

    p = add("serve", cmd_serve, "serve the HTTP API, metrics and the search page (FastAPI + uvicorn)")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0 picks a free one)")
    p.add_argument("--principals", help="principals file (default <data-dir>/principals.toml)")
    p.add_argument("--sync-config", help="sync settings (TOML); default <data-dir>/sync.toml when it exists")
    p.add_argument("--no-sync", action="store_true", help="do not poll the subscription platform")

    p = add("token", cmd_token_list, "manage bearer tokens of the principals file")
    tokens = p.add_subparsers(dest="token_command", required=True, metavar="ACTION")
    for action, func, help_text in (
        ("add", cmd_token_add, "create a principal (or re-key it) and print its new token once"),
        ("list", cmd_token_list, "list principals with their grants and scopes (never tokens)"),
        ("remove", cmd_token_remove, "remove a principal"),
    ):
        t = tokens.add_parser(action, help=help_text, description=help_text)
        t.set_defaults(func=func)
        t.add_argument("--json", action="store_true", help="print one JSON object")
        t.add_argument("--principals", help="principals file (default <data-dir>/principals.toml)")
        if action != "list":
            t.add_argument("name", help="principal name: letters, digits, '.', '_', '-'")
        if action == "add":
            t.add_argument("--grant", action="append", metavar="G", required=True,
                           help="grant key the principal sees: sub:<id>, team:<id>, user:<id>, or * (repeatable)")
            t.add_argument("--scope", action="append", metavar="S",
                           help="scope: skills:read, memory:read (repeatable; default both)")

    p = add("calibrate", cmd_calibrate, "recompute the encoder's score calibration stored with the index")
    p.add_argument("--queries", metavar="FILE",
                   help="JSONL of {query, expected: [slugs]}: also tune the semantic weight on them (MRR@10)")

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
    except Exception as exc:  # the last line of defence: one line, never a traceback (-v logs it)
        log.debug("unexpected error", exc_info=True)
        message = f"{type(exc).__name__}: {exc}"
        if getattr(args, "json", False):
            out.write(json.dumps({"error": {"code": "INTERNAL", "message": message, "details": {}}}) + "\n")
        else:
            print(f"error: INTERNAL: {message} (run with -v for details)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
