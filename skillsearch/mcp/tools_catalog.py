"""The four catalog tools: ``search_skills``, ``list_skills``, ``get_skill`` and ``resolve_skill``.

Their errors are ``{"error": {"code", "message", "details"}}``; with the policy's catalog scope (the HTTP
app's ``skills:read``) a caller without it gets ``ACCESS_DENIED``.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult
from pydantic import Field

from skillsearch.core.domain import SearchMode, SkillKind
from skillsearch.core.views import ListResponse, ResolvedFlow, SearchResponse, SkillDetail
from skillsearch.mcp.context import ServerState, ToolGroup, run_tool
from skillsearch.retrieval.search_types import SearchRequest

__all__ = ["get_skill", "group", "list_skills", "resolve_skill", "search_skills"]

group = ToolGroup()


@group.tool("search_skills", "Search skills")
def search_skills(
    query: Annotated[str, Field(description="What you need, in plain words, e.g. 'rotate TLS certificates'.")],
    ctx: Context[ServerState, Any],
    limit: Annotated[int, Field(ge=1, le=100, description="Most hits to return.")] = 10,
    kind: Annotated[SkillKind | None, Field(description="Only skills of this kind.")] = None,
    tags: Annotated[list[str], Field(description="Only skills carrying every one of these tags.")] = [],  # noqa: B006
    mode: Annotated[
        SearchMode,
        Field(description="hybrid (default: keywords and meaning), lexical (keywords), semantic (meaning)."),
    ] = "hybrid",
    min_confidence: Annotated[
        float | None, Field(ge=0.0, le=1.0, description="Leave out hits whose confidence is under this, before limit"
                                                        " applies: up to limit hits that reach it, in rank order (a"
                                                        " hit may be surer than one above it); hits whose"
                                                        " confidence is null are kept.")
    ] = None,
) -> Annotated[CallToolResult, SearchResponse]:
    """Find the skills that fit a task, best first. Use this first whenever a task might be covered by a
    skill; each hit has its skill_id, kind, tags, a score, a confidence (the probability, in [0, 1],
    that it is what you asked for) and why it ranked there. no_match=true means nothing fits
    (no_match_message says why and what to do): do not force a weak hit. no_match=false is no promise: a
    request near the catalog's topics can still get hits that do not fit, so read the top hit's
    confidence, and under about 0.5 check its description before you load it. confidence is null for a
    request in another language than English, and in lexical or semantic mode: judge those hits by their
    descriptions (min_confidence does not cut them). A notice means the request's language is not
    searchable as configured. Next: get_skill with a hit's skill_id (or recall_cloud_skill for the
    staged view). To browse everything instead, use list_skills."""
    request = SearchRequest(query=query, limit=limit, mode=mode, kind=kind, tags=tuple(tags),
                            min_confidence=min_confidence)
    return run_tool(ctx, "search_skills", lambda c, _policy, p: c.search_view(p, request))


@group.tool("list_skills", "List skills")
def list_skills(
    ctx: Context[ServerState, Any],
    cursor: Annotated[str | None, Field(description="next_cursor of the previous page; omit for the first page.")] = None,
    limit: Annotated[int, Field(ge=1, le=200, description="Skills per page.")] = 50,
    kind: Annotated[SkillKind | None, Field(description="Only skills of this kind.")] = None,
    tags: Annotated[list[str], Field(description="Only skills carrying every one of these tags.")] = [],  # noqa: B006
) -> Annotated[CallToolResult, ListResponse]:
    """Page through every skill you can use, by name: id, slug, name, description, kind, tags and
    skill_uri. Use it to browse or enumerate; to find a skill for a task, search_skills is faster and
    ranked. Pass next_cursor back as cursor for the next page (null at the end). Next: get_skill with a
    skill_id."""
    return run_tool(ctx, "list_skills",
                    lambda c, _policy, p: c.list_skills(p, kind=kind, tags=tags, cursor=cursor, limit=limit))


# get_skill's bound on the instructions one answer carries. A few skills' instructions run to 160,000
# characters (about 40,000 tokens), which in one tool result would fill much of a host's context window, and
# a host keeps every tool result for the rest of the conversation. 24,000 characters (about 6,000 tokens) is
# a small share of any host's window and holds the whole SKILL.md of 96 % of the 883 real skills of the
# shared catalog (36 are longer); an agent reads the rest with offset = next_offset. HTTP and the CLI, whose
# callers are programs and people who asked for the whole skill, have no bound unless they pass max_chars.
GET_SKILL_MAX_CHARS = 24_000


@group.tool("get_skill", "Get a skill")
def get_skill(
    skill_id: Annotated[str, Field(description="A skill_id from search_skills or list_skills (or the slug of a"
                                               " skill you can see, when only one has it).")],
    ctx: Context[ServerState, Any],
    offset: Annotated[int, Field(ge=0, description="Where to start reading the instructions, in characters: 0, or"
                                                   " the next_offset of the previous answer.")] = 0,
    max_chars: Annotated[int, Field(ge=1, description="Most characters of the instructions to return.")]
    = GET_SKILL_MAX_CHARS,
) -> Annotated[CallToolResult, SkillDetail]:
    """Read one skill in full. A 'knowledge' skill returns its markdown instructions: read and follow them.
    Long instructions come a part at a time: when instructions_truncated is true and next_offset is not
    null, call get_skill again with the same skill_id and offset = next_offset for the next part; the
    parts joined are the whole instructions when every part has the same revision_id (another means the
    skill changed meanwhile: read again from offset 0). A 'flow_template' adds its ordered steps (tool
    calls with {param} placeholders) and its parameter schema: keep to its instructions and call
    resolve_skill with values for those parameters. Also lists the skill's resource files, which its
    instructions may name: read one with resources/read of its uri, or with recall_cloud_skill
    (skill_id, this answer's revision_id, resource = its path)."""
    return run_tool(ctx, "get_skill",
                    lambda c, _policy, p: c.get_skill(p, skill_id, offset=offset, max_chars=max_chars))


@group.tool("resolve_skill", "Resolve a flow template")
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
    its args. The answer has no instructions: read them with get_skill first (checks, when to stop).
    Missing, unknown or mistyped parameters give one VALIDATION_ERROR naming each of them; fix them and
    call again. Knowledge skills have no steps: read them with get_skill instead."""
    return run_tool(ctx, "resolve_skill",
                    lambda c, policy, p: c.resolve(p, skill_id, parameters, policy.host_tools))
