"""What every MCP tool shares: the per-server state its calls see, the tool-group registry, and the one
way a tool runs (who is calling, which scope it needs, the catalog or why it is closed, the result).

A tool module (``tools_catalog.py``, ``tools_recall.py``) defines its tools at module level on a
:class:`ToolGroup`; ``server.build_mcp_server`` registers every group. A new group (or, later, resources)
is one more module with its own group, registered the same way.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.tools import Tool
from mcp_types import CallToolResult, ContentBlock, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, model_validator

from skillsearch.core.domain import Principal
from skillsearch.core.errors import AccessDeniedError, SkillSearchError, error_body
from skillsearch.core.integers import as_integer
from skillsearch.service import Catalog
from skillsearch.usecases.recall import DEFAULT_MAX_CONTENT_BYTES

__all__ = [
    "READ_ONLY",
    "ErrorShape",
    "PrincipalProvider",
    "ServerState",
    "ToolGroup",
    "ToolPolicy",
    "error_result",
    "run_tool",
    "strict_arguments",
]

PrincipalProvider = Callable[[Mapping[str, str] | None], Principal]
"""Who is calling: gets the HTTP request headers (``None`` over stdio and in-process) and returns the
principal, or raises :class:`~skillsearch.core.errors.UnauthenticatedError`."""

ErrorShape = Callable[[SkillSearchError], dict[str, Any]]
"""How a tool's error result carries an error: ``{"error": {...}}`` (the catalog tools) or the tool's own
envelope (``recall_cloud_skill``)."""

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, destructive_hint=False, open_world_hint=False)


@dataclass(frozen=True)
class ToolPolicy:
    """What one server's tools are allowed and bound to: the caller's principal, the scope the catalog
    tools need (``None``: none), the host's tool names (``None``: no check) and the recall content cap."""

    provider: PrincipalProvider
    catalog_scope: str | None = None
    host_tools: frozenset[str] | None = None
    max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES


@dataclass(frozen=True)
class ServerState:
    """What the lifespan hands to every tool call: the catalog, or why it could not be opened (an index
    built for another model, say), which every tool then answers with instead of the server dying; and the
    server's :class:`ToolPolicy`."""

    catalog: Catalog | None
    policy: ToolPolicy
    failure: SkillSearchError | None = None


def _text(data: dict[str, Any]) -> list[ContentBlock]:
    return [TextContent(type="text", text=json.dumps(data, ensure_ascii=False))]


def error_result(exc: SkillSearchError, shape: ErrorShape = error_body) -> CallToolResult:
    data = shape(exc)
    return CallToolResult(content=_text(data), structured_content=data, is_error=True)


def run_tool(
    ctx: Context[ServerState, Any],
    tool: str,
    work: Callable[[Catalog, ToolPolicy, Principal], BaseModel],
    *,
    shape: ErrorShape = error_body,
    scoped: bool = True,
) -> CallToolResult:
    """One tool call: the caller, the scope check (``scoped``: the policy's catalog scope applies), the
    open catalog, then ``work``; every package error becomes the tool's error result."""
    state = ctx.request_context.lifespan_context
    try:
        principal = state.policy.provider(ctx.headers)
        scope = state.policy.catalog_scope
        if scoped and scope is not None and not principal.has_scope(scope):
            raise AccessDeniedError(f"{tool} needs the {scope} scope", {"required_scope": scope})
        if state.catalog is None:
            raise state.failure or SkillSearchError("the catalog is not open")
        data = work(state.catalog, state.policy, principal).model_dump(mode="json")
        return CallToolResult(content=_text(data), structured_content=data)
    except SkillSearchError as exc:
        return error_result(exc, shape)


def strict_arguments(tool: Tool) -> Tool:
    """``tool`` whose arguments are taken as its input schema says, and no other way: no coercion (``"3"``
    or ``true`` for an integer is refused, as the schema's ``type: integer`` says) and no argument the
    schema does not name (``additionalProperties: false``). Both fail as ``VALIDATION_ERROR``, like any
    other schema error. An integer argument takes ``3.0`` as 3, as JSON Schema's ``integer`` does
    (``core/integers.py``): strict pydantic refused it, though the schema the host was given allows it. The
    SDK builds lax, extra-ignoring argument models and offers no switch, so the model it built is
    subclassed once, here, with the stricter config."""
    lax = tool.fn_metadata.arg_model
    integers = frozenset(f.alias or name for name, f in lax.model_fields.items() if f.annotation is int)

    def whole_numbers(data: Any) -> Any:
        if isinstance(data, dict) and integers:
            return {k: as_integer(v) if k in integers else v for k, v in data.items()}
        return data

    strict: type[BaseModel] = type(lax.__name__, (lax,), {
        "__module__": lax.__module__,
        "model_config": ConfigDict(strict=True, extra="forbid", arbitrary_types_allowed=True),
        "_whole_numbers": model_validator(mode="before")(whole_numbers),
    })
    metadata = tool.fn_metadata.model_copy(update={"arg_model": strict})
    return tool.model_copy(update={"fn_metadata": metadata, "parameters": strict.model_json_schema(by_alias=True)})


@dataclass
class ToolGroup:
    """Tools defined at module level with ``@group.tool(name, title)``: read-only, idempotent, described
    by their dedented docstrings, their arguments strict (:func:`strict_arguments`); :meth:`build` makes
    them for a server (``MCPServer(tools=...)``) and :attr:`shapes` gives each one's error shape."""

    tools: list[tuple[Callable[..., Any], str, str, ErrorShape]] = field(default_factory=list)
    _built: tuple[Tool, ...] | None = field(default=None, repr=False, compare=False)

    def tool(self, name: str, title: str, shape: ErrorShape = error_body) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        def add(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.tools.append((fn, name, title, shape))
            self._built = None
            return fn

        return add

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for _, name, _, _ in self.tools)

    @property
    def shapes(self) -> dict[str, ErrorShape]:
        """Each tool's error shape by name."""
        return {name: shape for _, name, _, shape in self.tools}

    def build(self) -> list[Tool]:
        """Every tool of the group, as a server takes them. Made once per process and shared by every server
        built after (a tool is a module-level function; what it is bound to comes from the server's state):
        the SDK's argument models and JSON schemas took 0.14 s a server, paid by each in-process build."""
        if self._built is None:
            self._built = tuple(strict_arguments(Tool.from_function(fn, name=name, title=title, annotations=READ_ONLY,
                                                                    description=inspect.cleandoc(fn.__doc__ or "")))
                                for fn, name, title, _ in self.tools)
        return list(self._built)
