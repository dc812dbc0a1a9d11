"""One bounded walk of a folder of skills that never reads anything outside it.

The importer and the reference upstream (which loads its folders through the importer) read skill folders
only through this module. What it promises:

- **No symbolic link is followed**, whatever it points to (a file, a folder, a loop, ``/proc/self/environ``):
  every directory and file is opened relative to its parent's descriptor with ``O_NOFOLLOW``, so a link
  swapped in between listing and opening is refused too. A symlinked resource is skipped with a reason; a
  symlinked skill folder or ``SKILL.md`` refuses that skill.
- **Only regular files with one name are read.** FIFOs, sockets and devices are skipped (opened with
  ``O_NONBLOCK``, so a FIFO cannot hang the import); a file with several hard links is skipped, because
  its other name may be outside the folder (``ln /etc/shadow``).
- **Bounded**: folder depth, entries looked at, resources per skill, bytes per file and per skill
  (:class:`~skillsearch.core.limits.Limits`). A file is read up to its limit plus one byte whatever size it
  reports (``/proc`` files report 0). The walk is iterative and holds at most one descriptor per level.
- File names that are not valid UTF-8 are skipped with a reason (they could not be stored or shown).
- **The folder as a whole** (the imported folder, a source's root) over a limit, or unreadable, raises
  :class:`FolderUnreadable`: a caller mirroring a source must keep its last good state rather than read
  "no skills here". A skill folder that cannot be opened is still named as a skill folder, so reading it
  fails and its skill is refused (keeping its last good revision) instead of silently disappearing.
- A watcher's scoped read (``skill_folders(root, limits, only=names)``) goes through the same descriptors
  and checks: only the named top-level entries are looked at, each with ``lstat`` relative to the root.

Hidden entries (a name starting with ``.``) and ``__pycache__`` are left out silently, as before.
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from skillsearch.core.limits import Limits
from skillsearch.core.wellformed import is_unicode, printable

__all__ = ["FolderUnreadable", "SkillFolder", "TooLarge", "folder_holding_skills", "read_bounded", "read_skill_folder",
           "skill_folders"]

SKILL_FILE = "SKILL.md"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class TooLarge(ValueError):
    """A file over its byte limit."""


class FolderUnreadable(ValueError):
    """The imported folder itself cannot be read within the limits (too many entries, not openable)."""


@dataclass
class SkillFolder:
    """What one walk of a skill folder found: ``SKILL.md``, the resources and the skipped entries."""

    skill_md: bytes
    files: list[tuple[str, bytes]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class _Entry:
    name: str
    kind: str  # "dir", "file", "link", "other"


def _hidden(name: str) -> bool:
    return name.startswith(".") or name == "__pycache__"


def _entries(dir_fd: int, limit: int) -> list[_Entry]:
    """The entries of a directory (at most ``limit`` + 1, so a huge folder is never listed in full)."""
    out: list[_Entry] = []
    with os.scandir(dir_fd) as it:
        for e in it:
            if e.is_symlink():
                kind = "link"
            elif e.is_dir(follow_symlinks=False):
                kind = "dir"
            elif e.is_file(follow_symlinks=False):
                kind = "file"
            else:
                kind = "other"
            out.append(_Entry(e.name, kind))
            if len(out) > limit:
                break
    out.sort(key=lambda e: e.name)
    return out


def _open_dir(name: str | Path, dir_fd: int | None = None) -> int:
    """A directory descriptor; a symbolic link raises ``ValueError``."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise ValueError(f"{printable(str(name))} is a symbolic link or not a folder (not followed)") from None
        raise


