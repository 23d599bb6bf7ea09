#!/usr/bin/env python3
"""cairn-server against Redis 7 with redis-benchmark, in one run, interleaved.

Sides (each started fresh, on a new directory and a free port, for every measurement):
  cairn      cairn-server --engine db --sync never  (WAL on: every write logged before the
             reply, not fsynced; survives a process crash)
  redis-aof  redis-server --appendonly yes --appendfsync no --save ""  (the same durability)
  redis-mem  redis-server --appendonly no --save ""  (no persistence; reference only)
  cairn-b    as cairn, with the binary --compare-bin names and the extra flags of
             --compare-args (an A/B of two builds or two settings)

For each repetition, pipeline depth and side — sides in a rotated order each repetition, so
none always runs first — it runs
  redis-benchmark -t TEST -n N -c CLIENTS -d SIZE -r KEYSPACE -P DEPTH --csv
once per test, in order, against one server (SET fills the keys GET then reads), and records
requests/s and latency percentiles per test, plus the CPU time the server process used (utime+stime from /proc/<pid>/stat, before and after) and the CPU time
redis-benchmark used (its rusage), each divided by the wall time of the run: on a 2-core
machine redis-benchmark takes most of one core, which bounds what either server can show.

Writes to --out: raw.csv (every run), summary.md (medians with min-max, p99, paired
ratios to redis-aof, CPU use), summary.json and chart.svg (median requests/s per test).

The full run (the lead's) is the defaults on a release build:
    cargo build --release -p cairn-server
    python3 bench/redis/run.py --out bench/results/$(date +%F)-redis
A smoke test of the script itself (debug build, tiny):
    python3 bench/redis/run.py --cairn-bin target/debug/cairn-server -n 2000 --reps 1 \
        --out /tmp/cairn-redis-smoke
"""

import argparse
import csv
import io
import json
import os
import resource
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

SIDES = ("cairn", "redis-aof", "redis-mem", "cairn-b")
BASELINE = "redis-aof"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def cpu_seconds(pid):
    """utime + stime of a live process, in seconds (fields 14 and 15 of /proc/pid/stat)."""
    with open(f"/proc/{pid}/stat") as stat:
        text = stat.read()
    fields = text[text.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def wait_ready(port, process, deadline_s=60):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server on port {port} exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(64).startswith(b"+PONG"):
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"server on port {port} never answered PING")


def start_side(side, args, port, directory):
    if side in ("cairn", "cairn-b"):
        binary = args.cairn_bin if side == "cairn" else (args.compare_bin or args.cairn_bin)
        command = [binary, "--engine", "db", "--dir", directory, "--port", str(port),
                   "--sync", "never"]
        if side == "cairn-b":
            command += shlex.split(args.compare_args)
    else:
        aof = "yes" if side == "redis-aof" else "no"
        command = [args.redis_server, "--port", str(port), "--bind", "127.0.0.1",
                   "--dir", directory, "--save", "", "--appendonly", aof,
                   "--appendfsync", "no", "--daemonize", "no", "--logfile", ""]
    log = open(os.path.join(directory, "server.log"), "w")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    wait_ready(port, process)
    return process, log


def stop_side(process, log):
    process.terminate()
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    log.close()


