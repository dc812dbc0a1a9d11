"""The int8 kernels of the vector stage's scan, paired in one run: simsimd's ``cdist`` (the stage's kernel
until 2026-12-03; measured only when simsimd is installed, it is no longer a dependency) against numkong's
``cdist`` for one query vector and ``dots_packed`` (the query vectors packed once) for several, and the
row-wise maximum over the query vectors as numpy's ``max(axis=1)`` against ``cosines.row_max``; then the
stage's own ``vector_scan.scan`` (blocks, scales, :data:`~skillsearch.retrieval.vector_scan.SCAN_THREADS`
threads) with each of its kernels (``int8_kernels.KERNELS``: our own ``_int8dots`` beside numkong's two), which
is what ``int8_kernels.scan_kernel`` chooses between.
torch's two int8 kernels (fbgemm's dynamic int8 linear, ``_weight_int8pack_mm``) are timed beside them as the
alternatives already installed with the model, and numkong's ``cdist`` over int4 codes (two signed values a
byte: half the bytes of a row, the first pass the docs named as the next step if the scan must halve), and
the time to read the codes at all (numpy summing them on one and on two threads): the floor of any scan.
The kernels differ by instruction set several times over, so the report is named by the core's widest vector
instructions (``scan-kernels-avx2``, ``scan-kernels-avx-512-vnni``, ...; the Zen 4 run of 2026-12-03 was
written as ``scan-kernels-avx512-vnni``, in git at 57d3264) and lists numkong's capabilities.

Rows: random int8 codes of 384 dimensions (the kernels' cost does not depend on the values); query vectors
1 to 7 (a request and up to six of its sentences). Each timing is the median of ``--rounds`` calls
over the whole matrix in one thread, the alternatives interleaved.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/scan_kernels.py --sizes 10000 100000 1000000``
(writes ``benchmarks/results/scan-kernels-<instructions>.{md,json}``). ``--numkong-only haswell`` measures, on a
core with AVX-512, numkong's AVX2 kernels (our own kernel's AVX2 path is timed in every run), written as
``scan-kernels-<instructions>-numkong-haswell``. Not collected by pytest.
Output: an experiment record behind past choices, not a current result; last runs in git at 586bd12 and 889bf0e.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from skillsearch.bench.report import SIMD_LEVELS, machine, write_script_report  # noqa: E402
from skillsearch.retrieval import _int8dots  # noqa: E402
from skillsearch.retrieval.compact import BLOCK, Compact, nibbles  # noqa: E402
from skillsearch.retrieval.cosines import row_max  # noqa: E402
from skillsearch.retrieval.int8_kernels import KERNELS, pin, scan_kernel  # noqa: E402
from skillsearch.retrieval.vector_scan import SCAN_THREADS, scan  # noqa: E402

DIM = 384
# ``_weight_int8pack_mm`` has no vectorised path here (39 ms for one vector over 100k rows): timed up to this.
INT8PACK_UP_TO = 100_000


def _median_ms(fns: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in fns}
    for fn in fns.values():
        fn()
    for _ in range(rounds):
        for k, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[k].append((time.perf_counter() - t) * 1000)
    return {k: round(float(np.median(v)), 3) for k, v in times.items()}


def _read_in_two(words: np.ndarray) -> None:
    """Sum two halves of ``words`` on two threads (numpy releases the GIL): reading the codes once, as a
    scan on the stage's two threads must."""
    half = len(words) // 2
    other = threading.Thread(target=words[half:].sum)
    other.start()
    words[:half].sum()
    other.join()


class TorchKernels:
    """torch's two int8 x float kernels over one matrix of codes (row scales 1/127), on one torch thread:
    fbgemm's dynamic int8 linear with the codes prepacked once (it quantises the query vectors to 7 bits
    itself), and ``_weight_int8pack_mm`` (float query vectors against int8 rows with per-row scales). Both
    were measured as alternatives to numkong, not chosen (docs/benchmarks.md, "Kernels outside numkong")."""

    def __init__(self, codes: np.ndarray) -> None:
        import warnings

        import torch

        self.torch = torch
        torch.set_num_threads(1)
        self.codes = torch.from_numpy(codes)
        self.scales = torch.full((codes.shape[0],), 1 / 127, dtype=torch.float32)
        t = time.perf_counter()
        with warnings.catch_warnings():  # quantized tensors are deprecated in torch (the warning says so)
            warnings.simplefilter("ignore")
            weight = torch._make_per_channel_quantized_tensor(
                self.codes, self.scales.double(), torch.zeros(codes.shape[0], dtype=torch.long), 0)
            self.packed = torch.ops.quantized.linear_prepack(weight, None)
        self.prepack_s = round(time.perf_counter() - t, 3)

    def fbgemm(self, q: np.ndarray) -> object:
        return self.torch.ops.quantized.linear_dynamic(self.torch.from_numpy(q), self.packed, True)

    def int8pack(self, q: np.ndarray) -> object:
        return self.torch.ops.aten._weight_int8pack_mm(self.torch.from_numpy(q), self.codes, self.scales)


