//! Medians, min–max, ratios, the text table and the JSON document.

use crate::engine::EngineConfig;
use crate::runner::{Measurement, Params};
use serde::Serialize;
use std::fmt::Write as _;

/// Median and range of one figure over the repetitions.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Stat {
    /// Median (mean of the middle two for an even count).
    pub median: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

impl Stat {
    /// The statistic of `values` (all zero when empty).
    pub fn of(values: impl IntoIterator<Item = f64>) -> Stat {
        let mut values: Vec<f64> = values.into_iter().collect();
        if values.is_empty() {
            return Stat::default();
        }
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = if n % 2 == 1 {
            values[n / 2]
        } else {
            (values[n / 2 - 1] + values[n / 2]) / 2.0
        };
        Stat {
            median,
            min: values[0],
            max: values[n - 1],
        }
    }
}

/// Every figure summarised over the repetitions.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    /// Operations per second.
    pub ops_per_sec: Stat,
    /// Keys accessed per second.
    pub keys_per_sec: Stat,
    /// Latency p50 (µs).
    pub p50_us: Stat,
    /// Latency p99 (µs).
    pub p99_us: Stat,
    /// Latency p99.9 (µs).
    pub p999_us: Stat,
    /// Disk bytes written / logical bytes.
    pub write_amplification: Stat,
    /// Space used at the end of the phase (bytes).
    pub space_bytes: Stat,
    /// Space used / logical size of the key space.
    #[serde(default)]
    pub space_amplification: Stat,
    /// Fraction of point reads that found their key.
    pub found_fraction: Stat,
    /// Process CPU microseconds per operation.
    pub cpu_us_per_op: Stat,
    /// Data blocks read per point read (0 where the engine does not count them).
    pub blocks_per_read: Stat,
}

impl Summary {
    /// Summarises `runs`.
    pub fn of(runs: &[Measurement]) -> Summary {
        let stat = |figure: fn(&Measurement) -> f64| Stat::of(runs.iter().map(figure));
        Summary {
            ops_per_sec: stat(|m| m.ops_per_sec),
            keys_per_sec: stat(|m| m.keys_per_sec),
            p50_us: stat(|m| m.p50_us),
            p99_us: stat(|m| m.p99_us),
            p999_us: stat(|m| m.p999_us),
            write_amplification: stat(|m| m.write_amplification),
            space_bytes: stat(|m| m.space_bytes as f64),
            space_amplification: stat(|m| m.space_amplification),
            cpu_us_per_op: stat(|m| m.cpu_us_per_op),
            blocks_per_read: stat(|m| m.blocks_per_read.unwrap_or(0.0)),
            found_fraction: stat(|m| {
                if m.reads == 0 {
                    0.0
                } else {
                    m.found as f64 / m.reads as f64
                }
            }),
        }
    }
}

/// One (benchmark, threads, engine) cell.
#[derive(Debug, Clone, Serialize)]
pub struct ResultEntry {
    /// Workload name.
    pub benchmark: String,
    /// Thread count.
    pub threads: usize,
    /// Engine name.
    pub engine: String,
    /// The engine cannot run this workload (scans on an engine without key order): no runs.
    pub unsupported: bool,
    /// Caveat of the workload, if any.
    pub note: Option<String>,
    /// Every repetition.
    pub runs: Vec<Measurement>,
    /// Medians and ranges.
    pub summary: Summary,
    /// Median ops/s divided by the first engine's.
    pub ratio_to_first: f64,
    /// Latency CDF over all repetitions: (percentile, µs).
    pub latency_cdf: Vec<(f64, f64)>,
}

/// The machine the run was on.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// Logical CPUs.
    pub cpus: usize,
    /// Memory in GiB.
    pub memory_gib: f64,
    /// CPU model name.
    pub cpu_model: String,
    /// Kernel release.
    pub kernel: String,
    /// 1-minute load average when the run started (anything above ~0 on an idle machine
    /// means other work shared the CPUs).
    pub load_average_start: f64,
    /// 1-minute load average when the run ended.
    pub load_average_end: f64,
}

/// The 1-minute load average (0 if unknown).
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0.0)
}

