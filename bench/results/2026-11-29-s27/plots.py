#!/usr/bin/env python3
"""Draws this session's two plots from the raw outputs beside it:
ycsbe-pairs.png (each interleaved pair's Membuffer on/off ratio, per binary and thread
count) and fig15-alternating.png (flodb_burst throughput per budget, one line per round).

  python3 plots.py
"""
import re
import statistics
import subprocess
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
PAIRS = HERE.parent / "2026-11-29-s26" / "pairs.py"


def pair_ratios(path):
    out = subprocess.run(["python3", str(PAIRS), str(path)], capture_output=True, text=True,
                         check=True).stdout
    cells = {}
    for line in out.splitlines():
        found = re.search(r"^\S+ t=(\d+): .* per pair (.*)", line)
        if found:
            cells[int(found.group(1))] = [float(x) for x in found.group(2).split(", ")]
    return cells


def ycsbe():
    figure, axis = plt.subplots(figsize=(8, 4.5))
    position = 0
    labels = []
    for name, path in [("s26-final", "ycsbe-s26final.txt"), ("s27-a", "ycsbe-s27a.txt")]:
        for threads, ratios in sorted(pair_ratios(HERE / path).items()):
            axis.scatter([position] * len(ratios), ratios, alpha=0.5, s=14)
            axis.hlines(statistics.median(ratios), position - 0.3, position + 0.3)
            labels.append(f"{name}\n{threads} thread{'s' if threads > 1 else ''}")
            position += 1
    axis.axhline(1.0, color="grey", linestyle=":")
    axis.set_xticks(range(len(labels)), labels)
    axis.set_ylabel("ops/s, Membuffer on / off (one dot per pair)")
    axis.set_title("YCSB E, 24 interleaved pairs per cell (bar: median)")
    figure.tight_layout()
    figure.savefig(HERE / "ycsbe-pairs.png", dpi=100)


def fig15():
    rounds = {}
    for line in (HERE / "fig15-alternating.txt").read_text().splitlines():
        header = re.search(r"budget (\d+)MiB i=(\d+)", line)
        if header:
            budget, round_ = int(header.group(1)), int(header.group(2))
        run = re.search(r"t=2: (\d+) ops/s.*cross-core (\d+)/(\d+) ns", line)
        if run:
            near = all(int(x) < 150 for x in run.group(2, 3))
            rounds.setdefault(round_, []).append((budget, int(run.group(1)) / 1e6, near))
    figure, axis = plt.subplots(figsize=(8, 4.5))
    for round_, runs in sorted(rounds.items()):
        style = "-" if all(near for _, _, near in runs) else "--"
        axis.plot([b for b, _, _ in runs], [m for _, m, _ in runs], style, marker="o",
                  label=f"round {round_}" + ("" if style == "-" else " (placement changed)"))
    axis.set_xscale("log", base=2)
    axis.set_xlabel("write_buffer_size (MiB)")
    axis.set_ylabel("Mops/s")
    axis.set_title("flodb_burst, cairn-membuffer, 2 threads, budgets alternating")
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(HERE / "fig15-alternating.png", dpi=100)


if __name__ == "__main__":
    ycsbe()
    fig15()
