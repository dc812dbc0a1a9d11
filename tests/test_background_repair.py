"""A server's request never repairs the index itself: an index a dead writer left behind the store is repaired in a
background thread while requests serve the last whole snapshot (``retrieval/background_repair.py``).

The dead writer is a real process that committed skills to the store and was killed (SIGKILL) before it wrote
the index. The serving catalog embeds with the real model through a gate this test holds shut, so the repair's
embedding is certainly unfinished while the request is answered.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from threading import Event, Thread, current_thread

import numpy as np
from fleetsupport import REPO, env, wait_for

from skillsearch.core.domain import Principal
from skillsearch.core.settings import Settings
from skillsearch.retrieval.encoder import Encoder, ProgressCallback
from skillsearch.retrieval.search_types import SearchRequest, SearchResult
from skillsearch.retrieval.wrapper import Wrapper
from skillsearch.service import Catalog

OPERATOR = Principal.operator()

# A writer that commits to the store (one new skill, one archived) and dies before its index write.
DEAD_WRITER = """
import os, signal, sys
from pathlib import Path
from skillsearch.catalog.importer import parse_path
from skillsearch.catalog.imports import store_import
from skillsearch.catalog.store import CatalogStore
store = CatalogStore.in_dir(Path(sys.argv[1]))
store_import(store, parse_path(Path(sys.argv[2]), "extra", "user:me"), "extra", "user:me")
store.archive(store.skills_by_slug("regex-debugging")[0].skill_id)
os.kill(os.getpid(), signal.SIGKILL)
"""


class GatedEncoder(Wrapper):
    """The real encoder, whose document embedding waits for ``release`` once ``armed``; it records the threads
    that embedded."""

    def __init__(self, inner: Encoder) -> None:
        super().__init__(inner)
        self.armed = False
        self.entered = Event()
        self.release = Event()
        self.threads: list[Thread] = []

    def encode_query_parts(self, query: str, parts: Sequence[str]) -> np.ndarray:
        return self.inner.encode_query_parts(query, parts)

    def encode_documents(self, texts: Sequence[str], progress: ProgressCallback | None = None) -> np.ndarray:
        if self.armed:
            self.threads.append(current_thread())
            self.entered.set()
            self.release.wait(300)
        return self.inner.encode_documents(texts, progress)


def test_a_request_serves_the_last_snapshot_while_a_dead_writers_leftovers_are_embedded_in_the_background(
    sample_dir: Path, encoder: Encoder, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    shutil.copytree(sample_dir, data)
    gate = GatedEncoder(encoder)
    catalog = Catalog.open(Settings(data_dir=data), encoder=gate)
    try:
        catalog.prepare_in_background()  # a server: the index is open already, the model loaded
        bundle = tmp_path / "one.json"
        bundle.write_text(json.dumps([{"slug": "llama-care", "name": "Llama care",
                                       "description": "Feed the llamas and brush their wool."}]))
        dead = subprocess.run([sys.executable, "-c", DEAD_WRITER, str(data), str(bundle)], env=env(), cwd=REPO,
                              capture_output=True, text=True, timeout=120)
        assert dead.returncode == -signal.SIGKILL, dead.stderr
        manifest = json.loads((data / "manifest.json").read_text(encoding="utf-8"))
        assert manifest["store_generation"] < catalog.generation()  # the index lags the store, no writer at work
        gate.armed = True

        answers: list[SearchResult] = []
        request = Thread(target=lambda: answers.append(
            catalog.search(OPERATOR, SearchRequest("debug a regular expression llamas", mode="lexical", limit=50))))
        try:
            request.start()
            # Until the request answered, or embeds in its own thread (what it did before: held at the gate).
            wait_for(lambda: not request.is_alive() or request in gate.threads, 120, 0.02)
            assert request not in gate.threads, "the request embedded the repair's skills in its own thread"
            assert not request.is_alive() and len(answers) == 1
            assert gate.entered.wait(120), "no repair started"
            assert all(t.name == "skillsearch-index-repair" for t in gate.threads)
            # Answered while the repair's embedding is held: the last snapshot, re-checked against the store.
            slugs = [h.skill.slug for h in answers[0].hits]
            assert "regex-debugging" not in slugs and "llama-care" not in slugs
            ready = catalog.readiness()
            assert ready.catching_up and ready.generation < catalog.generation()
        finally:
            gate.release.set()
            request.join(300)
        assert wait_for(lambda: catalog.index_generation() == catalog.generation(), 300), "the repair never finished"
        hits = catalog.search(OPERATOR, SearchRequest("feed the llamas", mode="lexical", limit=5)).hits
        assert hits and hits[0].skill.slug == "llama-care"
        assert not catalog.readiness().catching_up
    finally:
        gate.release.set()
        catalog.close()
