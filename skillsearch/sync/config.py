"""Sync settings: which upstream, with which credentials, and which subscriptions on which interval.

Read from a TOML file (``--config PATH``, else ``<data-dir>/sync.toml``)::

    [upstream]
    url = "http://127.0.0.1:8765"
    token = "demo-token"              # or token_env = "SKILLSEARCH_UPSTREAM_TOKEN"
    webhook_secret = "demo-secret"    # or webhook_secret_env = "..."; no secret means no webhook
    timeout_s = 10.0                  # per request (connect, read, write, pool)
    retries = 4                       # attempts after the first one, for 5xx/429/transport errors
    backoff_base_s = 0.5              # exponential backoff with full jitter, capped by backoff_max_s
    backoff_max_s = 30.0
    page_limit = 100
    webhook_tolerance_s = 300         # accepted clock skew of a webhook's timestamp
    deadline_s = 60.0                 # total wall time of one request, body included (not per read)
    max_response_bytes = 67108864     # one page's body after decoding (64 MiB; gzip bombs stop here)
    max_pages_per_run = 1000          # pages one run of a subscription may read; the next run resumes
    allow_insecure_http = false       # an http:// url must name a loopback host unless this is true

    [[subscriptions]]
    id = "starter-pack"
    interval_s = 60                   # poll interval; each wait is jittered by +-10%

Secrets may come from the environment so the file can be committed without them. The token is sent with
every request, so a plain ``http://`` url is refused unless its host is loopback (127.0.0.0/8, ::1,
``localhost``) or ``allow_insecure_http = true`` says the clear text is meant.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from skillsearch.core.errors import ValidationError

__all__ = [
    "SUBSCRIPTION_ID_PATTERN",
    "SubscriptionConfig",
    "SyncConfig",
    "UpstreamConfig",
    "default_config_path",
    "load_config",
    "load_subscriptions",
]

CONFIG_FILENAME = "sync.toml"
# A subscription's id, in this file and on the wire (``contract.py`` re-exports it). Defined here so that
# reading the configuration does not build the wire models.
SUBSCRIPTION_ID_PATTERN = r"^[A-Za-z0-9._-]{1,128}$"
_SUB_ID = re.compile(SUBSCRIPTION_ID_PATTERN)


@dataclass(frozen=True)
class UpstreamConfig:
    url: str
    token: str
    webhook_secret: str | None = None
    timeout_s: float = 10.0
    retries: int = 4
    backoff_base_s: float = 0.5
    backoff_max_s: float = 30.0
    page_limit: int = 100
    webhook_tolerance_s: int = 300
    deadline_s: float = 60.0
    max_response_bytes: int = 64 * 1024 * 1024
    max_pages_per_run: int = 1000
    allow_insecure_http: bool = False


@dataclass(frozen=True)
class SubscriptionConfig:
    id: str
    interval_s: float = 60.0

    @property
    def source(self) -> str:
        """The store's name for what this subscription owns (sync state is kept under it)."""
        return f"upstream:{self.id}"

    @property
    def grant(self) -> str:
        return f"sub:{self.id}"


@dataclass(frozen=True)
class SyncConfig:
    upstream: UpstreamConfig
    subscriptions: tuple[SubscriptionConfig, ...] = field(default_factory=tuple)

    def subscription(self, subscription_id: str) -> SubscriptionConfig | None:
        return next((s for s in self.subscriptions if s.id == subscription_id), None)


SECRETS = frozenset({"token", "webhook_secret"})  # what a server uses


def default_config_path(data_dir: Path) -> Path:
    return Path(data_dir) / CONFIG_FILENAME


def _secret(table: dict[str, Any], name: str, problems: list[str], needed: bool = True) -> str | None:
    """The secret, from the file or the variable it names; that variable unset is a problem only where the
    command uses the secret (``needed``)."""
    value = table.get(name)
    env = table.get(f"{name}_env")
    if value is None and env is not None:
        if not isinstance(env, str) or not env:
            problems.append(f"upstream.{name}_env must name an environment variable")
            return None
        value = os.environ.get(env)
        if value is None and needed:
            problems.append(f"upstream.{name}_env names {env}, which is not set")
    if value is not None and (not isinstance(value, str) or not value):
        problems.append(f"upstream.{name} must be a non-empty string")
        return None
    return value


def _number(table: dict[str, Any], name: str, default: float, low: float, high: float, problems: list[str]) -> Any:
    value = table.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        problems.append(f"upstream.{name} must be a number between {low} and {high}")
        return default
    return value


# What each table may hold: a misspelt setting (``intervl_s``) is refused, not silently left at its default.
_UPSTREAM_KEYS = frozenset({
    "url", "token", "token_env", "webhook_secret", "webhook_secret_env", "timeout_s", "retries", "backoff_base_s",
    "backoff_max_s", "page_limit", "webhook_tolerance_s", "deadline_s", "max_response_bytes", "max_pages_per_run",
    "allow_insecure_http",
})
_SUBSCRIPTION_KEYS = frozenset({"id", "interval_s"})
TOP_LEVEL_KEYS = frozenset({"upstream", "subscriptions", "sources"})


