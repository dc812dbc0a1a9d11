"""The catalog commands: ``import``, ``search``, ``list``, ``get``, ``resolve``, ``reindex`` and
``calibrate``, each one call of the :class:`Catalog` and its text or JSON rendering."""

from __future__ import annotations

import argparse
import base64
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from skillsearch.catalog.reads import MAX_PAGE
from skillsearch.cli.common import (
    Subparsers,
    add_command,
    add_grants,
    emit,
    grant_arg,
    in_use,
    open_catalog,
    principal_from_args,
    progress_factory,
    settings_from_args,
)
from skillsearch.cli.termination import STOPPING
from skillsearch.cli.usage import UsageError, float_range, int_range, non_empty
from skillsearch.core.domain import SEARCH_MODES, SKILL_KINDS, Parameter
from skillsearch.core.errors import SkillInvalidError, ValidationError, problem
from skillsearch.core.fusion import FUSIONS
from skillsearch.core.settings import Settings
from skillsearch.core.skill_uri import parse_skill_uri
from skillsearch.core.templates import coerce_text_value
from skillsearch.core.textual import is_text
from skillsearch.core.views import WEAK_CONFIDENCE
from skillsearch.core.wellformed import terminal_safe
from skillsearch.retrieval.search import validate
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.service import Catalog

__all__ = ["add_calibrate", "add_commands"]


def cmd_import(args: argparse.Namespace, out: TextIO) -> int:
    _check_not_a_mirrored_source(Path(args.data_dir), args.source)
    in_use(Path(args.data_dir))
    catalog = Catalog(settings_from_args(args), stopping=STOPPING)
    report = catalog.import_path(Path(args.path), args.source, args.grant, progress_factory(not args.quiet))
    for invalid in report.problems:
        print(terminal_safe(f"invalid: {invalid}"), file=sys.stderr)
    payload = report.to_dict()
    emit(out, args, payload, lambda: (
        f"imported into {report.source} ({report.grant}): {len(report.created)} created, "
        f"{len(report.updated)} updated, {len(report.unchanged)} unchanged, {len(report.problems)} invalid"
    ))
    return 0 if report.ok else 1


def _check_not_a_mirrored_source(data_dir: Path, source: str) -> None:
    """A source that sync mirrors (a configured folder or git source, or a subscription's ``upstream:ID``)
    is not one to import into: the import would replace its skills and the next sync would silently put
    them back."""
    from skillsearch.sync.config import default_config_path
    from skillsearch.sync.sources import load_sources

    config = default_config_path(data_dir)
    configured = {s.name for s in load_sources(config)}
    if source in configured or source.startswith("upstream:"):
        what = f"a source configured in {config}" if source in configured else "the name of a synced subscription"
        raise ValidationError(
            f"--source {source!r} is {what}: sync keeps its skills in step with where they come from, so an"
            f" import would be undone by its next run; import under another --source, or change the source"
            f" itself", {"problems": [problem("source", "names a source that sync mirrors")]})


def cmd_search(args: argparse.Namespace, out: TextIO) -> int:
    settings = settings_from_args(args)
    if args.limit > settings.max_limit:
        raise UsageError("skillsearch search", f"argument --limit: {args.limit} is out of range: give a whole"
                         f" number between 1 and {settings.max_limit} (SKILLSEARCH_MAX_LIMIT)")
    request = SearchRequest(query=args.query, limit=args.limit, mode=args.mode, kind=args.kind, tags=tuple(args.tag or ()),
                            fusion=args.fusion, semantic_weight=args.semantic_weight, min_confidence=args.min_confidence)
    validate(request, settings)  # an empty query refused before a catalog is opened, an index built, a model loaded
    view = open_catalog(args, reads_only=True).search_view(principal_from_args(args), request)

    def text() -> str:
        notice = [f"note: {view.notice}"] if view.notice else []
        if view.no_match:
            return "\n".join([*notice, f"no good match: {view.no_match_message} ({view.no_match_reason})"])
        lines = notice
        top = view.hits[0].confidence if view.hits else None
        if top is not None and top < WEAK_CONFIDENCE:
            lines.append(f"note: weak match: the top hit's confidence is {shown(top)} (under {WEAK_CONFIDENCE}); "
                         "read its description before you rely on it")
        if len(view.hits) == 1 and args.limit > 1 and args.min_confidence is None:  # not a cut of many
            lines.append("note: the only skill you can see that matched: its score ranks it against no other hit;"
                         " judge it by its description")
        twins = grants_of_twins(view.hits)
        for i, h in enumerate(view.hits, start=1):
            e = h.explanation
            conf = f"  confidence={shown(h.confidence)}" if h.confidence is not None else ""
            lines.append(f"{i:>2}. {terminal_safe(h.name, one_line=True)}  [{h.kind}]  {h.skill_id}  score={h.score:.3f}"
                         f"{conf}{twins.get(h.skill_id, '')}")
            lines.append(f"    {h.description[:160]}")
            lines.append(f"    why: lexical rank {e.lexical_rank or '-'}, semantic rank {e.semantic_rank or '-'}"
                         f" (cos {e.semantic_score if e.semantic_score is not None else '-'})")
        return "\n".join(lines)

    emit(out, args, view.model_dump(), text)
    return 0


