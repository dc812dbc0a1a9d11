"""``recall_cloud_skill``: the catalog as progressive disclosure (design section 6).

Its errors are its own envelope (``kind="error"``, ``data = {"code", "message", "details"}``); it always
requires ``memory:read`` (checked by the use case), never the catalog tools' scope.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp_types import CallToolResult
from pydantic import Field

from skillsearch.core.errors import SkillSearchError
from skillsearch.mcp.context import ServerState, ToolGroup, run_tool
from skillsearch.usecases.recall import CloudSkillEnvelope, error_envelope

__all__ = ["RECALL", "group", "recall_cloud_skill"]

RECALL = "recall_cloud_skill"


def recall_error(exc: SkillSearchError) -> dict[str, Any]:
    return error_envelope(exc).model_dump(mode="json")


group = ToolGroup()


@group.tool(RECALL, "Recall a cloud skill", shape=recall_error)
def recall_cloud_skill(
    ctx: Context[ServerState, Any],
    query: Annotated[str, Field(description="Level 0 discovery text; used when skill_id and slug are empty.")] = "",
    skill_id: Annotated[str, Field(description="Stable skill id, for the root (Level 1) or a resource (Level 2).")] = "",
    slug: Annotated[str, Field(description="Readable skill identity, for the root or a resource.")] = "",
    revision_id: Annotated[str, Field(description="Pins the root to a revision; required for a resource (Level 2).")] = "",
    resource: Annotated[str, Field(description="Logical path or resource id to read (Level 2).")] = "",
    offset: Annotated[int, Field(ge=0, description="Where to read on from: the next_offset of the previous answer,"
                                                   " with its revision_id (Level 1: characters of the instructions;"
                                                   " Level 2: bytes of the resource).")] = 0,
) -> Annotated[CallToolResult, CloudSkillEnvelope]:
    """Load only the layer of a skill you need. Level 0: query alone returns descriptors (discovery
    metadata, not instructions). Level 1: skill_id or slug returns the root manifest of the current
    revision (or of revision_id): instructions, revision_id, canonical_hash and the resource list.
    Instructions past the size cap come a part at a time: when next_offset is not null, call again with
    the same skill_id, revision_id = revision.revision_id and offset = next_offset; the parts joined are
    the whole instructions. A flow_template's steps keep their {param} placeholders: fill them with
    resolve_skill.
    Level 2: skill_id or slug + revision_id (from Level 1) + resource (path such as
    'scripts/check.py', or resource_id) returns that file: text as text, binary as base64; past the size
    cap a part at a time (render_status 'truncated'): call again with the same skill_id, revision_id and
    resource and offset = data.next_offset until it is null. A resource without revision_id is
    REVISION_PINNING_VIOLATION. Needs the memory:read scope. It never runs scripts or saves skills."""
    return run_tool(ctx, RECALL, lambda c, policy, p: c.recall(
        p, query=query, skill_id=skill_id, slug=slug, revision_id=revision_id, resource=resource, offset=offset,
        max_content_bytes=policy.max_content_bytes,
    ), shape=recall_error, scoped=False)
