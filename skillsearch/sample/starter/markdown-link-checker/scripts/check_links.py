#!/usr/bin/env python3
"""Report broken relative links and anchors in Markdown files.
Usage: check_links.py PATH [PATH ...]   (files or directories)"""
import re
import sys
from pathlib import Path

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.*)$", re.MULTILINE)
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)  # links in code are examples


def text(path: Path) -> str:
    return CODE.sub("", path.read_text(encoding="utf-8"))


def anchors(path: Path) -> set[str]:
    slugs = (re.sub(r"[^\w\s-]", "", h.strip().lower()) for h in HEADING.findall(text(path)))
    return {re.sub(r"\s", "-", s) for s in slugs}


def main(args: list[str]) -> int:
    files = []
    for p in map(Path, args or ["."]):
        files += sorted(p.rglob("*.md")) if p.is_dir() else [p]
    broken = 0
    for md in files:
        for target in LINK.findall(text(md)):
            if re.match(r"^[a-z]+:", target):  # http:, mailto:, ...
                continue
            file_part, _, anchor = target.partition("#")
            dest = (md.parent / file_part).resolve() if file_part else md
            problem = "missing file" if not dest.exists() else (
                "missing anchor" if anchor and dest.suffix == ".md" and anchor not in anchors(dest) else "")
            if problem:
                print(f"{md}: {problem} {target}")
                broken += 1
    print(f"{len(files)} files checked, {broken} broken link(s)")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
