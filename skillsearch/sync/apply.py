"""Applying one page of upstream changes: validate each item, store the page in one transaction, then
bring the index up to date for the changed skills only.

Why it is shaped like this:
- Items are validated one by one. A malformed item is rejected with its reason (logged, counted in the
  sync state) and the valid items of the same page are still stored. Each item is applied inside its own
  savepoint, so even a store-level refusal (a slug taken by another skill) only undoes that item.
- The page's content and the cursor that follows it are committed in the same transaction: the stored
  cursor never runs ahead of the stored content, and a crash before the commit repeats the page.
- The index is refreshed after the commit with the ids the page touched (when an index is given; a sync
  run passes none and refreshes once per 1,000 changed skills, see ``runner.py``); the index re-embeds only
  the skills whose embedded text changed. Reads re-check visibility against the store, so an archived or
  revoked skill leaves search as soon as the commit lands, before the index catches up.
- An archived skill keeps its revisions (pinned reads of them still work); a deleted one loses them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pydantic

from skillsearch.catalog.frontmatter import FrontMatterError, split_front_matter
from skillsearch.catalog.store import CatalogStore, utc_now
from skillsearch.catalog.sync_state import REJECTED_NOTE, SyncState
from skillsearch.core.domain import Resource, Revision, SkillContent, validation_text
from skillsearch.core.limits import Limits
from skillsearch.core.wellformed import printable
from skillsearch.retrieval.indexer import IndexStats, SearchIndex
from skillsearch.sync.config import SubscriptionConfig
from skillsearch.sync.contract import DeleteItem, UpsertItem, parse_item

__all__ = ["PageOutcome", "Rejection", "apply_page", "purge_subscription", "to_content"]

log = logging.getLogger("skillsearch.sync")

COUNTERS = ("created", "updated", "archived", "deleted", "rejected", "pages")


@dataclass(frozen=True)
class Rejection:
    skill_id: str | None
    reason: str

    def __str__(self) -> str:
        return f"{self.skill_id or '(no skill id)'}: {self.reason}"


@dataclass
class PageOutcome:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    index: IndexStats | None = None

    @property
    def changed(self) -> list[str]:
        return list(dict.fromkeys(self.created + self.updated + self.archived + self.deleted))

    def merge(self, other: PageOutcome) -> None:
        for name in ("created", "updated", "unchanged", "archived", "deleted", "rejected"):
            getattr(self, name).extend(getattr(other, name))


def _json_object(value: dict[str, Any]) -> dict[str, Any]:
    """Upstream's front matter object, kept only as far as JSON can carry it (it arrived as JSON)."""
    out = json.loads(json.dumps(value, default=str))
    assert isinstance(out, dict)
    return out


def to_content(item: UpsertItem, sub: SubscriptionConfig) -> SkillContent:
    """The wire item as the store's :class:`SkillContent`; ``ValueError`` with a reason when invalid."""
    rev = item.revision
    limits = Limits.from_env()
    if len(item.resources) > limits.max_resources:
        raise ValueError(f"{len(item.resources)} resources, over the limit of {limits.max_resources}")
    total = 0
    for r in item.resources:
        # Bounded before decoding, as for a bundle: base64 decodes to 3/4 of its length.
        size = len(r.content) * 3 // 4 if r.encoding == "base64" else len(r.content)
        if size > limits.max_resource_bytes:
            raise ValueError(f"resource {r.path!r} is about {size} bytes, over the limit of {limits.max_resource_bytes}")
        total += size
        if total > limits.max_skill_bytes:
            raise ValueError(f"the skill's resources exceed {limits.max_skill_bytes} bytes, over the limit")
    if rev.skill_md is not None:
        try:
            front, _ = split_front_matter(rev.skill_md)
        except FrontMatterError as exc:
            raise ValueError(f"revision.skill_md: {exc}") from None
        if not isinstance(front.get("name"), str) or not isinstance(front.get("description"), str):
            raise ValueError("revision.skill_md: its front matter needs a name and a description")
    try:
        resources = tuple(
            Resource(path=r.path, kind=r.kind, media_type=r.media_type, content=r.data()) for r in item.resources
        )
        return SkillContent(
            skill_id=item.skill.skill_id,
            slug=item.skill.slug,
            grant=sub.grant,
            source=sub.source,
            revision=Revision(
                version=rev.version,
                created_at=rev.created_at,
                name=rev.name.strip(),
                description=rev.description.strip(),
                kind=rev.kind,
                tags=tuple(t.strip().lower() for t in rev.tags if t.strip()),
                instructions=rev.instructions,
                steps=tuple(rev.steps),
                parameters=tuple(rev.parameters),
                metadata=rev.metadata,
                skill_md=rev.skill_md or "",
                frontmatter=front if rev.skill_md is not None else _json_object(rev.frontmatter or {}),
            ),
            resources=resources,
        )
    except pydantic.ValidationError as exc:
        raise ValueError(validation_text(exc, 5)) from None


def _raw_skill_id(raw: Any) -> str | None:
    if isinstance(raw, dict):
        sid = raw.get("skill_id")
        if sid is None and isinstance(raw.get("skill"), dict):
            sid = raw["skill"].get("skill_id")
        return printable(sid) if isinstance(sid, str) and 0 < len(sid) <= 200 else None
    return None


