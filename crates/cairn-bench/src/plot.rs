//! PNG plots: throughput against threads, and latency CDFs.
//!
//! Text is drawn with a bundled DejaVu Sans (plotters' `ab_glyph` feature), so no system font
//! library is needed.

use crate::error::{BenchError, Result};
use crate::report::{Report, ResultEntry, Stat, Summary};
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Once;

const FONT: &str = "sans-serif";
static FONT_BYTES: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
static REGISTER: Once = Once::new();

fn register_font() -> Result<()> {
    let mut outcome = Ok(());
    REGISTER.call_once(|| {
        if plotters::style::register_font(FONT, FontStyle::Normal, FONT_BYTES).is_err() {
            outcome = Err(BenchError::new("plot: the bundled font did not load"));
        }
    });
    outcome
}

const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

fn color(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

fn plot_error(error: impl std::fmt::Display) -> BenchError {
    BenchError::new(format!("plot: {error}"))
}

fn benchmarks(report: &Report) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for entry in &report.results {
        if !names.contains(&entry.benchmark) {
            names.push(entry.benchmark.clone());
        }
    }
    names
}

/// Writes every plot into `dir`; returns the files written.
pub fn write_all(report: &Report, dir: &Path) -> Result<Vec<PathBuf>> {
    register_font()?;
    std::fs::create_dir_all(dir)
        .map_err(|error| plot_error(format!("creating {}: {error}", dir.display())))?;
    let mut written = Vec::new();
    for (file, metric) in [
        ("throughput.png", &THROUGHPUT),
        ("cpu_per_op.png", &CPU_PER_OP),
    ] {
        let path = dir.join(file);
        per_thread_panels(report, metric, &path)?;
        written.push(path);
    }
    for benchmark in benchmarks(report) {
        // A benchmark no engine could run (scans on in-memory engines only) has no latencies.
        let measured = report
            .results
            .iter()
            .any(|entry| entry.benchmark == benchmark && !entry.latency_cdf.is_empty());
        if !measured {
            continue;
        }
        let path = dir.join(format!("latency_{benchmark}.png"));
        latency_cdf(report, &benchmark, &path)?;
        written.push(path);
    }
    Ok(written)
}

/// A figure drawn against threads.
struct Metric {
    /// Panel caption after the benchmark name.
    caption: &'static str,
    /// Y axis description.
    y_desc: &'static str,
    /// The figure's statistic in a summary.
    stat: fn(&Summary) -> Stat,
    /// Y axis labels.
    label: fn(f64) -> String,
}

const THROUGHPUT: Metric = Metric {
    caption: "throughput vs threads",
    y_desc: "ops/s (median, min-max)",
    stat: |summary| summary.ops_per_sec,
    label: |y| {
        if y >= 1e6 {
            format!("{:.1}M", y / 1e6)
        } else {
            format!("{:.0}k", y / 1e3)
        }
    },
};

// ops/s on a shared machine partly measures what other processes left; CPU time per operation
// much less so.
const CPU_PER_OP: Metric = Metric {
    caption: "CPU per operation (lower is better)",
    y_desc: "process CPU us/op (median, min-max)",
    stat: |summary| summary.cpu_us_per_op,
    label: |y| format!("{y:.2}"),
};