def run_benchmark(args, port, depth, test):
    """Runs redis-benchmark for one test; returns (its row, its CPU seconds, wall seconds)."""
    command = [args.redis_benchmark, "-p", str(port), "-t", test, "-n", str(args.requests),
               "-c", str(args.clients), "-d", str(args.size), "-r", str(args.keyspace),
               "-P", str(depth), "--csv"]
    started = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    output, errors = process.communicate()
    wall = time.monotonic() - started
    if process.returncode != 0:
        raise RuntimeError(f"redis-benchmark failed: {errors.decode()}")
    # communicate() reaped the child: its CPU is the growth of the children's rusage.
    rows = list(csv.DictReader(io.StringIO(output.decode())))
    if len(rows) != 1:
        raise RuntimeError(f"unexpected redis-benchmark output: {output.decode()!r}")
    row = rows[0]
    return {
        "rps": float(row["rps"]),
        "p50_ms": float(row["p50_latency_ms"]),
        "p99_ms": float(row["p99_latency_ms"]),
    }, wall


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(args, side, depth, scratch):
    """One server, every test in order (SET first fills the keys GET reads). Returns
    {test: row}, each row with the CPU cores the server and redis-benchmark kept busy."""
    directory = tempfile.mkdtemp(prefix=f"{side}-", dir=scratch)
    port = free_port()
    process, log = start_side(side, args, port, directory)
    rows = {}
    try:
        for test in args.tests.split(","):
            server_before, bench_before = cpu_seconds(process.pid), children_cpu()
            row, wall = run_benchmark(args, port, depth, test)
            server_seconds = cpu_seconds(process.pid) - server_before
            row["server_cpu"] = server_seconds / wall
            # CPU per request is what the other load on a shared machine disturbs least.
            row["server_us_per_request"] = server_seconds * 1e6 / args.requests
            row["bench_cpu"] = (children_cpu() - bench_before) / wall
            rows[test.upper()] = row
    finally:
        stop_side(process, log)
        shutil.rmtree(directory, ignore_errors=True)
    return rows


def median_range(values):
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}–{max(values):,.0f})"


def summarize(records, args):
    """Markdown tables and a JSON summary from every run's records."""
    lines = [f"# redis-benchmark: cairn-server vs Redis 7\n",
             f"`-t {args.tests} -n {args.requests} -c {args.clients} -d {args.size} "
             f"-r {args.keyspace}`, {args.reps} repetitions, interleaved. Requests/s: median "
             f"(min–max); p99 in ms (median); ratio: median of per-repetition ratios to "
             f"{BASELINE}. CPU: cores busy during the run (server / redis-benchmark); "
             f"µs/req: the server's CPU time per request (median; /proc counts 10 ms "
             f"ticks).\n"]
    summary = []
    tests = sorted({record["test"] for record in records})
    for depth in args.pipelines:
        lines.append(f"\n## -P {depth}\n")
        lines.append("| test | side | requests/s | p99 ms | ratio to " + BASELINE
                     + " | CPU server | CPU bench | server µs/req |")
        lines.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for test in tests:
            for side in args.sides:
                mine = [r for r in records if r["test"] == test and r["side"] == side
                        and r["pipeline"] == depth]
                if not mine:
                    continue
                ratios = []
                for record in mine:
                    base = [r for r in records if r["test"] == test and r["side"] == BASELINE
                            and r["pipeline"] == depth and r["rep"] == record["rep"]]
                    if base and base[0]["rps"] > 0:
                        ratios.append(record["rps"] / base[0]["rps"])
                entry = {
                    "test": test, "side": side, "pipeline": depth,
                    "rps_median": statistics.median(r["rps"] for r in mine),
                    "p99_ms_median": statistics.median(r["p99_ms"] for r in mine),
                    "ratio_median": statistics.median(ratios) if ratios else None,
                    "server_cpu": statistics.median(r["server_cpu"] for r in mine),
                    "bench_cpu": statistics.median(r["bench_cpu"] for r in mine),
                    "server_us_per_request": statistics.median(
                        r.get("server_us_per_request", 0.0) for r in mine),
                }
                summary.append(entry)
                ratio = f"{entry['ratio_median']:.2f}" if ratios else "—"
                lines.append(
                    f"| {test} | {side} | {median_range([r['rps'] for r in mine])} | "
                    f"{entry['p99_ms_median']:.3f} | {ratio} | {entry['server_cpu']:.2f} | "
                    f"{entry['bench_cpu']:.2f} | {entry['server_us_per_request']:.2f} |")
    return "\n".join(lines), summary


