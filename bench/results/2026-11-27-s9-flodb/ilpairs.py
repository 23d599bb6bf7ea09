#!/usr/bin/env python3
"""Paired throughput ratios from a cairn-bench --interleave_phases log.

    ilpairs.py LOG ENGINE_A ENGINE_B [BENCHMARK ...]

Pairs the k-th phase of ENGINE_A with the k-th phase of ENGINE_B of the same benchmark,
repetition and thread count (they ran seconds apart) and prints, per benchmark and thread
count, every pair's throughput ratio A / B, their median and mean, and both engines' median
throughput and CPU per operation.
"""
import re, statistics, sys
LINE = re.compile(r"  rep (\d+)/\d+ (\S+) (\S+) t=(\d+): (\d+) ops/s, p99 [\d.]+ us, ([\d.]+) cpu-us/op")
def main():
    path, a, b = sys.argv[1:4]
    wanted = set(sys.argv[4:])
    phases = {}
    for line in open(path):
        m = LINE.match(line)
        if not m or (wanted and m.group(3) not in wanted):
            continue
        rep, engine, bench, threads = m.group(1), m.group(2), m.group(3), int(m.group(4))
        phases.setdefault((bench, threads), {}).setdefault((rep, engine), []).append(
            (float(m.group(5)), float(m.group(6))))
    for (bench, threads), by in sorted(phases.items()):
        ratios, ops_a, ops_b, cpu_a, cpu_b = [], [], [], [], []
        for (rep, engine), runs in by.items():
            if engine != a or (rep, b) not in by:
                continue
            for (oa, ca), (ob, cb) in zip(runs, by[(rep, b)]):
                ratios.append(oa / ob); ops_a.append(oa); ops_b.append(ob); cpu_a.append(ca); cpu_b.append(cb)
        if not ratios:
            continue
        print(f"{bench:18} {threads:>2} thr  {a}/{b}: pairs {' '.join(f'{r:.2f}' for r in ratios)}"
              f"  median {statistics.median(ratios):.3f} mean {statistics.mean(ratios):.3f}"
              f"  | {a} {statistics.median(ops_a)/1e3:.0f}k {statistics.median(cpu_a):.2f}us"
              f"  {b} {statistics.median(ops_b)/1e3:.0f}k {statistics.median(cpu_b):.2f}us")
main()
