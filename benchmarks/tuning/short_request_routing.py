"""Where ``minilm+e5`` sends short requests: non-English ones read as English, English ones read as foreign.

No model is loaded (``language.is_foreign`` alone, with and without MiniLM's vocabulary). Requests: the
multilingual dev set (``benchmarks/data/multilingual.jsonl``), the skills dev set's requests in other
languages and in English, and the English dev queries of MetaTool, Seal-Tools and Gorilla (``qrels.dev.tsv``).
Each request is also cut into the short requests an agent sends: its first N words, its last N words, and
its first N content words ("kw N": words of 4+ letters outside the detector's function-word lists, the
shape of a keyword request such as "Datenbank-Passwort rotieren"). Prints, per set, how many requests
each check misreads (docs/rules.md, "Routing").

Usage: ``PYTHONPATH=. python benchmarks/tuning/short_request_routing.py [--data-root ../shared/data]
[--examples]``. Not collected by pytest.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from pathlib import Path

from skillsearch.core import language
from skillsearch.core.language import is_foreign
from skillsearch.retrieval.model_files import minilm_words

ROOT = Path(__file__).resolve().parents[2]
_WORD = re.compile(r"[^\W\d_][\w'’-]*", re.UNICODE)
_STOP = language.FRENCH_WORDS | language._OTHER_LATIN | language._ENGLISH_CUES


def _keywords(q: str, n: int) -> str:
    words = [w for w in _WORD.findall(q) if len(w) >= 4 and w.lower() not in _STOP]
    return " ".join(words[:n]) if words else q


CUTS: dict[str, Callable[[str], str]] = {
    "full": lambda q: q,
    "first 4": lambda q: " ".join(q.split()[:4]),
    "first 3": lambda q: " ".join(q.split()[:3]),
    "first 2": lambda q: " ".join(q.split()[:2]),
    "last 3": lambda q: " ".join(q.rstrip(" ?.!。？").split()[-3:]),
    "last 2": lambda q: " ".join(q.rstrip(" ?.!。？").split()[-2:]),
    "kw 3": lambda q: _keywords(q, 3),
    "kw 2": lambda q: _keywords(q, 2),
}


def _lines(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def request_sets(data_root: Path) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(non-English sets, English sets), each request text by set name."""
    foreign: dict[str, list[str]] = {}
    english: dict[str, list[str]] = {}
    for r in _lines(ROOT / "benchmarks" / "data" / "multilingual.jsonl"):
        (english if r["lang"] == "en" else foreign).setdefault("multilingual-" + r["lang"], []).append(r["query"])
    for r in _lines(data_root / "skills-catalog" / "queries.dev.jsonl"):
        (english if r["lang"] == "en" else foreign).setdefault("skills-" + r["lang"], []).append(r["q"])
    for name in ("metatool", "sealtools", "gorilla"):
        folder = data_root / name
        dev = {line.split("\t")[0] for line in (folder / "qrels.dev.tsv").read_text(encoding="utf-8").splitlines()}
        english[name] = [r["text"] for r in _lines(folder / "queries.jsonl") if r["_id"] in dev]
    return foreign, english


def table(sets: dict[str, list[str]], misread: Callable[[str], bool], examples: list[str]) -> list[str]:
    out = ["| set | n | " + " | ".join(CUTS) + " |", "|" + " --- |" * (len(CUTS) + 2)]
    totals = dict.fromkeys(CUTS, 0)
    for name, texts in sorted(sets.items()):
        cells = []
        for cut_name, cut in CUTS.items():
            bad = [cut(t) for t in texts if misread(cut(t))]
            totals[cut_name] += len(bad)
            cells.append(str(len(bad)))
            examples += [f"{name} {cut_name}: {b[:100]!r}" for b in bad]
        out.append(f"| {name} | {len(texts)} | " + " | ".join(cells) + " |")
    out.append(f"| all | {sum(map(len, sets.values()))} | " + " | ".join(map(str, totals.values())) + " |")
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-root", type=Path, default=ROOT.parent / "shared" / "data")
    p.add_argument("--examples", action="store_true", help="list every misread request")
    args = p.parse_args()
    foreign, english = request_sets(args.data_root)
    words = minilm_words()
    checks: dict[str, frozenset[str] | None] = {"cues only (no vocabulary)": None,
                                                 "with MiniLM's vocabulary (the route)": words}
    for title, known in checks.items():
        examples: list[str] = []

        def foreign_read(text: str, known: frozenset[str] | None = known) -> bool:
            return is_foreign(text, known)

        print(f"## {title}\n\nNon-English requests read as English:\n")
        print("\n".join(table(foreign, lambda t: not foreign_read(t), examples)))
        print("\nEnglish requests read as foreign (sent to e5):\n")
        print("\n".join(table(english, foreign_read, examples)))
        if args.examples:
            print("\n" + "\n".join(examples))
        print()


if __name__ == "__main__":
    main()
