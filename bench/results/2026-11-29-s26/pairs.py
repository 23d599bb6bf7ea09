#!/usr/bin/env python3
"""Paired ratios from an --interleave_phases run of cairn-bench: each measured phase runs every
engine once, in an order that rotates, so consecutive lines with one workload and thread
count form one group. Prints, per workload and thread count, each group's ratio of A over B
(ops/s), their median, and the pairs whose placement tags agree (both engines' probe in the
same class: near < 150 ns <= far).

  python3 pairs.py RUN.txt [A [B]]     (A, B default cairn-membuffer, cairn-nomembuffer)
"""
import re
import statistics
import sys

LINE = re.compile(r"rep \d+/\d+ (\S+) (\S+) t=(\d+): (\d+) ops/s, p99 ([\d.]+) us, ([\d.]+) cpu-us/op, cross-core (\d+)/(\d+) ns")


def placement(a, b):
    return "".join("n" if int(x) < 150 else "f" for x in (a, b))


def main():
    path = sys.argv[1]
    a = sys.argv[2] if len(sys.argv) > 2 else "cairn-membuffer"
    b = sys.argv[3] if len(sys.argv) > 3 else "cairn-nomembuffer"
    rows = [m.groups() for m in map(LINE.search, open(path)) if m]
    groups, current = [], {}
    for engine, workload, threads, ops, p99, cpu, x, y in rows:
        if workload == "compact":
            continue
        key = (workload, int(threads))
        if engine in current and current[engine][0] == key or current and next(iter(current.values()))[0] != key:
            groups.append(current)
            current = {}
        current[engine] = (key, float(ops), float(p99), float(cpu), placement(x, y))
    if current:
        groups.append(current)
    by_cell = {}
    for group in groups:
        if a in group and b in group:
            key = group[a][0]
            by_cell.setdefault(key, []).append(group)
    for (workload, threads), cell in sorted(by_cell.items()):
        ratios = [g[a][1] / g[b][1] for g in cell]
        same = [g[a][1] / g[b][1] for g in cell if g[a][4] == g[b][4]]
        cpu = [g[a][3] / g[b][3] for g in cell]
        print(f"{workload} t={threads}: {a}/{b} per pair " + ", ".join(f"{r:.3f}" for r in ratios))
        print(f"  median {statistics.median(ratios):.3f} over {len(ratios)} pairs;"
              f" same-placement pairs {len(same)}, median {statistics.median(same):.3f}" if same else
              f"  median {statistics.median(ratios):.3f} over {len(ratios)} pairs; no same-placement pair")
        print(f"  cpu-us/op ratio median {statistics.median(cpu):.3f};"
              f" p99 us {a} median {statistics.median(g[a][2] for g in cell):.1f},"
              f" {b} {statistics.median(g[b][2] for g in cell):.1f}")
        others = sorted({e for g in cell for e in g} - {a, b})
        for other in others:
            r = [g[a][1] / g[other][1] for g in cell if other in g]
            print(f"  {a}/{other} median {statistics.median(r):.2f} ({len(r)} pairs)")


if __name__ == "__main__":
    main()
