#!/usr/bin/env python3
"""Tables and throughput-vs-budget plots for bench/flodb/run.sh output.

    python3 bench/flodb/plot.py OUT_DIR

For each figure directory (OUT_DIR/<figure>/<budget>/results.json) it prints a Markdown table
(median ops/s, median CPU µs/op, ratio to the figure's reference engine, paired over the
interleaved repetitions, and the Membuffer's counters: share of writes completed in the
Membuffer, versions moved by in-place updates, writer drains, scan drains/piggybacks/fallbacks
(copies), versions left undrained when a sealed memtable was dropped, and the share of the
phase's writes still in the Membuffer when it ended, which means what it says only for a
phase that starts from an empty Membuffer, as Fig. 17's fill does) into OUT_DIR/<figure>/table.md, and draws OUT_DIR/<figure>/throughput.png
(median ops/s against the budget, one line per engine and thread count).
"""
import json
import statistics
import sys
from pathlib import Path

REFERENCE = {"fig17": "cairn-nomembuffer", "fig15": "rocksdb", "fig16": "rocksdb",
             "scan": "cairn-nomembuffer", "noregress": "cairn-nomembuffer"}


def budget_mib(label):
    return int(label.removesuffix("MiB"))


def counters(run):
    return dict(run.get("engine_counters") or [])


def membuffer_columns(runs):
    """Median over repetitions of the Membuffer counters (cairn runs only)."""
    share, moved, writer_drains, scan, piggy, copies = [], [], [], [], [], []
    undrained, at_end = [], []
    for run in runs:
        c = counters(run)
        taken = c.get("membuffer_writes", 0)
        direct = c.get("membuffer_direct_writes", 0)
        if taken + direct == 0:
            return ""
        share.append(100.0 * taken / (taken + direct))
        moved.append(c.get("membuffer_moved_versions", 0))
        writer_drains.append(c.get("membuffer_writer_drains", 0))
        scan.append(c.get("membuffer_scan_drains", 0))
        piggy.append(c.get("membuffer_scan_piggybacks", 0))
        copies.append(c.get("membuffer_scan_fallbacks", 0))
        undrained.append(c.get("membuffer_undrained_at_drop", 0))
        # In the Membuffer when the timed phase ended (a fill starts from an empty one).
        at_end.append(100.0 * c.get("membuffer_undrained_at_end", 0) / (taken + direct))
    med = statistics.median
    return (f"{med(share):.2f} % | {med(moved):,.0f} | {med(writer_drains):,.0f} | "
            f"{med(scan):,.0f} / {med(piggy):,.0f} / {med(copies):,.0f} | "
            f"{med(undrained):,.0f} | {med(at_end):.1f} %")


def paired_ratio(cell, reference):
    ratios = [a["ops_per_sec"] / b["ops_per_sec"]
              for a, b in zip(cell["runs"], reference["runs"]) if b["ops_per_sec"] > 0]
    return statistics.median(ratios) if ratios else float("nan")


def figure_tables(figure_dir):
    rows, points = [], {}
    reference_engine = REFERENCE.get(figure_dir.name)
    for budget_dir in sorted(figure_dir.iterdir(), key=lambda p: budget_mib(p.name)
                             if p.name.endswith("MiB") else 0):
        results = budget_dir / "results.json"
        if not results.exists():
            continue
        data = json.loads(results.read_text())
        cells = [c for c in data["results"] if not c.get("unsupported") and c.get("runs")]
        for cell in cells:
            reference = next((c for c in cells if c["engine"] == reference_engine
                              and c["benchmark"] == cell["benchmark"]
                              and c["threads"] == cell["threads"]), None)
            ratio = paired_ratio(cell, reference) if reference else float("nan")
            summary = cell["summary"]
            ops = summary["ops_per_sec"]["median"]
            cpu = summary.get("cpu_us_per_op", {}).get("median", float("nan"))
            rows.append(f"| {budget_dir.name} | {cell['benchmark']} | {cell['threads']} | "
                        f"{cell['engine']} | {ops:,.0f} | {cpu:.3f} | {ratio:.2f} | "
                        f"{membuffer_columns(cell['runs'])} |")
            key = (cell["benchmark"], cell["engine"], cell["threads"])
            points.setdefault(key, []).append((budget_mib(budget_dir.name), ops))
    header = ("| budget | benchmark | threads | engine | median ops/s | CPU µs/op | "
              f"paired ratio to {reference_engine} | share in Membuffer | moved in place | "
              "writer drains | scan drains / piggybacks / fallbacks | undrained at drop | "
              "undrained at end (share of writes) |\n"
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    return header + "\n" + "\n".join(rows), points


def plot(points, path, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (benchmark, engine, threads), series in sorted(points.items()):
        series.sort()
        ax.plot([b for b, _ in series], [o / 1e6 for _, o in series], marker="o",
                label=f"{benchmark} {engine} t={threads}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("write_buffer_size (MiB)")
    ax.set_ylabel("median Mops/s")
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "bench/results/2026-11-26-flodb")
    for figure_dir in sorted(p for p in out.iterdir() if p.is_dir()):
        table, points = figure_tables(figure_dir)
        (figure_dir / "table.md").write_text(table + "\n")
        print(f"## {figure_dir.name}\n\n{table}\n")
        if len({b for series in points.values() for b, _ in series}) > 1:
            plot(points, figure_dir / "throughput.png", f"FloDB {figure_dir.name} on cairn")


if __name__ == "__main__":
    main()