def int4_pairs(codes: np.ndarray) -> np.ndarray:
    """int8 codes as numkong's ``int4`` rows: each value's top four bits (-8..7), two to a byte, the even
    dimension in the low nibble (checked against numpy in :func:`_pair`)."""
    nibbles = (codes >> 4).astype(np.uint8) & 0xF
    return np.ascontiguousarray(nibbles[:, 0::2] | (nibbles[:, 1::2] << 4))


def _pair(codes: np.ndarray, q: np.ndarray, rounds: int, nk: Any, simsimd: Any, tk: TorchKernels,
          codes4: np.ndarray, nibbles4: np.ndarray) -> dict[str, Any]:
    """One size and count of query vectors: the kernels, then the row-wise maximum of one block."""
    packed = nk.dots_pack(q, dtype="int8")
    q4 = int4_pairs(q)
    exact4 = (codes[:8] >> 4).astype(np.int32) @ (q >> 4).astype(np.int32).T
    if not np.array_equal(np.asarray(nk.cdist(codes4[:8], q4, metric="dot", dtype="int4")), exact4):
        raise RuntimeError("numkong's int4 dot products disagree with numpy's on these nibbles")
    qf = q.astype(np.float32) / 127
    fns: dict[str, Callable[[], object]] = {}
    if simsimd is not None:
        fns["simsimd cdist"] = lambda: simsimd.cdist(codes, q, metric="dot", threads=1, out_dtype="float32")
    fns["numkong cdist"] = lambda: nk.cdist(codes, q, metric="dot", out_dtype="float32")
    fns["numkong dots_packed"] = lambda: nk.dots_packed(codes, packed)
    products = np.empty((codes.shape[0], q.shape[0]), dtype=np.float32)
    for path in _int8dots.paths():
        if path != "portable":
            fns[f"int8dots (ours, {path})"] = lambda path=path: _int8dots.dots(codes, q, products, path=path)
    best = np.empty(codes.shape[0], dtype=np.float32)
    total = np.empty(codes.shape[0], dtype=np.float32)
    fns["int8dots best+sum (ours)"] = lambda: _int8dots.best(codes, q, best, total)
    fns["int4 best+sum (ours, best4)"] = lambda: _int8dots.best4(nibbles4, q, best, total)
    fns["numkong cdist int4"] = lambda: nk.cdist(codes4, q4, metric="dot", dtype="int4", out_dtype="float32")
    words = codes.reshape(-1).view(np.uint64)  # the codes' bytes as 8-byte words: the floor any scan pays
    fns["memory read, 1 thread"] = lambda: words.sum()
    fns["memory read, 2 threads"] = lambda: _read_in_two(words)
    fns["torch fbgemm linear_dynamic"] = lambda: tk.fbgemm(qf)
    if codes.shape[0] <= INT8PACK_UP_TO:
        fns["torch _weight_int8pack_mm"] = lambda: tk.int8pack(qf)
    row: dict[str, Any] = {"rows": codes.shape[0], "query_vectors": q.shape[0], **_median_ms(fns, rounds),
                           "fbgemm prepack_s": tk.prepack_s}
    row.setdefault("torch _weight_int8pack_mm", "-")  # not timed at this size
    block = np.asarray(nk.dots_packed(codes[:BLOCK], packed))
    out = np.empty(block.shape[0], dtype=block.dtype)
    row.update(_median_ms({"max(axis=1), one block": lambda: block.max(axis=1),
                           "row_max, one block": lambda: row_max(block, out)}, rounds))
    row["block_rows"] = int(block.shape[0])
    compact = Compact.of_codes(codes, np.full(codes.shape[0], 1 / 127, np.float32))
    floats = q.astype(np.float32) / np.linalg.norm(q.astype(np.float32), axis=1, keepdims=True)
    # One vector always goes through cdist: the two numkong columns time the same call.
    row.update(_median_ms({f"stage scan, {k}": (lambda k=k: scan(compact, None, floats, kernel=k)) for k in KERNELS},
                          rounds))
    return row


