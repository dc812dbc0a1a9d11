"""Bearer-token principals: who is calling, which grants they see and which scopes they hold.

The principals file is ``<data-dir>/principals.toml``::

    [principals.analytics-bot]
    token_sha256 = "9f86d0..."            # sha256 hex of the bearer token; the token itself is never stored
    grants = ["team:data-science", "sub:starter-pack"]   # or ["*"] for every grant (an operator)
    scopes = ["skills:read", "memory:read"]

``skillsearch token add NAME --grant G --scope S`` writes such a table and prints the token once. The HTTP
app (and MCP over HTTP) authenticates a request by hashing the presented token and comparing it with every
stored hash in constant time; stdio MCP runs as a principal named on the command line and reads the same
file. Tokens are never logged.

The **demo principal** (token :data:`DEMO_TOKEN`, printed by ``make serve``) exists only while the server
runs on the bundled sample catalog: it sees ``sub:starter-pack`` and ``team:data-science`` but not
``sub:ops-pro``, so the page shows visibility at work.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import threading
import time
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillsearch.core.domain import SCOPE_MEMORY_READ, Principal
from skillsearch.core.errors import AccessDeniedError, UnauthenticatedError, ValidationError, problem
from skillsearch.core.grants import ALL_GRANTS, grant_problem

if TYPE_CHECKING:
    from skillsearch.service import Catalog

__all__ = [
    "DEMO_GRANTS",
    "DEMO_PRINCIPAL",
    "DEMO_TOKEN",
    "KNOWN_SCOPES",
    "PRINCIPALS_FILE",
    "SCOPE_SKILLS_READ",
    "PrincipalEntry",
    "PrincipalRegistry",
    "add_principal",
    "bearer_token",
    "generate_token",
    "hash_token",
    "read_entries",
    "remove_principal",
    "require_scope",
]

PRINCIPALS_FILE = "principals.toml"
log = logging.getLogger("skillsearch")
SCOPE_SKILLS_READ = "skills:read"
KNOWN_SCOPES = (SCOPE_SKILLS_READ, SCOPE_MEMORY_READ)

DEMO_PRINCIPAL = "demo"
DEMO_TOKEN = "demo-token-not-secret"
DEMO_GRANTS = frozenset({"sub:starter-pack", "team:data-science"})

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
MAX_TOKEN_CHARS = 512

# A principals file changed this recently that is empty or unreadable is taken for one still being written in
# place (``cp``, ``scp``, a config tool that truncates, then writes): its previous principals keep answering
# until it is whole or this old. An operator copying the fleet's file onto a live replica saw valid tokens
# answered 401 in that window (84 of 851 requests while the file was copied 300 times).
WRITE_GRACE_S = 2.0


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def generate_token() -> str:
    """256 random bits, URL-safe, with a prefix that makes a leaked token easy to recognise and grep for."""
    return "sks_" + secrets.token_urlsafe(32)


def bearer_token(authorization: str | None) -> str:
    """The token of an ``Authorization: Bearer <token>`` header, or ``UNAUTHENTICATED``."""
    if not authorization:
        raise UnauthenticatedError("missing bearer token: send 'Authorization: Bearer <token>'")
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise UnauthenticatedError("malformed Authorization header: use 'Bearer <token>'")
    if len(token) > MAX_TOKEN_CHARS:
        raise UnauthenticatedError("invalid bearer token")
    return token


def require_scope(principal: Principal, scope: str) -> None:
    if not principal.has_scope(scope):
        raise AccessDeniedError(
            f"principal {principal.name!r} lacks scope {scope!r}", {"required_scope": scope}
        )


@dataclass(frozen=True)
class PrincipalEntry:
    """One table of the principals file."""

    principal: Principal
    token_sha256: str | None


def _validate(name: str, grants: Iterable[str], scopes: Iterable[str]) -> tuple[list[str], list[str]]:
    problems: list[str] = []
    if not NAME_PATTERN.match(name or ""):
        problems.append(f"invalid principal name {name!r}: letters, digits, '.', '_', '-' (max 64)")
    grants = list(dict.fromkeys(grants))
    scopes = list(dict.fromkeys(scopes))
    problems += [text for g in grants if (text := grant_problem(g, allow_all=True))]
    problems += [f"invalid scope {s!r}: known scopes are {', '.join(KNOWN_SCOPES)}"
                 for s in scopes if s not in KNOWN_SCOPES]
    if problems:
        raise ValidationError("; ".join(problems), {"problems": problems})
    return grants, scopes


def _entry(name: str, table: Mapping[str, Any], path: Path) -> PrincipalEntry:
    grants = table.get("grants", [])
    scopes = table.get("scopes", [])
    token_sha = table.get("token_sha256")
    if not isinstance(grants, list) or not isinstance(scopes, list) or not all(
        isinstance(x, str) for x in [*grants, *scopes]
    ):
        raise ValidationError(f"{path}: principals.{name}: grants and scopes must be lists of strings")
    if token_sha is not None and (not isinstance(token_sha, str) or not _SHA256_HEX.match(token_sha)):
        raise ValidationError(f"{path}: principals.{name}: token_sha256 must be 64 lowercase hex digits")
    grants, scopes = _validate(name, grants, scopes)
    principal = Principal(
        name=name,
        grants=None if ALL_GRANTS in grants else frozenset(grants),
        scopes=frozenset(scopes),
    )
    return PrincipalEntry(principal, token_sha)


def read_entries(path: Path) -> dict[str, PrincipalEntry]:
    """Every principal of a principals file, validated; an absent file has none."""
    return _read(path)[1]


def _read(path: Path) -> tuple[str, dict[str, PrincipalEntry]]:
    """The file's text as read (empty when absent) and its principals."""
    try:
        text = path.read_text(encoding="utf-8")
        raw = tomllib.loads(text)
    except FileNotFoundError:
        return "", {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValidationError(f"principals file {path} is unreadable: {exc}") from None
    tables = raw.get("principals", {})
    if not isinstance(tables, dict):
        raise ValidationError(f"{path}: [principals] must be a table of tables")
    return text, {name: _entry(name, t, path) for name, t in tables.items() if isinstance(t, dict)}


def _toml_string(value: str) -> str:
    # Names, grants, scopes and hashes are validated to ASCII patterns, where a JSON string is a TOML one.
    return json.dumps(value)


def _write_file(path: Path, entries: Mapping[str, PrincipalEntry]) -> None:
    lines = ["# skillsearch principals: bearer tokens are stored only as sha256 hashes.",
             "# Manage with `skillsearch token add|list|remove`.", ""]
    for name in sorted(entries):
        e = entries[name]
        grants = [ALL_GRANTS] if e.principal.grants is None else sorted(e.principal.grants)
        lines.append(f"[principals.{_toml_string(name)}]")
        if e.token_sha256:
            lines.append(f"token_sha256 = {_toml_string(e.token_sha256)}")
        lines.append(f"grants = [{', '.join(_toml_string(g) for g in grants)}]")
        lines.append(f"scopes = [{', '.join(_toml_string(s) for s in sorted(e.principal.scopes))}]")
        lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write("\n".join(lines))
        os.replace(tmp, path)
    except OSError as exc:  # a full disk: named, as every refused write is (a buffered write names no file)
        tmp.unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror, str(path)) from exc


