"""Local skill sources in configuration: folders and git repositories that the catalog mirrors.

They sit beside the subscriptions in the same TOML file (``<data-dir>/sync.toml``), one ``[[sources]]``
table each, and need no ``[upstream]`` table::

    [[sources]]
    name = "my-skills"                    # 1-64 of A-Z a-z 0-9 . _ - ; also the catalog's `source` of its skills
    grant = "user:me"
    path = "~/.claude/skills"             # a folder of skills, or one skill's folder
    interval_s = 300                      # a full re-read as a safety net beside the watcher

    [[sources]]
    name = "team"
    grant = "team:platform"
    git = "https://git.example.com/platform/skills.git"   # or file:///srv/skills.git
    ref = "main"                          # branch, tag or commit; "HEAD" = the remote's default branch
    subdir = "skills"                     # optional: where in the tree the skills are
    interval_s = 300                      # how often the repository is fetched

A source's name is also the ``source`` its skills carry in the catalog, so ``skillsearch import PATH
--source NAME`` is a one-shot run into the same ownership. ``skillsearch sources add|remove`` edit the
file through tomlkit (this module is its home), which keeps the rest of the file, comments included;
tomlkit is imported by those two edits only (reading uses ``tomllib``), not by every command that reads.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from skillsearch.core.errors import ValidationError
from skillsearch.core.grants import grant_problem
from skillsearch.sync.config import TOP_LEVEL_KEYS, unknown_keys

__all__ = [
    "SourceConfig",
    "add_source",
    "git_location",
    "load_sources",
    "name_problem",
    "parse_sources",
    "redact_url",
    "remove_source",
]

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
DEFAULT_INTERVAL_S = 300.0
_KEYS = {"name", "grant", "path", "git", "ref", "subdir", "interval_s"}
MIN_INTERVAL_S, MAX_INTERVAL_S = 1.0, 86400.0


def name_problem(name: Any) -> str | None:
    """Why ``name`` cannot be a source's name (``None``: it can); said of the file's ``sources[i].name`` and
    of the name given to ``sources add`` alike."""
    if isinstance(name, str) and NAME_PATTERN.match(name):
        return None
    return "must be 1-64 characters of A-Z, a-z, 0-9, '.', '_', '-', the first a letter or digit"


def git_location(tracks: dict[str, Any]) -> str:
    """A git source's ``url#ref`` (``url#ref:subdir``) from what it tracks (:attr:`SourceConfig.tracks`, or one
    kept in a cursor)."""
    where = f"{tracks.get('git')}#{tracks.get('ref')}"
    return f"{where}:{tracks['subdir']}" if tracks.get("subdir") else where


@dataclass(frozen=True)
class SourceConfig:
    name: str
    grant: str
    path: Path | None = None
    git: str | None = None
    ref: str = "HEAD"
    subdir: str | None = None
    interval_s: float = DEFAULT_INTERVAL_S

    @property
    def id(self) -> str:
        """The poller's key (the poller schedules sources and subscriptions alike)."""
        return self.name

    @property
    def kind(self) -> Literal["folder", "git"]:
        return "git" if self.git is not None else "folder"

    @property
    def shown_git(self) -> str | None:
        """The repository URL as statuses, reports and logs show it: any ``user:token@`` hidden."""
        return redact_url(self.git) if self.git is not None else None

    @property
    def location(self) -> str:
        if self.git is not None:
            return git_location(self.tracks)
        return str(self.path)

    @property
    def tracks(self) -> dict[str, str]:
        """What a git source reads (its URL as shown, without user information, its ref and subdir), kept in
        the cursor beside the commit applied: a run compares its commit with the last one only while these
        match (``sync/mirror.read_source``)."""
        return {"git": self.shown_git or "", "ref": self.ref, "subdir": self.subdir or ""}

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "grant": self.grant, "kind": self.kind}
        if self.git is not None:
            out.update(git=self.git, ref=self.ref)
            if self.subdir:
                out["subdir"] = self.subdir
        else:
            out["path"] = str(self.path)
        out["interval_s"] = self.interval_s
        return out


def redact_url(url: str) -> str:
    """``url`` with its user information (``https://user:token@host/...``, a token pasted with the URL) shown
    as ``***@``: the URL itself stays in the configuration only. Any ``/v1/sync/status`` caller reads a
    source's location and refusals, and the server's log holds them."""
    scheme, sep, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    if sep and "@" in authority:
        authority = "***@" + authority.rsplit("@", 1)[1]
    return f"{scheme}{sep}{authority}{slash}{path}"


