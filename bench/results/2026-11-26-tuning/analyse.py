#!/usr/bin/env python3
"""Tables (figures.md) and cross-run plots (*.png) from the runs of run.sh.

Usage: analyse.py [RESULTS_DIR]   (default: the directory of this script)

Every figure comes from runs/<name>/results.json, written by one cairn-bench command each
(the command is in the JSON and in runs/<name>.txt). Derived figures:
  live data   = found fraction of readrandom x num x (key + value): the distinct keys a
                random fill left (about 63 % of num), in logical bytes
  s-amp       = database directory after the settle (or compact) step / live data
  w-amp       = bytes the process wrote to storage during fill + settle / key+value bytes of
                the fill (WAL included; the settle step finishes the fill's compactions)
  insert CPU  = process CPU seconds of fill + settle / keys written, in microseconds: the
                whole cost of an insert, background merging included; machine load moves it
                far less than ops/s
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
RUNS = os.path.join(HERE, "runs")


def load(name):
    path = os.path.join(RUNS, name, "results.json")
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        report = json.load(handle)
    phases = {}
    for entry in report["results"]:
        if entry["runs"]:
            phases[entry["benchmark"]] = entry["runs"][0]
    return {"report": report, "phases": phases, "name": name}


def counter(measurement, name):
    for key, value in measurement.get("engine_counters", []):
        if key == name:
            return value
    return 0


def summary(run):
    """The derived figures of one run (None where a phase is missing)."""
    report, phases = run["report"], run["phases"]
    params = report["params"]
    entry_bytes = params["key_size"] + params["value_size"]
    fill = phases.get("fillrandom")
    after = phases.get("settle") or phases.get("compact")
    out = {"name": run["name"], "command": report["command"], "commit": report["commit"]}
    if fill:
        out["fill_ops"] = fill["ops_per_sec"]
        out["fill_cpu_us"] = fill["cpu_us_per_op"]
        total_cpu = fill["cpu_seconds"] + (after["cpu_seconds"] if after else 0.0)
        total_disk = fill["disk_bytes"] + (after["disk_bytes"] if after else 0)
        out["insert_cpu_us"] = total_cpu * 1e6 / fill["ops"]
        out["w_amp"] = total_disk / fill["logical_bytes"]
        wal = counter(fill, "wal_bytes") + (counter(after, "wal_bytes") if after else 0)
        tables = sum(
            counter(m, "flush_bytes") + counter(m, "compaction_write_bytes")
            for m in (fill, after)
            if m
        )
        out["engine_w_amp"] = tables / wal if wal else None
        out["settle_s"] = after["seconds"] if after else None
    if after:
        out["space_mib"] = after["space_bytes"] / 2**20
        out["shape"] = after.get("level_shape")
    read = phases.get("readrandom")
    if read:
        out["found"] = read["found"] / read["reads"] if read["reads"] else None
        if after and out["found"]:
            live = out["found"] * params["num"] * entry_bytes
            out["s_amp"] = after["space_bytes"] / live
    for phase in ["readrandom", "multireadrandom", "readmissing"]:
        m = phases.get(phase)
        if m:
            out[phase] = {
                "ops": m["ops_per_sec"],
                "cpu_us": m["cpu_us_per_op"],
                "p50_us": m["p50_us"],
                "blocks": m.get("blocks_per_read"),
            }
    seeks = {}
    for phase, m in phases.items():
        if phase.startswith("seekrandom:"):
            size = int(phase.split(":")[1]) + 1
            seeks[size] = {
                "us": 1e6 / m["ops_per_sec"] if m["ops_per_sec"] else None,
                "cpu_us": m["cpu_us_per_op"],
                "p50_us": m["p50_us"],
            }
    out["seeks"] = dict(sorted(seeks.items()))
    out["load"] = (report["machine"]["load_average_start"], report["machine"]["load_average_end"])
    return out


def fmt(value, spec=".2f"):
    return "-" if value is None else format(value, spec)


def kops(value):
    return "-" if value is None else f"{value / 1000:.0f}k"


def shape_rows(names):
    rows = []
    for name in names:
        run = load(name)
        if run:
            rows.append(summary(run))
    return rows


def shape_table(rows, title):
    lines = [f"### {title}", ""]
    lines.append(
        "| run | fill ops/s | insert CPU µs/key (fill + settle) | w-amp (disk) | w-amp (tables/WAL) "
        "| space MiB | s-amp | shape after settle | readrandom ops/s (CPU µs, blocks) "
        "| multi_get ops/s (CPU µs) | readmissing ops/s (CPU µs, blocks) |"
    )
    lines.append("| --- " * 11 + "|")
    for r in rows:
        rr, mg, rm = r.get("readrandom", {}), r.get("multireadrandom", {}), r.get("readmissing", {})
        lines.append(
            f"| {r['name']} | {kops(r.get('fill_ops'))} | {fmt(r.get('insert_cpu_us'))} "
            f"| {fmt(r.get('w_amp'))} | {fmt(r.get('engine_w_amp'))} | {fmt(r.get('space_mib'), '.0f')} "
            f"| {fmt(r.get('s_amp'))} | `{r.get('shape')}` "
            f"| {kops(rr.get('ops'))} ({fmt(rr.get('cpu_us'))}, {fmt(rr.get('blocks'), '.3f')}) "
            f"| {kops(mg.get('ops'))} ({fmt(mg.get('cpu_us'))}) "
            f"| {kops(rm.get('ops'))} ({fmt(rm.get('cpu_us'))}, {fmt(rm.get('blocks'), '.4f')}) |"
        )
    return lines


def plot_tradeoff(rows, path):
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    for r in rows:
        if "readrandom" not in r or r.get("insert_cpu_us") is None:
            continue
        label = r["name"].replace("style-", "").replace("runs-", "").replace("fanout-", "")
        axes[0].scatter(r["fill_ops"] / 1000, r["readrandom"]["ops"] / 1000)
        axes[0].annotate(label, (r["fill_ops"] / 1000, r["readrandom"]["ops"] / 1000), fontsize=7)
        axes[1].scatter(r["insert_cpu_us"], r["readrandom"]["cpu_us"])
        axes[1].annotate(label, (r["insert_cpu_us"], r["readrandom"]["cpu_us"]), fontsize=7)
    axes[0].set_xlabel("fillrandom k ops/s (foreground)")
    axes[0].set_ylabel("readrandom k ops/s")
    axes[0].set_title("throughput (noisy: shared 2-vCPU machine)")
    axes[1].set_xlabel("insert CPU µs per key (fill + settle, background included)")
    axes[1].set_ylabel("readrandom CPU µs per lookup")
    axes[1].set_title("CPU per operation (lower is better)")
    fig.suptitle("insert vs lookup by style, runs per level D and fanout T (8 M keys, L1 4 MiB)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_amplification(rows, path):
    rows = [r for r in rows if r.get("w_amp") is not None]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    xs = range(len(rows))
    ax.bar([x - 0.2 for x in xs], [r["engine_w_amp"] for r in rows], 0.4, label="write amplification (tables / WAL)")
    ax.bar([x + 0.2 for x in xs], [r.get("s_amp") or 0 for r in rows], 0.4, label="space amplification")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([r["name"].replace("style-", "").replace("-levels5", "\n5 levels") for r in rows], fontsize=8)
    ax.legend()
    ax.set_title("w-amp (tables/WAL) and s-amp per style (8 M keys, L1 4 MiB, T 10)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def monkey_bits(average, ratio, deepest, level):
    """cairn's Monkey bits per key for `level` (crates/cairn/src/compaction/levels.rs)."""
    import math

    if average == 0:
        return 0
    ln2_squared = math.log(2) ** 2
    ln_ratio = math.log(max(ratio, 2))
    log_size = lambda l: max(l - 1, 0) * ln_ratio
    deepest = max(deepest, 1)
    weights = [math.exp(log_size(l)) for l in range(1, deepest + 1)]
    mean_log = sum(w * log_size(l) for l, w in zip(range(1, deepest + 1), weights)) / sum(weights)
    bits = average + (mean_log - log_size(level)) / ln2_squared
    return int(min(max(round(bits), 0), 64))


