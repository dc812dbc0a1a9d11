"""The ``skill://`` URIs of the MCP Skills extension: ``skill://<grant type>/<grant id>/<slug>/<path>``.

The two prefix segments are the skill's grant (``team:data`` -> ``team/data``), so two grants' skills with the
same slug never share a URI; the last skill-path segment is the slug, which is the served SKILL.md's ``name``.
Segments are percent-encoded (RFC 3986 ``pchar``; a bare ``.`` or ``..`` as ``%2E``). Only the canonical
spelling parses: an equivalent but differently encoded URI is unknown, so no file has two names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

from skillsearch.core.domain import SLUG_PATTERN

__all__ = ["SCHEME", "SKILL_MD", "SkillAddress", "parse_skill_uri", "skill_uri"]

SKILL_MD = "SKILL.md"
SCHEME = "skill://"
_GRANT_TYPES = ("sub", "team", "user")
_PCHAR_SAFE = "!$&'()*+,;=:@~"
_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


@dataclass(frozen=True)
class SkillAddress:
    grant: str
    slug: str
    path: str  # "" for the skill's root directory

    @property
    def root(self) -> str:
        return skill_uri(self.grant, self.slug, "")


def _segment(text: str) -> str:
    quoted = quote(text, safe=_PCHAR_SAFE)
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


def skill_uri(grant: str, slug: str, path: str = SKILL_MD) -> str:
    """The URI of one file (or, with ``path=""``, the root directory) of the skill ``slug`` in ``grant``."""
    kind, _, ident = grant.partition(":")
    base = f"{SCHEME}{kind}/{_segment(ident)}/{slug}"
    return f"{base}/{'/'.join(_segment(p) for p in path.split('/'))}" if path else base


def parse_skill_uri(uri: str) -> SkillAddress | None:
    """The address of a canonical skill URI, or ``None`` for anything else (no partial guesses)."""
    if not isinstance(uri, str) or not uri.startswith(SCHEME) or len(uri) > 2048:
        return None
    parts = uri[len(SCHEME):].split("/")
    if len(parts) < 3 or parts[0] not in _GRANT_TYPES:
        return None
    ident, slug = unquote(parts[1]), parts[2]
    if not _ID.match(ident) or not SLUG_PATTERN.match(slug):
        return None
    path = "/".join(unquote(p) for p in parts[3:])
    if any(p in ("", ".", "..") for p in path.split("/")) and path:
        return None
    address = SkillAddress(f"{parts[0]}:{ident}", slug, path)
    return address if skill_uri(address.grant, slug, path) == uri else None