impl Machine {
    /// Reads /proc for what it can.
    pub fn detect() -> Machine {
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
        let memory_kib = read("/proc/meminfo")
            .lines()
            .find_map(|line| line.strip_prefix("MemTotal:"))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
            .unwrap_or(0.0);
        let cpu_model = read("/proc/cpuinfo")
            .lines()
            .find_map(|line| line.strip_prefix("model name"))
            .map(|rest| rest.trim_start_matches([' ', '\t', ':']).trim().to_string())
            .unwrap_or_else(|| "unknown".to_string());
        Machine {
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            memory_gib: (memory_kib / (1024.0 * 1024.0) * 10.0).round() / 10.0,
            cpu_model,
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
            load_average_start: load_average(),
            load_average_end: 0.0,
        }
    }
}

/// The whole JSON document.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// UTC time the run started.
    pub date_utc: String,
    /// The command line.
    pub command: String,
    /// `git describe` of the working tree, if available.
    pub commit: String,
    /// Machine.
    pub machine: Machine,
    /// Workload sizes.
    pub params: Params,
    /// Engine options before mapping.
    pub config: EngineConfig,
    /// Option mapping per engine.
    pub mapping: Vec<(String, Vec<String>)>,
    /// Engines in order (ratios are to the first).
    pub engines: Vec<String>,
    /// Thread counts.
    pub threads: Vec<usize>,
    /// Measured repetitions.
    pub repetitions: usize,
    /// Every cell.
    pub results: Vec<ResultEntry>,
}

fn human(value: f64) -> String {
    if value >= 10_000_000.0 {
        format!("{:.1}M", value / 1e6)
    } else if value >= 10_000.0 {
        format!("{:.0}k", value / 1e3)
    } else {
        format!("{value:.0}")
    }
}

fn micros(value: f64) -> String {
    if value >= 1000.0 {
        format!("{:.1}ms", value / 1000.0)
    } else {
        format!("{value:.1}")
    }
}

/// The results table (ratios to the first engine).
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    // Wide enough for every engine name (rwlock-hashmap is the longest built in).
    let width = report
        .engines
        .iter()
        .map(String::len)
        .max()
        .unwrap_or(0)
        .max(8);
    let _ = writeln!(
        out,
        "{:<17} {:>3} {:<width$} {:>9} {:>17} {:>6} {:>9} {:>8} {:>8} {:>8} {:>9} {:>6} {:>6} {:>8} {:>6} {:>7}",
        "benchmark",
        "thr",
        "engine",
        "ops/s",
        "[min-max]",
        "ratio",
        "keys/s",
        "p50us",
        "p99us",
        "p99.9us",
        "cpu-us/op",
        "found",
        "w-amp",
        "spaceMiB",
        "s-amp",
        "blk/rd"
    );
    let mut previous: Option<(&str, usize)> = None;
    for entry in &report.results {
        let group = (entry.benchmark.as_str(), entry.threads);
        if previous.is_some() && previous != Some(group) {
            out.push('\n');
        }
        previous = Some(group);
        if entry.unsupported {
            let _ = writeln!(
                out,
                "{:<17} {:>3} {:<width$} unsupported (no ordered iteration)",
                entry.benchmark, entry.threads, entry.engine
            );
            continue;
        }
        let summary = &entry.summary;
        let found = if entry.runs.iter().any(|m| m.reads > 0) {
            format!("{:.0}%", summary.found_fraction.median * 100.0)
        } else {
            "-".to_string()
        };
        let blocks = if entry.runs.iter().any(|m| m.blocks_per_read.is_some()) {
            format!("{:.3}", summary.blocks_per_read.median)
        } else {
            "-".to_string()
        };
        let amplification = if entry.runs.iter().any(|m| m.logical_bytes > 0) {
            format!("{:.2}", summary.write_amplification.median)
        } else {
            "-".to_string()
        };
        let _ = writeln!(
            out,
            "{:<17} {:>3} {:<width$} {:>9} {:>17} {:>6.2} {:>9} {:>8} {:>8} {:>8} {:>9.2} {:>6} {:>6} {:>8.0} {:>6.2} {:>7}",
            entry.benchmark,
            entry.threads,
            entry.engine,
            human(summary.ops_per_sec.median),
            format!(
                "[{}-{}]",
                human(summary.ops_per_sec.min),
                human(summary.ops_per_sec.max)
            ),
            entry.ratio_to_first,
            human(summary.keys_per_sec.median),
            micros(summary.p50_us.median),
            micros(summary.p99_us.median),
            micros(summary.p999_us.median),
            summary.cpu_us_per_op.median,
            found,
            amplification,
            summary.space_bytes.median / (1024.0 * 1024.0),
            summary.space_amplification.median,
            blocks,
        );
    }
    let notes: Vec<String> = {
        let mut notes: Vec<String> = report
            .results
            .iter()
            .filter_map(|entry| {
                entry
                    .note
                    .as_ref()
                    .map(|note| format!("{}: {note}", entry.benchmark))
            })
            .collect();
        notes.dedup();
        notes
    };
    for note in notes {
        let _ = writeln!(out, "note: {note}");
    }
    out
}