def _check_subdir(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip("/"):
        return None
    pure = PurePosixPath(value.strip("/"))
    if pure.is_absolute() or any(part in ("..", ".", "") for part in pure.parts) or "\\" in value:
        return None
    return pure.as_posix()


def _one(raw: Any, i: int, base: Path, problems: list[str]) -> SourceConfig | None:
    at = f"sources[{i}]"
    if not isinstance(raw, dict):
        problems.append(f"{at} must be a table")
        return None
    before = len(problems)
    unknown = sorted(set(raw) - _KEYS)
    if unknown:
        problems.append(f"{at}: unknown key(s) {', '.join(unknown)}")
    name = raw.get("name")
    if wrong := name_problem(name):
        problems.append(f"{at}.name {name!r} {wrong}" if isinstance(name, str) else f"{at}.name {wrong}")
        name = "?"
    at = f"source {name!r}"
    grant = raw.get("grant")
    if wrong := grant_problem(grant):
        problems.append(f"{at}: {wrong}")
    path, git = raw.get("path"), raw.get("git")
    if (path is None) == (git is None):
        problems.append(f"{at}: give exactly one of path or git")
    interval = raw.get("interval_s", DEFAULT_INTERVAL_S)
    if isinstance(interval, bool) or not isinstance(interval, int | float) or not MIN_INTERVAL_S <= interval <= MAX_INTERVAL_S:
        problems.append(f"{at}: interval_s must be a number of seconds between {MIN_INTERVAL_S:g} and {MAX_INTERVAL_S:g}")
        interval = DEFAULT_INTERVAL_S
    folder: Path | None = None
    if path is not None:
        if not isinstance(path, str) or not path.strip():
            problems.append(f"{at}: path must be a non-empty string")
        else:
            folder = Path(path).expanduser()
            folder = folder if folder.is_absolute() else (base / folder)
        if any(k in raw for k in ("ref", "subdir")):
            problems.append(f"{at}: ref and subdir belong to a git source")
    ref, subdir = "HEAD", None
    if git is not None:
        if not isinstance(git, str) or not git.startswith(("https://", "file://")) or any(c.isspace() for c in git):
            local = isinstance(git, str) and git.startswith(("/", "~", "."))
            problems.append(f"{at}: git must be an https:// or file:// URL" + (
                f" (a repository on this machine: file://{Path(git).expanduser().resolve()})" if local else ""))
        ref = raw.get("ref", "HEAD")
        if not isinstance(ref, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,199}", ref) or ".." in ref:
            problems.append(f"{at}: ref must be a branch, tag or commit name")
        if "subdir" in raw:
            subdir = _check_subdir(raw["subdir"])
            if subdir is None:
                problems.append(f"{at}: subdir must be a relative path inside the repository")
    if len(problems) > before:
        return None
    return SourceConfig(str(name), str(grant), folder, git, str(ref), subdir, float(interval))


def parse_sources(data: dict[str, Any], where: str = "sync config", base: Path | None = None) -> tuple[SourceConfig, ...]:
    """The ``[[sources]]`` of a parsed TOML document; every problem is listed in one ``VALIDATION_ERROR``.
    A relative ``path`` is taken relative to ``base`` (the configuration file's folder)."""
    raw = data.get("sources", [])
    problems: list[str] = unknown_keys(data, TOP_LEVEL_KEYS, "")
    if not isinstance(raw, list):
        raise ValidationError(f"{where}: sources must be an array of tables ([[sources]])",
                              {"problems": ["sources must be an array of tables"]})
    out: list[SourceConfig] = []
    for i, item in enumerate(raw):
        cfg = _one(item, i, base or Path.cwd(), problems)
        if cfg is None:
            continue
        if any(s.name == cfg.name for s in out):
            problems.append(f"source {cfg.name!r} is listed twice")
            continue
        out.append(cfg)
    if problems:
        raise ValidationError(f"{where}: " + "; ".join(problems), {"problems": problems})
    return tuple(out)


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValidationError(f"{path} is not a readable TOML file: {exc}", {"path": str(path)}) from None


def load_sources(path: Path) -> tuple[SourceConfig, ...]:
    """The sources configured in ``path``; none when the file does not exist."""
    path = Path(path)
    return parse_sources(_read(path), str(path), path.parent)


def add_source(path: Path, source: SourceConfig) -> None:
    """Append ``source`` to the file (created when missing), keeping everything else in it as it was."""
    path = Path(path)
    fields = {k: v for k, v in source.to_dict().items() if k != "kind"}
    # The new source's own problems name it as not added (the file is not at fault; nothing is written).
    parse_sources({"sources": [fields]}, f"not added to {path}", path.parent)
    existing = load_sources(path)
    if any(s.name == source.name for s in existing):
        raise ValidationError(f"a source named {source.name!r} is already configured in {path}",
                              {"name": source.name})
    import tomlkit

    text = path.read_text(encoding="utf-8") if path.exists() else ""
    doc = tomlkit.parse(text)
    table = tomlkit.table()
    for key, value in fields.items():
        table[key] = value
    sources = doc.get("sources")
    if sources is None:
        sources = tomlkit.aot()
        doc["sources"] = sources
    sources.append(table)
    rendered = tomlkit.dumps(doc)
    parse_sources(tomllib.loads(rendered), str(path), path.parent)  # what we write must read back
    _write(path, rendered)


def remove_source(path: Path, name: str) -> SourceConfig:
    """Take the source named ``name`` out of the file; the rest of the file stays as it was."""
    path = Path(path)
    existing = {s.name: s for s in load_sources(path)}
    if name not in existing:
        raise ValidationError(f"no source named {name!r} in {path}", {"name": name})
    import tomlkit

    doc = tomlkit.parse(path.read_text(encoding="utf-8"))
    sources = doc["sources"]
    keep = [t for t in sources if t.get("name") != name]
    if keep:
        aot = tomlkit.aot()
        for t in keep:
            aot.append(t)
        doc["sources"] = aot
    else:
        del doc["sources"]
    _write(path, tomlkit.dumps(doc))
    return existing[name]


def _write(path: Path, text: str) -> None:
    """Write through a temporary file and a rename, so a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:  # a full disk: named, as every refused write is (a buffered write names no file)
        tmp.unlink(missing_ok=True)
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
