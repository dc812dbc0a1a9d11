"""The MCP surface (design section 7): five read-only tools over one :class:`Catalog`.

``list_skills``, ``search_skills``, ``get_skill``, ``resolve_skill`` (``tools_catalog.py``) and
``recall_cloud_skill`` (``tools_recall.py``); no tool executes steps or writes skills. The catalog is opened
once in the server's lifespan and shared by every call; the caller's :class:`Principal` comes from a
``principal_provider`` that sees the request headers (``None`` over stdio), so the HTTP app can map a
bearer token to a principal while stdio uses a fixed one. A catalog the lifespan opens loads its
embedding model in the background (``retrieval/loading.py``): ``initialize`` and ``tools/list`` are answered
at once, and a search that arrives first waits for the model. Transports: ``transport.py``.

Errors are MCP tool error results (``is_error``) whose structured content carries the stable code:
``{"error": {"code", "message", "details"}}`` for the four catalog tools, and for ``recall_cloud_skill``
its own envelope with ``kind="error"`` and ``data = {"code", "message", "details"}``. The text content
is the same JSON, for hosts that only show text. Arguments that fail the input schema are
``VALIDATION_ERROR`` too (``details.problems`` of ``{"field", "message"}``, never the rejected values);
anything unexpected is a generic ``INTERNAL`` error whose details stay in the server log.

Where new parts go: a tool group is a module with a :class:`~skillsearch.mcp.context.ToolGroup`, added to
``TOOL_GROUPS``; protocol extensions (``mcp.server.extension``) come in through ``extensions=``, and
resources through a ``register(server)`` function of their module called in :func:`build_mcp_server`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from importlib import metadata
from typing import Any, Literal

import anyio
import pydantic
from mcp.server import NotificationOptions
from mcp.server.caching import CacheableMethod, CacheHint
from mcp.server.extension import Extension
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.stdio import stdio_server
from mcp_types import CallToolResult, InputRequiredResult

from skillsearch.core.domain import Principal, json_type
from skillsearch.core.errors import SkillSearchError, ValidationError, echo, error_body, invalid_input, problem
from skillsearch.mcp import skills_extension, tools_catalog, tools_recall
from skillsearch.mcp.changes import ChangeNotifier, WhileOpen, serving_changes
from skillsearch.mcp.context import ErrorShape, PrincipalProvider, ServerState, ToolGroup, ToolPolicy, error_result
from skillsearch.mcp.transport import AnswerUnreadable, SayNotInitialized
from skillsearch.service import Catalog
from skillsearch.usecases.recall import DEFAULT_MAX_CONTENT_BYTES

__all__ = [
    "TOOL_GROUPS",
    "TOOL_NAMES",
    "CatalogSource",
    "PrincipalProvider",
    "ServerState",
    "SkillSearchMCP",
    "build_mcp_server",
]

log = logging.getLogger("skillsearch.mcp")

try:
    VERSION = metadata.version("skillsearch")
except metadata.PackageNotFoundError:  # a checkout run from its folder, never installed
    VERSION = "0+unknown"

TOOL_GROUPS: tuple[ToolGroup, ...] = (tools_catalog.group, tools_recall.group)
TOOL_NAMES = tuple(name for group in TOOL_GROUPS for name in group.names)
# Cacheable list methods the SDK's own handlers answer: they get the Skills extension's ttlMs/cacheScope.
# prompts/list stays served (an empty list, so the prompts capability is advertised): the MCP conformance
# suite's `caching` scenario, which benchmarks/skills_conformance.py requires to pass, fails a server without it.
_HINTED: tuple[CacheableMethod, ...] = ("tools/list", "prompts/list", "resources/templates/list")

CatalogSource = Catalog | Callable[[], Catalog]
"""An open catalog (shared, left open) or a factory the lifespan calls once and closes at shutdown."""

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


class SkillSearchMCP(MCPServer[ServerState]):
    """Turns the SDK's own argument-validation and crash errors into our ``{code, message, details}``, in
    the error shape of the tool that was called; and says over stdio what it really sends (``notifications``:
    ``resources.listChanged`` in the ``initialize`` result when a :class:`ChangeNotifier` runs)."""

    def __init__(self, *, notifications: NotificationOptions | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error_shapes: dict[str, ErrorShape] = {}
        self.notifications = notifications or NotificationOptions()
        self._stop_lock = threading.RLock()  # stop() may run in a signal handler inside run_stdio_async
        self._cancel: Callable[[], object] | None = None
        self._then: Callable[[], object] | None = None

    async def run_stdio_async(self) -> None:
        """As the SDK's, with our notification options: its own passes none, so ``initialize`` would say
        ``listChanged: false`` while the notifier sends ``notifications/resources/list_changed``; and a line
        the SDK cannot read is answered (``transport.AnswerUnreadable``), not dropped; a request sent before
        ``initialize`` is told so (``transport.SayNotInitialized``), not that its params are invalid. Ends when
        the client closes stdin, or after :meth:`stop`."""
        lowlevel = self._lowlevel_server
        loop = asyncio.get_running_loop()
        async with stdio_server() as (read_stream, write_stream):
            with anyio.CancelScope() as scope:
                with self._stop_lock:
                    self._cancel = lambda: loop.call_soon_threadsafe(scope.cancel)
                    if self._then is not None:
                        scope.cancel()
                replies = SayNotInitialized(write_stream)
                await lowlevel.run(AnswerUnreadable(read_stream, write_stream, replies), replies,
                                   lowlevel.create_initialization_options(self.notifications))
            if self._then is not None:
                # The session and its lifespan have ended (writes stopped and joined, the catalog closed). The
                # SDK's stdin reader is a thread blocked until the client closes the pipe: it cannot be
                # cancelled, and leaving this block would wait for it.
                self._then()

    def stop(self, then: Callable[[], object]) -> None:
        """End :meth:`run_stdio_async` while the client keeps stdin open (a process told to stop: SIGTERM):
        the session is cancelled, the lifespan's cleanup runs, then ``then()`` is called in the server's
        thread, where it must leave the process (``os._exit``). Safe from a signal handler or another thread,
        also before the server has started."""
        with self._stop_lock:
            if self._then is not None:
                return
            self._then = then
            if self._cancel is not None:
                self._cancel()

    def _error(self, name: str, exc: SkillSearchError) -> CallToolResult:
        return error_result(exc, self.error_shapes.get(name, error_body))

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[ServerState, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as exc:
            log.error("tool %s failed", name, exc_info=exc.__cause__ or exc)
            return self._error(name, SkillSearchError("internal error: the server log has the details"))
        except ToolError as exc:
            if isinstance(exc.__cause__, pydantic.ValidationError):
                required = (self._tool_input_schema(name) or {}).get("required", ())
                errors = [_received(e, required) for e in exc.__cause__.errors(include_url=False)]
                refused = invalid_input(errors, "invalid arguments: ")
                if any(e.get("type") == "extra_forbidden" for e in errors):
                    # A guessed name (`params`, `path`, `id`): say the names the tool does take.
                    schema = self._tool_input_schema(name) or {}
                    takes = ", ".join(schema.get("properties", {}))
                    refused = ValidationError(f"{refused.message} ({name} takes: {takes})", refused.details)
                return self._error(name, refused)
            if name not in self.error_shapes:
                return self._error(name, ValidationError(
                    f"unknown tool {echo(name)!r}: call one of {', '.join(self.error_shapes)}",
                    {"problems": [problem("name", "no tool of this name")], "tools": list(self.error_shapes)}))
            raise


def _received(error: Mapping[str, Any], required: Iterable[str]) -> dict[str, Any]:
    """A schema error of one argument without its value, its message saying which JSON type came instead of
    the one expected (``"3"`` for an integer: "Input should be a valid integer, got string"), so an agent
    knows what to send; the value itself is never echoed. A ``null`` for an optional argument says to leave
    it out: its schema has no null (hosts that fill every argument send one), and its default applies then."""
    out = {k: v for k, v in error.items() if k != "input"}
    if str(error.get("type", "")).endswith("_type") and "input" in error:
        given, loc = error["input"], tuple(error.get("loc", ()))
        said = ("a number with a fractional part" if isinstance(given, float) and error.get("type") == "int_type"
                and math.isfinite(given) and not given.is_integer() else json_type(given))
        if given is None and len(loc) == 1 and loc[0] not in required:
            said += f": leave {loc[0]} out for its default"
        out["msg"] = f"{error.get('msg', '')}, got {said}"
    return out


def _provider(who: PrincipalProvider | Principal) -> PrincipalProvider:
    if isinstance(who, Principal):
        return lambda _headers: who
    return who


def build_mcp_server(
    catalog: CatalogSource,
    principal_provider: PrincipalProvider | Principal,
    *,
    known_tools: Iterable[str] | None = None,
    max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES,
    catalog_scope: str | None = None,
    name: str = "skillsearch",
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "WARNING",
    extensions: Sequence[Extension] = (),
    notifier: ChangeNotifier | None = None,
    while_open: Sequence[WhileOpen] = (),
) -> SkillSearchMCP:
    """The MCP server with the five tools. ``known_tools``: the host's tool names, so that a template
    naming any other tool is ``SKILL_INVALID``; ``max_content_bytes``: the recall content cap;
    ``catalog_scope``: a scope the four catalog tools require (the HTTP app's ``skills:read``; ``None``
    over stdio), ``ACCESS_DENIED`` without it. ``recall_cloud_skill`` always requires ``memory:read``.
    ``extensions``: MCP protocol extensions served beside the tools. ``notifier``: tells connected sessions
    when the skills they can see change (``mcp/changes.py``); ``while_open``: what runs while the catalog is
    open (the local sources' keeper)."""
    policy = ToolPolicy(_provider(principal_provider), catalog_scope,
                        frozenset(known_tools) if known_tools is not None else None, max_content_bytes)

    @asynccontextmanager
    async def lifespan(_server: MCPServer[ServerState]) -> AsyncIterator[ServerState]:
        if isinstance(catalog, Catalog):
            async with serving_changes(catalog, notifier, while_open):
                yield ServerState(catalog, policy)
            return
        failure: SkillSearchError | None = None
        try:
            opened: Catalog | None = await anyio.to_thread.run_sync(catalog)
        except SkillSearchError as exc:
            log.error("cannot open the catalog: %s: %s", exc.code, exc.message)
            opened, failure = None, exc
        try:
            if opened is None:
                yield ServerState(opened, policy, failure)
            else:
                # The protocol is answered from now on; a search that needs the model waits for this load.
                opened.prepare_in_background()
                async with serving_changes(opened, notifier, while_open):
                    yield ServerState(opened, policy, failure)
        finally:
            if opened is not None:
                opened.close()

    skills = skills_extension.for_server(lambda ctx: ctx.lifespan_context, policy.provider,
                                         fixed_principal=isinstance(principal_provider, Principal),
                                         catalog_scope=catalog_scope)
    hint = CacheHint(ttl_ms=skills_extension.TTL_MS, scope=skills.cache_scope)
    # Change notifications are advertised where they are sent: with a notifier (stdio), `initialize` says
    # resources.listChanged and `subscriptions/listen` is served (server/discover derives its flags from
    # that); without one (HTTP, stateless: nothing would ever publish) neither is.
    server = SkillSearchMCP(name=name, version=VERSION, instructions=INSTRUCTIONS, lifespan=lifespan,
                            log_level=log_level, extensions=[skills, *extensions],
                            cache_hints={m: hint for m in _HINTED},
                            tools=[tool for group in TOOL_GROUPS for tool in group.build()],
                            subscriptions=notifier.bus if notifier is not None else False,
                            notifications=NotificationOptions(resources_changed=notifier is not None))
    if notifier is not None:
        server.middleware.append(notifier.middleware)
    for group in TOOL_GROUPS:
        server.error_shapes.update(group.shapes)
    skills_extension.register(server, skills)
    return server