def _held_by(source: str) -> str:
    """Who holds a skill, in the terms of the platform's operator reading the rejection."""
    kind, _, name = source.partition(":")
    if kind == "upstream" and name:
        return f"synced from subscription {name!r}"
    return f"held by the local source {source!r}"


def _apply_one(store: CatalogStore, sub: SubscriptionConfig, item: UpsertItem | DeleteItem,
               out: PageOutcome, now: str) -> None:
    """Apply one valid item; raises ``ValueError`` when the store must refuse it."""
    if isinstance(item, DeleteItem):
        owner = store.skill(item.skill_id)
        if owner is None:
            out.unchanged.append(item.skill_id)
            return
        if owner.source != sub.source:
            raise ValueError(f"delete refused: the skill is {_held_by(owner.source)}")
        store.delete(item.skill_id)
        out.deleted.append(item.skill_id)
        return
    content = to_content(item, sub)
    existing = store.skill(content.skill_id)
    if existing is not None and existing.source != sub.source:
        # A platform that offers one skill in two plans must send it under two ids (docs/upstream-api.md).
        raise ValueError(f"the skill id is already {_held_by(existing.source)}: a skill id must be unique across"
                         " every subscription and source of the catalog")
    clash = store.skill_by_slug(content.grant, content.slug)
    if clash is not None and clash.skill_id != content.skill_id:
        raise ValueError(f"slug {content.slug!r} is already used in {content.grant} by skill {clash.skill_id}")
    if item.skill.status == "archived":
        if (
            existing is not None
            and existing.status == "archived"
            and existing.current_revision_id == store.revision_id_of(content)
        ):
            out.unchanged.append(content.skill_id)
            return
        store.upsert(content, now)
        store.archive(content.skill_id, now)
        out.archived.append(content.skill_id)
        return
    getattr(out, store.upsert(content, now)).append(content.skill_id)


def apply_page(
    store: CatalogStore,
    index: SearchIndex | None,
    sub: SubscriptionConfig,
    items: Iterable[Any],
    *,
    state: SyncState,
    cursor: str | None,
    finished: bool,
    full: bool = False,
    earlier_rejected: Sequence[Rejection] = (),
) -> tuple[PageOutcome, SyncState]:
    """Store one page and save ``cursor`` with it; returns what happened and the sync state now stored.

    ``earlier_rejected`` are the items earlier pages of the same pull refused: the note stored with the page
    counts and names them too, so ``sync --status`` tells of every item the pull refused (not of the last
    page's alone), as refused in the last run (not as an earlier error) when a later page refused none.

    In a ``full`` sync the skill ids the upstream listed are recorded in the store with the page, so a full
    sync resumed after a crash still knows them; on its last page (``finished``) the skills of this
    subscription that were never listed are deleted, in the same transaction.
    """
    out = PageOutcome()
    now = utc_now()
    listed: list[str] = []
    with store.transaction():
        before = store.generation()
        for raw in items:
            raw_id = _raw_skill_id(raw)
            if raw_id is not None:
                listed.append(raw_id)
            try:
                with store.savepoint():
                    _apply_one(store, sub, parse_item(raw), out, now)
            except pydantic.ValidationError as exc:
                out.rejected.append(Rejection(raw_id, validation_text(exc, 5)))
            except ValueError as exc:
                out.rejected.append(Rejection(raw_id, str(exc)))
            except RecursionError:
                out.rejected.append(Rejection(raw_id, "nested too deeply"))
        if full:
            # "" marks the full sync as in progress even when a page listed no usable id.
            store.sync.mark_listed(sub.source, ["", *listed])
            if finished:
                seen = store.sync.listed(sub.source)
                for skill_id in store.skill_ids_of_source(sub.source):
                    if skill_id not in seen:
                        store.delete(skill_id)
                        out.deleted.append(skill_id)
                store.sync.clear_listed(sub.source)
        counts = {k: int(state.counts.get(k, 0)) for k in COUNTERS}
        for k in ("created", "updated", "archived", "deleted", "rejected"):
            counts[k] += len(getattr(out, k))
        counts["pages"] += 1
        last_error = state.last_error
        refused = [*earlier_rejected, *out.rejected]
        if refused:  # stamped with this page: on the last one, the same moment as the pull's success
            last_error = f"{now} {REJECTED_NOTE}{len(refused)} item(s): " + "; ".join(map(str, refused[:3]))
        new_state = SyncState(sub.source, cursor, now if finished else state.last_success, last_error, counts)
        store.sync.save(new_state)
        after = store.generation()
    for r in out.rejected:
        log.warning("sync %s: rejected item %s", sub.id, r)
    if index is not None and out.changed:
        out.index = index.refresh(store, out.changed, (before, after))
    return out, new_state


def purge_subscription(store: CatalogStore, index: SearchIndex | None, sub: SubscriptionConfig,
                       state: SyncState, reason: str) -> list[str]:
    """The platform confirmed a revocation: keep it marked revoked, drop its skills, forget the cursor."""
    now = utc_now()
    with store.transaction():
        before = store.generation()
        store.set_revoked(sub.id, True, now)
        store.sync.clear_listed(sub.source)
        gone = [s for s in store.skill_ids_of_source(sub.source) if store.delete(s)]
        counts = dict(state.counts)
        counts["deleted"] = int(counts.get("deleted", 0)) + len(gone)
        store.sync.save(SyncState(sub.source, None, state.last_success, f"{now} {reason}", counts))
        after = store.generation()
    if index is not None and gone:
        index.refresh(store, gone, (before, after))
    return gone