def shown(confidence: float) -> str:
    """A confidence as the CLI and the page print it: two decimals, and ``<0.01`` rather than a row of
    ``0.00`` for the hits the model gives next to nothing."""
    return "<0.01" if confidence < 0.005 else f"{confidence:.2f}"


def grants_of_twins(items: Sequence[Any]) -> dict[str, str]:
    """``"  (team:x)"`` by skill id for the items whose name another item also has (one skill per source and
    grant, so two sources' `transcribe` in two grants), else nothing: the text rows tell them apart."""
    seen = Counter(item.name for item in items)
    out = {}
    for item in items:
        address = parse_skill_uri(item.skill_uri) if seen[item.name] > 1 else None
        if address is not None:
            out[item.skill_id] = f"  ({address.grant})"
    return out


def cmd_list(args: argparse.Namespace, out: TextIO) -> int:
    catalog = open_catalog(args, index=False)  # the store alone: no index, no model
    page = catalog.list_skills(
        principal_from_args(args), kind=args.kind, tags=args.tag or (), cursor=args.cursor, limit=args.limit
    )
    filtered = " with that kind or tag" if args.kind or args.tag else ""
    twins = grants_of_twins(page.items)
    emit(out, args, page.model_dump(), lambda: "\n".join(
        [f"{s.skill_id}  {s.kind:<13}  {terminal_safe(s.name, one_line=True)}{twins.get(s.skill_id, '')}"
         for s in page.items]
        + ([f"(more: --cursor {page.next_cursor})"] if page.next_cursor else [])
    ) or f"(no skills you can see{filtered})")
    return 0


def cmd_get(args: argparse.Namespace, out: TextIO) -> int:
    catalog = open_catalog(args, index=False)  # the store alone: no index, no model
    if args.resource is not None:
        if args.offset or args.max_chars is not None:
            raise UsageError("skillsearch get", "--offset and --max-chars read a part of the instructions, not of"
                             " a resource: leave them out with --resource")
        return _get_resource(catalog, args, out)
    detail = catalog.get_skill(principal_from_args(args), args.skill_id, offset=args.offset, max_chars=args.max_chars)

    def text() -> str:
        name = terminal_safe(detail.name, one_line=True)
        lines = [f"# {name}  ({detail.kind}, {detail.skill_id}, revision {detail.revision_id})", detail.description, ""]
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
        if detail.instructions_truncated:
            end = detail.next_offset if detail.next_offset is not None else detail.instructions_chars
            lines += ["", f"(instructions: characters {detail.instructions_offset} to {end} of"
                          f" {detail.instructions_chars}" + (f"; the rest: --offset {detail.next_offset})"
                                                             if detail.next_offset is not None else ")")]
        if detail.resources:
            lines += ["", "Resources:"] + [f"  {r.path} ({r.kind}, {r.size} bytes)" for r in detail.resources]
        return "\n".join(lines)

    emit(out, args, detail.model_dump(), text)
    return 0


