#!/usr/bin/env python3
"""Medians of ab.sh's runs: per binary, benchmark and threads, cairn's and RocksDB's ops/s
(every repetition of every round) and cairn over RocksDB; then the second binary over the
first for cairn."""
import re, sys, statistics, glob, os
from collections import defaultdict
out = sys.argv[1]; bins = sys.argv[2:]
line = re.compile(r"rep \d+/\d+ (\S+) (\S+) t=(\d+): (\d+) ops/s.*cross-core (\d+)/(\d+) ns")
ops = defaultdict(list); place = defaultdict(list)
for path in sorted(glob.glob(os.path.join(out, "*.txt"))):
    name = os.path.basename(path).rsplit("-r", 1)[0]
    for m in line.finditer(open(path).read()):
        engine, bench, threads, value, a, b = m.groups()
        ops[(name, engine, bench, int(threads))].append(int(value))
        place[name].append(int(a))
keys = sorted({(b, t) for (_, _, b, t) in ops})
print("| benchmark | threads | " + " | ".join(f"{b} cairn k/s | {b} rocksdb k/s | {b} cairn/rocksdb" for b in bins) + f" | {bins[-1]}/{bins[0]} cairn |")
print("|" + " --- |" * (2 + 3 * len(bins) + 1))
for bench, threads in keys:
    cells = []; cairn = []
    for b in bins:
        c = statistics.median(ops[(b, "cairn", bench, threads)]); r = statistics.median(ops[(b, "rocksdb", bench, threads)])
        cairn.append(c); cells += [f"{c/1000:.0f}", f"{r/1000:.0f}", f"{c/r:.2f}"]
    print(f"| {bench} | {threads} | " + " | ".join(cells) + f" | {cairn[-1]/cairn[0]:.3f} |")
for b in bins:
    print(f"\n{b}: cross-core probe medians {statistics.median(place[b])} ns over {len(place[b])} lines")
