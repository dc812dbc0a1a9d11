"""The limits on what one import may bring in: safe defaults, each overridable by an environment variable.

Input from folders and bundles is hostile until checked (a 50 MB SKILL.md, a YAML alias bomb, a folder of
a million files, a symlink loop). Every bound here is checked before the bytes it guards are read in full,
so an import of hostile input stays small in memory. The sync client's bounds (page items, response bytes,
request deadline, pages per run) are settings of the upstream in ``sync.toml`` (``sync/config.py``).

README.md lists every limit in one table; keep the two in step.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any

__all__ = ["Limits"]

MiB = 1024 * 1024


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(f"SKILLSEARCH_{name.upper()}")
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"SKILLSEARCH_{name.upper()} must be a whole number, got {raw!r}") from None
    if value < 1:
        raise ValueError(f"SKILLSEARCH_{name.upper()} must be at least 1, got {value}")
    return value


@dataclass(frozen=True)
class Limits:
    # SKILL.md, whole file (front matter + instructions).
    max_skill_md_bytes: int = 1 * MiB
    # The YAML front matter of SKILL.md (aliases are refused whatever its size).
    max_front_matter_bytes: int = 64 * 1024
    # One resource (a file of a skill folder, a bundle resource after base64 decoding).
    max_resource_bytes: int = 5 * MiB
    # Resources of one skill.
    max_resources: int = 500
    # All resources of one skill together.
    max_skill_bytes: int = 50 * MiB
    # Folder levels below a skill folder (or below the imported folder when looking for skills).
    max_depth: int = 16
    # Entries (files and folders) one walk of a skill folder looks at before refusing the skill.
    max_walk_entries: int = 5000
    # One .json/.jsonl bundle file.
    max_bundle_bytes: int = 256 * MiB
    # A git source's tree as exported: its files' bytes plus 512 per entry (checked before exporting).
    max_source_bytes: int = 512 * MiB
    # Entries (files and folders) of a git source's tree (checked before exporting): writing and removing a
    # hostile tree of many small files took minutes a run, within the byte limit.
    max_source_entries: int = 50_000

    @classmethod
    def from_env(cls, **overrides: Any) -> Limits:
        """Defaults, else ``SKILLSEARCH_MAX_*`` environment variables, else keyword overrides."""
        values = {f.name: _env_int(f.name, int(f.default)) for f in fields(cls)}  # type: ignore[arg-type]
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)
