"""The MCP Skills extension (SEP-2640, ``io.modelcontextprotocol/skills``) over the same catalog and rule.

Declared with ``directoryRead: true`` beside the ``resources`` capability. Its three methods come in through the
SDK's :class:`~mcp.server.extension.Extension` (``skills/list``, ``skills/get``, ``resources/directory/read``);
``resources/read`` and ``resources/list`` are spec methods an extension may not bind, so :func:`register` puts
them on the low-level server (which allows replacing a spec handler). Every answer is for the caller's principal
now (:mod:`skillsearch.usecases.skill_files`): an invisible skill's URIs answer ``-32602`` exactly like unknown
ones; a cursor is signed for the caller, so another caller's or a forged one is ``-32602`` too.

How the extension map reaches clients (mcp 2.3): ``MCPServer(extensions=[...])`` writes the settings into the
low-level ``Server.extensions``; ``get_capabilities`` puts them under ``capabilities.extensions``. On protocol
2026-07-28 a client reads them from ``server/discover``. On the older ``initialize`` handshake the result is
sieved through that protocol revision's schema, whose ``ServerCapabilities`` has no ``extensions``: the map is
dropped there, and a client must call ``server/discover`` (or speak 2026-07-28) to learn of the extension.
"""

from __future__ import annotations

import base64
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    BlobResourceContents,
    ListResourcesResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    RequestParams,
    TextResourceContents,
)
from mcp_types import Resource as McpResource

from skillsearch.core.domain import Principal
from skillsearch.core.errors import AccessDeniedError, SkillSearchError
from skillsearch.core.textual import is_text
from skillsearch.service import Catalog
from skillsearch.usecases.skill_files import (
    ContentIntegrityError,
    CursorError,
    SkillEntry,
    UnknownUriError,
)

__all__ = ["ACCESS_DENIED_CODE", "EXTENSION_ID", "SkillsExtension", "for_server", "register", "request_headers"]

log = logging.getLogger("skillsearch.mcp.skills")

EXTENSION_ID = "io.modelcontextprotocol/skills"
ACCESS_DENIED_CODE = -32003
"""JSON-RPC code of a caller without the scope these methods need (``data.code`` is ``ACCESS_DENIED``): a
refusal of this caller, in the implementation-defined server range, neither -32602 (the request is
well-formed) nor -32603 (nothing is broken)."""
TTL_MS = 30_000
PAGE = 50

CacheScope = Literal["public", "private"]
CatalogOf = Callable[[ServerRequestContext[Any, Any]], Catalog]
PrincipalOf = Callable[[ServerRequestContext[Any, Any]], Principal]


class _UriParams(RequestParams):
    uri: str


class _DirectoryParams(RequestParams):
    uri: str
    cursor: str | None = None


class _ListParams(RequestParams):
    cursor: str | None = None


def _entry_json(entry: SkillEntry) -> dict[str, Any]:
    return {
        "uri": entry.uri,
        "frontmatter": entry.frontmatter,
        "resources": [{"uri": entry.file_uri(f.path), "digest": f.digest, "size": f.size} for f in entry.files],
    }


