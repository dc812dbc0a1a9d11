"""MiniLM's traced forward kept between processes, so that a process that embeds never imports
sentence-transformers once one process has traced the model.

Importing sentence-transformers (with transformers, scikit-learn and scipy behind it) took 7.3 s of the 7.5 s
a CLI hybrid search spent before its answer; torch alone takes 1.5-1.8 s and loading the saved TorchScript
module 0.13 s (docs/benchmarks.md, "Start-up"). The first process that loads the model traces it and checks
the trace against the model (``torch_ops.TracedForward.of``), then saves it here; later processes load it
with torch and the Rust tokenizer alone.

An entry lives in ``<cache_dir>/forward/<key>/`` (``model_files.cache_dir``), its key a digest of the model
files' fingerprint, torch's version and :data:`FORWARD_VERSION`, so other weights, another torch or another
trace recipe never read it; an entry no process has loaded for 30 days is removed when another is saved. It
also holds two probe texts' vectors, which a load recomputes and compares: a damaged or foreign entry is
ignored (and written again by the process that then traces the model). The cache is only a cache:
unreadable or unwritable, the model is loaded and traced as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

from skillsearch.retrieval.model_files import cache_dir
from skillsearch.retrieval.torch_ops import TracedForward

__all__ = ["FORWARD_VERSION", "entry_dir", "load", "save"]

log = logging.getLogger("skillsearch")

# Bumped when what is traced or how it is tokenized changes (torch_ops._mean_pooled, TracedForward.of).
FORWARD_VERSION = 1
_CHECK_TEXTS = ("a", "renew an expiring TLS certificate before the site goes down")
_CHECK_FILE = "check.json"
# The saved vectors and the recomputed ones must agree this closely (measured: exactly).
_TOLERANCE = 1e-5
# A temporary folder older than this was left by a process that died while saving.
_STALE_S = 3600.0
# An entry no process has loaded for this long (another torch, other model files) is removed when a new one
# is saved, so the folder does not grow by 91 MB with every upgrade.
_UNUSED_S = 30 * 86400.0


def _torch_version() -> str:
    try:
        return version("torch")
    except PackageNotFoundError:
        return "none"


def entry_dir(fingerprint: str) -> Path:
    """Where the forward of the model with this fingerprint is kept, for this torch."""
    key = hashlib.sha256(f"{FORWARD_VERSION}\n{fingerprint}\n{_torch_version()}".encode()).hexdigest()[:32]
    return cache_dir() / "forward" / key


def load(fingerprint: str) -> TracedForward | None:
    """The saved forward of this model, checked on its probe texts; None when there is none or it is not
    usable (then the caller traces the model again)."""
    folder = entry_dir(fingerprint)
    if not (folder / _CHECK_FILE).is_file():
        return None
    try:
        forward = _checked(folder, fingerprint)
    except Exception as exc:  # a cache: anything wrong with it means tracing again
        log.warning("the saved forward in %s is not usable (%s: %s); tracing the model again", folder,
                    type(exc).__name__, exc)
        return None
    with contextlib.suppress(OSError):  # in use: kept by the pruning in :func:`save`
        os.utime(folder / _CHECK_FILE)
    return forward


def _checked(folder: Path, fingerprint: str) -> TracedForward:
    """The forward saved in ``folder`` if it was saved for this model and torch and still gives its probe
    vectors; raises otherwise."""
    check = json.loads((folder / _CHECK_FILE).read_text(encoding="utf-8"))
    if check.get("fingerprint") != fingerprint or check.get("torch") != _torch_version():
        raise ValueError("the entry was written for another model or torch")
    forward = TracedForward.load(folder)
    expected = np.asarray(check["vectors"], dtype=np.float32)
    got = forward.encode(list(_CHECK_TEXTS), len(_CHECK_TEXTS))
    if got.shape != expected.shape or float(np.abs(got - expected).max()) > _TOLERANCE:
        raise ValueError("its vectors differ from the ones it was saved with")
    return forward


def _usable(folder: Path, fingerprint: str) -> bool:
    try:
        _checked(folder, fingerprint)
    except Exception:
        return False
    return True


def save(fingerprint: str, forward: TracedForward) -> Path | None:
    """Keep ``forward`` (checked against its model) for later processes; the folder written, or None when
    the cache cannot be written (logged, nothing else changes). Written under a temporary name and renamed,
    so a reader never sees half an entry. A usable entry found at the rename (processes started together on a
    new machine each trace and save the model) is kept as it is: a reader may be loading it; only a damaged
    one is replaced. (The caller found none usable before tracing, so nothing is checked before writing.)"""
    folder = entry_dir(fingerprint)
    root = folder.parent
    tmp = root / f".{folder.name}.{os.getpid()}.tmp"
    try:
        root.mkdir(parents=True, exist_ok=True)
        _remove_stale(root)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        forward.save(tmp)
        vectors = forward.encode(list(_CHECK_TEXTS), len(_CHECK_TEXTS))
        check = {"fingerprint": fingerprint, "torch": _torch_version(), "version": FORWARD_VERSION,
                 "texts": list(_CHECK_TEXTS), "vectors": vectors.tolist()}
        (tmp / _CHECK_FILE).write_text(json.dumps(check), encoding="utf-8")
        if folder.exists():
            if _usable(folder, fingerprint):  # saved by another process while this one wrote
                shutil.rmtree(tmp, ignore_errors=True)
                return folder
            shutil.rmtree(folder, ignore_errors=True)  # damaged: this one replaces it
        os.rename(tmp, folder)
    except Exception as exc:  # a full disk surfaces from torch as a RuntimeError: a cache never fails a load
        log.info("the traced forward is not kept for later processes (%s: %s)", type(exc).__name__, exc)
        shutil.rmtree(tmp, ignore_errors=True)
        return None
    return folder


def _remove_stale(root: Path) -> None:
    """Temporary folders a dead process left, and entries no process has loaded for :data:`_UNUSED_S`."""
    now = time.time()
    marks = [(tmp, _STALE_S) for tmp in root.glob(".*.tmp")]
    marks += [(check, _UNUSED_S) for check in root.glob(f"[!.]*/{_CHECK_FILE}")]
    for mark, age in marks:
        try:
            if now - mark.stat().st_mtime > age:
                shutil.rmtree(mark if mark.is_dir() else mark.parent, ignore_errors=True)
        except OSError:
            continue