def unknown_keys(table: dict[str, Any], known: frozenset[str], at: str) -> list[str]:
    """A problem per key of ``table`` that ``known`` does not hold, with the closest known one when any."""
    out = []
    for key in sorted(set(table) - known):
        close = difflib.get_close_matches(key, sorted(known), n=1)
        out.append(f"{at}{key} is not a setting" + (f" (did you mean {close[0]}?)" if close else ""))
    return out


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a URL's host, IPv6 without brackets) never leaves this machine: ``localhost``,
    127.0.0.0/8 or ::1 (also as an IPv4-mapped address)."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def _url_problem(url: Any, allow_insecure_http: bool) -> str | None:
    """Why ``url`` cannot be the upstream's, or ``None``. The bearer token travels with every request, so
    plain http is for a platform on this machine only, unless allowed in so many words."""
    # A scheme is case-insensitive (RFC 3986 3.1): HTTP:// is plain http too, and HTTPS:// is https.
    if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
        return "upstream.url must be an http:// or https:// URL"
    try:
        host = urlsplit(url).hostname
    except ValueError as exc:
        return f"upstream.url is not a valid URL ({exc})"
    if not host:
        return "upstream.url must name a host"
    if url.lower().startswith("http://") and not allow_insecure_http and not is_loopback_host(host):
        return (f"upstream.url is plain http:// to {host}, which is not this machine: the subscription token"
                " would travel in clear text; use https://, or set allow_insecure_http = true in [upstream]"
                " to accept that")
    return None


def parse_config(data: dict[str, Any], where: str = "sync config", needs: frozenset[str] = SECRETS) -> SyncConfig:
    """Validate a parsed TOML document; every problem is listed in one ``VALIDATION_ERROR``. ``needs``: the
    secrets the command uses (a server both; ``sync`` the token; ``sync --status`` none), so a variable
    named by ``token_env`` or ``webhook_secret_env`` is required only where it is used."""
    problems: list[str] = unknown_keys(data, TOP_LEVEL_KEYS, "")
    up = data.get("upstream")
    if not isinstance(up, dict):
        raise ValidationError(f"{where}: missing [upstream] table", {"problems": ["missing [upstream] table"]})
    problems += unknown_keys(up, _UPSTREAM_KEYS, "upstream.")
    url = up.get("url")
    insecure = up.get("allow_insecure_http", False)
    if not isinstance(insecure, bool):
        problems.append("upstream.allow_insecure_http must be true or false")
        insecure = False
    if url_problem := _url_problem(url, insecure):
        problems.append(url_problem)
    token = _secret(up, "token", problems, "token" in needs)
    if token is None and "token_env" not in up and not any("upstream.token" in p for p in problems):
        problems.append("upstream.token (or token_env) is required")
    upstream = UpstreamConfig(
        url=str(url).rstrip("/"),
        token=token or "",
        webhook_secret=_secret(up, "webhook_secret", problems, "webhook_secret" in needs),
        timeout_s=float(_number(up, "timeout_s", 10.0, 0.01, 600, problems)),
        retries=int(_number(up, "retries", 4, 0, 20, problems)),
        backoff_base_s=float(_number(up, "backoff_base_s", 0.5, 0.0, 600, problems)),
        backoff_max_s=float(_number(up, "backoff_max_s", 30.0, 0.0, 3600, problems)),
        page_limit=int(_number(up, "page_limit", 100, 1, 1000, problems)),
        webhook_tolerance_s=int(_number(up, "webhook_tolerance_s", 300, 1, 86400, problems)),
        deadline_s=float(_number(up, "deadline_s", 60.0, 0.01, 3600, problems)),
        max_response_bytes=int(_number(up, "max_response_bytes", 64 * 1024 * 1024, 1024, 2**31, problems)),
        max_pages_per_run=int(_number(up, "max_pages_per_run", 1000, 1, 1_000_000, problems)),
        allow_insecure_http=insecure,
    )
    subs: list[SubscriptionConfig] = []
    raw_subs = data.get("subscriptions", [])
    if not isinstance(raw_subs, list):
        problems.append("subscriptions must be an array of tables ([[subscriptions]])")
        raw_subs = []
    for i, raw in enumerate(raw_subs):
        sid = raw.get("id") if isinstance(raw, dict) else None
        if isinstance(raw, dict):
            problems += unknown_keys(raw, _SUBSCRIPTION_KEYS, f"subscriptions[{i}].")
        if not isinstance(sid, str) or not _SUB_ID.match(sid):
            problems.append(f"subscriptions[{i}].id must be 1-128 characters of A-Z, a-z, 0-9, '.', '_', '-'")
            continue
        interval = raw.get("interval_s", 60.0)
        if isinstance(interval, bool) or not isinstance(interval, int | float) or not 0.05 <= interval <= 86400:
            problems.append(f"subscriptions[{i}].interval_s must be a number of seconds between 0.05 and 86400")
            continue
        if any(s.id == sid for s in subs):
            problems.append(f"subscription {sid!r} is listed twice")
            continue
        subs.append(SubscriptionConfig(sid, float(interval)))
    if problems:
        raise ValidationError(f"{where}: " + "; ".join(problems), {"problems": problems})
    return SyncConfig(upstream, tuple(subs))


def load_config(path: Path, option: str = "--config") -> SyncConfig:
    """The sync file at ``path``; a missing one is refused with what to write, and the command's ``option``
    that names another file."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValidationError(
            f"no sync configuration at {path}: write one with an [upstream] table (url, and token or token_env)"
            " and [[subscriptions]] tables (id), or add a folder or git source with `skillsearch sources add`;"
            f" or pass {option} (README: \"Sync from a subscription platform\")",
            {"path": str(path)},
        ) from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValidationError(f"{path} is not a readable TOML file: {exc}", {"path": str(path)}) from None
    return parse_config(data, str(path))


def load_subscriptions(path: Path, needs: frozenset[str] = SECRETS) -> SyncConfig | None:
    """Like :func:`load_config`, but ``None`` when the file is missing or configures no upstream and no
    subscription (a file may hold only local ``[[sources]]``, see ``skillsearch.sync.sources``)."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValidationError(f"{path} is not a readable TOML file: {exc}", {"path": str(path)}) from None
    if "upstream" not in data and not data.get("subscriptions"):
        return None
    return parse_config(data, str(path), needs)
