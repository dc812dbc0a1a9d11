"""The envelope ``recall_cloud_skill`` answers with (``xmemo.cloud_skill.v1``): Level 0 descriptors, the
Level 1 root manifest, a Level 2 resource payload, or an error payload (``usecases/recall.py`` fills them)."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from skillsearch.core.views import ParameterView, ResourceInfo, StepView

__all__ = [
    "SCHEMA_VERSION",
    "CloudSkillEnvelope",
    "Descriptor",
    "DescriptorList",
    "ErrorPayload",
    "RenderStatus",
    "ResourcePayload",
    "RevisionMeta",
    "RootManifest",
]

SCHEMA_VERSION: Final = "xmemo.cloud_skill.v1"

RenderStatus = Literal["complete", "truncated", "empty", "error"]


class Descriptor(BaseModel):
    """Discovery metadata of one skill (Level 0): enough to choose, not to act."""

    model_config = ConfigDict(extra="forbid")

    skill_id: str = Field(description="Pass as skill_id to recall the root manifest (Level 1).")
    slug: str
    name: str
    description: str
    kind: str
    tags: list[str]
    score: float
    confidence: float | None = Field(
        None, description="Probability in [0, 1] that this skill is what the query asks for (as in search_skills).")
    skill_uri: str = Field("", description="skill:// URI of its SKILL.md (MCP Skills extension, current revision).")


class DescriptorList(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str
    no_match: bool = Field(description="True when nothing in the catalog is a good match for the query. False is "
                           "no promise of a fit: read the top hit's confidence.")
    no_match_reason: str | None = Field(None, description="Why there are no descriptors (as in search_skills).")
    notice: str | None = Field(None, description="Set when the query's language is not searchable as configured.")
    descriptors: list[Descriptor]


class RevisionMeta(BaseModel):
    model_config = ConfigDict(extra="forbid")

    revision_id: str = Field(description="Pin this as revision_id to read a resource (Level 2).")
    version: str
    created_at: str
    canonical_hash: str
    is_current: bool


class RootManifest(BaseModel):
    """The root of one revision (Level 1); name, description and tags are the revision's own."""

    model_config = ConfigDict(extra="forbid")

    skill_id: str
    slug: str
    name: str
    description: str
    kind: str
    tags: list[str]
    current_revision_id: str
    revision: RevisionMeta
    canonical_hash: str
    instructions: str
    instructions_truncated: bool = Field(False, description="True when instructions holds only a part of them: "
                                         "from instructions_offset, up to next_offset.")
    instructions_chars: int = Field(0, description="Length of the whole instructions, in characters.")
    instructions_offset: int = Field(0, description="Where the part in instructions starts, in characters.")
    next_offset: int | None = Field(None, description="Where the rest of the instructions starts: recall again "
                                    "with this skill_id, revision.revision_id and offset = next_offset; null "
                                    "when the part reaches the end.")
    steps: list[StepView] | None = Field(None, description="Flow templates only: ordered tool calls with {param}.")
    parameters: list[ParameterView] | None = Field(None, description="Flow templates only: the parameter schema.")
    resources: list[ResourceInfo]
    skill_uri: str = Field("", description="skill:// URI of the current revision's SKILL.md (MCP Skills extension).")


class ResourcePayload(BaseModel):
    """One resource of a pinned revision (Level 2)."""

    model_config = ConfigDict(extra="forbid")

    skill_id: str
    revision_id: str
    resource_id: str
    path: str
    kind: str
    media_type: str
    size: int = Field(description="Size of the whole resource in bytes.")
    sha256: str = Field(description="sha256 of the whole resource, even when the content is truncated.")
    encoding: Literal["text", "base64"] = Field(description="'text' (UTF-8 text) or 'base64' (binary bytes).")
    content: str
    returned_bytes: int = Field(description="Bytes of the resource that content holds.")
    truncated: bool = Field(description="content is a part of the resource, not the whole of it.")
    offset: int = Field(0, description="Where content starts in the resource, in bytes.")
    next_offset: int | None = Field(None, description="Where the rest starts, in bytes: recall again with the same"
                                    " skill, revision_id and resource and offset = next_offset; null at the end.")


class ErrorPayload(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str = Field(description="Stable error code, e.g. SKILL_NOT_FOUND or REVISION_PINNING_VIOLATION.")
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class CloudSkillEnvelope(BaseModel):
    """The single answer shape of ``recall_cloud_skill`` (``CloudSkillResponseEnvelope``)."""

    object: Literal["cloud_skill"] = "cloud_skill"
    schema_version: Literal["xmemo.cloud_skill.v1"] = SCHEMA_VERSION
    kind: Literal["descriptor", "root", "resource", "error"] = Field(
        description="descriptor (Level 0), root (Level 1), resource (Level 2) or error."
    )
    render_status: RenderStatus = Field(
        description="complete; truncated (content cut at the size cap); empty (no good match); error."
    )
    warnings: list[str] = Field(default_factory=list)
    data: DescriptorList | RootManifest | ResourcePayload | ErrorPayload
