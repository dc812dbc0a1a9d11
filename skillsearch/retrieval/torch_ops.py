"""torch's home: the matrix product search takes from torch (:func:`max_cosines`), the intra-op thread count
(:func:`set_intra_op_threads`) and MiniLM's forward pass as one TorchScript call (:class:`TracedForward`).

Why torch for the product of several query vectors: OpenBLAS (numpy, held to one thread, see
``skillsearch/__init__.py``) multiplies a tall matrix by a few vectors slowly. Measured with torch at the one
intra-op thread the batching service sets, right after a model pass (ms, 10k / 100k rows): three vectors
1.2 / 11.0 with torch, 1.8 / 18.9 with numpy; one vector 0.88 / 7.6 with torch, 0.69 / 6.5 with numpy, so
one vector goes to numpy (``cosines.max_cosines``; docs/benchmarks.md, "Subnormal products").
torch is loaded with the encoder's library (sentence-transformers) already. It is imported on first use,
never at import time.

Why a traced forward: sentence-transformers runs the model module by module in Python, and every one of its
~150 tensor operations gives up the GIL and must take it back. In a server whose other threads run Python
(HTTP, Tantivy's results, the answers) each take-back waits for the holder: on 2 cores, 8 requests took
53 ms alone and 664 ms beside one busy Python thread. Traced, the forward is one call that holds the GIL
only to start and to finish: 45 ms alone, 72 ms beside the same thread, and one request 4.4 ms instead of
9.3 (``benchmarks/gil_handoff.py``; docs/benchmarks.md, "The traced forward and the GIL"). The vectors are
the eager model's to 2e-7.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Tokens", "TracedForward", "max_cosines", "set_intra_op_threads"]

# One text's token ids and token type ids.
Tokens = tuple[np.ndarray, np.ndarray]

log = logging.getLogger(__name__)

# The inputs of a BERT-like transformer, in the order the traced forward takes them.
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
# How close the traced vectors must be to the eager model's on the probe texts (they measure about 2e-7).
_TOLERANCE = 1e-5
_PROBES = ("a", "a longer probe text, so that the example the forward is traced on is padded")
# The files of a saved forward (:meth:`TracedForward.save`).
_FORWARD_FILE, _TOKENIZER_FILE, _SHAPE_FILE = "forward.pt", "tokenizer.json", "shape.json"


def set_intra_op_threads(threads: int) -> None:
    """torch's intra-op threads for this whole process (``retrieval/batching.py`` chooses the number)."""
    import torch

    if threads > 0 and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def max_cosines(matrix: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Each row's best product over the query vectors: ``(matrix @ queries.T).max(axis=1)`` as float32, for
    a C-contiguous float32 ``matrix`` and a C-contiguous float32 ``queries`` of shape ``(n, dim)``.

    A single vector is given twice: torch's GEMM beats its matrix-vector path (search sends one vector to
    numpy instead, see ``cosines.max_cosines``)."""
    import torch

    columns = queries if len(queries) > 1 else np.vstack([queries, queries])
    with warnings.catch_warnings():
        # The snapshot's matrix is read-only; torch only reads it here.
        warnings.simplefilter("ignore", UserWarning)
        rows = torch.from_numpy(matrix)
    with torch.inference_mode():
        best: np.ndarray = torch.mm(rows, torch.from_numpy(columns).T).amax(dim=1).numpy()
    return best


class TracedForward:
    """A sentence-transformers model made of a BERT-like transformer, mean pooling and normalisation, run as
    one TorchScript call per sub-batch, with the model's own (Rust) tokenizer called directly.

    :meth:`of` traces a model and checks both halves against the model: the token ids against its
    ``preprocess``, the vectors against its ``encode``; it answers None (the caller keeps ``encode``) for
    any other pipeline or when tracing or a check fails. :meth:`tokenize` and :meth:`encode_tokens` are the
    two halves of :meth:`encode`, so that a caller's thread can tokenize its own request and a batching
    worker only pads and runs the model (``retrieval/batching.py``). Safe to call from several threads."""

    def __init__(self, traced: Any, tokenizer: Any, pad_id: int, dim: int) -> None:
        self.traced, self.tokenizer, self.pad_id, self.dim = traced, tokenizer, pad_id, dim

    @classmethod
    def of(cls, model: Any) -> TracedForward | None:
        import torch

        modules = list(model)
        names = [type(m).__name__ for m in modules]
        config = modules[1].get_config_dict() if len(modules) == 3 and hasattr(modules[1], "get_config_dict") else {}
        transformer = getattr(modules[0], "auto_model", None) if modules else None
        backend = getattr(getattr(model, "tokenizer", None), "backend_tokenizer", None)
        if (names != ["Transformer", "Pooling", "Normalize"] or config.get("pooling_mode") != "mean"
                or transformer is None or backend is None):
            log.info("the model's pipeline is %s: its forward is not traced", names)
            return None
        try:
            tokenizer = type(backend).from_str(backend.to_str())  # our own copy: padding and truncation are state
            tokenizer.no_padding()
            tokenizer.enable_truncation(int(model.max_seq_length))
            example = model.preprocess(list(_PROBES))
            with torch.inference_mode(), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the tracer's notes on branches that are constant for BERT
                traced = torch.jit.trace(  # type: ignore[no-untyped-call]
                    _mean_pooled(transformer).eval(), tuple(example[k] for k in _INPUTS), check_trace=False)
            dim = int(config.get("embedding_dimension") or model.get_sentence_embedding_dimension())
            forward = cls(traced, tokenizer, int(model.tokenizer.pad_token_id or 0), dim)
            probes = [*_PROBES, _PROBES[0], "  spaced\tout  ", "word " * 400]
            features = model.preprocess(probes)
            same_tokens = all(
                features["input_ids"][i][: len(ids)].tolist() == ids.tolist()
                and int(features["attention_mask"][i].sum()) == len(ids)
                for i, (ids, _) in enumerate(forward.tokenize(probes)))
            expected = model.encode(probes, batch_size=2, normalize_embeddings=True, convert_to_numpy=True,
                                    show_progress_bar=False)
            worst = float(np.abs(forward.encode(probes, 2) - expected).max())
        except Exception as exc:  # any failure keeps the eager model, which is always right
            log.warning("tracing the model's forward failed (%s: %s); it runs module by module", type(exc).__name__, exc)
            return None
        if not same_tokens or worst > _TOLERANCE:
            log.warning("the traced forward differs from the model (tokens equal: %s, vectors by %.2g); it runs "
                        "module by module", same_tokens, worst)
            return None
        return forward

    def save(self, folder: Path) -> None:
        """Write this forward to ``folder`` (which must exist): the TorchScript module with its weights,
        the tokenizer as its JSON, and the padding id and dimension."""
        import torch

        torch.jit.save(self.traced, str(folder / _FORWARD_FILE))
        (folder / _TOKENIZER_FILE).write_text(self.tokenizer.to_str(), encoding="utf-8")
        (folder / _SHAPE_FILE).write_text(json.dumps({"pad_id": self.pad_id, "dim": self.dim}), encoding="utf-8")

    @classmethod
    def load(cls, folder: Path) -> TracedForward:
        """A forward :meth:`save` wrote: torch and the Rust tokenizer only, neither sentence-transformers nor
        transformers (their imports took 5-6 s of a process that only searches, the traced module 0.13 s).
        Raises whatever reading or parsing the files raises."""
        import torch
        from tokenizers import Tokenizer

        shape = json.loads((folder / _SHAPE_FILE).read_text(encoding="utf-8"))
        traced = torch.jit.load(str(folder / _FORWARD_FILE), map_location="cpu")  # type: ignore[no-untyped-call]
        tokenizer = Tokenizer.from_str((folder / _TOKENIZER_FILE).read_text(encoding="utf-8"))
        return cls(traced.eval(), tokenizer, int(shape["pad_id"]), int(shape["dim"]))

    def tokenize(self, texts: Sequence[str]) -> list[Tokens]:
        """Each text's token ids and token type ids, unpadded (truncated as the model truncates)."""
        return [(np.asarray(e.ids, dtype=np.int64), np.asarray(e.type_ids, dtype=np.int64))
                for e in self.tokenizer.encode_batch(list(texts))]

    def encode_tokens(
        self, tokens: Sequence[Tokens], batch_size: int, progress: Callable[[int], None] | None = None,
    ) -> np.ndarray:
        """Normalised vectors (float32, one row per text) in sub-batches of ``batch_size`` texts of similar
        length (as ``encode`` groups them: less padding); ``progress`` hears each sub-batch's size."""
        import torch

        out = np.zeros((len(tokens), self.dim), dtype=np.float32)
        order = sorted(range(len(tokens)), key=lambda i: -len(tokens[i][0]))
        step = max(1, batch_size)
        for start in range(0, len(order), step):
            rows = order[start : start + step]
            width = max(len(tokens[i][0]) for i in rows)
            ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
            types = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                n = len(tokens[i][0])
                ids[r, :n], types[r, :n], mask[r, :n] = tokens[i][0], tokens[i][1], 1
            with torch.inference_mode():
                out[rows] = self.traced(torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(types)).numpy()
            if progress:
                progress(len(rows))
        return out

    def encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        return self.encode_tokens(self.tokenize(texts), batch_size)


def _mean_pooled(transformer: Any) -> Any:
    """``transformer`` with sentence-transformers' mean pooling and L2 normalisation on top, as a module."""
    import torch

    class MeanPooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            tokens = self.transformer(input_ids=input_ids, attention_mask=attention_mask,
                                      token_type_ids=token_type_ids, return_dict=False)[0]
            weights = attention_mask.unsqueeze(-1).to(tokens.dtype)
            mean = (tokens * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2.0, dim=1)

    return MeanPooled()
