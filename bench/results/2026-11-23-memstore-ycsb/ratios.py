#!/usr/bin/env python3
"""Prints MemStore's ratios to each peer from a cairn-bench results.json, as Markdown.

ops/s ratio = MemStore median ops/s / peer median ops/s (> 1: MemStore faster).
CPU ratio   = peer median CPU us/op / MemStore median CPU us/op (> 1: MemStore cheaper).
"""
import json
import sys

path = sys.argv[1] if len(sys.argv) > 1 else "results.json"
report = json.load(open(path))
cells = {}
for entry in report["results"]:
    if entry.get("unsupported"):
        continue
    cells[(entry["benchmark"], entry["threads"], entry["engine"])] = entry["summary"]
benchmarks = []
for entry in report["results"]:
    if entry["benchmark"] not in benchmarks:
        benchmarks.append(entry["benchmark"])
peers = [engine for engine in report["engines"] if engine != "memstore"]


def fmt(value):
    return f"{value / 1e3:.0f}k" if value < 1e6 else f"{value / 1e6:.2f}M"


header = "| workload | thr | memstore ops/s [min–max] |"
for peer in peers:
    header += f" {peer} ops/s | ÷ {peer} |"
for peer in peers:
    header += f" CPU ÷ {peer} |"
print(header)
print("|" + " --- |" * (3 + 3 * len(peers)))
for benchmark in benchmarks:
    for threads in report["threads"]:
        mine = cells.get((benchmark, threads, "memstore"))
        if mine is None:
            continue
        ops = mine["ops_per_sec"]
        row = f"| {benchmark} | {threads} | {fmt(ops['median'])} [{fmt(ops['min'])}–{fmt(ops['max'])}] |"
        for peer in peers:
            theirs = cells.get((benchmark, threads, peer))
            if theirs is None:
                row += " – | – |"
                continue
            ratio = ops["median"] / theirs["ops_per_sec"]["median"]
            mark = "**" if ratio < 0.5 else ""
            row += f" {fmt(theirs['ops_per_sec']['median'])} | {mark}{ratio:.2f}{mark} |"
        for peer in peers:
            theirs = cells.get((benchmark, threads, peer))
            cpu = mine["cpu_us_per_op"]["median"]
            if theirs is None or cpu <= 0:
                row += " – |"
                continue
            row += f" {theirs['cpu_us_per_op']['median'] / cpu:.2f} |"
        print(row)
