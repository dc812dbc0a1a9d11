#!/usr/bin/env python3
"""Show every match of a regex in a file (or stdin), with spans, groups and timing.

Usage: regex_probe.py PATTERN [FILE] [--flags ims]
"""
import argparse
import re
import sys
import time

FLAG_MAP = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("pattern")
    ap.add_argument("file", nargs="?")
    ap.add_argument("--flags", default="", help="any of i, m, s, x")
    args = ap.parse_args()
    flags = 0
    for ch in args.flags:
        flags |= FLAG_MAP[ch]
    rx = re.compile(args.pattern, flags)
    text = open(args.file, encoding="utf-8").read() if args.file else sys.stdin.read()
    for lineno, line in enumerate(text.splitlines(), 1):
        start = time.perf_counter()
        matches = list(rx.finditer(line))
        ms = (time.perf_counter() - start) * 1000
        status = f"{len(matches)} match(es)" if matches else "no match"
        print(f"{lineno:>4}: {status:<12} {ms:7.2f} ms  {line[:80]!r}")
        for m in matches:
            print(f"        span={m.span()} text={m.group(0)!r}")
            for name, value in m.groupdict().items():
                print(f"          {name} = {value!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
