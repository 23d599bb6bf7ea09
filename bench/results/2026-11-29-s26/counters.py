#!/usr/bin/env python3
"""Membuffer counters per (benchmark, threads) from a cairn-bench results.json: scans, scan
drains and fallbacks (copies instead of drains), summed over the runs.

  python3 counters.py results.json [engine]   (engine default cairn-membuffer)
"""
import json
import sys

NAMES = ["membuffer_scan_drains", "membuffer_scan_fallbacks", "membuffer_drains",
         "membuffer_drained_versions", "membuffer_writes", "membuffer_direct_writes"]


def main():
    data = json.load(open(sys.argv[1]))
    engine = sys.argv[2] if len(sys.argv) > 2 else "cairn-membuffer"
    for result in data["results"]:
        if result["engine"] != engine or result["benchmark"] == "compact":
            continue
        totals = {name: 0 for name in NAMES}
        ops = 0
        for run in result["runs"]:
            ops += run["ops"]
            for name, value in run.get("engine_counters", []):
                if name in totals:
                    totals[name] += value
        shown = ", ".join(f"{name.removeprefix('membuffer_')} {value}" for name, value in totals.items())
        print(f"{result['benchmark']} t={result['threads']}: ops {ops}, {shown}")


if __name__ == "__main__":
    main()
