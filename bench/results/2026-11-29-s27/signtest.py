#!/usr/bin/env python3
"""Sign test over the pairs `pairs.py` prints: per cell, how many pairs fall below 1, the
two-sided binomial p of that count, the median and the quartiles of the ratios.

  python3 signtest.py RUN.txt [A [B]]
"""
import math
import re
import statistics
import subprocess
import sys
from pathlib import Path

PAIRS = Path(__file__).resolve().parent.parent / "2026-11-29-s26" / "pairs.py"


def main():
    out = subprocess.run(["python3", str(PAIRS), *sys.argv[1:]], capture_output=True,
                         text=True, check=True).stdout
    for line in out.splitlines():
        found = re.search(r"^(\S+ t=\d+): .* per pair (.*)", line)
        if not found:
            continue
        print(summary(found.group(1), [float(x) for x in found.group(2).split(", ")]))


def summary(cell, ratios):
    """One cell's line: pairs below 1, the two-sided sign test's p, median and quartiles."""
    n, below = len(ratios), sum(r < 1 for r in ratios)
    k = max(below, n - below)
    p = min(1.0, 2 * sum(math.comb(n, i) for i in range(k, n + 1)) / 2 ** n)
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    return (f"{cell}: {n} pairs, {below} below 1 (sign test p = {p:.3f}),"
            f" median {statistics.median(ratios):.3f}, quartiles {q1:.3f}-{q3:.3f}")


if __name__ == "__main__":
    main()
