"""A visible skill as files with digests: the use case behind the MCP Skills extension (SEP-2640).

Every skill the caller may see now (the one visibility rule) is a directory of files addressed by
``skill://<grant type>/<grant id>/<slug>/<path>``, for instance ``skill://team/data/ab-test-analysis/SKILL.md``.
The two prefix segments are the skill's grant (``team:data``), so two grants' skills with the same slug never
share a URI, and the last skill-path segment is the slug, which is the served SKILL.md's ``name``. The files:

- ``SKILL.md``: :func:`~skillsearch.catalog.skill_md.served_skill_md` of the current revision;
- ``assets/template.json`` for a flow template (its steps and parameters), unless the revision has a file of that name;
- every stored resource of the current revision, with its stored sha256 and size.

Integrity: a stored resource whose bytes no longer hash to its stored digest, or a revision whose stored body no
longer gives its canonical hash (SKILL.md and assets/template.json are derived from it), is refused with
:class:`ContentIntegrityError`, never served with a digest that does not describe it. A skill the caller may not
see, and every URI under it, is :class:`UnknownUriError` with the same message as a URI that never existed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Iterable
from dataclasses import dataclass

from skillsearch.catalog.skill_md import served_skill_md, template_json
from skillsearch.catalog.store import CatalogStore
from skillsearch.core.domain import Principal, Resource, Revision, Skill
from skillsearch.core.errors import SkillSearchError, echo
from skillsearch.core.hashing import canonical_hash, sha256_hex
from skillsearch.core.skill_uri import SKILL_MD, SkillAddress, parse_skill_uri, skill_name, skill_uri
from skillsearch.core.visibility import is_visible, visible_grants

__all__ = [
    "SKILL_MD",
    "SKILL_MD_KEPT",
    "ContentIntegrityError",
    "CursorError",
    "DirectoryEntry",
    "SkillAddress",
    "SkillEntry",
    "SkillFile",
    "SkillFiles",
    "UnknownUriError",
    "directory_children",
    "entries_page",
    "legacy_skill_md_note",
    "parse_skill_uri",
    "read_file",
    "skill_entry",
    "skill_uri",
]

TEMPLATE_JSON = "assets/template.json"
MAX_PAGE = 100


class UnknownUriError(SkillSearchError):
    """No file or skill is served at this URI to this caller (it does not exist, or is not visible)."""

    code = "SKILL_NOT_FOUND"


class CursorError(SkillSearchError):
    """A cursor this server did not hand to this caller (forged, altered, or another caller's)."""

    code = "VALIDATION_ERROR"


class ContentIntegrityError(SkillSearchError):
    """Stored bytes no longer match their stored digest: refused rather than served with a wrong digest."""

    code = "INTERNAL"


@dataclass(frozen=True)
class SkillFile:
    path: str
    media_type: str
    size: int
    sha256: str

    @property
    def digest(self) -> str:
        return f"sha256:{self.sha256}"


@dataclass(frozen=True)
class SkillEntry:
    """One skill as the extension lists it: its SKILL.md URI, front matter and complete manifest."""

    skill: Skill
    uri: str
    frontmatter: dict[str, object]
    files: tuple[SkillFile, ...]

    def file_uri(self, path: str) -> str:
        return skill_uri(self.skill.grant, self.skill.slug, path)


@dataclass(frozen=True)
class DirectoryEntry:
    uri: str
    name: str
    media_type: str


# -- finding the skill -------------------------------------------------------------------------------------


def _unknown(template: str, uri: str) -> UnknownUriError:
    """``template`` with ``{uri}``: the URI shown back cut to a bounded length (a 100 kB URI, a short error)."""
    shown = echo(uri)
    return UnknownUriError(template.format(uri=shown), {"uri": shown})


def _not_served(uri: str) -> UnknownUriError:
    return _unknown("No skill is served at {uri}", uri)


def _resolve(store: CatalogStore, grant: str, name: str) -> Skill | None:
    """The skill of ``grant`` served under the skill name ``name``: the slug equal to it, else the smallest slug
    whose hyphen runs collapse to it (a name has none, so ``-`` -> ``-%`` finds exactly those candidates)."""
    exact = store.skill_by_slug(grant, name)
    if exact is not None:
        return exact
    slugs = [slug for slug in store.slugs_spelt_like(grant, name.replace("-", "-%")) if skill_name(slug) == name]
    return store.skill_by_slug(grant, slugs[0]) if slugs else None


def _served(store: CatalogStore, skill: Skill) -> bool:
    """Whether the extension serves this skill under its name (not when another slug of its grant has it)."""
    if skill_name(skill.slug) == skill.slug:
        return True
    winner = _resolve(store, skill.grant, skill_name(skill.slug))
    return winner is not None and winner.skill_id == skill.skill_id


def _visible(store: CatalogStore, principal: Principal, address: SkillAddress, uri: str) -> Skill:
    skill = _resolve(store, address.grant, address.name)
    if skill is None or not is_visible(skill.status, skill.grant, principal, store.revoked_subscriptions()):
        raise _not_served(uri)
    return skill


def _current(store: CatalogStore, skill: Skill) -> tuple[Revision, list[Resource]]:
    revision = store.revision(skill.current_revision_id)
    if revision is None:
        raise ContentIntegrityError(f"skill {skill.slug} has no stored current revision", {"slug": skill.slug})
    return revision, store.resources(revision.revision_id)


def _check_revision(skill: Skill, revision: Revision, resources: Iterable[Resource]) -> None:
    if canonical_hash(revision, resources) != revision.canonical_hash:
        raise ContentIntegrityError(
            f"the stored revision of {skill.slug} no longer matches its canonical hash (changed on disk); its files "
            "are not served: import or sync it again",
            {"slug": skill.slug, "revision_id": revision.revision_id},
        )


def _derived(skill: Skill, revision: Revision, stored_paths: set[str]) -> dict[str, tuple[str, bytes]]:
    """The files made from the revision itself: path -> (media type, bytes)."""
    files = {SKILL_MD: ("text/markdown", served_skill_md(skill_name(skill.slug), revision).text.encode("utf-8"))}
    if revision.kind == "flow_template" and TEMPLATE_JSON not in stored_paths:
        files[TEMPLATE_JSON] = ("application/json", template_json(revision))
    return files


def _entry(skill: Skill, revision: Revision, resources: list[Resource]) -> SkillEntry:
    stored = {r.path: r for r in resources if r.path != SKILL_MD}
    served = served_skill_md(skill_name(skill.slug), revision)
    files = [SkillFile(path, media, len(data), sha256_hex(data))
             for path, (media, data) in _derived(skill, revision, set(stored)).items()]
    files += [SkillFile(r.path, r.media_type, r.size, r.sha256) for r in stored.values()]
    return SkillEntry(skill, skill_uri(skill.grant, skill.slug), dict(served.frontmatter), tuple(files))


# -- the three reads ---------------------------------------------------------------------------------------


def skill_entry(store: CatalogStore, principal: Principal, uri: str) -> SkillEntry:
    """``skills/get``: the entry of the skill whose SKILL.md is at ``uri``."""
    address = parse_skill_uri(uri)
    if address is None or address.path != SKILL_MD:
        raise _not_served(uri)
    skill = _visible(store, principal, address, uri)
    revision, resources = _current(store, skill)
    return _entry(skill, revision, resources)


def read_file(store: CatalogStore, principal: Principal, uri: str) -> tuple[SkillFile, bytes]:
    """``resources/read``: one file's exact bytes, checked against its digest first."""
    address = parse_skill_uri(uri)
    if address is None or not address.path:
        raise _unknown("No resource is served at {uri}", uri)
    skill = _visible(store, principal, address, uri)
    revision, resources = _current(store, skill)
    stored = {r.path for r in resources if r.path != SKILL_MD}
    derived = _derived(skill, revision, stored)
    if address.path in derived:
        _check_revision(skill, revision, resources)
        media, data = derived[address.path]
        return SkillFile(address.path, media, len(data), sha256_hex(data)), data
    resource = store.resource(revision.revision_id, address.path) if address.path in stored else None
    if resource is None or resource.path != address.path:
        raise _unknown("No resource is served at {uri}", uri)
    data = resource.content
    if len(data) != resource.size or hashlib.sha256(data).hexdigest() != resource.sha256:
        raise ContentIntegrityError(
            f"{uri}: the stored bytes no longer match their digest (changed on disk); refused rather than served "
            "with a wrong digest: import or sync the skill again",
            {"uri": uri},
        )
    return SkillFile(resource.path, resource.media_type, resource.size, resource.sha256), data


def directory_children(store: CatalogStore, principal: Principal, uri: str) -> list[DirectoryEntry]:
    """``resources/directory/read``: the direct children of a skill directory (files and sub-directories)."""
    address = parse_skill_uri(uri)
    if address is None:
        raise _unknown("{uri} is not a directory resource", uri)
    skill = _visible(store, principal, address, uri)
    revision, resources = _current(store, skill)
    entry = _entry(skill, revision, resources)
    prefix = f"{address.path}/" if address.path else ""
    children: dict[str, DirectoryEntry] = {}
    for f in entry.files:
        if not f.path.startswith(prefix):
            continue
        head, _, rest = f.path[len(prefix):].partition("/")
        child = prefix + head
        if rest:
            children.setdefault(child, DirectoryEntry(entry.file_uri(child), head, "inode/directory"))
        else:
            children[child] = DirectoryEntry(entry.file_uri(child), head, f.media_type)
    if not children:  # a file, or nothing at all
        raise _unknown("{uri} is not a directory resource", uri)
    return [children[k] for k in sorted(children)]


# Set in ``meta`` once no current revision lacks its SKILL.md: every revision written since has the key, so
# the count (which reads every current body: 8.3 s at 1M skills, cold) is never made again.
SKILL_MD_KEPT = "skill_md_kept"


def legacy_skill_md_note(store: CatalogStore) -> str | None:
    """What to run, when current revisions were written before revisions kept their SKILL.md (no
    ``skill_md`` key in the body): they are served a rendered SKILL.md until imported again."""
    count = store.current_revisions_without("skill_md", SKILL_MD_KEPT)
    if not count:
        return None
    return (f"{count} skills were stored before skillsearch kept each SKILL.md as authored: the MCP Skills "
            "extension serves them a SKILL.md rendered from their parsed fields. To serve the authored bytes, "
            "import their folders again (`skillsearch import PATH --source SOURCE --grant GRANT`); synced skills "
            "get theirs with their next upstream change.")


# -- listing, with cursors bound to the caller ---------------------------------------------------------


def _caller(principal: Principal) -> bytes:
    grants = "*" if principal.grants is None else ",".join(sorted(principal.grants))
    return f"{principal.name}\x1f{grants}".encode()


def _sign(key: bytes, principal: Principal, payload: str) -> str:
    return hmac.new(key, _caller(principal) + b"\x1e" + payload.encode(), hashlib.sha256).hexdigest()[:32]


def encode_cursor(key: bytes, principal: Principal, skill: Skill) -> str:
    payload = base64.urlsafe_b64encode(json.dumps([skill.name, skill.skill_id]).encode()).decode().rstrip("=")
    return f"{payload}.{_sign(key, principal, payload)}"


def decode_cursor(key: bytes, principal: Principal, cursor: str) -> tuple[str, str]:
    """The position a cursor stands for; :class:`CursorError` unless this server gave it to this caller."""
    payload, _, mac = cursor.partition(".") if isinstance(cursor, str) else ("", "", "")
    if not payload or not hmac.compare_digest(mac.encode(), _sign(key, principal, payload).encode()):
        raise CursorError("invalid cursor: pass back the nextCursor this server gave you, unchanged", {})
    try:
        name, skill_id = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        raise CursorError("invalid cursor", {}) from None
    return str(name), str(skill_id)


def entries_page(
    store: CatalogStore, principal: Principal, key: bytes, cursor: str | None = None, limit: int = 50
) -> tuple[list[SkillEntry], str | None]:
    """``skills/list``: one page of every visible skill (name, then id order) and the cursor after it."""
    limit = max(1, min(limit, MAX_PAGE))
    after = decode_cursor(key, principal, cursor) if cursor else None
    grants = visible_grants(principal, store.grants(), store.revoked_subscriptions())
    page = store.list_page(sorted(grants), after=after, limit=limit + 1)
    entries = []
    for skill in page[:limit]:
        if not _served(store, skill):
            continue
        revision, resources = _current(store, skill)
        entries.append(_entry(skill, revision, resources))
    more = len(page) > limit
    return entries, encode_cursor(key, principal, page[limit - 1]) if more else None


@dataclass(frozen=True)
class SkillFiles:
    """The Skills extension's reads over one catalog store (``Catalog.skill_files()``), so the MCP surface
    never holds the store itself."""

    store: CatalogStore

    def page(self, principal: Principal, key: bytes, cursor: str | None, limit: int) -> tuple[list[SkillEntry], str | None]:
        return entries_page(self.store, principal, key, cursor, limit)

    def entry(self, principal: Principal, uri: str) -> SkillEntry:
        return skill_entry(self.store, principal, uri)

    def directory(self, principal: Principal, uri: str) -> list[DirectoryEntry]:
        return directory_children(self.store, principal, uri)

    def read(self, principal: Principal, uri: str) -> tuple[SkillFile, bytes]:
        return read_file(self.store, principal, uri)