/// Median over repetitions of `numerator[r] / denominator[r]` (None without a usable pair).
/// The two runs of one repetition are close in time, so a machine that drifts between
/// repetitions (other work, writeback, thermal limits) moves both and the ratio less.
fn paired_median(numerator: &[Measurement], denominator: &[Measurement]) -> Option<f64> {
    let ratios: Vec<f64> = numerator
        .iter()
        .zip(denominator)
        .filter(|(_, below)| below.ops_per_sec > 0.0)
        .map(|(above, below)| above.ops_per_sec / below.ops_per_sec)
        .collect();
    (!ratios.is_empty()).then(|| Stat::of(ratios).median)
}

/// Each repetition's ratio with the placement it ran under: `1.53@61ns` where 61 ns is the
/// slowest cross-core round trip probed around either run (`placement` module), or the bare
/// ratio without probes. Shows whether a low median comes from far-placed repetitions.
fn paired_detail(numerator: &[Measurement], denominator: &[Measurement]) -> String {
    numerator
        .iter()
        .zip(denominator)
        .filter(|(_, below)| below.ops_per_sec > 0.0)
        .map(|(above, below)| {
            let ratio = above.ops_per_sec / below.ops_per_sec;
            let round_trip = crate::runner::slower_round_trip(
                above.cross_core_round_trip_ns(),
                below.cross_core_round_trip_ns(),
            );
            match round_trip {
                Some(nanoseconds) => format!("{ratio:.2}@{nanoseconds:.0}ns"),
                None => format!("{ratio:.2}"),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Paired ratios: each engine's throughput at each thread count over the previous thread
/// count (scaling), and each engine over the first engine, each as the median of the
/// per-repetition ratios. Empty when no pair of cells has runs to compare.
pub fn paired_ratios(results: &[ResultEntry], engines: &[String], threads: &[usize]) -> String {
    let find = |benchmark: &str, thread_count: usize, engine: &str| {
        results
            .iter()
            .find(|entry| {
                entry.benchmark == benchmark
                    && entry.threads == thread_count
                    && entry.engine == engine
                    && !entry.unsupported
            })
            .map(|entry| entry.runs.as_slice())
    };
    let mut benchmarks: Vec<&str> = Vec::new();
    for entry in results {
        if !benchmarks.contains(&entry.benchmark.as_str()) {
            benchmarks.push(&entry.benchmark);
        }
    }
    let mut out = String::new();
    if threads.len() >= 2 {
        for benchmark in &benchmarks {
            for engine in engines {
                let mut parts = Vec::new();
                for pair in threads.windows(2) {
                    let [lower, upper] = pair else { continue };
                    let pair = find(benchmark, *upper, engine).zip(find(benchmark, *lower, engine));
                    let ratio = pair.and_then(|(above, below)| paired_median(above, below));
                    if let (Some(ratio), Some((above, below))) = (ratio, pair) {
                        parts.push(format!(
                            "{upper}/{lower} threads {ratio:.2}x [{}]",
                            paired_detail(above, below)
                        ));
                    }
                }
                if !parts.is_empty() {
                    let _ = writeln!(
                        out,
                        "  scaling  {benchmark:<17} {engine:<14} {}",
                        parts.join("  ")
                    );
                }
            }
        }
    }
    if let Some(first) = engines.first() {
        for benchmark in &benchmarks {
            for &thread_count in threads {
                for engine in engines.iter().skip(1) {
                    let ratio = find(benchmark, thread_count, engine)
                        .zip(find(benchmark, thread_count, first))
                        .and_then(|(above, below)| paired_median(above, below))
                        .filter(|ratio| *ratio > 0.0);
                    if let Some(ratio) = ratio {
                        let _ = writeln!(
                            out,
                            "  engines  {benchmark:<17} {thread_count:>3} thr  {engine} / {first} = {ratio:.2}  ({first} / {engine} = {:.2}x)",
                            1.0 / ratio
                        );
                    }
                }
            }
        }
    }
    if out.is_empty() {
        return out;
    }
    format!(
        "paired ratios: median over repetitions of each repetition's own ratio (less sensitive \
         to drift between repetitions than the ratio of medians)\n{out}"
    )
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc_now() -> String {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs());
    let days = (seconds / 86_400) as i64;
    let rest = seconds % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        (rest % 3600) / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_ranges() {
        let stat = Stat::of([3.0, 1.0, 2.0]);
        assert_eq!((stat.median, stat.min, stat.max), (2.0, 1.0, 3.0));
        assert_eq!(Stat::of([1.0, 2.0, 3.0, 10.0]).median, 2.5);
        assert_eq!(Stat::of(std::iter::empty()).median, 0.0);
    }

    fn entry(benchmark: &str, threads: usize, engine: &str, ops: &[f64]) -> ResultEntry {
        let runs: Vec<Measurement> = ops
            .iter()
            .map(|&ops_per_sec| Measurement {
                ops_per_sec,
                ..Measurement::default()
            })
            .collect();
        ResultEntry {
            benchmark: benchmark.to_string(),
            threads,
            engine: engine.to_string(),
            unsupported: false,
            note: None,
            summary: Summary::of(&runs),
            runs,
            ratio_to_first: 0.0,
            latency_cdf: Vec::new(),
        }
    }

    #[test]
    fn paired_ratios_take_the_median_of_per_repetition_ratios() {
        // Repetition 2 ran slow for every cell: the ratio of medians (300/150 = 2.0 for
        // scaling) differs from the median of the per-repetition ratios (1.6, 2.0, 1.6).
        let results = vec![
            entry("fill", 1, "a", &[100.0, 50.0, 200.0]),
            entry("fill", 2, "a", &[160.0, 100.0, 320.0]),
            entry("fill", 1, "b", &[50.0, 25.0, 50.0]),
            entry("fill", 2, "b", &[40.0, 50.0, 80.0]),
        ];
        let engines = vec!["a".to_string(), "b".to_string()];
        let text = paired_ratios(&results, &engines, &[1, 2]);
        assert!(
            text.contains("scaling  fill              a              2/1 threads 1.60x"),
            "{text}"
        );
        assert!(
            text.contains("scaling  fill              b              2/1 threads 1.60x"),
            "{text}"
        );
        // b / a at 1 thread: 0.5, 0.5, 0.25 -> 0.5; at 2 threads: 0.25, 0.5, 0.25 -> 0.25.
        assert!(
            text.contains("1 thr  b / a = 0.50  (a / b = 2.00x)"),
            "{text}"
        );
        assert!(
            text.contains("2 thr  b / a = 0.25  (a / b = 4.00x)"),
            "{text}"
        );
    }

    #[test]
    fn scaling_lists_each_repetition_with_its_slowest_placement_probe() {
        let mut one = entry("fill", 1, "a", &[100.0, 100.0]);
        let mut two = entry("fill", 2, "a", &[170.0, 120.0]);
        // Repetition 1 ran close-placed around both runs; repetition 2's 2-thread run ended
        // far-placed, and one probe is missing.
        one.runs[0].cross_core_round_trip_ns_before = Some(55.0);
        one.runs[0].cross_core_round_trip_ns_after = Some(58.4);
        two.runs[0].cross_core_round_trip_ns_before = Some(57.0);
        two.runs[0].cross_core_round_trip_ns_after = Some(56.0);
        one.runs[1].cross_core_round_trip_ns_before = Some(60.0);
        two.runs[1].cross_core_round_trip_ns_after = Some(351.0);
        let engines = vec!["a".to_string()];
        let text = paired_ratios(&[one, two], &engines, &[1, 2]);
        assert!(
            text.contains("2/1 threads 1.45x [1.70@58ns 1.20@351ns]"),
            "{text}"
        );
        let bare = paired_ratios(
            &[
                entry("fill", 1, "a", &[100.0]),
                entry("fill", 2, "a", &[150.0]),
            ],
            &engines,
            &[1, 2],
        );
        assert!(bare.contains("2/1 threads 1.50x [1.50]"), "{bare}");
    }

    #[test]
    fn paired_ratios_skip_missing_cells_and_zero_denominators() {
        let results = vec![
            entry("fill", 1, "a", &[0.0, 0.0]),
            entry("fill", 2, "a", &[10.0, 10.0]),
        ];
        let engines = vec!["a".to_string(), "b".to_string()];
        let text = paired_ratios(&results, &engines, &[1, 2]);
        assert_eq!(text, "", "nothing to pair, nothing printed");
    }

    #[test]
    fn utc_date_is_well_formed() {
        let now = utc_now();
        assert_eq!(now.len(), 20);
        assert!(now.starts_with("20"));
        assert!(now.ends_with('Z'));
    }
}
