"""The catalog's rows as domain objects: the columns a skill is read with, and one converter per table.

The inverse of what :class:`~skillsearch.catalog.store.CatalogStore` writes; a revision's body is the JSON
of :func:`skillsearch.core.hashing.revision_body`.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

from skillsearch.core.domain import FlowStep, Parameter, Resource, Revision, Skill

__all__ = ["SKILL_COLUMNS", "IndexRow", "index_row_from_row", "resource_from_row", "revision_from_row", "skill_from_row"]

SKILL_COLUMNS = (
    "skill_id, slug, name, description, kind, tags, grant_key, status, current_revision_id, updated_at, source"
)


@dataclass(frozen=True)
class IndexRow:
    """What the search index needs of one active skill's current revision."""

    skill_id: str
    slug: str
    grant: str
    kind: str
    tags: tuple[str, ...]
    name: str
    description: str
    instructions: str
    canonical_hash: str


def skill_from_row(row: sqlite3.Row) -> Skill:
    return Skill(
        skill_id=row["skill_id"],
        slug=row["slug"],
        name=row["name"],
        description=row["description"],
        kind=row["kind"],
        tags=tuple(json.loads(row["tags"])),
        grant=row["grant_key"],
        status=row["status"],
        current_revision_id=row["current_revision_id"],
        updated_at=row["updated_at"],
        source=row["source"],
    )


def revision_from_row(row: sqlite3.Row) -> Revision:
    body = json.loads(row["body"])
    return Revision(
        revision_id=row["revision_id"],
        skill_id=row["skill_id"],
        version=row["version"],
        created_at=row["created_at"],
        canonical_hash=row["canonical_hash"],
        name=body["name"],
        description=body["description"],
        kind=body["kind"],
        tags=tuple(body["tags"]),
        instructions=body["instructions"],
        steps=tuple(FlowStep(**s) for s in body["steps"]),
        parameters=tuple(Parameter(**p) for p in body["parameters"]),
        metadata=body.get("metadata", {}),
    )


def resource_from_row(row: sqlite3.Row, with_content: bool) -> Resource:
    return Resource(
        resource_id=row["resource_id"],
        path=row["path"],
        kind=row["kind"],
        media_type=row["media_type"],
        size=row["size"],
        sha256=row["sha256"],
        content=bytes(row["content"]) if with_content else b"",
    )


def index_row_from_row(row: sqlite3.Row) -> IndexRow:
    """A skill joined with its current revision (``CatalogStore.index_rows``)."""
    return IndexRow(
        skill_id=row["skill_id"],
        slug=row["slug"],
        grant=row["grant_key"],
        kind=row["kind"],
        tags=tuple(json.loads(row["tags"])),
        name=row["name"],
        description=row["description"],
        instructions=json.loads(row["body"])["instructions"],
        canonical_hash=row["canonical_hash"],
    )
