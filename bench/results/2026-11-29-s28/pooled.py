#!/usr/bin/env python3
"""Sign test over the pairs of several runs pooled per cell (`../2026-11-29-s26/pairs.py`
on each file): how many pairs fall below 1, the two-sided binomial p, the median and the
quartiles of the ratios.

  python3 pooled.py RUN.txt [RUN.txt ...]
"""
import math
import re
import statistics
import subprocess
import sys
from pathlib import Path

PAIRS = Path(__file__).resolve().parent.parent / "2026-11-29-s26" / "pairs.py"


def cells(path):
    out = subprocess.run(["python3", str(PAIRS), path], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        found = re.search(r"^(\S+ t=\d+): .* per pair (.*)", line)
        if found:
            yield found.group(1), [float(x) for x in found.group(2).split(", ")]


def main():
    pooled = {}
    for path in sys.argv[1:]:
        for cell, ratios in cells(path):
            pooled.setdefault(cell, []).extend(ratios)
    for cell, ratios in pooled.items():
        n, below = len(ratios), sum(r < 1 for r in ratios)
        k = max(below, n - below)
        p = min(1.0, 2 * sum(math.comb(n, i) for i in range(k, n + 1)) / 2 ** n)
        q1, _, q3 = statistics.quantiles(ratios, n=4)
        print(f"{cell}: {n} pairs, {below} below 1 (sign test p = {p:.3f}),"
              f" median {statistics.median(ratios):.3f}, quartiles {q1:.3f}-{q3:.3f}")


if __name__ == "__main__":
    main()
