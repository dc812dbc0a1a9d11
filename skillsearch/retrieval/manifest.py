"""The index's manifest (``<data_dir>/manifest.json``, written last by every index write): what the index
was built with (format, encoder name, dimension and model fingerprint, embedded text, lexical recipe), its
calibration, the store generation it holds and the id of the write that made it.

An open checks that the index can be searched by the configured encoder (:func:`built_with`); other
commands read the encoder an index records (:func:`recorded_encoder`) so that they need no flag.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from skillsearch.core.errors import IndexMismatchError, IndexNotReadyError
from skillsearch.core.refusals import refusal_advice
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.encoders import encoder_choice

__all__ = ["FORMAT_VERSION", "MANIFEST", "TUNED_KEYS", "built_with", "read_manifest", "recorded_encoder",
           "write_manifest"]

FORMAT_VERSION = 2
MANIFEST = "manifest.json"
# Calibration entries set from labelled requests rather than computed from probes; a rebuild keeps them.
TUNED_KEYS = ("semantic_weight", "tuned_on")


def recorded_encoder(data_dir: Path) -> str | None:
    """The name of the encoder the index in ``data_dir`` was built with (None: no readable manifest; opening
    the index says what is wrong with it)."""
    try:
        manifest = read_manifest(Path(data_dir) / MANIFEST)
    except IndexNotReadyError:
        return None
    encoder = (manifest or {}).get("encoder")
    name = encoder.get("name") if isinstance(encoder, dict) else None
    return name if isinstance(name, str) else None


def read_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest at ``path``; None when there is none (no index yet). Unreadable, not JSON, or JSON that
    is not an object: ``IndexNotReadyError`` naming the file and the fix."""
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(manifest, dict):
            raise ValueError(f"a JSON {type(manifest).__name__}, not an object")
        return manifest
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise IndexNotReadyError(f"index manifest {path} is unreadable ({exc}); run `skillsearch reindex`") from exc


def write_manifest(path: Path, fields: dict[str, Any]) -> str:
    """Write ``fields`` with this format's version, the time and a fresh write id, atomically (a temporary
    file renamed over the old one); returns the write id. A write the disk refuses (full, a file size limit,
    permissions) is :class:`IndexNotReadyError` naming the file, its temporary file removed and the manifest
    in place unchanged (behind the store, so the next open repairs the index)."""
    write_id = os.urandom(16).hex()
    manifest = {"format_version": FORMAT_VERSION, **fields,
                "written_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "write_id": write_id}
    tmp = path.with_suffix(".tmp")
    try:
        tmp.write_text(json.dumps(manifest, indent=2), encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise IndexNotReadyError(
            f"the index manifest {path} could not be written ({exc.strerror or exc}); the one in place was kept:"
            f" {refusal_advice(exc)}, then run the command again (it repairs the index)",
            {"path": str(path), "reason": "unwritable"},
        ) from exc
    return write_id


def built_with(manifest: dict[str, Any], encoder: Encoder, data_dir: Path) -> dict[str, Any]:
    """The manifest's encoder entry, once the index is known to be searchable by ``encoder``: this format,
    the same model name and dimension, and the same model files. Raises :class:`IndexMismatchError` naming
    the command that makes it searchable."""
    if manifest.get("format_version") != FORMAT_VERSION:
        raise IndexMismatchError(
            f"index format {manifest.get('format_version')} is not {FORMAT_VERSION}; run `skillsearch reindex`"
        )
    built: dict[str, Any] = manifest.get("encoder", {})
    if built.get("name") != encoder.name or built.get("dim") != encoder.dim:
        was, now = encoder_choice(str(built.get("name"))), encoder_choice(encoder.name)
        use = f"pass --encoder {was} (or set SKILLSEARCH_ENCODER={was}) to search it as built, or " if was else ""
        raise IndexMismatchError(
            f"the index in {data_dir} was built with encoder {built.get('name')!r} ({built.get('dim')} dims)"
            f" but {encoder.name!r} ({encoder.dim} dims) is configured: {use}run"
            f" `skillsearch --data-dir {data_dir}{f' --encoder {now}' if now else ''} reindex` to rebuild it"
            f" for {now or encoder.name}",
            {"index_encoder": built.get("name"), "configured_encoder": encoder.name, "index_encoder_option": was},
        )
    # The model files behind the name must be the ones the index was built with (a fine-tuned copy or another
    # package version under the same name embeds differently). An index written before fingerprints were
    # recorded is taken as it is, and gets this model's on its next write.
    recorded, loaded = built.get("fingerprint"), encoder.fingerprint()
    if recorded and recorded != loaded:
        raise IndexMismatchError(
            f"the index in {data_dir} was built with other model files under the name {encoder.name!r}"
            f" (fingerprint {recorded}, loaded {loaded});"
            f" run `skillsearch --data-dir {data_dir} reindex` to rebuild it with this model",
            {"index_fingerprint": recorded, "loaded_fingerprint": loaded, "encoder": encoder.name},
        )
    return built