def filter_bits_per_key(shape, bits, allocation, ratio=10):
    """Filter memory per stored key, estimated from the shape after settle: each level's
    MiB times the bits its tables get (entries per MiB are alike across levels). Tables
    written while the tree was shallower may carry other bits: an estimate."""
    levels = []
    for part in (shape or "").split():
        name, rest = part.split(":")
        level = int(name[1:])
        mib = float(rest.split("/")[2].rstrip("M"))
        levels.append((level, mib))
    if not levels:
        return None
    deepest = max(level for level, _ in levels)
    total = sum(mib for _, mib in levels)
    if total == 0:
        return None
    if allocation == "uniform":
        return float(bits)
    return sum(mib * monkey_bits(bits, ratio, deepest, level) for level, mib in levels) / total


def bloom_rows():
    rows = []
    for bits in [2, 4, 6, 8, 10]:
        for allocation in ["uniform", "monkey"]:
            name = f"bloom-{allocation}-{bits}"
            if allocation == "uniform" and bits == 10:
                name = "style-leveling-T10"
            run = load(name)
            if run:
                r = summary(run)
                r["bits"], r["allocation"] = bits, allocation
                r["memory_bits"] = filter_bits_per_key(r.get("shape"), bits, allocation)
                rows.append(r)
    return rows


