"""The bundled sample catalog (``skillsearch/sample``): where it lies, the sources its ``manifest.json`` names,
and whether a store holds it and nothing else (the only catalog on which a server offers the demo principal).
"""

from __future__ import annotations

import json
from importlib import resources as importlib_resources
from pathlib import Path
from typing import NamedTuple

from skillsearch.catalog.store import CatalogStore

__all__ = ["SampleSource", "holds_only_sample", "sample_catalog_dir", "sample_sources"]


class SampleSource(NamedTuple):
    path: Path
    source: str
    grant: str


def sample_catalog_dir() -> Path:
    return Path(str(importlib_resources.files("skillsearch") / "sample"))


def sample_sources() -> list[SampleSource]:
    """The sample's sources, in the order its manifest lists them."""
    root = sample_catalog_dir()
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    return [SampleSource(root / s["path"], s["source"], s["grant"]) for s in manifest["sources"]]


def holds_only_sample(store: CatalogStore) -> bool:
    """True when every skill came from the sample's sources (and there is one), and nothing was synced."""
    sources = [s.source for s in sample_sources()]
    sample_count = sum(len(store.skill_ids_of_source(s)) for s in sources)
    synced = [s for s in store.sync.states() if s.source not in sources]
    total = store.count()
    return total > 0 and sample_count == total and not synced
