#!/usr/bin/env python3
"""Quick per-column profile of a CSV file with pandas.

Usage: profile_csv.py FILE.csv [--top 5] [--sep ,]
"""
import argparse

import pandas as pd


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--sep", default=",")
    args = ap.parse_args()
    # Read everything as text first so nothing is silently converted.
    df = pd.read_csv(args.path, sep=args.sep, dtype="string", keep_default_na=False)
    print(f"{args.path}: {len(df)} rows x {df.shape[1]} columns\n")
    for col in df.columns:
        s = df[col]
        blank = (s.str.strip() == "").mean()
        numeric = pd.to_numeric(s, errors="coerce").notna().mean()
        top = s.value_counts().head(args.top)
        print(f"## {col}")
        print(f"   blank: {blank:.1%}  distinct: {s.nunique()}  parses as number: {numeric:.1%}")
        for value, count in top.items():
            print(f"   {count:>8}  {value!r}")
        print()


if __name__ == "__main__":
    main()
