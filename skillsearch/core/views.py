"""The answers of the read use cases, as pydantic models: one shape for MCP, HTTP and the CLI's JSON."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator

__all__ = [
    "NO_MATCH_MESSAGES",
    "WEAK_CONFIDENCE",
    "Explanation",
    "ListResponse",
    "ParameterView",
    "ResolvedFlow",
    "ResolvedStep",
    "ResourceInfo",
    "SearchHitView",
    "SearchResponse",
    "SkillDetail",
    "SkillSummary",
    "StepView",
]


# Under this, a top hit deserves a look at its description before it is used. The dev sets, each left out
# (benchmarks/results/lodo-dev.md, the reliability table), disagree on where a hit becomes more likely right
# than wrong: above 0.1 on MetaTool, 0.2 on the skills set, 0.6 on Seal-Tools, nowhere on Gorilla; 0.5 is the
# cautious side of that (a right hit under it gets a needless look, a wrong one over it on Seal-Tools none).
# The confidence cannot tell a right top hit from a wrong lower one (docs/rules.md, "how the confidence is
# fitted"), so many right top hits sit under it. The CLI's text and the search page (static/app.js, which
# repeats the number) say so beside such a hit; the search_skills tool description tells agents the same.
WEAK_CONFIDENCE = 0.5

# What a caller can do about each empty answer, by its no_match_reason: the API returns it as
# no_match_message, the CLI prints it and the search page shows it.
NO_MATCH_MESSAGES: dict[str, str] = {
    "low_confidence": "Nothing you can see fits this request well enough. Describe the task in other words (what "
                      "you want done rather than a tool's name), or check that your grants include the skills you "
                      "expect.",
    "no_good_match": "No skill you can see shares a word with this request or comes close to it in meaning. "
                     "Rephrase it in plain words, or list the skills to see what the catalog holds.",
    "below_min_confidence": "There were hits, but none reached your min_confidence. Lower it, or leave it out to see "
                            "them with their confidence.",
    "no_shared_word": "No skill you can see shares a word with this request, and a lexical search matches words "
                      "only. Rephrase it, or search by meaning (hybrid or semantic mode).",
    "no_candidates": "Nothing you can see matched: the kind or tag filters, or your grants, leave nothing to rank. "
                     "Remove a filter, or check your grants.",
}


class SkillSummary(BaseModel):
    """What a list shows of a skill: no upstream fields."""

    skill_id: str = Field(description="Stable opaque id; pass it to get_skill or resolve_skill.")
    slug: str = Field("", description="Its slug, as search hits show it; get_skill and resolve_skill take it too.")
    name: str
    description: str
    kind: str = Field(description="'knowledge' (instructions to read) or 'flow_template' (steps to run).")
    tags: list[str]
    skill_uri: str = Field("", description="skill:// URI of its SKILL.md (MCP Skills extension): skills/get, resources/read.")


class Explanation(BaseModel):
    """Why a hit ranked where it did."""

    lexical_rank: int | None = Field(None, description="Rank in the BM25 list (1 = best), null if not matched.")
    lexical_score: float | None = Field(None, description="BM25 score.")
    semantic_rank: int | None = Field(None, description="Rank by cosine among the semantic candidates.")
    semantic_score: float | None = Field(None, description="Cosine similarity of query and skill embeddings.")
    fused_score: float = Field(description="The score the list is ordered by.")
    fusion: str | None = Field(None, description="Fusion method in hybrid mode: zscore, minmax or rrf.")
    semantic_weight: float | None = Field(
        None, description="Weight of the cosines in hybrid fusion for this request: the one it named or the "
        "index's tuned one, else the default moved by the share of candidates that match lexically.")


class SearchHitView(BaseModel):
    skill_id: str
    slug: str
    name: str
    description: str
    kind: str
    tags: list[str]
    score: float
    confidence: float | None = Field(
        None, description="Probability in [0, 1] that this skill is one the request wants, fitted on labelled dev "
        "requests; the same for every caller who sees the skill. Null outside hybrid mode or without a fitted "
        "decision: a request in another language than English, which the multilingual route answers, has none.")
    explanation: Explanation
    skill_uri: str = Field("", description="skill:// URI of its SKILL.md (MCP Skills extension): skills/get, resources/read.")


class SearchResponse(BaseModel):
    query: str
    mode: str
    fusion: str | None
    hits: list[SearchHitView]
    no_match: bool = Field(description="True when nothing in the catalog is a good match for the query. False is "
                           "no promise of a fit: read the top hit's confidence.")
    no_match_reason: str | None = Field(
        None, description="Why the list is empty: low_confidence (nothing fits), below_min_confidence (the "
        "caller's min_confidence), no_good_match, no_shared_word (lexical mode), no_candidates. Null when there are hits.")
    no_match_message: str | None = Field(
        default=None, description="One sentence for a person or an agent: what no_match_reason means and what to do "
        "about it. Null when there are hits.")
    notice: str | None = Field(
        None, description="Set when the request is in a language the configured encoder cannot read: "
        "multilingual search is off, and how to turn it on. Such a request is never answered no_match.")
    took_ms: float

    @model_validator(mode="after")
    def _message(self) -> SearchResponse:
        if self.no_match_reason and self.no_match_message is None:
            self.no_match_message = NO_MATCH_MESSAGES.get(self.no_match_reason)
        return self


class ListResponse(BaseModel):
    items: list[SkillSummary]
    next_cursor: str | None = Field(None, description="Pass as cursor to get the next page; null at the end.")


class ResourceInfo(BaseModel):
    resource_id: str
    path: str
    kind: str
    media_type: str
    size: int
    sha256: str
    uri: str = Field("", description="skill:// URI of this file of the current revision (MCP Skills extension): "
                                     "resources/read loads it. Empty for a pinned older revision, which only "
                                     "recall_cloud_skill serves.")


class ParameterView(BaseModel):
    name: str
    type: str
    required: bool
    description: str = ""
    default: Any = None
    enum: list[Any] | None = None


class StepView(BaseModel):
    tool: str
    args: dict[str, Any]


class SkillDetail(BaseModel):
    skill_id: str
    slug: str
    name: str
    description: str
    kind: str
    tags: list[str]
    revision_id: str
    version: str
    canonical_hash: str
    updated_at: str
    instructions: str | None = Field(None, description="Markdown instructions (knowledge) or usage notes (flow); "
                                     "the part asked for when instructions_truncated.")
    instructions_truncated: bool = Field(default=False, description="True when instructions holds only a part of them: "
                                         "from instructions_offset, up to next_offset.")
    instructions_chars: int = Field(default=0, description="Length of the whole instructions, in characters.")
    instructions_offset: int = Field(default=0, description="Where the part in instructions starts, in characters.")
    next_offset: int | None = Field(default=None, description="Pass as offset to read the instructions on from where this "
                                    "part ends; null when it reaches the end.")
    steps: list[StepView] | None = Field(None, description="Flow templates only: ordered tool calls with {param}.")
    parameters: list[ParameterView] | None = Field(None, description="Flow templates only: the parameter schema.")
    resources: list[ResourceInfo]
    skill_uri: str = Field("", description="skill:// URI of its SKILL.md (MCP Skills extension): skills/get, resources/read.")


class ResolvedStep(BaseModel):
    tool: str
    args: dict[str, Any]


class ResolvedFlow(BaseModel):
    skill_id: str
    revision_id: str
    steps: list[ResolvedStep] = Field(description="Call these tools yourself, in order; nothing was executed.")
    parameters: dict[str, Any] = Field(description="The effective values, defaults applied.")
