"""The ``skill://`` URIs of the MCP Skills extension: ``skill://<grant type>/<grant id>/<slug>/<path>``.

The two prefix segments are the skill's grant (``team:data`` -> ``team/data``), so two grants' skills with the
same slug never share a URI; the last skill-path segment is the skill's name: its slug, with runs of hyphens
made one (``a--b`` -> ``a-b``: slugs allow them, the Agent Skills naming rules do not), which is also the served
SKILL.md's ``name``. Where two slugs of one grant give the same name, the one equal to it (else the smallest)
is served under it; the other is not served by the extension.
Segments are percent-encoded (RFC 3986 ``pchar``; a bare ``.`` or ``..`` as ``%2E``). Only the canonical
spelling parses: an equivalent but differently encoded URI is unknown, so no file has two names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

__all__ = ["NAME_PATTERN", "SCHEME", "SKILL_MD", "SkillAddress", "parse_skill_uri", "skill_name", "skill_uri"]

SKILL_MD = "SKILL.md"
SCHEME = "skill://"
_GRANT_TYPES = ("sub", "team", "user")
_PCHAR_SAFE = "!$&'()*+,;=:@~"
_ID = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
NAME_PATTERN = re.compile(r"^(?!.*--)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
"""The Agent Skills naming rules: 1-64 of a-z, 0-9 and '-', no leading, trailing or consecutive hyphens."""


def skill_name(slug: str) -> str:
    """The skill's Agent Skills name: its slug, with runs of hyphens (which slugs allow) made one."""
    return re.sub(r"-{2,}", "-", slug)


@dataclass(frozen=True)
class SkillAddress:
    grant: str
    name: str  # the skill name: its slug, or the slug with hyphen runs made one (see ``skill_name``)
    path: str  # "" for the skill's root directory

    @property
    def root(self) -> str:
        return skill_uri(self.grant, self.name, "")


def _segment(text: str) -> str:
    quoted = quote(text, safe=_PCHAR_SAFE)
    return quoted.replace(".", "%2E") if quoted in (".", "..") else quoted


def skill_uri(grant: str, slug: str, path: str = SKILL_MD) -> str:
    """The URI of one file (or, with ``path=""``, the root directory) of the skill ``slug`` in ``grant``."""
    kind, _, ident = grant.partition(":")
    base = f"{SCHEME}{kind}/{_segment(ident)}/{skill_name(slug)}"
    return f"{base}/{'/'.join(_segment(p) for p in path.split('/'))}" if path else base


def parse_skill_uri(uri: str) -> SkillAddress | None:
    """The address of a canonical skill URI, or ``None`` for anything else (no partial guesses)."""
    if not isinstance(uri, str) or not uri.startswith(SCHEME) or len(uri) > 2048:
        return None
    parts = uri[len(SCHEME):].split("/")
    if len(parts) < 3 or parts[0] not in _GRANT_TYPES:
        return None
    ident, name = unquote(parts[1]), parts[2]
    if not _ID.match(ident) or not NAME_PATTERN.match(name):
        return None
    path = "/".join(unquote(p) for p in parts[3:])
    if any(p in ("", ".", "..") for p in path.split("/")) and path:
        return None
    address = SkillAddress(f"{parts[0]}:{ident}", name, path)
    return address if skill_uri(address.grant, name, path) == uri else None