def add_principal(path: Path, name: str, grants: Iterable[str], scopes: Iterable[str], *,
                  replace: bool = True) -> str:
    """Create (or, with ``replace``, re-key) principal ``name`` and return its new token; only the hash is
    written. Without ``replace`` an existing name is refused: its token and grants stay as they are."""
    grant_list, scope_list = _validate(name, grants, scopes)
    if not grant_list:
        raise ValidationError("give at least one --grant (sub:<id>, team:<id>, user:<id>, or * for all)")
    entries = read_entries(path)
    if name in entries and not replace:
        raise ValidationError(
            f"principal {name!r} already exists in {path}: pass --replace to give it a new token and these"
            " grants and scopes (its old token stops working)",
            {"problems": [problem("name", f"principal {name!r} already exists")]})
    token = generate_token()
    entries[name] = PrincipalEntry(
        Principal(name=name, grants=None if ALL_GRANTS in grant_list else frozenset(grant_list),
                  scopes=frozenset(scope_list)),
        hash_token(token),
    )
    _write_file(path, entries)
    return token


def remove_principal(path: Path, name: str) -> bool:
    entries = read_entries(path)
    if entries.pop(name, None) is None:
        return False
    _write_file(path, entries)
    return True


class PrincipalRegistry:
    """The principals of one file (re-read when it changes on disk) plus, optionally, the demo principal."""

    def __init__(self, path: Path | None, *, demo: bool | Callable[[], bool] = False,
                 clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self._demo = demo
        self._clock = clock
        self._demo_now: bool | None = None
        self._lock = threading.Lock()
        self._stamp: tuple[int, ...] | None = None
        self._loaded = False
        self._broken_stamp: tuple[int, ...] | None = None
        self._entries: dict[str, PrincipalEntry] = {}
        self._reload(starting=True)

    @classmethod
    def for_catalog(cls, catalog: Catalog, path: Path | None = None) -> PrincipalRegistry:
        """The registry a server on ``catalog`` uses: its data dir's file, and the demo principal only
        when the catalog is exactly the bundled sample."""
        seen: dict[str, Any] = {"generation": None, "sample": False}

        def still_sample() -> bool:
            # Re-checked whenever the catalog changes: a sync or import of anything else ends the demo.
            generation = catalog.generation()
            if generation != seen["generation"]:
                seen["sample"], seen["generation"] = catalog.runs_on_sample(), generation
            return bool(seen["sample"])

        return cls(path or catalog.data_dir / PRINCIPALS_FILE, demo=still_sample)

    @property
    def demo(self) -> bool:
        """Whether the demo principal exists right now."""
        return self._demo() if callable(self._demo) else self._demo

    def _reload(self, starting: bool = False) -> None:
        demo = self.demo
        stamp: tuple[int, ...] | None = None
        st: os.stat_result | None = None
        if self.path is not None:
            try:
                st = self.path.stat()
                # Not mtime and size alone: a re-keyed principal writes a file of the same size, and two writes
                # within one tick of a coarse clock (or a deploy tool that keeps mtimes) share the mtime. Every
                # write replaces the file by a rename (a new inode), and ctime cannot be set back.
                stamp = (st.st_ino, st.st_dev, st.st_mtime_ns, st.st_ctime_ns, st.st_size)
            except FileNotFoundError:
                stamp = None
        if self._loaded and stamp == self._stamp and demo == self._demo_now:
            return
        # Not at start (the operator sees the file as it is) and not once it is this old, whatever it holds.
        being_written = (not starting and self._loaded and st is not None
                         and abs(self._clock() - st.st_mtime) < WRITE_GRACE_S)
        try:
            text, entries = _read(self.path) if self.path is not None else ("", {})
        except ValidationError as exc:
            if starting:  # the operator starting a server (or a CLI command) sees the whole reason
                raise
            if being_written:
                return  # the stamp is not kept: the next request reads it again
            # Fail closed, and tell the operator (path and TOML error in the log), never the bearer client.
            if stamp != self._broken_stamp:
                log.error("principals file unusable, every bearer request is refused until it is fixed: %s",
                          exc.message)
                self._broken_stamp = stamp
            self._entries, self._loaded = {}, False
            raise UnauthenticatedError(
                "authentication is unavailable: the server's principals file is broken (the operator's log"
                " says why)") from None
        if being_written and not text:  # what was read, not the size stat saw: a copy may truncate in between
            return  # truncated, not yet written (a file emptied on purpose revokes WRITE_GRACE_S later)
        self._broken_stamp = None
        if demo:
            entries.setdefault(DEMO_PRINCIPAL, PrincipalEntry(
                Principal(DEMO_PRINCIPAL, DEMO_GRANTS, frozenset({SCOPE_SKILLS_READ, SCOPE_MEMORY_READ})),
                hash_token(DEMO_TOKEN),
            ))
        self._entries, self._stamp, self._demo_now, self._loaded = entries, stamp, demo, True

    def names(self) -> list[str]:
        with self._lock:
            self._reload()
            return sorted(self._entries)

    def principal(self, name: str) -> Principal:
        """By name, for stdio surfaces that run as one principal."""
        with self._lock:
            self._reload()
            entry = self._entries.get(name)
        if entry is None:
            raise UnauthenticatedError(f"no principal named {name!r} in {self.path}", {"principal": name})
        return entry.principal

    def authenticate(self, token: str) -> Principal:
        """The principal holding ``token``. Every stored hash is compared, in constant time, so neither
        timing nor order tells a caller how close a guess was."""
        presented = hash_token(token).encode("ascii")
        with self._lock:
            self._reload()
            entries = list(self._entries.values())
        found: Principal | None = None
        for entry in entries:
            if entry.token_sha256 is not None and hmac.compare_digest(presented, entry.token_sha256.encode("ascii")):
                found = entry.principal
        if found is None:
            if hmac.compare_digest(presented, hash_token(DEMO_TOKEN).encode("ascii")):
                # The demo token is public: saying why it stopped working tells a caller nothing secret.
                raise UnauthenticatedError(
                    f"the demo token ({DEMO_TOKEN}) works only while the server runs on the bundled sample"
                    " catalog alone, and this catalog now holds other skills (an import, a sync or a source):"
                    " create a token with `skillsearch token add NAME --grant G`")
            raise UnauthenticatedError("invalid bearer token")
        return found

    def authenticate_header(self, authorization: str | None) -> Principal:
        return self.authenticate(bearer_token(authorization))
