"""Servers warm each index snapshot in the background (``Catalog.prepare_in_background``,
``retrieval/warming.py``): what the first search over a snapshot would otherwise make is made as soon as the
snapshot is, for the snapshot the server opens and for each one a write brings: the int4 copy that a large
index's scan reads first (``vector_scan.prepare``) and the document languages of a centered route."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np

from skillsearch.core.settings import Settings
from skillsearch.retrieval import int8_kernels
from skillsearch.retrieval.calibration import language_codes
from skillsearch.retrieval.compact import Compact, nibbles, nibbles_made
from skillsearch.retrieval.indexer import IndexSnapshot
from skillsearch.retrieval.int8_kernels import scan_kernel
from skillsearch.retrieval.routed_encoder import RoutedEncoder
from skillsearch.retrieval.routing import RequestRoute
from skillsearch.retrieval.vector_scan import INT4_FROM, first_pass, prepare
from skillsearch.service import Catalog


def test_prepare_makes_the_int4_copy_exactly_where_a_scan_reads_one() -> None:
    rng = np.random.default_rng(5)
    big = Compact.of_codes(rng.integers(-127, 128, (INT4_FROM, 384), dtype=np.int8),
                           np.full(INT4_FROM, 1 / 127 / 20, dtype=np.float32))
    small = Compact.of_codes(np.ascontiguousarray(big.parts[0][:1_000]), big.scales[:1_000])
    ours = int8_kernels.scans_int4(scan_kernel())
    assert not nibbles_made(big.parts[0])
    assert prepare(big, None, kernel="numkong-cdist") is False and not nibbles_made(big.parts[0])
    assert prepare(small, None) is False and not nibbles_made(small.parts[0])
    assert prepare(big, None) is ours and nibbles_made(big.parts[0]) is ours
    assert ("int4_widest" in vars(big)) is ours and "int4_widest" not in vars(small)
    if ours:  # the scan then reads the copy made here, not a new one
        made = nibbles(big.parts[0])
        q = rng.standard_normal((1, 384)).astype(np.float32)
        assert first_pass(big, None, q / np.linalg.norm(q)) is not None and nibbles(big.parts[0]) is made


def _e5_route(snapshot: IndexSnapshot) -> RequestRoute:
    route = next(r for r in snapshot.routing.routes() if r.centering is not None)
    assert route.route == RoutedEncoder.OTHER
    return route


def _warmed(route: RequestRoute) -> bool:
    """Whether the route's document languages were made (a cached property, made once)."""
    deadline = time.monotonic() + 30
    while "language_codes" not in vars(route) and time.monotonic() < deadline:
        time.sleep(0.01)
    return "language_codes" in vars(route)


def test_a_server_warms_the_snapshot_it_opens_and_each_a_write_brings(
        default_sample_dir: Path, routed: RoutedEncoder, tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    shutil.copytree(default_sample_dir, data_dir)
    catalog = Catalog.open(Settings(data_dir=data_dir), encoder=routed)
    try:
        opened = catalog.index().snapshot()
        assert "language_codes" not in vars(_e5_route(opened))  # a plain open leaves it to the first search
        catalog.prepare_in_background()
        route = _e5_route(opened)
        assert _warmed(route)
        assert route.centering is not None
        np.testing.assert_array_equal(route.language_codes, language_codes(route.matrix, route.centering))
        # A write makes a new snapshot: warmed too, without a search.
        skill = Path(__file__).resolve().parents[1] / "skillsearch" / "sample" / "ops" / "incident-triage"
        report = catalog.import_path(skill, "local", "team:extra")
        assert report.changed
        written = catalog.index().snapshot()
        assert written is not opened and written.generation > opened.generation
        assert _warmed(_e5_route(written))
    finally:
        catalog.close()
