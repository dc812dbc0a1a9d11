"""One run of a local source (a folder or a git repository): make the catalog hold what the source holds.

A run reads the source whole (the importer parses each skill folder), then applies the difference to the
skills this source owns in one store transaction, and refreshes the index for the changed skills only:

- new skill folder -> the skill is added; changed content -> a new revision (old revisions stay, so a
  pinned recall still reads them); unchanged content -> nothing is written and nothing re-embedded.
- a skill folder that is gone -> the skill is **archived**, not deleted. Archived skills are invisible to
  every read (search, list, get, the MCP listing) exactly like deleted ones, but their revisions stay, so a
  host that pinned a revision gets ``SKILL_ARCHIVED`` (it knows the skill was withdrawn) rather than an
  unexplained ``REVISION_NOT_FOUND``, and a folder that comes back (an undone delete, a branch switch)
  reactivates the same skill id with its history. Another local source may take over an archived skill's
  slug in the same grant; nothing else of another source is ever touched.
- a skill folder whose SKILL.md does not parse (half written, bad YAML) is *refused* and keeps its last
  good revision; a source that cannot be read at all (missing folder, unreachable remote, a ref that moved
  backwards) changes nothing and reports the error. A run never empties the catalog because of a failure.

A git source records the commit it was read at in the ``version`` of each revision it writes
(``<commit>`` or ``<declared version>@<commit>``) and refuses a ref that moved to an ancestor of the last
commit it applied unless the run is told ``allow_rewind``; a rewritten (diverged) history is applied with
a warning. What a source last applied lives in the store's sync state under the source's name: the commit
and which folder held which skill (the cursor, as JSON).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillsearch.catalog.importer import ImportProblem, ParsedImport, parse_path
from skillsearch.catalog.store import CatalogStore, utc_now
from skillsearch.catalog.sync_state import SyncState
from skillsearch.catalog.walk import folder_holding_skills
from skillsearch.core.domain import SLUG_PATTERN, SkillContent
from skillsearch.core.errors import SkillSearchError, StopFlag
from skillsearch.core.hashing import stable_id
from skillsearch.retrieval.indexer import IndexStats, ProgressFactory, SearchIndex
from skillsearch.sync.git import GitCache, Tree, export_folder
from skillsearch.sync.sources import SourceConfig, git_location

__all__ = ["SourceRead", "SourceReport", "apply_source", "read_source", "retire_source"]

log = logging.getLogger("skillsearch.sync")

COUNTERS = ("runs", "added", "changed", "removed", "refused", "errors")


@dataclass(frozen=True)
class Refusal:
    file: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"file": self.file, "reason": self.reason}


@dataclass
class SourceRead:
    """What a source holds now (or why it could not be read)."""

    source: SourceConfig
    parsed: ParsedImport = field(default_factory=ParsedImport)
    folders: dict[str, str] = field(default_factory=dict)  # skill_id -> folder relative to the source root
    broken: set[str] = field(default_factory=set)  # folders whose SKILL.md did not parse
    commit: str | None = None
    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    skipped: bool = False  # a git source whose ref still names the commit last applied
    scope: frozenset[str] | None = None  # the top-level folders read (None: the whole source)


@dataclass
class SourceReport:
    source: str
    kind: str
    grant: str
    commit: str | None = None
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: int = 0
    removed: list[str] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    skipped: bool = False
    index: IndexStats | None = None
    finished_at: str = ""

    @property
    def changed_ids(self) -> list[str]:
        return self.added + self.changed + self.removed

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source, "kind": self.kind, "grant": self.grant, "commit": self.commit,
            "added": self.added, "changed": self.changed, "unchanged": self.unchanged, "removed": self.removed,
            "refused": [r.to_dict() for r in self.refused], "warnings": self.warnings, "error": self.error,
            "skipped": self.skipped, "embedded": self.index.embedded if self.index else 0,
            "finished_at": self.finished_at,
        }


def _last(store: CatalogStore, source: SourceConfig) -> tuple[SyncState, dict[str, Any]]:
    state = store.sync.state(source.name) or SyncState(source.name, None, None, None, {})
    try:
        cursor = json.loads(state.cursor) if state.cursor else {}
    except json.JSONDecodeError:
        cursor = {}
    return state, cursor if isinstance(cursor, dict) else {}


def _folder_of(file: str, root: Path) -> str | None:
    """The skill folder (relative to the root) of a problem reported for ``<folder>/SKILL.md``."""
    path = Path(file)
    if path.name != "SKILL.md":
        return None
    try:
        return path.parent.relative_to(root).as_posix()
    except ValueError:
        return None


def _left_out(root: Path, tree: Tree) -> list[ImportProblem]:
    """The committed symbolic links and submodules an export left out, reported where a folder import
    reports a link: at the top, or inside a skill folder (a linked ``SKILL.md`` refuses its skill)."""
    whole = (root / "SKILL.md").is_file()
    out = []
    for paths, reason in ((tree.links, "symbolic link (not followed)"),
                          (tree.submodules, "git submodule (not exported)")):
        for rel in paths:
            parts = rel.split("/")
            if any(p.startswith(".") or p == "__pycache__" for p in parts):
                continue
            skill_md = parts[-1] == "SKILL.md" and len(parts) <= 2
            if whole or skill_md or len(parts) == 1 or (root / parts[0] / "SKILL.md").is_file():
                out.append(ImportProblem(str(root / rel), f"SKILL.md is refused: {reason}" if skill_md
                                         else f"skipped: {reason}"))
    return out


def _parse(source: SourceConfig, root: Path, shown: str, scope: frozenset[str] | None = None,
           left_out: list[ImportProblem] | None = None, stopping: StopFlag | None = None,
           progress: ProgressFactory | None = None) -> SourceRead:
    """Read the folder ``root`` through the importer's walk, which opens every entry relative to the root's
    descriptor and follows no symbolic link, whole or (``scope``) only the named top-level folders.
    ``left_out``: what a git export could not hold, reported with the refusals. ``stopping``: looked at
    between skills; once set, ``WriteStopped`` (nothing was read into the store)."""
    read = SourceRead(source)
    if not root.is_dir():
        read.error = f"{shown} is not a folder (missing or unreadable): the last good state is kept"
        return read
    if scope is not None and os.path.lexists(root / "SKILL.md"):
        scope = None  # the source is one skill: read it whole
    try:
        parsed = parse_path(root, source.name, source.grant, only=scope, stopping=stopping, progress=progress)
    except OSError as exc:
        read.error = f"{shown} could not be read ({exc.strerror or exc}): the last good state is kept"
        return read
    if parsed.unreadable is not None:
        read.error = f"{shown} could not be read: {parsed.unreadable}: the last good state is kept"
        return read
    read.scope = scope
    parsed.problems.extend(left_out or ())

    def shown_file(file: str) -> str:
        try:
            return f"{shown}/{Path(file).relative_to(root).as_posix()}"
        except ValueError:
            return file

    for content in parsed.skills:
        folder = _folder_of(parsed.files[content.skill_id], root)
        read.folders[content.skill_id] = folder if folder is not None else "."
        parsed.files[content.skill_id] = shown_file(parsed.files[content.skill_id])
    problems = []
    for problem in parsed.problems:
        if problem.file == str(root):
            # "No SKILL.md here": a state like any other (nothing is refused, the run succeeds), but said,
            # since a source pointed one level too high (a repository keeping its skills in skills/) says so.
            if scope is None:
                read.warnings.append(_holds_no_skill(source, root, shown))
            continue
        folder = _folder_of(problem.file, root)
        if folder is not None:
            read.broken.add(folder)
        problems.append(ImportProblem(shown_file(problem.file), problem.reason))
    parsed.problems = problems
    read.parsed = parsed
    return read


def _holds_no_skill(source: SourceConfig, root: Path, shown: str) -> str:
    """The warning for a source that holds no skill, naming a folder one level down that holds some."""
    text = f"{shown} holds no skill (a skill is a folder right under it with a SKILL.md: <name>/SKILL.md)"
    below = folder_holding_skills(root)
    if below is None:
        return text
    if source.git is not None:
        subdir = f"{source.subdir}/{below}" if source.subdir else below
        return f"{text}; {below}/ holds skills: set subdir = {subdir!r} (sources add --subdir {subdir})"
    return f"{text}; {below}/ holds skills: point the source at {root / below} (sources add --path)"


def read_source(store: CatalogStore, source: SourceConfig, cache_dir: Path, *, force: bool = False,
                allow_rewind: bool = False, folders: frozenset[str] | None = None,
                stopping: StopFlag | None = None, progress: ProgressFactory | None = None) -> SourceRead:
    """Read what ``source`` holds now. No store write happens here (a fetch may take long).

    ``folders``: for a folder source, read only these top-level folders (the ones a watcher saw change);
    the skills recorded in other folders are left as they are. ``stopping`` (SIGTERM, a server's shutdown):
    a git run in progress is ended and a folder's read stops between skills, raising ``WriteStopped``.
    ``progress``: the read of the skills shown as it goes (the CLI's bar)."""
    if source.kind == "folder":
        assert source.path is not None
        return _parse(source, source.path, str(source.path), folders, stopping=stopping, progress=progress)
    assert source.git is not None
    _, cursor = _last(store, source)
    last = cursor.get("commit") if isinstance(cursor.get("commit"), str) else None
    warnings: list[str] = []
    was = cursor.get("tracks")
    if last and isinstance(was, dict) and was != source.tracks:
        # The configuration now names another repository, ref or subdir: what was applied is no earlier
        # state of what is read now, so neither "nothing new" nor "moved backwards" can be judged from it.
        warnings.append(f"now reading {source.location} (was {git_location(was)}): applied in full")
        last = None
    cache = GitCache(Path(cache_dir) / f"{source.name}.git", stopping=stopping)
    try:
        commit = cache.fetch(source.git, source.ref)
        if last and commit != last and cache.has_commit(last):
            if cache.is_ancestor(commit, last):
                if not allow_rewind:
                    read = SourceRead(source, commit=commit)
                    read.error = (f"{source.ref} moved backwards from {last[:12]} to {commit[:12]}; "
                                  "refused (run `skillsearch sources sync "
                                  f"{source.name} --allow-rewind` to apply it)")
                    return read
                warnings.append(f"{source.ref} moved backwards from {last[:12]} to {commit[:12]} (allowed)")
            elif not cache.is_ancestor(last, commit):
                warnings.append(f"{source.ref} was rewritten: {last[:12]} is not in the history of {commit[:12]}")
        if last == commit and not force:
            return SourceRead(source, commit=commit, skipped=True)
        cache.keep(commit)
        shown = f"{source.shown_git}@{commit[:12]}" + (f":{source.subdir}" if source.subdir else "")
        with export_folder(cache.git_dir.parent) as tmp:
            root, tree = cache.export(commit, source.subdir, tmp / "tree")
            read = _parse(source, root, shown, left_out=_left_out(root, tree), stopping=stopping, progress=progress)
    except SkillSearchError as exc:
        read = SourceRead(source)
        read.error = exc.message
        return read
    read.commit = commit
    read.warnings = warnings + read.warnings
    return read


def _versioned(content: SkillContent, commit: str, version: str) -> SkillContent:
    declared = content.revision.version
    label = version if version else (f"{declared}@{commit}" if declared else commit)
    return content.model_copy(update={"revision": content.revision.model_copy(update={"version": label})})


def _owned_elsewhere(store: CatalogStore, content: SkillContent, source: str) -> str | None:
    """Why ``content`` cannot be stored for ``source``, or ``None`` when it can."""
    clash = store.skill_by_slug(content.grant, content.slug)
    owner = store.skill(content.skill_id)
    for other in (clash, owner):
        if other is None or other.source == source:
            continue
        if other.status == "archived" and not other.source.startswith("upstream:") and other.skill_id == content.skill_id:
            continue  # a withdrawn skill of another local source: this source may take its slug over
        return f"slug {content.slug!r} in grant {content.grant} belongs to source {other.source!r}"
    return None


def _apply_one(store: CatalogStore, read: SourceRead, content: SkillContent, report: SourceReport, now: str) -> None:
    existing = store.skill(content.skill_id)
    if read.commit is not None:
        if existing is not None and existing.source == read.source.name:
            current = store.revision(existing.current_revision_id)
            same = _versioned(content, read.commit, current.version if current else "")
            if store.revision_id_of(same) == existing.current_revision_id:
                content = same  # unchanged content keeps the revision (and the commit) it was first read at
            else:
                content = _versioned(content, read.commit, "")
        else:
            content = _versioned(content, read.commit, "")
    outcome = store.upsert(content, now)
    if outcome == "unchanged":
        report.unchanged += 1
    elif existing is None or existing.status != "active" or existing.source != read.source.name:
        report.added.append(content.skill_id)
    else:
        report.changed.append(content.skill_id)


def apply_source(store: CatalogStore, index: SearchIndex | None, read: SourceRead) -> SourceReport:
    """Apply ``read`` to the catalog in one transaction, then refresh the index for what changed."""
    source = read.source
    report = SourceReport(source.name, source.kind, source.grant, commit=read.commit, warnings=list(read.warnings),
                          skipped=read.skipped)
    now = utc_now()
    state, cursor = _last(store, source)
    counts = {k: int(state.counts.get(k, 0)) for k in COUNTERS}
    counts["runs"] += 1
    with store.transaction():
        if read.error is not None or read.skipped:
            report.error = read.error
            counts["errors"] += read.error is not None
            last_error = f"{now} {read.error}" if read.error else state.last_error
            success = state.last_success if read.error else now
            kept = state.cursor
            if read.skipped and source.git is not None and "tracks" not in cursor:  # a cursor of an older version
                kept = json.dumps({**cursor, "tracks": source.tracks}, sort_keys=True)
            store.sync.save(SyncState(source.name, kept, success, last_error, counts))
        else:
            kept_folders: dict[str, str] = {}
            previous: dict[str, str] = cursor.get("folders", {}) if isinstance(cursor.get("folders"), dict) else {}
            elsewhere = {sid: f for f, sid in previous.items() if read.scope is not None and f not in read.scope}
            for content in read.parsed.skills:
                reason = _owned_elsewhere(store, content, source.name)
                if content.skill_id in elsewhere and read.source.path is not None \
                        and os.path.lexists(read.source.path / elsewhere[content.skill_id] / "SKILL.md"):
                    reason = f"duplicate slug {content.slug!r} (first defined in {elsewhere[content.skill_id]}/)"
                if reason is not None:
                    report.refused.append(Refusal(read.parsed.files[content.skill_id], reason))
                    continue
                try:
                    with store.savepoint():
                        _apply_one(store, read, content, report, now)
                except ValueError as exc:
                    report.refused.append(Refusal(read.parsed.files[content.skill_id], str(exc)))
                    continue
                kept_folders[read.folders[content.skill_id]] = content.skill_id
            report.refused.extend(Refusal(p.file, p.reason) for p in read.parsed.problems)
            # A broken folder keeps the skill it held at the last good run (by that run's record, or by
            # the id its folder name gives when the folder name is a valid slug).
            for folder in read.broken:
                held = previous.get(folder)
                if held is None and SLUG_PATTERN.match(Path(folder).name or ""):
                    held = stable_id("sk", source.grant, Path(folder).name)
                if held is not None:
                    kept_folders[folder] = held
            keep = set(kept_folders.values())
            if read.scope is None:
                candidates = store.skill_ids_of_source(source.name)
            else:  # a scoped read can only withdraw what the folders it read held
                candidates = [sid for folder, sid in previous.items() if folder in read.scope]
                kept_folders = {f: sid for f, sid in previous.items() if f not in read.scope} | kept_folders
            for skill_id in candidates:
                owner = store.skill(skill_id)
                if skill_id not in keep and owner is not None and owner.source == source.name \
                        and store.archive(skill_id, now):
                    report.removed.append(skill_id)
            counts["added"] += len(report.added)
            counts["changed"] += len(report.changed)
            counts["removed"] += len(report.removed)
            counts["refused"] += len(report.refused)
            more = len(report.refused) - 3
            last_error = (f"{now} refused {len(report.refused)}: " + "; ".join(
                f"{r.file}: {r.reason}" for r in report.refused[:3]) + (f"; and {more} more" if more > 0 else "")
            ) if report.refused else None
            written: dict[str, Any] = {"commit": read.commit, "folders": kept_folders}
            if source.git is not None:
                written["tracks"] = source.tracks
            new_cursor = json.dumps(written, sort_keys=True)
            store.sync.save(SyncState(source.name, new_cursor, now, last_error, counts))
    for warning in report.warnings:  # history rewritten, another ref read, a source holding no skill
        log.warning("source %s: %s", source.name, warning)
    if report.error:
        log.warning("source %s: %s", source.name, report.error)
    for r in report.refused:
        log.warning("source %s: refused %s: %s", source.name, r.file, r.reason)
    if index is not None and report.changed_ids:
        report.index = index.refresh(store, report.changed_ids)
    report.finished_at = now
    return report


def retire_source(store: CatalogStore, index: SearchIndex | None, name: str) -> list[str]:
    """A source taken out of the configuration: archive every skill it owns (revisions stay readable by
    pin) and forget what it last applied."""
    now = utc_now()
    with store.transaction():
        gone = [s for s in store.skill_ids_of_source(name) if store.archive(s, now)]
        state = store.sync.state(name)
        if state is not None:
            store.sync.save(SyncState(name, None, state.last_success, f"{now} removed from the configuration",
                                            dict(state.counts)))
    if index is not None and gone:
        index.refresh(store, gone)
    return gone
