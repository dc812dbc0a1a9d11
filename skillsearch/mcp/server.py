"""The MCP surface (design section 7): five read-only tools over one :class:`Catalog`.

``list_skills``, ``search_skills``, ``get_skill``, ``resolve_skill`` and ``recall_cloud_skill``; no tool
executes steps or writes skills. The catalog is opened once in the server's lifespan and shared by every
call; the caller's :class:`Principal` comes from a ``principal_provider`` that sees the request headers
(``None`` over stdio), so the HTTP app can map a bearer token to a principal while stdio uses a fixed one.

Errors are MCP tool error results (``is_error``) whose structured content carries the stable code:
``{"error": {"code", "message", "details"}}`` for the four catalog tools, and for ``recall_cloud_skill``
its own envelope with ``kind="error"`` and ``data = {"code", "message", "details"}``. The text content
is the same JSON, for hosts that only show text. Arguments that fail the input schema are
``VALIDATION_ERROR`` too (field names only, never the rejected values); anything unexpected is a generic
``INTERNAL`` error whose details stay in the server log.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import anyio
import pydantic
from mcp.server.caching import CacheableMethod, CacheHint
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, ContentBlock, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field
from starlette.applications import Starlette

from skillsearch.core.domain import Principal
from skillsearch.core.errors import AccessDeniedError, SkillSearchError, ValidationError
from skillsearch.core.views import ListResponse, ResolvedFlow, SearchResponse, SkillDetail
from skillsearch.mcp.skills_extension import TTL_MS, for_server, install
from skillsearch.retrieval.search import SearchRequest
from skillsearch.service import Catalog
from skillsearch.usecases.recall import DEFAULT_MAX_CONTENT_BYTES, CloudSkillEnvelope, error_envelope

__all__ = [
    "TOOL_NAMES",
    "CatalogSource",
    "PrincipalProvider",
    "ServerState",
    "build_mcp_server",
    "mountable",
    "run_streamable_http",
    "streamable_http_app",
]

log = logging.getLogger("skillsearch.mcp")

TOOL_NAMES = ("list_skills", "search_skills", "get_skill", "resolve_skill", "recall_cloud_skill")
RECALL = "recall_cloud_skill"

PrincipalProvider = Callable[[Mapping[str, str] | None], Principal]
"""Who is calling: gets the HTTP request headers (``None`` over stdio and in-process) and returns the
principal, or raises :class:`~skillsearch.core.errors.UnauthenticatedError`."""

CatalogSource = Catalog | Callable[[], Catalog]
"""An open catalog (shared, left open) or a factory the lifespan calls once and closes at shutdown."""

_HINTED: tuple[CacheableMethod, ...] = ("tools/list", "prompts/list", "resources/templates/list")
READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, destructive_hint=False, open_world_hint=False)

INSTRUCTIONS = """\
A catalog of skills: reusable know-how (kind 'knowledge': instructions to read) and tool-call recipes
(kind 'flow_template': ordered steps with {param} placeholders). Find one with search_skills, read it
with get_skill, and for a flow template call resolve_skill with its parameters, then issue each resolved
step yourself with your own tools. Nothing here executes steps or changes skills. recall_cloud_skill is
the same catalog as progressive disclosure: query -> descriptors, skill_id/slug -> root manifest,
revision_id + resource -> one file of that exact revision.
Every skill is also served by the MCP Skills extension (io.modelcontextprotocol/skills): each search hit,
list item, get_skill and recall answer carries its skill_uri (skill://<grant type>/<grant id>/<slug>/SKILL.md),
which skills/get describes (front matter, files with sha256 digests) and resources/read loads, byte for byte."""


@dataclass(frozen=True)
class ServerState:
    """What the lifespan hands to every tool call: the catalog, or why it could not be opened (an index
    built for another model, say), which every tool then answers with instead of the server dying."""

    catalog: Catalog | None
    failure: SkillSearchError | None = None


class _Server(MCPServer[ServerState]):
    """Turns the SDK's own argument-validation and crash errors into our ``{code, message, details}``."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[ServerState, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as exc:
            log.error("tool %s failed", name, exc_info=exc.__cause__ or exc)
            return _error_result(name, SkillSearchError("internal error: the server log has the details"))
        except ToolError as exc:
            if isinstance(exc.__cause__, pydantic.ValidationError):
                problems = [
                    {"field": ".".join(str(p) for p in err["loc"]), "message": err["msg"]}
                    for err in exc.__cause__.errors(include_input=False, include_url=False)
                ]
                message = "invalid arguments: " + "; ".join(f"{p['field']}: {p['message']}" for p in problems)
                return _error_result(name, ValidationError(message, {"problems": problems}))
            if name not in TOOL_NAMES:
                return _error_result(name, ValidationError(f"unknown tool {name!r}", {"tools": list(TOOL_NAMES)}))
            raise


def _text(data: dict[str, Any]) -> list[ContentBlock]:
    return [TextContent(type="text", text=json.dumps(data, ensure_ascii=False))]


def _ok(model: BaseModel) -> CallToolResult:
    data = model.model_dump(mode="json")
    return CallToolResult(content=_text(data), structured_content=data)


def _error_result(tool: str, exc: SkillSearchError) -> CallToolResult:
    data = error_envelope(exc).model_dump(mode="json") if tool == RECALL else {"error": exc.to_dict()}
    return CallToolResult(content=_text(data), structured_content=data, is_error=True)


def _fixed(principal: Principal) -> PrincipalProvider:
    return lambda _headers: principal


def _tool(server: MCPServer[ServerState], name: str, title: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Registers a read-only, idempotent tool whose description is its docstring, dedented."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        server.add_tool(fn, name=name, title=title, description=inspect.cleandoc(fn.__doc__ or ""),
                        annotations=READ_ONLY)
        return fn

    return register


def build_mcp_server(
    catalog: CatalogSource,
    principal_provider: PrincipalProvider | Principal,
    *,
    known_tools: Iterable[str] | None = None,
    max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES,
    catalog_scope: str | None = None,
    name: str = "skillsearch",
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "WARNING",
) -> MCPServer[ServerState]:
    """The MCP server with the five tools. ``known_tools``: the host's tool names, so that a template
    naming any other tool is ``SKILL_INVALID``; ``max_content_bytes``: the recall content cap;
    ``catalog_scope``: a scope the four catalog tools require (the HTTP app's ``skills:read``; ``None``
    over stdio), ``ACCESS_DENIED`` without it. ``recall_cloud_skill`` always requires ``memory:read``."""
    provider = _fixed(principal_provider) if isinstance(principal_provider, Principal) else principal_provider
    host_tools = frozenset(known_tools) if known_tools is not None else None

    @asynccontextmanager
    async def lifespan(_server: MCPServer[ServerState]) -> AsyncIterator[ServerState]:
        if isinstance(catalog, Catalog):
            yield ServerState(catalog)
            return
        failure: SkillSearchError | None = None
        try:
            opened: Catalog | None = await anyio.to_thread.run_sync(catalog)
        except SkillSearchError as exc:
            log.error("cannot open the catalog: %s: %s", exc.code, exc.message)
            opened, failure = None, exc
        try:
            yield ServerState(opened, failure)
        finally:
            if opened is not None:
                opened.close()

    skills = for_server(lambda ctx: ctx.lifespan_context, provider, catalog_scope=catalog_scope,
                        fixed_principal=isinstance(principal_provider, Principal))
    hint = CacheHint(ttl_ms=TTL_MS, scope=skills.cache_scope)
    server = _Server(name=name, instructions=INSTRUCTIONS, lifespan=lifespan, log_level=log_level,
                     extensions=[skills], cache_hints={m: hint for m in _HINTED})
    install(server, skills)

    def call(tool: str, ctx: Context[ServerState, Any], work: Callable[[Catalog, Principal], BaseModel]) -> CallToolResult:
        try:
            principal = provider(ctx.headers)
            if catalog_scope is not None and tool != RECALL and not principal.has_scope(catalog_scope):
                raise AccessDeniedError(f"{tool} needs the {catalog_scope} scope", {"required_scope": catalog_scope})
            state = ctx.request_context.lifespan_context
            if state.catalog is None:
                raise state.failure or SkillSearchError("the catalog is not open")
            return _ok(work(state.catalog, principal))
        except SkillSearchError as exc:
            return _error_result(tool, exc)

    @_tool(server, "search_skills", "Search skills")
    def search_skills(
        query: Annotated[str, Field(description="What you need, in plain words, e.g. 'rotate TLS certificates'.")],
        ctx: Context[ServerState, Any],
        limit: Annotated[int, Field(ge=1, le=100, description="Most hits to return.")] = 10,
        kind: Annotated[
            Literal["knowledge", "flow_template"] | None, Field(description="Only skills of this kind.")
        ] = None,
        tags: Annotated[list[str], Field(description="Only skills carrying every one of these tags.")] = [],  # noqa: B006
        mode: Annotated[
            Literal["hybrid", "lexical", "semantic"],
            Field(description="hybrid (default: keywords and meaning), lexical (keywords), semantic (meaning)."),
        ] = "hybrid",
    ) -> Annotated[CallToolResult, SearchResponse]:
        """Find the skills that fit a task, best first. Use this first whenever a task might be covered by a
        skill; each hit has its skill_id, kind, tags, a score and why it ranked there. no_match=true means
        nothing in the catalog fits: do not force a weak hit. Next: get_skill with a hit's skill_id (or
        recall_cloud_skill for the staged view). To browse everything instead, use list_skills."""
        request = SearchRequest(query=query, limit=limit, mode=mode, kind=kind, tags=tuple(tags))
        return call("search_skills", ctx, lambda c, p: c.search_view(p, request))

    @_tool(server, "list_skills", "List skills")
    def list_skills(
        ctx: Context[ServerState, Any],
        cursor: Annotated[
            str | None, Field(description="next_cursor of the previous page; omit for the first page.")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=200, description="Skills per page.")] = 50,
        kind: Annotated[
            Literal["knowledge", "flow_template"] | None, Field(description="Only skills of this kind.")
        ] = None,
        tags: Annotated[list[str], Field(description="Only skills carrying every one of these tags.")] = [],  # noqa: B006
    ) -> Annotated[CallToolResult, ListResponse]:
        """Page through every skill you can use, by name: id, name, description, kind and tags only. Use it
        to browse or enumerate; to find a skill for a task, search_skills is faster and ranked. Pass
        next_cursor back as cursor for the next page (null at the end). Next: get_skill with a skill_id."""
        return call("list_skills", ctx, lambda c, p: c.list_skills(p, kind=kind, tags=tags, cursor=cursor, limit=limit))

    @_tool(server, "get_skill", "Get a skill")
    def get_skill(
        skill_id: Annotated[str, Field(description="A skill_id from search_skills or list_skills.")],
        ctx: Context[ServerState, Any],
    ) -> Annotated[CallToolResult, SkillDetail]:
        """Read one skill in full. A 'knowledge' skill returns its markdown instructions: read and follow
        them. A 'flow_template' returns its ordered steps (tool calls with {param} placeholders) and its
        parameter schema: next, call resolve_skill with values for those parameters. Also lists the
        skill's resource files (read one with recall_cloud_skill). Unknown or unavailable ids are
        SKILL_NOT_FOUND."""
        return call("get_skill", ctx, lambda c, p: c.get_skill(p, skill_id))

    @_tool(server, "resolve_skill", "Resolve a flow template")
    def resolve_skill(
        skill_id: Annotated[str, Field(description="skill_id of a flow_template skill.")],
        ctx: Context[ServerState, Any],
        parameters: Annotated[
            dict[str, Any],
            Field(description="Parameter values by name, typed as get_skill's schema says (integer, boolean...)."),
        ] = {},  # noqa: B006
    ) -> Annotated[CallToolResult, ResolvedFlow]:
        """Fill a flow template's parameters and get back its ordered steps with every {param} substituted
        and defaults applied. It executes nothing: you then call each step's tool yourself, in order, with
        its args. Missing, unknown or mistyped parameters give one VALIDATION_ERROR naming each of them;
        fix them and call again. Knowledge skills have no steps: read them with get_skill instead."""
        return call("resolve_skill", ctx, lambda c, p: c.resolve(p, skill_id, parameters, host_tools))

    @_tool(server, RECALL, "Recall a cloud skill")
    def recall_cloud_skill(
        ctx: Context[ServerState, Any],
        query: Annotated[str, Field(description="Level 0 discovery text; used when skill_id and slug are empty.")] = "",
        skill_id: Annotated[str, Field(description="Stable skill id, for the root (Level 1) or a resource (Level 2).")] = "",
        slug: Annotated[str, Field(description="Readable skill identity, for the root or a resource.")] = "",
        revision_id: Annotated[
            str, Field(description="Pins the root to a revision; required for a resource (Level 2).")
        ] = "",
        resource: Annotated[str, Field(description="Logical path or resource id to read (Level 2).")] = "",
    ) -> Annotated[CallToolResult, CloudSkillEnvelope]:
        """Load only the layer of a skill you need. Level 0: query alone returns descriptors (discovery
        metadata, not instructions). Level 1: skill_id or slug returns the root manifest of the current
        revision (or of revision_id): instructions, revision_id, canonical_hash and the resource list.
        Level 2: skill_id or slug + revision_id (from Level 1) + resource (path such as
        'scripts/check.py', or resource_id) returns that file: text as text, binary as base64, cut at a
        size cap (render_status 'truncated'). A resource without revision_id is
        REVISION_PINNING_VIOLATION. Needs the memory:read scope. It never runs scripts or saves skills."""
        return call(RECALL, ctx, lambda c, p: c.recall(
            p, query=query, skill_id=skill_id, slug=slug, revision_id=revision_id, resource=resource,
            max_content_bytes=max_content_bytes,
        ))

    return server