def plot_bloom(rows, path):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for allocation in ["uniform", "monkey"]:
        points = [r for r in rows if r["allocation"] == allocation and "readmissing" in r]
        points.sort(key=lambda r: r["bits"])
        points.sort(key=lambda r: r["memory_bits"] or 0)
        axes[0].plot([r["memory_bits"] for r in points], [r["readmissing"]["blocks"] for r in points], "o-", label=allocation)
        axes[1].plot([r["memory_bits"] for r in points], [r["readmissing"]["cpu_us"] for r in points], "o-", label=allocation)
        for r in points:
            axes[0].annotate(f"--bloom_bits {r['bits']}", (r["memory_bits"], r["readmissing"]["blocks"]), fontsize=7)
    axes[0].set_yscale("log")
    axes[0].set_xlabel("filter bits per stored key actually spent (estimated from the shape)")
    axes[0].set_ylabel("data blocks read per zero-result lookup")
    axes[1].set_xlabel("filter bits per stored key actually spent")
    axes[1].set_ylabel("CPU µs per zero-result lookup")
    for ax in axes:
        ax.legend()
    fig.suptitle("zero-result lookups: uniform vs Monkey (leveling, T 10, 8 M keys)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_ranges(rows, path):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in rows:
        if not r["seeks"]:
            continue
        sizes = list(r["seeks"].keys())
        ax.plot(sizes, [r["seeks"][s]["cpu_us"] for s in sizes], "o-", label=r["name"].replace("style-", ""))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("range size (entries read per query)")
    ax.set_ylabel("CPU µs per range query")
    ax.legend()
    ax.set_title("range-query cost against range size (8 M keys, L1 4 MiB, T 10)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_lookups(rows, path):
    fig, ax = plt.subplots(figsize=(9, 4.5))
    labels, values = [], []
    for r in rows:
        for phase in ["readrandom", "multireadrandom", "readmissing"]:
            if phase in r:
                labels.append(f"{r['name']}\n{phase}")
                values.append(r[phase]["cpu_us"])
    ax.bar(range(len(values)), values)
    ax.set_xticks(range(len(values)))
    ax.set_xticklabels(labels, fontsize=6, rotation=60, ha="right")
    ax.set_ylabel("CPU µs per key looked up")
    ax.set_title("get vs multi_get, lookup_threads 0 vs 2")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def compression_table():
    lines = [
        "| values | compression | run | fillrandom ops/s | CPU µs/key, fill + compact | w-amp (tables/WAL) | space after compact MiB | readrandom ops/s | readrandom CPU µs |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for ratio in ["0.5", "1.0"]:
        for codec in ["none", "lz4", "zstd", "perlevel"]:
            for suffix in ["", "-rep2", "-rep3"]:
                run = load(f"compression-{codec}-r{ratio}{suffix}")
                if not run:
                    continue
                r = summary(run)
                rr = r.get("readrandom", {})
                label = "none on L0-1, zstd below" if codec == "perlevel" else codec
                lines.append(
                    f"| ratio {ratio} | {label} | {suffix.lstrip('-') or 'rep1'} | {kops(r.get('fill_ops'))} | {fmt(r.get('insert_cpu_us'))} "
                    f"| {fmt(r.get('engine_w_amp'))} | {fmt(r.get('space_mib'), '.0f')} | {kops(rr.get('ops'))} | {fmt(rr.get('cpu_us'))} |"
                )
    return lines


def main():
    style_names = [
        "style-leveling-T10",
        "style-tiering-T10-D4",
        "style-lazy-T10-D4",
        "style-leveling-T10-levels5",
        "style-tiering-T10-D4-levels5",
        "style-lazy-T10-D4-levels5",
    ]
    grid_names = style_names[:3] + [
        "runs-tiering-T10-D2",
        "runs-tiering-T10-D8",
        "fanout-leveling-T4",
        "fanout-tiering-T4-D4",
        "fanout-leveling-T16",
        "fanout-tiering-T16-D4",
    ]
    styles = shape_rows(style_names)
    grid = shape_rows(grid_names)
    lookups = shape_rows(["style-leveling-T10", "runs-tiering-T10-D8", "lookup2-tiering-T10-D8"])
    bloom = bloom_rows()
    lines = ["# Tuning figures (generated by analyse.py from runs/*/results.json)", ""]
    lines += shape_table(styles, "Styles at T = 10") + [""]
    lines += shape_table(grid, "Runs per level D and fanout T") + [""]
    lines += ["### Zero-result lookups, uniform vs Monkey", ""]
    lines.append("| bits/key (setting) | allocation | filter bits per stored key (estimated) | readmissing blocks/lookup | readmissing CPU µs | readmissing ops/s | readrandom CPU µs | shape |")
    lines.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in bloom:
        rm, rr = r.get("readmissing", {}), r.get("readrandom", {})
        lines.append(
            f"| {r['bits']} | {r['allocation']} | {fmt(r.get('memory_bits'), '.1f')} | {fmt(rm.get('blocks'), '.4f')} | {fmt(rm.get('cpu_us'))} "
            f"| {kops(rm.get('ops'))} | {fmt(rr.get('cpu_us'))} | `{r.get('shape')}` |"
        )
    lines += ["", "### Range queries (µs per query, wall; CPU µs in brackets)", ""]
    sizes = sorted({s for r in styles for s in r["seeks"]})
    lines.append("| style | " + " | ".join(f"{s} entries" for s in sizes) + " |")
    lines.append("| --- " * (len(sizes) + 1) + "|")
    for r in styles:
        cells = [
            f"{fmt(r['seeks'][s]['us'], '.1f')} ({fmt(r['seeks'][s]['cpu_us'], '.1f')})" if s in r["seeks"] else "-"
            for s in sizes
        ]
        lines.append(f"| {r['name']} | " + " | ".join(cells) + " |")
    lines += ["", "### Lookups: get, multi_get, lookup_threads", ""]
    lines += shape_table(lookups, "Point lookups")[2:]
    lines += ["", "### Compression (3 M keys, L1 4 MiB; space after compact_range)", ""]
    lines += compression_table()
    lines += ["", "### Commands, commits and load", ""]
    for name in sorted(os.listdir(RUNS)):
        run = load(name) if os.path.isdir(os.path.join(RUNS, name)) else None
        if run:
            r = summary(run)
            lines.append(f"- `{name}` (commit {r['commit']}, load {r['load'][0]:.1f}→{r['load'][1]:.1f}): `{r['command']}`")
    with open(os.path.join(HERE, "figures.md"), "w") as handle:
        handle.write("\n".join(lines) + "\n")
    if grid:
        plot_tradeoff(grid, os.path.join(HERE, "insert-vs-lookup.png"))
    if styles:
        plot_amplification(styles, os.path.join(HERE, "amplification.png"))
        plot_ranges(styles, os.path.join(HERE, "range-size.png"))
    if bloom:
        plot_bloom(bloom, os.path.join(HERE, "bloom-monkey.png"))
    if lookups:
        plot_lookups(lookups, os.path.join(HERE, "lookups.png"))


if __name__ == "__main__":
    main()
