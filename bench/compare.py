"""Summarise bench/compare.sh runs: paired new/old ratios per benchmark and thread count.

Placement tag of a run: the slower of the cross-core round trips cairn-bench probed before and
after the phase -- near (< 100 ns), mid (100-250 ns), far (> 250 ns); see bench/README.md.
"""
import json
import statistics
import sys


def tag(run):
    probes = [run.get("cross_core_round_trip_ns_before"), run.get("cross_core_round_trip_ns_after")]
    probes = [p for p in probes if p is not None]
    if not probes:
        return "?"
    slow = max(probes)
    return "near" if slow < 100 else ("mid" if slow <= 250 else "far")


def load(path):
    with open(path) as handle:
        data = json.load(handle)
    return {(r["benchmark"], r["threads"]): r["runs"][0] for r in data["results"] if r["runs"]}


def main():
    out, reps, old_rev, new_rev = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    pairs = {}
    for rep in range(1, reps + 1):
        old, new = load(f"{out}/old-{rep}.json"), load(f"{out}/new-{rep}.json")
        for key in old.keys() & new.keys():
            pairs.setdefault(key, []).append((old[key], new[key]))
    print(f"paired comparison: new={new_rev} / old={old_rev}, {reps} interleaved repetitions")
    for (bench, threads), runs in sorted(pairs.items()):
        ratios = [n["ops_per_sec"] / o["ops_per_sec"] for o, n in runs]
        cells = "  ".join(
            f"{r:.3f}({tag(o)}/{tag(n)})" for r, (o, n) in zip(ratios, runs)
        )
        old_med = statistics.median(o["ops_per_sec"] for o, _ in runs)
        new_med = statistics.median(n["ops_per_sec"] for _, n in runs)
        verdict = "ok" if statistics.median(ratios) >= 0.95 else "REGRESSION"
        p99 = [statistics.median(r.get("p99_us") or 0 for r in side) for side in zip(*runs)]
        p999 = [statistics.median(r.get("p999_us") or 0 for r in side) for side in zip(*runs)]
        print(
            f"{bench:>16} t={threads:<3} old {old_med/1e3:8.1f}k new {new_med/1e3:8.1f}k ops/s  "
            f"paired median {statistics.median(ratios):.3f} [{verdict}]  "
            f"p99 {p99[0]:.1f}->{p99[1]:.1f} us  p99.9 {p999[0]:.1f}->{p999[1]:.1f} us  "
            f"per rep: {cells}"
        )


if __name__ == "__main__":
    main()
