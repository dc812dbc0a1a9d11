"""Storing a parsed import: one transaction that refuses slug and ownership clashes entry by entry, and
the :class:`ImportReport` of what was created, updated, left unchanged or refused."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from skillsearch.catalog.store import CatalogStore, UpsertOutcome

if TYPE_CHECKING:  # the importer (and PyYAML with it) only when something is imported: `list` reads ImportReport
    from skillsearch.catalog.importer import ImportProblem, ParsedImport

__all__ = ["ImportReport", "IndexOutcome", "store_import"]


class IndexOutcome(Protocol):
    """What an import reports of the index refresh that followed it (the indexer's ``IndexStats``)."""

    @property
    def embedded(self) -> int: ...

    @property
    def seconds(self) -> float: ...


@dataclass
class ImportReport:
    source: str
    grant: str
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    problems: list[ImportProblem] = field(default_factory=list)
    index: IndexOutcome | None = None
    # The store's generation just before and after the import's transaction (for the index refresh).
    span: tuple[int, int] = (0, 0)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def changed(self) -> list[str]:
        return self.created + self.updated

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "grant": self.grant,
            "created": len(self.created),
            "updated": len(self.updated),
            "unchanged": len(self.unchanged),
            "problems": [{"file": p.file, "reason": p.reason} for p in self.problems],
            "embedded": self.index.embedded if self.index else 0,
        }


def store_import(store: CatalogStore, parsed: ParsedImport, source: str, grant: str) -> ImportReport:
    """Upsert every parsed skill of ``source`` into ``grant``, in one transaction. A skill whose slug is
    taken in the grant by another skill, whose id belongs to another source or grant (an id a bundle names
    never moves another skill, old revisions and all, into another grant), or whose name only looks like
    another's of the grant (look-alike letters) is a problem, not a write."""
    from skillsearch.catalog.importer import ImportProblem

    report = ImportReport(source=source, grant=grant, problems=list(parsed.problems))
    outcomes: dict[str, UpsertOutcome] = {}
    with store.transaction():
        before = store.generation()
        for content in parsed.skills:
            # The batch's earlier skills are in the table already (same transaction), so one lookup checks
            # the name against the grant and the rest of the batch.
            if (seen := store.look_alike(grant, content.skill_id, content.revision.name)) is not None:
                report.problems.append(ImportProblem(parsed.files[content.skill_id], f"name looks like"
                                                     f" {seen[1]!r} of skill {seen[0]} (look-alike letters)"))
                continue
            clash = store.skill_by_slug(grant, content.slug)
            if clash is not None and clash.skill_id != content.skill_id:
                report.problems.append(ImportProblem(
                    parsed.files[content.skill_id],
                    f"slug {content.slug!r} is already used in grant {grant} by source {clash.source!r}",
                ))
                continue
            owner = store.skill(content.skill_id)
            if owner is not None and (owner.source != source or owner.grant != grant):
                report.problems.append(ImportProblem(
                    parsed.files[content.skill_id],
                    f"skill {content.skill_id} belongs to source {owner.source!r} in grant {owner.grant},"
                    f" not {source!r} in {grant}",
                ))
                continue
            outcomes[content.skill_id] = store.upsert(content)
        report.span = (before, store.generation())
    for skill_id, outcome in outcomes.items():
        getattr(report, outcome).append(skill_id)
    return report
