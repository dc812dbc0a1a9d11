"""The encoders by ``--encoder`` name: which one a setting loads (once per process), which name an index
records, and the fingerprint of a setting's model computed from its files alone.

- ``minilm``: :class:`~skillsearch.retrieval.minilm.MiniLMEncoder`, English;
- ``e5``: :class:`~skillsearch.retrieval.e5.E5Encoder`, multilingual;
- ``minilm+e5`` (``DEFAULT_ENCODER``): :class:`~skillsearch.retrieval.routed_encoder.RoutedEncoder`, both,
  routed by the request's language: English requests are answered by MiniLM, every other request by e5;
- ``hashing``: :class:`~skillsearch.retrieval.hashing_encoder.HashingEncoder`, a deterministic bag-of-words
  encoder for fast unit tests; not a real model.
"""

from __future__ import annotations

from collections.abc import Callable
from threading import RLock

from skillsearch.core.errors import IndexNotReadyError, ValidationError, problem
from skillsearch.retrieval.e5 import E5Encoder
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.hashing_encoder import HashingEncoder
from skillsearch.retrieval.minilm import MiniLMEncoder
from skillsearch.retrieval.model_files import (
    e5_weights,
    file_fingerprint,
    folder_fingerprint,
    minilm_dir,
    routed_fingerprint,
)
from skillsearch.retrieval.routed_encoder import RoutedEncoder

__all__ = ["DEFAULT_ENCODER", "ENCODERS", "encoder_choice", "make_encoder", "setting_fingerprint"]


# What a new index is built with when nothing names an encoder: any language out of the box (MiniLM answers
# English requests, multilingual-e5 the others; docs/benchmarks.md, "Default encoder"). ``minilm`` is for
# English-only fleets: it builds several times faster.
DEFAULT_ENCODER = "minilm+e5"

ENCODERS: dict[str, Callable[[], Encoder]] = {
    "minilm": MiniLMEncoder,
    "e5": E5Encoder,
    # The pair shares its two models with ``minilm`` and ``e5`` (loaded once per process, below).
    "minilm+e5": lambda: RoutedEncoder(make_encoder("minilm"), make_encoder("e5")),
    "hashing": HashingEncoder,
}


# The model name each --encoder choice records in an index's manifest (what a mismatch message names).
_RECORDED_AS = {MiniLMEncoder.name: "minilm", E5Encoder.name: "e5", HashingEncoder.name: "hashing",
                f"{MiniLMEncoder.name}+{E5Encoder.name}": "minilm+e5"}


def encoder_choice(model_name: str) -> str | None:
    """The ``--encoder`` choice whose model an index records as ``model_name``; None when none does."""
    return _RECORDED_AS.get(model_name)


_LOADED: dict[str, Encoder] = {}
# Reentrant: ``minilm+e5`` loads its two models through make_encoder, so they are shared with the others.
_LOAD_LOCK = RLock()


def make_encoder(name: str) -> Encoder:
    """The encoder of that name (empty: ``DEFAULT_ENCODER``), loaded once per process: models are read-only
    and large."""
    name = name or DEFAULT_ENCODER
    if name not in ENCODERS:
        raise ValidationError(f"unknown encoder {name!r}: choose one of {', '.join(sorted(ENCODERS))}",
                              {"problems": [problem("encoder", f"choose one of {', '.join(sorted(ENCODERS))}")]})
    with _LOAD_LOCK:
        if name not in _LOADED:
            _LOADED[name] = ENCODERS[name]()
        return _LOADED[name]


_BY_SETTING: dict[str, Callable[[], str]] = {
    "minilm": lambda: folder_fingerprint(minilm_dir()),
    "e5": lambda: file_fingerprint(e5_weights()),
    "minilm+e5": lambda: routed_fingerprint(folder_fingerprint(minilm_dir()), file_fingerprint(e5_weights())),
    "hashing": lambda: HashingEncoder().fingerprint(),
}


def setting_fingerprint(setting: str) -> str:
    """The fingerprint of the encoder a setting (``--encoder``) would load: the same value that encoder's
    ``fingerprint()`` gives once loaded, computed from its files alone."""
    if setting not in _BY_SETTING:
        raise IndexNotReadyError(f"unknown encoder {setting!r}; choose one of {', '.join(sorted(_BY_SETTING))}")
    return _BY_SETTING[setting]()