def read_bounded(name: str | Path, limit: int, dir_fd: int | None = None, *, follow: bool = False) -> bytes:
    """The bytes of one regular file with a single name, read up to ``limit``.

    Raises :class:`TooLarge` over the limit and ``ValueError`` for a link, a hard-linked file or anything
    that is not a regular file. ``follow`` allows a symbolic link (only for a path the operator named)."""
    flags = _FILE_FLAGS & ~os.O_NOFOLLOW if follow else _FILE_FLAGS
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ValueError("symbolic link (not followed)") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file (skipped)")
        if st.st_nlink > 1 and not follow:
            raise ValueError(f"a hard link ({st.st_nlink} names; another may be outside the folder)")
        if st.st_size > limit:
            raise TooLarge(f"{st.st_size} bytes, over the limit of {limit}")
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(1024 * 1024, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise TooLarge(f"more than {limit} bytes, over the limit")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _named(dir_fd: int, names: Collection[str]) -> list[_Entry]:
    """The entries of ``names`` that exist in the directory, each looked at with ``lstat`` (never followed)."""
    out: list[_Entry] = []
    for name in sorted(set(names)):
        if not name or "/" in name or name in (".", ".."):
            continue
        try:
            mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            continue
        kind = ("link" if stat.S_ISLNK(mode) else "dir" if stat.S_ISDIR(mode)
                else "file" if stat.S_ISREG(mode) else "other")
        out.append(_Entry(name, kind))
    return out


def _exists(name: str, dir_fd: int) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def skill_folders(root: Path, limits: Limits, only: Collection[str] | None = None) -> tuple[list[str], list[tuple[str, str]]]:
    """The skill folders of an imported folder: ``[""]`` when it holds ``SKILL.md`` itself, else the names
    of its sub-folders that do. Also what was skipped (symlinked folders), as (name, reason).

    ``only``: look at these top-level names only (a watcher's batch), never listing the folder.
    Raises :class:`FolderUnreadable` when the folder itself cannot be read or is over a limit."""
    try:
        fd = _open_dir(root) if not root.is_symlink() else _open_dir(root.resolve())
    except (ValueError, OSError) as exc:
        raise FolderUnreadable(f"the folder cannot be opened: {exc}") from None
    try:
        if only is None:
            try:
                entries = _entries(fd, limits.max_walk_entries)
            except OSError as exc:
                raise FolderUnreadable(f"the folder cannot be listed: {exc}") from None
            if len(entries) > limits.max_walk_entries:
                raise FolderUnreadable(f"the folder has more than {limits.max_walk_entries} entries, over the limit "
                                       "(SKILLSEARCH_MAX_WALK_ENTRIES)")
        else:
            if len(only) > limits.max_walk_entries:
                raise FolderUnreadable(f"more than {limits.max_walk_entries} top-level entries changed, over the "
                                       "limit (SKILLSEARCH_MAX_WALK_ENTRIES)")
            try:
                entries = _named(fd, set(only) | {SKILL_FILE})
            except OSError as exc:
                raise FolderUnreadable(f"the folder cannot be read: {exc}") from None
        if any(e.name == SKILL_FILE for e in entries):
            return [""], []
        found: list[str] = []
        skipped: list[tuple[str, str]] = []
        for e in entries:
            if _hidden(e.name):
                continue
            if not is_unicode(e.name):
                skipped.append((printable(e.name), "folder name is not valid UTF-8 (skipped)"))
            elif e.kind == "link":
                skipped.append((e.name, "symbolic link (not followed)"))
            elif e.kind == "dir":
                try:
                    sub = _open_dir(e.name, fd)
                except ValueError as exc:
                    skipped.append((e.name, str(exc)))
                    continue
                except FileNotFoundError:
                    continue  # removed since it was listed
                except OSError:
                    found.append(e.name)  # unreadable: its read fails and the skill it held is kept
                    continue
                try:
                    if _exists(SKILL_FILE, sub):
                        found.append(e.name)
                except OSError:
                    found.append(e.name)
                finally:
                    os.close(sub)
        return found, skipped
    finally:
        os.close(fd)


def read_skill_folder(root: Path, name: str, limits: Limits) -> SkillFolder:
    """Read the skill folder ``root/name`` (``name`` ``""``: ``root`` itself) within the limits.

    Raises ``ValueError`` with the reason when the skill must be refused: ``SKILL.md`` missing, a link or
    too large, or the folder over a limit (depth, entries, resources, bytes)."""
    root_fd = _open_dir(root) if not root.is_symlink() else _open_dir(root.resolve())
    fds: list[int] = [root_fd]
    try:
        if name:
            fds.append(_open_dir(name, root_fd))
        skill_fd = fds[-1]
        try:
            skill_md = read_bounded(SKILL_FILE, limits.max_skill_md_bytes, skill_fd)
        except TooLarge as exc:
            raise ValueError(f"{SKILL_FILE} is {exc}") from None
        except FileNotFoundError:
            raise ValueError(f"no {SKILL_FILE}") from None
        except ValueError as exc:
            raise ValueError(f"{SKILL_FILE} is refused: {exc}") from None
        folder = SkillFolder(skill_md)
        _walk(skill_fd, limits, folder, fds)
        return folder
    finally:
        for fd in fds:
            os.close(fd)


def _walk(skill_fd: int, limits: Limits, folder: SkillFolder, fds: list[int]) -> None:
    seen = 0
    total = 0
    stack: list[tuple[int, Iterator[_Entry], str]] = [(skill_fd, iter(_entries(skill_fd, limits.max_walk_entries)), "")]
    while stack:
        fd, entries, prefix = stack[-1]
        entry = next(entries, None)
        if entry is None:
            stack.pop()
            if fd != skill_fd:
                fds.remove(fd)
                os.close(fd)
            continue
        seen += 1
        if seen > limits.max_walk_entries:
            raise ValueError(f"the skill folder has more than {limits.max_walk_entries} entries, over the limit")
        if _hidden(entry.name) or (not prefix and entry.name == SKILL_FILE):
            continue
        rel = prefix + entry.name
        if not is_unicode(entry.name):
            folder.skipped.append((printable(rel), "file name is not valid UTF-8 (skipped)"))
        elif entry.kind == "link":
            folder.skipped.append((rel, "symbolic link (not followed)"))
        elif entry.kind == "dir":
            if len(stack) >= limits.max_depth:
                raise ValueError(f"the skill folder nests deeper than {limits.max_depth} levels, over the limit")
            try:
                sub = _open_dir(entry.name, fd)
            except (ValueError, OSError) as exc:
                folder.skipped.append((rel, str(exc)))
                continue
            fds.append(sub)
            stack.append((sub, iter(_entries(sub, limits.max_walk_entries)), rel + "/"))
        elif entry.kind == "other":
            folder.skipped.append((rel, "not a regular file (skipped)"))
        else:
            try:
                data = read_bounded(entry.name, limits.max_resource_bytes, fd)
            except TooLarge as exc:
                raise ValueError(f"resource {rel} is {exc}") from None
            except (ValueError, OSError) as exc:
                folder.skipped.append((rel, str(exc)))
                continue
            total += len(data)
            if total > limits.max_skill_bytes:
                raise ValueError(f"the skill's resources exceed {limits.max_skill_bytes} bytes, over the limit")
            folder.files.append((rel, data))
            if len(folder.files) > limits.max_resources:
                raise ValueError(f"the skill has more than {limits.max_resources} resources, over the limit")


def folder_holding_skills(root: Path, most: int = 200) -> str | None:
    """The first top-level folder of ``root`` whose own folders hold a regular ``SKILL.md`` (``root/skills/x/
    SKILL.md`` gives ``skills``): the hint for a source pointed one level too high. A bounded look (``most``
    entries a folder) that follows no link and passes over anything it cannot read; it reads no file."""
    try:
        with os.scandir(root) as entries:
            tops = sorted(e.name for e in itertools.islice(entries, most)
                          if not _hidden(e.name) and e.is_dir(follow_symlinks=False))
    except OSError:
        return None
    for top in tops:
        try:
            with os.scandir(root / top) as entries:
                inner = [e.name for e in itertools.islice(entries, most) if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        for name in inner:
            try:
                if stat.S_ISREG(os.lstat(root / top / name / "SKILL.md").st_mode):
                    return top
            except OSError:
                continue
    return None
