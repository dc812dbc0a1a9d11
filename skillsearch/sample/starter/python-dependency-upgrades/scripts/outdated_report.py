#!/usr/bin/env python3
"""Group `pip list --outdated --format=json` output by semver bump size.

Usage: pip list --outdated --format=json > outdated.json
       outdated_report.py outdated.json
"""
import json
import re
import sys


def parts(version: str) -> list[int]:
    nums = [int(n) for n in re.findall(r"\d+", version)[:3]]
    return nums + [0] * (3 - len(nums))


def bump_kind(old: str, new: str) -> str:
    a, b = parts(old), parts(new)
    if a[0] != b[0]:
        return "major"
    if a[1] != b[1]:
        return "minor"
    return "patch"


def main(path: str) -> None:
    rows = json.load(open(path, encoding="utf-8"))
    groups: dict[str, list[str]] = {"major": [], "minor": [], "patch": []}
    for row in rows:
        kind = bump_kind(row["version"], row["latest_version"])
        groups[kind].append(f"{row['name']} {row['version']} -> {row['latest_version']}")
    for kind in ("patch", "minor", "major"):
        print(f"== {kind} ({len(groups[kind])}) ==")
        for line in sorted(groups[kind], key=str.lower):
            print("  " + line)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "outdated.json")
