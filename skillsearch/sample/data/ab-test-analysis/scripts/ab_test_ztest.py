#!/usr/bin/env python3
"""Two-proportion z-test for an A/B test, with SRM check (stdlib only).
Usage: ab_test_ztest.py --control USERS CONVERSIONS --variant USERS CONVERSIONS [--split 0.5]
"""
import argparse
import math


def norm_cdf(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--control", nargs=2, type=int, required=True, metavar=("N", "CONV"))
    ap.add_argument("--variant", nargs=2, type=int, required=True, metavar=("N", "CONV"))
    ap.add_argument("--split", type=float, default=0.5, help="expected share of control")
    a = ap.parse_args()
    (n1, c1), (n2, c2) = a.control, a.variant
    p1, p2 = c1 / n1, c2 / n2
    diff = p2 - p1
    se = math.sqrt(p1 * (1 - p1) / n1 + p2 * (1 - p2) / n2)
    pooled = (c1 + c2) / (n1 + n2)
    se0 = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    z = diff / se0
    p_value = 2 * (1 - norm_cdf(abs(z)))
    total = n1 + n2
    exp1, exp2 = total * a.split, total * (1 - a.split)
    chi2 = (n1 - exp1) ** 2 / exp1 + (n2 - exp2) ** 2 / exp2
    srm_p = math.erfc(math.sqrt(chi2 / 2))  # chi-square, 1 degree of freedom
    print(f"control  {c1}/{n1} = {p1:.4%}")
    print(f"variant  {c2}/{n2} = {p2:.4%}")
    print(f"lift     {diff * 100:+.3f} pp ({diff / p1:+.2%} relative)")
    print(f"95% CI   [{(diff - 1.96 * se) * 100:+.3f}, {(diff + 1.96 * se) * 100:+.3f}] pp")
    print(f"z = {z:.3f}, two-sided p = {p_value:.4f}")
    print(f"SRM p = {srm_p:.4g}" + ("  <-- sample ratio mismatch, do not trust" if srm_p < 0.001 else ""))


if __name__ == "__main__":
    main()
