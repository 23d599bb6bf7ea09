#!/usr/bin/env python3
"""Sign test over the pairs of several runs pooled per cell (`../2026-11-29-s26/pairs.py`
on each file; the summary line is `../2026-11-29-s27/signtest.py`'s): how many pairs fall
below 1, the two-sided binomial p, the median and the quartiles of the ratios.

  python3 pooled.py RUN.txt [RUN.txt ...]
"""
import re
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent
PAIRS = RESULTS / "2026-11-29-s26" / "pairs.py"
sys.path.insert(0, str(RESULTS / "2026-11-29-s27"))
from signtest import summary  # noqa: E402  (the path is set just above)


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
        print(summary(cell, ratios))

if __name__ == "__main__":
    main()