def _get_resource(catalog: Catalog, args: argparse.Namespace, out: TextIO) -> int:
    """``get SKILL --resource PATH``: the resource's exact bytes on stdout (``> FILE`` keeps them), or under
    ``--json`` one object with its metadata and its content (text, or base64 for binary). A terminal is not
    sent binary data or control characters (they could drive it): redirect, or ask for ``--json``."""
    skill, revision_id, found = catalog.get_resource(principal_from_args(args), args.skill_id, args.resource)
    raw = found.content
    text = raw.decode("utf-8") if is_text(found.media_type, raw) else None
    if args.json:
        payload = {"skill_id": skill.skill_id, "slug": skill.slug, "revision_id": revision_id,
                   "resource_id": found.resource_id, "path": found.path, "kind": found.kind,
                   "media_type": found.media_type, "size": len(raw), "sha256": found.sha256,
                   "encoding": "text" if text is not None else "base64",
                   "content": text if text is not None else base64.b64encode(raw).decode("ascii")}
        emit(out, args, payload, str)  # --json: the one JSON writer of the CLI
        return 0
    if out.isatty() and (text is None or terminal_safe(text) != text):
        raise UsageError("skillsearch get", f"{found.path} ({found.media_type}, {len(raw)} bytes) holds binary data or"
                         " control characters, which are not written to a terminal: redirect the output"
                         " (> FILE) or use --json")
    buffer = getattr(out, "buffer", None)
    if buffer is None:  # a text stream without bytes underneath (in-process callers)
        out.write(raw.decode("utf-8", "surrogateescape"))
        return 0
    out.flush()
    buffer.write(raw)
    buffer.flush()
    return 0


def param_arg(item: str) -> str:
    """``type=`` of ``--param``: ``NAME=VALUE`` with a name (the value may be empty)."""
    name, sep, _ = item.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"takes NAME=VALUE, got {item!r}")
    return item


# What a command-line text that did not read as its parameter's type is not.
_NOT_A = {"integer": "a whole number", "number": "a number", "boolean": "true or false"}


def _parse_params(catalog: Catalog, args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, tuple[str, str]]]:
    """The ``--param`` values, each read as its parameter's type where it can be, and the texts that could
    not (name -> (text, type)): resolution reports those with every other problem, in :func:`_said_of_texts`."""
    given: dict[str, str] = {}
    for item in args.param or []:
        name, _, text = item.partition("=")
        if name in given and given[name] != text:
            raise UsageError("skillsearch resolve", f"argument --param: {name} is given twice"
                             f" ({given[name]!r} and {text!r}); give it once")
        given[name] = text
    detail = catalog.get_skill(principal_from_args(args), args.skill_id)
    if detail.kind != "flow_template":  # said here in the command line's words (the MCP tool is get_skill)
        raise SkillInvalidError(
            f"skill {args.skill_id!r} is a {detail.kind} skill, not a flow_template: nothing to resolve;"
            f" read it with `skillsearch get {args.skill_id}`", {"skill_id": args.skill_id, "kind": detail.kind})
    schema = {p.name: p for p in (detail.parameters or [])}
    values: dict[str, Any] = {}
    unread: dict[str, tuple[str, str]] = {}
    for name, text in given.items():
        p = schema.get(name)
        values[name] = value = coerce_text_value(Parameter(**p.model_dump()) if p else None, text)
        if p is not None and p.type in _NOT_A and isinstance(value, str):
            unread[name] = (text, p.type)
    return values, unread


def _said_of_texts(exc: ValidationError, unread: dict[str, tuple[str, str]]) -> ValidationError:
    """Every command-line value is text: a type problem said "expected integer, got string"; it names the
    text that did not read as the type instead ("'25.5' is not a whole number"), in the message and its
    ``details.problems`` entry, beside the other problems."""
    message, details = exc.message, dict(exc.details)
    problems = [dict(p) for p in details.get("problems", [])]
    for name, (text, kind) in unread.items():
        said, plain = f"expected {kind}, got string", f"{text!r} is not {_NOT_A[kind]} (expected {kind})"
        message = message.replace(f"{name}: {said}", f"{name}: {plain}")
        for p in problems:
            if p.get("field") == f"parameters.{name}" and p.get("message", "").endswith(said):
                p["message"] = p["message"].removesuffix(said) + plain
    return ValidationError(message, {**details, "problems": problems} if problems else details)


