"""SIGTERM (docker, Kubernetes, systemd) during an embedding: the process stops at the next batch instead of
embedding everything first, keeps what it embedded, exits 143 saying what is left, and the next open embeds
the rest. A real ``skillsearch import`` process with the real MiniLM model."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from skillsearch.core.domain import Principal
from skillsearch.core.settings import Settings
from skillsearch.retrieval.encoder import Encoder
from skillsearch.retrieval.search_types import SearchRequest
from skillsearch.service import Catalog

REPO = Path(__file__).resolve().parents[1]
SKILLS = 400
TAIL = "Quokka telemetry for zanzibar lighthouses"


def _bundle(path: Path) -> Path:
    skills = [
        {"slug": f"skill-{i:03d}", "name": f"Skill {i:03d}",
         "description": f"Handles chore number {i} of the warehouse inventory, step by step.",
         "tags": ["chores"], "instructions": f"Count the boxes of aisle {i}. Write the total down. " * 8}
        for i in range(SKILLS - 1)
    ]
    skills.append({"slug": "lighthouse-quokka", "name": TAIL, "description": f"{TAIL}: reads the beacons.",
                   "tags": ["beacons"], "instructions": "Read each lighthouse beacon and log the quokka count."})
    path.write_text(json.dumps(skills), encoding="utf-8")
    return path


def test_sigterm_mid_import_stops_between_batches_and_the_next_open_embeds_the_rest(
        tmp_path: Path, encoder: Encoder) -> None:
    data_dir = tmp_path / "data"
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "skillsearch.cli", "--data-dir", str(data_dir), "--encoder", "minilm", "import",
         str(_bundle(tmp_path / "bundle.json")), "--source", "chores", "--grant", "team:ops"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
    )
    assert proc.stderr is not None
    seen = ""
    while "embedding" not in seen:  # the progress bar: the store has committed, the model embeds
        char = proc.stderr.read(1)
        assert char, f"the import ended before it embedded: {seen!r}"
        seen += char
    proc.send_signal(signal.SIGTERM)
    rest = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(timeout=120) == 128 + signal.SIGTERM, seen + rest
    said = re.search(r"terminated: stopped embedding: (\d+) of (\d+) skills embedded and saved; the other (\d+)", rest)
    assert said is not None, rest
    embedded, total, left = map(int, said.groups())
    assert total == SKILLS and left == SKILLS - embedded and left > 0

    # The store holds every skill (its transaction committed); the index what was embedded, behind the store.
    manifest = json.loads((data_dir / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["store_generation"] == -1 and manifest["documents"] == embedded
    catalog = Catalog.open(Settings(data_dir=data_dir, encoder="minilm", seed_sample=False), encoder=encoder)
    try:
        assert catalog.skill_count() == SKILLS
        assert catalog.embedded_documents() == left  # only the rest, not the skills embedded before the stop
        assert catalog.indexed_documents() == SKILLS
        catalog.readiness()  # both sides hold every skill, at the store's generation
        hits = catalog.search(Principal.operator(), SearchRequest(query="quokka lighthouse beacons", mode="semantic")).hits
        assert hits and hits[0].skill.slug == "lighthouse-quokka"
    finally:
        catalog.close()