def measure(sizes: list[int], vectors: list[int], rounds: int) -> list[dict[str, Any]]:
    import numkong as nk

    try:
        import simsimd
    except ImportError:
        simsimd = None
    rng = np.random.default_rng(0)
    rows: list[dict[str, Any]] = []
    for n in sizes:
        codes = rng.integers(-127, 128, (n, DIM), dtype=np.int8)
        tk = TorchKernels(codes)
        codes4 = int4_pairs(codes)
        nibbles4 = nibbles(codes)  # the stage's own int4 copy (``compact.nibbles``)
        for nq in vectors:
            q = rng.integers(-127, 128, (nq, DIM), dtype=np.int8)
            rows.append(_pair(codes, q, rounds, nk, simsimd, tk, codes4, nibbles4))
            print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    from skillsearch.bench.report import run_started

    run_started()  # the commit its report names: HEAD as the run starts, not when it writes
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--vectors", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6, 7])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    ap.add_argument("--numkong-only", nargs="+", metavar="CAPABILITY",
                    help="turn off every numkong capability but these (and 'serial') first: with 'haswell', "
                         "numkong runs its AVX2 kernels, as on a core without AVX-512; the report's name says so")
    args = ap.parse_args()
    command = "PYTHONPATH=. .venv/bin/python benchmarks/scan_kernels.py " + " ".join(sys.argv[1:])
    import numkong as nk

    pin(numkong_only=args.numkong_only or ())
    rows = measure(args.sizes, args.vectors, args.rounds)
    caps = sorted(k for k, v in nk.get_capabilities().items() if v)
    described = machine()
    simd = next((name for _, name in SIMD_LEVELS if f", {name})" in described), "plain")
    name = "scan-kernels-" + simd.lower().replace(" ", "-")
    if args.numkong_only:
        name += "-numkong-" + "-".join(sorted(args.numkong_only))
    print(write_script_report(
        args.out, name,
        "The vector stage's scan kernels (ms, median)", command,
        "random int8 codes of 384 dimensions", rows, text_columns=0,
        notes=("The kernels alone (`simsimd cdist`, `numkong cdist`, `numkong dots_packed`, ours "
               "(`int8dots`, `retrieval/_int8dots.c`, each of its vector paths this core runs writing every "
               "product, and its default path keeping each row's best and the sum of its products, as the "
               "stage's scan asks), the row-wise maximum, torch's two) run on one thread.",
               f"`numkong cdist int4`: the same rows as int4 codes ({DIM // 2} bytes a row, half of int8's), "
               "the query vectors too; the products checked against numpy's on the first rows. `int4 best+sum "
               "(ours, best4)`: the stage's own int4 copy of the rows (`compact.nibbles`) against the int8 "
               "query vectors, the best and the sum kept, our kernel's default path.",
               "`memory read, 1 thread` / `2 threads`: numpy summing the int8 codes as 8-byte words, in one "
               "thread or in two halves on two: the floor of any scan that reads every row once.",
               "`torch fbgemm linear_dynamic`: the codes prepacked once (`fbgemm prepack_s`, a second copy of "
               "them), the float query vectors quantised to 7 bits inside the call; torch deprecates the "
               "quantized tensors it needs. `torch _weight_int8pack_mm`: float query vectors against the "
               f"int8 rows and their scales, timed up to {INT8PACK_UP_TO:,} rows.",
               "`max(axis=1)` and `row_max`: the row-wise best over the query vectors of one block of "
               "`dots_packed` products (int32, `block_rows` x `query_vectors`).",
               f"`stage scan, <kernel>`: `vector_scan.scan` over the whole matrix on {SCAN_THREADS} threads "
               "with each of `int8_kernels.KERNELS` (one vector goes through `cdist` for `numkong-packed`). "
               f"numkong's capabilities here: {', '.join(caps)}; our kernel's path: {_int8dots.kernel()}; "
               f"the stage picks `{scan_kernel()}`.",),
        extra={"machine": described, "numkong_capabilities": caps, "int8dots_path": _int8dots.kernel(),
               "stage_kernel": scan_kernel()}))


if __name__ == "__main__":
    main()
