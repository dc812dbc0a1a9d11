"""Content hashing: the canonical hash that identifies a revision, and ids derived from it.

:func:`revision_body` is the one serialisation of what a revision says: the store keeps it as the
revision's body, and the canonical hash covers it with the version and the resources.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from skillsearch.core.domain import Resource, Revision

__all__ = ["canonical_hash", "canonical_json", "revision_body", "sha256_hex", "stable_id"]


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_json(value: Any) -> bytes:
    """JSON with sorted keys, no whitespace and UTF-8 text: equal content gives equal bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def revision_body(revision: Revision) -> dict[str, Any]:
    """What ``revision`` says (name, description, kind, tags, instructions, steps, parameters, metadata) as
    JSON values, in that order; its ids, version and dates are not part of it."""
    return {
        "name": revision.name,
        "description": revision.description,
        "kind": revision.kind,
        "tags": list(revision.tags),
        "instructions": revision.instructions,
        "steps": [s.model_dump() for s in revision.steps],
        "parameters": [p.model_dump() for p in revision.parameters],
        "metadata": revision.metadata,
    }


def canonical_hash(revision: Revision, resources: Iterable[Resource]) -> str:
    """sha256 of everything the revision says, resources by their content hash (design section 1)."""
    body = {
        "version": revision.version,
        **revision_body(revision),
        "resources": sorted(
            ({"path": r.path, "kind": r.kind, "media_type": r.media_type, "sha256": r.sha256 or sha256_hex(r.content)}
             for r in resources),
            key=lambda r: r["path"],
        ),
    }
    return sha256_hex(canonical_json(body))


def stable_id(prefix: str, *parts: str) -> str:
    """An opaque id that is the same for the same parts: ``sk_`` + 20 hex digits of their hash."""
    return f"{prefix}_{sha256_hex(chr(31).join(parts).encode('utf-8'))[:20]}"