/// One panel per benchmark: the metric's median (min–max bars) against threads, a line per
/// engine. Thread counts are evenly spaced categories (1, 2, 16 would crowd 1 and 2 on a linear
/// axis).
fn per_thread_panels(report: &Report, metric: &Metric, path: &Path) -> Result<()> {
    // Benchmarks no engine could run (scans on in-memory engines) get no panel.
    let names: Vec<String> = benchmarks(report)
        .into_iter()
        .filter(|name| {
            report
                .results
                .iter()
                .any(|entry| &entry.benchmark == name && !entry.unsupported)
        })
        .collect();
    let mut thread_counts: Vec<usize> = report.results.iter().map(|e| e.threads).collect();
    thread_counts.sort_unstable();
    thread_counts.dedup();
    let position = |threads: usize| {
        thread_counts
            .iter()
            .position(|&count| count == threads)
            .unwrap_or(0) as f64
    };
    let last = thread_counts.len().saturating_sub(1) as f64;
    let columns = names.len().clamp(1, 3);
    let rows = names.len().div_ceil(columns).max(1);
    let size = (520 * columns as u32, 400 * rows as u32);
    let root = BitMapBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let panels = root.split_evenly((rows, columns));
    for (panel, benchmark) in panels.iter().zip(&names) {
        let entries: Vec<&ResultEntry> = report
            .results
            .iter()
            .filter(|entry| &entry.benchmark == benchmark && !entry.unsupported)
            .collect();
        let top = entries
            .iter()
            .map(|e| (metric.stat)(&e.summary).max)
            .fold(0.0f64, f64::max)
            .max(1.0)
            * 1.15;
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!("{benchmark}: {}", metric.caption),
                (FONT, 18).into_font(),
            )
            .margin(12)
            .x_label_area_size(38)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5f64..last + 0.5, 0f64..top)
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc("threads")
            .y_desc(metric.y_desc)
            .label_style((FONT, 13).into_font())
            .axis_desc_style((FONT, 14).into_font())
            .x_labels(thread_counts.len() + 1)
            .disable_x_mesh()
            .x_label_formatter(&|x| {
                // Only whole positions name a thread count.
                let index = x.round();
                if (x - index).abs() > 1e-6 || index < 0.0 {
                    return String::new();
                }
                thread_counts
                    .get(index as usize)
                    .map_or_else(String::new, |count| count.to_string())
            })
            .y_label_formatter(&|y| (metric.label)(*y))
            .draw()
            .map_err(plot_error)?;
        for (index, engine) in report.engines.iter().enumerate() {
            let mut points: Vec<&ResultEntry> = entries
                .iter()
                .copied()
                .filter(|entry| &entry.engine == engine)
                .collect();
            points.sort_by_key(|entry| entry.threads);
            if points.is_empty() {
                continue;
            }
            let style = color(index).stroke_width(2);
            let line: Vec<(f64, f64)> = points
                .iter()
                .map(|e| (position(e.threads), (metric.stat)(&e.summary).median))
                .collect();
            chart
                .draw_series(LineSeries::new(line.clone(), style))
                .map_err(plot_error)?
                .label(engine.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color(index).stroke_width(2))
                });
            chart
                .draw_series(
                    line.iter()
                        .map(|&point| Circle::new(point, 4, color(index).filled())),
                )
                .map_err(plot_error)?;
            chart
                .draw_series(points.iter().map(|e| {
                    let x = position(e.threads);
                    PathElement::new(
                        vec![
                            (x, (metric.stat)(&e.summary).min),
                            (x, (metric.stat)(&e.summary).max),
                        ],
                        color(index).stroke_width(1),
                    )
                }))
                .map_err(plot_error)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .label_font((FONT, 14).into_font())
            // Half transparent: a point under the legend (often the 16-thread one, bottom
            // right) stays visible.
            .background_style(WHITE.mix(0.5))
            .border_style(BLACK)
            .draw()
            .map_err(plot_error)?;
    }
    root.present().map_err(plot_error)?;
    Ok(())
}

/// Latency CDF of `benchmark` at its largest thread count, a line per engine.
fn latency_cdf(report: &Report, benchmark: &str, path: &Path) -> Result<()> {
    let entries: Vec<&ResultEntry> = report
        .results
        .iter()
        .filter(|entry| entry.benchmark == benchmark)
        .collect();
    let threads = entries.iter().map(|e| e.threads).max().unwrap_or(1);
    let entries: Vec<&ResultEntry> = entries
        .into_iter()
        .filter(|entry| entry.threads == threads && !entry.latency_cdf.is_empty())
        .collect();
    let low = entries
        .iter()
        .flat_map(|e| e.latency_cdf.iter().map(|&(_, us)| us))
        .fold(f64::INFINITY, f64::min)
        .max(0.01);
    let high = entries
        .iter()
        .flat_map(|e| e.latency_cdf.iter().map(|&(_, us)| us))
        .fold(0.0f64, f64::max)
        .max(low * 10.0);
    let root = BitMapBackend::new(path, (800, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{benchmark}: latency CDF, {threads} thread(s)"),
            (FONT, 20).into_font(),
        )
        .margin(14)
        .x_label_area_size(42)
        .y_label_area_size(60)
        .build_cartesian_2d((low * 0.8..high * 1.25).log_scale(), 0f64..100f64)
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_desc("latency (microseconds, log scale)")
        .y_desc("percentile")
        .label_style((FONT, 13).into_font())
        .axis_desc_style((FONT, 15).into_font())
        .x_label_formatter(&|x| {
            if *x >= 1.0 {
                format!("{x:.0}")
            } else {
                format!("{x:.2}")
            }
        })
        .draw()
        .map_err(plot_error)?;
    for (index, engine) in report.engines.iter().enumerate() {
        let Some(entry) = entries.iter().find(|entry| &entry.engine == engine) else {
            continue;
        };
        let points: Vec<(f64, f64)> = entry
            .latency_cdf
            .iter()
            .map(|&(percentile, us)| (us.max(low), percentile))
            .collect();
        chart
            .draw_series(LineSeries::new(points, color(index).stroke_width(2)))
            .map_err(plot_error)?
            .label(engine.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color(index).stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .label_font((FONT, 15).into_font())
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(plot_error)?;
    root.present().map_err(plot_error)?;
    Ok(())
}