def chart(summary, args):
    """A grouped bar chart (SVG, no dependencies) of median requests/s."""
    groups = [(depth, test) for depth in args.pipelines
              for test in sorted({e["test"] for e in summary})]
    colors = {"cairn": "#2b7bb9", "redis-aof": "#d9534f", "redis-mem": "#aaaaaa",
              "cairn-b": "#5cb85c"}
    top = max((e["rps_median"] for e in summary), default=1) or 1
    bar, gap, height = 14, 18, 260
    width = 60 + len(groups) * (bar * len(args.sides) + gap)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 90}" '
             f'font-family="sans-serif" font-size="10">',
             f'<text x="10" y="14">median requests/s (max {top:,.0f})</text>']
    x = 50
    for depth, test in groups:
        for side in args.sides:
            found = [e for e in summary if e["pipeline"] == depth and e["test"] == test
                     and e["side"] == side]
            if found:
                h = height * found[0]["rps_median"] / top
                parts.append(f'<rect x="{x}" y="{20 + height - h:.1f}" width="{bar - 2}" '
                             f'height="{h:.1f}" fill="{colors.get(side, "#555")}"/>')
            x += bar
        parts.append(f'<text x="{x - bar * len(args.sides)}" y="{height + 35}">{test} -P{depth}'
                     f'</text>')
        x += gap
    for index, side in enumerate(args.sides):
        parts.append(f'<rect x="{50 + index * 90}" y="{height + 55}" width="10" height="10" '
                     f'fill="{colors.get(side, "#555")}"/><text x="{64 + index * 90}" '
                     f'y="{height + 64}">{side}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cairn-bin", default="target/release/cairn-server")
    parser.add_argument("--compare-bin",
                        help="side cairn-b's cairn-server (default: --cairn-bin)")
    parser.add_argument("--compare-args", default="",
                        help="extra flags for side cairn-b, e.g. \"--threads 1\"")
    parser.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    parser.add_argument("--redis-benchmark",
                        default=shutil.which("redis-benchmark") or "redis-benchmark")
    parser.add_argument("-n", "--requests", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("-c", "--clients", type=int, default=50)
    parser.add_argument("-d", "--size", type=int, default=100)
    parser.add_argument("-r", "--keyspace", type=int, default=1_000_000)
    parser.add_argument("-t", "--tests", default="set,get,incr,mset,hset")
    parser.add_argument("--pipelines", default="1,16")
    parser.add_argument("--sides", default="cairn,redis-aof,redis-mem")
    parser.add_argument("--out", default="/tmp/cairn-redis-bench")
    args = parser.parse_args()
    args.pipelines = [int(depth) for depth in args.pipelines.split(",")]
    args.sides = [side for side in args.sides.split(",") if side]
    for side in args.sides:
        if side not in SIDES:
            parser.error(f"unknown side {side}")
    if "cairn" in args.sides and not os.access(args.cairn_bin, os.X_OK):
        parser.error(f"{args.cairn_bin} missing: cargo build --release -p cairn-server")
    if "cairn-b" in args.sides and not (args.compare_bin or args.compare_args):
        parser.error("side cairn-b needs --compare-bin or --compare-args (an A/B)")
    if args.compare_bin and not os.access(args.compare_bin, os.X_OK):
        parser.error(f"{args.compare_bin} is not an executable cairn-server")
    os.makedirs(args.out, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="cairn-redis-bench-")
    records = []
    try:
        for rep in range(args.reps):
            order = args.sides[rep % len(args.sides):] + args.sides[:rep % len(args.sides)]
            for depth in args.pipelines:
                for side in order:
                    rows = measure(args, side, depth, scratch)
                    for test, row in rows.items():
                        records.append({"rep": rep, "pipeline": depth, "side": side,
                                        "test": test, **row})
                    print(f"rep {rep} -P {depth} {side}: " + ", ".join(
                        f"{t} {r['rps']:,.0f}/s (CPU {r['server_cpu']:.2f}+{r['bench_cpu']:.2f}, "
                        f"{r['server_us_per_request']:.2f} µs/req)"
                        for t, r in rows.items()), file=sys.stderr)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    with open(os.path.join(args.out, "raw.csv"), "w", newline="") as raw:
        writer = csv.DictWriter(raw, fieldnames=list(records[0].keys()) if records else ["rep"])
        writer.writeheader()
        writer.writerows(records)
    text, summary = summarize(records, args)
    with open(os.path.join(args.out, "summary.md"), "w") as out:
        out.write(text)
    with open(os.path.join(args.out, "summary.json"), "w") as out:
        json.dump({"args": {k: v for k, v in vars(args).items()}, "summary": summary}, out,
                  indent=1)
    with open(os.path.join(args.out, "chart.svg"), "w") as out:
        out.write(chart(summary, args))
    print(text)


if __name__ == "__main__":
    main()