def cmd_resolve(args: argparse.Namespace, out: TextIO) -> int:
    catalog = open_catalog(args, index=False)  # the store alone: no index, no model
    values, unread = _parse_params(catalog, args)
    try:
        flow = catalog.resolve(principal_from_args(args), args.skill_id, values)
    except ValidationError as exc:
        raise _said_of_texts(exc, unread) from None
    emit(out, args, flow.model_dump(), lambda: "\n".join(
        f"{i}. {s.tool} {json.dumps(s.args, ensure_ascii=False)}" for i, s in enumerate(flow.steps, start=1)
    ))
    return 0


def cmd_reindex(args: argparse.Namespace, out: TextIO) -> int:
    in_use(Path(args.data_dir))
    catalog = Catalog(settings_from_args(args), stopping=STOPPING)
    stats = catalog.reindex(progress_factory(not args.quiet))
    payload = {"documents": stats.upserted, "embedded": stats.embedded, "seconds": round(stats.seconds, 3)}
    emit(out, args, payload, lambda: (
        f"reindexed {stats.upserted} skills ({stats.embedded} embedded) in {stats.seconds:.1f}s"
    ))
    return 0


def cmd_calibrate(args: argparse.Namespace, out: TextIO) -> int:
    catalog = open_catalog(args)
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
                query, expected = entry["query"], entry["expected"]
            except (ValueError, KeyError, TypeError) as exc:
                raise ValidationError(f"{args.queries}:{lineno}: expected {{query, expected: [slugs]}} ({exc})") from None
            # A string as ``expected`` was read letter by letter, null as the query "None", and an empty list
            # tuned the weight on a query with no right answer (replacing a real tuning).
            if not isinstance(query, str) or not query.strip():
                raise ValidationError(f"{args.queries}:{lineno}: query must be a non-empty string",
                                      {"problems": [problem(f"line {lineno}.query", "must be a non-empty string")]})
            if (not isinstance(expected, list) or not expected
                    or not all(isinstance(slug, str) and slug.strip() for slug in expected)):
                raise ValidationError(f"{args.queries}:{lineno}: expected must be a non-empty list of skill slugs",
                                      {"problems": [problem(f"line {lineno}.expected", "must be a non-empty list of slugs")]})
            labelled.append((query, list(expected)))
            unknown = [slug for slug in labelled[-1][1] if not catalog.store.skills_by_slug(slug)]
            if unknown:  # a typo would score as a miss and tune the weight against nothing
                raise ValidationError(f"{args.queries}:{lineno}: no skill has the slug(s) {', '.join(unknown)}",
                                      {"problems": [problem(f"line {lineno}.expected", "names no skill")]})
    if args.queries and not labelled:
        raise ValidationError(f"{args.queries}: no labelled queries (one {{query, expected: [slugs]}} per line)")
    calibration = catalog.calibrate(labelled)
    emit(out, args, calibration, lambda: "\n".join(_calibration_lines(calibration)))
    return 0


def _calibration_lines(values: dict[str, Any], prefix: str = "") -> list[str]:
    """The calibration as ``key.sub: value`` lines for a reader: nested routes flattened, long lists (the
    per-language centroids, hundreds of numbers each) counted instead of printed; ``--json`` has them all."""
    lines = []
    for key, value in values.items():
        if isinstance(value, dict):
            lines += _calibration_lines(value, f"{prefix}{key}.")
        elif isinstance(value, list) and value and isinstance(value[0], list):
            lines.append(f"{prefix}{key}: [{len(value)} vectors of {len(value[0])}; --json prints them]")
        elif isinstance(value, list) and len(value) > 8:
            lines.append(f"{prefix}{key}: [{len(value)} values; --json prints them]")
        else:
            lines.append(f"{prefix}{key}: {round(value, 4) if isinstance(value, float) else value}")
    return lines