def streamable_http_app(
    server: MCPServer[ServerState],
    *,
    path: str = "/mcp",
    host: str = "127.0.0.1",
    allowed_hosts: Iterable[str] = (),
) -> Starlette:
    """The streamable HTTP ASGI app; its lifespan runs ``server.session_manager.run()``, which enters the
    server's lifespan once. To serve it inside another app, see :func:`mountable`.

    Stateless JSON responses: no session to lose, any replica can answer. DNS-rebinding protection stays
    on: only ``host`` (loopback names when it is a loopback address) and ``allowed_hosts`` are accepted."""
    security: TransportSecuritySettings | None = None
    extra = list(allowed_hosts)
    if extra or host not in ("127.0.0.1", "localhost", "::1"):
        hosts = [f"{host}:*", host, *extra]
        security = TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                             allowed_origins=[f"http://{h}" for h in hosts])
    return server.streamable_http_app(
        streamable_http_path=path, json_response=True, stateless_http=True, host=host, transport_security=security,
    )


def mountable(
    server: MCPServer[ServerState], *, host: str = "127.0.0.1", allowed_hosts: Iterable[str] = ()
) -> tuple[Starlette, Callable[[], AbstractAsyncContextManager[None]]]:
    """``(asgi_app, lifespan)`` to serve ``/mcp`` inside another ASGI app such as the FastAPI HTTP app.

    Add the app as ``Route("/mcp", endpoint=asgi_app)``: it answers exactly ``/mcp``, where a
    ``Mount("/mcp", ...)`` would first redirect every POST to ``/mcp/``. Enter ``lifespan()`` inside the
    outer app's lifespan: a routed sub-app's own lifespan never runs, and the session manager (which also
    enters this server's lifespan, opening the catalog once) must."""
    return streamable_http_app(server, path="/mcp", host=host, allowed_hosts=allowed_hosts), server.session_manager.run


def run_streamable_http(server: MCPServer[ServerState], *, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve ``/mcp`` standalone with uvicorn until interrupted (``skillsearch mcp --http``)."""
    import uvicorn

    uvicorn.run(streamable_http_app(server, host=host), host=host, port=port, log_level="warning")