class SkillsExtension(Extension):
    """``skills/list``, ``skills/get`` and ``resources/directory/read`` over the caller's visible skills."""

    identifier = EXTENSION_ID

    def __init__(self, catalog_of: CatalogOf, principal_of: PrincipalOf, cache_scope: CacheScope) -> None:
        self.catalog_of = catalog_of
        self.principal_of = principal_of
        self.cache_scope: CacheScope = cache_scope
        self.cursor_key = os.urandom(32)  # cursors live as long as this server; a restart means starting over

    def settings(self) -> dict[str, Any]:
        return {"directoryRead": True}

    def methods(self) -> Sequence[MethodBinding]:
        return (
            MethodBinding("skills/list", _ListParams, self._guard(self._list)),
            MethodBinding("skills/get", _UriParams, self._guard(self._get)),
            MethodBinding("resources/directory/read", _DirectoryParams, self._guard(self._directory)),
        )

    def _guard(self, work: Callable[[Catalog, Principal, Any], Any]) -> Any:
        async def handler(ctx: ServerRequestContext[Any, Any], params: Any) -> Any:
            return await self.run(ctx, lambda c, p: work(c, p, params))

        return handler

    async def run(self, ctx: ServerRequestContext[Any, Any], work: Callable[[Catalog, Principal], Any]) -> Any:
        """Our errors as JSON-RPC errors: unknown/invisible URIs and bad cursors -32602, a missing scope
        :data:`ACCESS_DENIED_CODE`, the rest -32603."""
        try:
            principal = self.principal_of(ctx)
            catalog = self.catalog_of(ctx)
            return await anyio.to_thread.run_sync(lambda: work(catalog, principal))
        except (UnknownUriError, CursorError) as exc:
            raise MCPError(code=INVALID_PARAMS, message=exc.message, data=exc.details or None) from None
        except AccessDeniedError as exc:
            raise MCPError(code=ACCESS_DENIED_CODE, message=exc.message, data=exc.to_dict()) from None
        except ContentIntegrityError as exc:
            log.error("integrity: %s", exc.message)
            raise MCPError(code=INTERNAL_ERROR, message=exc.message, data=exc.details or None) from None
        except SkillSearchError as exc:
            raise MCPError(code=INTERNAL_ERROR, message=exc.message, data=exc.to_dict()) from None
        except MCPError:
            raise
        except Exception:
            log.exception("%s failed", ctx.method)
            raise MCPError(code=INTERNAL_ERROR, message="internal error: the server log has the details") from None

    def _cache(self) -> dict[str, Any]:
        return {"ttlMs": TTL_MS, "cacheScope": self.cache_scope}

    def _list(self, catalog: Catalog, principal: Principal, params: _ListParams) -> dict[str, Any]:
        entries, cursor = catalog.skill_files().page(principal, self.cursor_key, params.cursor, PAGE)
        result: dict[str, Any] = {"skills": [_entry_json(e) for e in entries], **self._cache()}
        if cursor:
            result["nextCursor"] = cursor
        return result

    def _get(self, catalog: Catalog, principal: Principal, params: _UriParams) -> dict[str, Any]:
        return {"skill": _entry_json(catalog.skill_files().entry(principal, params.uri)), **self._cache()}

    def _directory(self, catalog: Catalog, principal: Principal, params: _DirectoryParams) -> dict[str, Any]:
        children = catalog.skill_files().directory(principal, params.uri)
        if params.cursor:  # one page always holds the whole directory (a skill has at most a few hundred files)
            raise CursorError("invalid cursor: this directory listing has a single page", {})
        return {"resources": [{"uri": c.uri, "name": c.name, "mimeType": c.media_type} for c in children]}

    # -- the two spec methods ------------------------------------------------------------------------

    def _read(self, catalog: Catalog, principal: Principal, params: ReadResourceRequestParams) -> ReadResourceResult:
        file, data = catalog.skill_files().read(principal, params.uri)
        content: TextResourceContents | BlobResourceContents
        if is_text(file.media_type, data):
            content = TextResourceContents(uri=params.uri, mime_type=file.media_type, text=data.decode("utf-8"))
        else:
            content = BlobResourceContents(uri=params.uri, mime_type=file.media_type,
                                           blob=base64.b64encode(data).decode("ascii"))
        return ReadResourceResult(contents=[content], ttl_ms=TTL_MS, cache_scope=self.cache_scope)

    def _resources(
        self, catalog: Catalog, principal: Principal, params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        cursor = params.cursor if params is not None else None
        entries, after = catalog.skill_files().page(principal, self.cursor_key, cursor, PAGE)
        resources = [
            McpResource(uri=e.uri, name=str(e.frontmatter["name"]), description=str(e.frontmatter["description"]),
                        mime_type="text/markdown", size=e.files[0].size)
            for e in entries
        ]
        return ListResourcesResult(resources=resources, next_cursor=after, ttl_ms=TTL_MS, cache_scope=self.cache_scope)


def register(server: MCPServer[Any], extension: SkillsExtension) -> None:
    """Serve ``resources/read`` (every skill file, exact bytes) and ``resources/list`` (each visible skill's
    SKILL.md) from the extension; the extension's own methods are bound by ``MCPServer(extensions=[...])``."""
    lowlevel = server._lowlevel_server  # the SDK's documented way to re-provide a spec method

    async def read(ctx: ServerRequestContext[Any, Any], params: ReadResourceRequestParams) -> Any:
        return await extension.run(ctx, lambda c, p: extension._read(c, p, params))

    async def listing(ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None) -> Any:
        return await extension.run(ctx, lambda c, p: extension._resources(c, p, params))

    lowlevel.add_request_handler("resources/read", ReadResourceRequestParams, read)
    lowlevel.add_request_handler("resources/list", PaginatedRequestParams, listing)


def for_server(
    state_of: Callable[[ServerRequestContext[Any, Any]], Any],
    provider: Callable[[Mapping[str, str] | None], Principal],
    *,
    fixed_principal: bool,
    catalog_scope: str | None,
) -> SkillsExtension:
    """The extension for :func:`skillsearch.mcp.server.build_mcp_server`: the catalog from the lifespan state
    (``state.catalog``, or ``state.failure``), the caller from the same principal provider and scope as the
    tools. ``cacheScope`` is ``public`` only for a server with one fixed principal (stdio, ``mcp --http``):
    elsewhere the answer depends on the caller, so it is ``private``."""

    def catalog_of(ctx: ServerRequestContext[Any, Any]) -> Catalog:
        state = state_of(ctx)
        if state.catalog is None:
            raise state.failure or SkillSearchError("the catalog is not open")
        catalog: Catalog = state.catalog
        return catalog

    def principal_of(ctx: ServerRequestContext[Any, Any]) -> Principal:
        principal = provider(request_headers(ctx))
        if catalog_scope is not None and not principal.has_scope(catalog_scope):
            raise AccessDeniedError(f"{ctx.method} needs the {catalog_scope} scope", {"required_scope": catalog_scope})
        return principal

    return SkillsExtension(catalog_of, principal_of, "public" if fixed_principal else "private")


def request_headers(ctx: ServerRequestContext[Any, Any]) -> Mapping[str, str] | None:
    """The HTTP request headers of this message (``None`` over stdio and in process)."""
    headers = getattr(ctx.request, "headers", None)
    return headers if headers is None or isinstance(headers, Mapping) else dict(headers)
