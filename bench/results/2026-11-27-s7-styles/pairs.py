#!/usr/bin/env python3
"""Per-pair CPU and time ratios of two engines run with --interleave_phases.

    pairs.py LOG [BENCHMARK]    # LOG: cairn-bench's standard error; BENCHMARK default readrandom

Pairs each read phase of the second engine with the first engine's phase just before it (same
repetition, same position in the list) and prints, per repetition, both shapes, every pair's
CPU-per-operation ratio (second / first) and their median; then the median over all pairs.
"""
import re
import statistics
import sys

LINE = re.compile(
    r"  rep (\d+)/\d+ (\S+) (\S+) t=(\d+): (\d+) ops/s, p99 [\d.]+ us, ([\d.]+) cpu-us/op"
    r"(?:, ([\d.]+) blocks/read)?(?:, cross-core (\d+)/(\d+) ns)?(?:, shape (.*))?")


def runs(shape):
    """Sorted runs in a shape string such as `L0:3r/3f/2M L4:1r/10f/641M`."""
    return sum(int(part) for part in re.findall(r":(\d+)r/", shape))


def main():
    path = sys.argv[1]
    benchmark = sys.argv[2] if len(sys.argv) > 2 else "readrandom"
    phases = {}
    engines = []
    for line in open(path):
        match = LINE.match(line)
        if not match or match.group(3) != benchmark:
            continue
        rep, engine = match.group(1), match.group(2)
        if engine not in engines:
            engines.append(engine)
        phases.setdefault(rep, {}).setdefault(engine, []).append({
            "ops": float(match.group(5)), "cpu": float(match.group(6)),
            "blocks": float(match.group(7) or 0), "shape": (match.group(10) or "").strip(),
            "placement": max(int(match.group(8) or 0), int(match.group(9) or 0))})
    first, second = engines[0], engines[1]
    every_cpu, every_time = [], []
    print(f"{second} / {first}, {benchmark}: CPU per operation, per pair")
    for rep in sorted(phases, key=int):
        a, b = phases[rep][first], phases[rep][second]
        cpu = [y["cpu"] / x["cpu"] for x, y in zip(a, b)]
        time = [x["ops"] / y["ops"] for x, y in zip(a, b)]
        every_cpu += cpu
        every_time += time
        print(f"rep {rep}: {first} {a[0]['shape']} ({runs(a[0]['shape'])} runs, "
              f"{a[0]['blocks']:.3f} blocks/read)")
        print(f"       {second} {b[0]['shape']} ({runs(b[0]['shape'])} runs, "
              f"{b[0]['blocks']:.3f} blocks/read)")
        print("       pairs " + " ".join(f"{r:.2f}" for r in cpu)
              + f"  median CPU {statistics.median(cpu):.3f}, time {statistics.median(time):.3f}"
              + f"  (CPU us {statistics.median([x['cpu'] for x in a]):.2f} / "
              + f"{statistics.median([y['cpu'] for y in b]):.2f})")
    print(f"all {len(every_cpu)} pairs: median CPU ratio {statistics.median(every_cpu):.3f}, "
          f"time ratio {statistics.median(every_time):.3f}")


if __name__ == "__main__":
    main()