def add_commands(sub: Subparsers) -> None:
    p = add_command(sub, "import", cmd_import, "import a folder of Agent Skills or a JSON/JSONL bundle")
    p.add_argument("path", help="a folder of Agent Skills (a SKILL.md per skill folder), or a .json/.jsonl bundle")
    p.add_argument("--source", required=True, type=non_empty, help="name of the local source the skills belong to")
    p.add_argument("--grant", required=True, type=grant_arg, help="grant key: sub:<id>, team:<id> or user:<id>")

    p = add_command(sub, "search", cmd_search, "search skills (hybrid by default)")
    p.add_argument("query", help="what the agent needs, in natural language (any language under the default minilm+e5 encoder)")
    add_grants(p)
    p.add_argument("--mode", default="hybrid", choices=SEARCH_MODES,
                   help="hybrid (default: BM25 and vectors fused, with confidences), lexical (BM25 alone; loads no"
                        " model) or semantic (vectors alone)")
    p.add_argument("--kind", choices=SKILL_KINDS, help="only skills of this kind (default: every kind)")
    p.add_argument("--tag", action="append", metavar="T", help="require this tag (repeatable; default: none)")
    p.add_argument("--limit", type=int_range(1), default=10, metavar="N",
                   help="hits to return, 1 to SKILLSEARCH_MAX_LIMIT (100 unless set; default 10)")
    p.add_argument("--fusion", choices=list(FUSIONS), help=f"fusion method (hybrid mode; default {Settings.fusion})")
    p.add_argument("--semantic-weight", type=float_range(0, 1, "a weight"), metavar="W",
                   help=f"the semantic side's weight, 0-1 (hybrid mode; default {Settings.semantic_weight}, moved per request)")
    p.add_argument("--min-confidence", type=float_range(0, 1, "a confidence"), metavar="C",
                   help="leave out hits whose confidence (0-1, hybrid mode) is under this (default: keep every hit)")

    p = add_command(sub, "list", cmd_list, "list visible skills, paged")
    add_grants(p)
    p.add_argument("--kind", choices=SKILL_KINDS, help="only skills of this kind (default: every kind)")
    p.add_argument("--tag", action="append", metavar="T", help="require this tag (repeatable; default: none)")
    p.add_argument("--limit", type=int_range(1, MAX_PAGE), default=50, metavar="N",
                   help=f"skills per page, 1 to {MAX_PAGE} (default 50)")
    p.add_argument("--cursor", help="the next_cursor a previous page printed: the page after it (default: the first page)")

    p = add_command(sub, "get", cmd_get, "show a skill: instructions, or steps and parameters (--json: the"
                    " exact text; the text output shows control characters as escapes)")
    p.add_argument("skill_id", metavar="SKILL_ID|SLUG", help="a skill_id from search/list, or a slug only one visible skill has")
    add_grants(p)
    p.add_argument("--resource", metavar="PATH",
                   help="print this resource of the skill (a path from its Resources list, or a resource_id):"
                        " its exact bytes, to redirect into a file; with --json its metadata and content (default:"
                        " the skill itself)")
    p.add_argument("--offset", type=int_range(0), default=0, metavar="N",
                   help="print the instructions from this character on (default 0; or the next_offset a cut part gave)")
    p.add_argument("--max-chars", type=int_range(1), metavar="N",
                   help="print at most N characters of the instructions (a part ends at a line end where it can;"
                        " default: all of them)")

    p = add_command(sub, "resolve", cmd_resolve, "resolve a flow template's steps with parameter values (never runs them)")
    p.add_argument("skill_id", metavar="SKILL_ID|SLUG",
                   help="a flow template's skill_id from search or list, or a slug only one skill you can see has")
    add_grants(p)
    p.add_argument("--param", action="append", metavar="NAME=VALUE", type=param_arg,
                   help="a parameter's value (repeatable; the same NAME twice is a usage error; default: the template's)")

    add_command(sub, "reindex", cmd_reindex, "rebuild the search index from the catalog")


def add_calibrate(sub: Subparsers) -> None:
    p = add_command(sub, "calibrate", cmd_calibrate, "recompute the encoder's score calibration stored with the index")
    p.add_argument("--queries", metavar="FILE",
                   help="JSONL of {query, expected: [slugs]}: also tune the semantic weight on them (MRR@10; default:"
                        " none, only the calibration is recomputed)")
