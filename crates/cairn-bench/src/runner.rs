//! Runs one workload's measured phase (and any unmeasured load before it) on an open engine.

use crate::engine::Engine;
use crate::error::{BenchError, Result};
use crate::keys::{make_key, make_missing_key, KeyDist, Permutation, ValuePool, Zipfian};
use crate::workloads::{Budget, Dist, Op, Preload, Shape, Workload};
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Sizes and knobs shared by every workload of a run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Params {
    /// Key space size (db_bench `--num`, YCSB record count).
    pub num: u64,
    /// Operations for read-type workloads (db_bench `--reads`, YCSB operation count).
    pub reads: u64,
    /// Key bytes.
    pub key_size: usize,
    /// Value bytes.
    pub value_size: usize,
    /// Values compress to about this fraction of their size (`--compression_ratio`).
    pub compression_ratio: f64,
    /// Entries read after each seek in `seekrandom`.
    pub seek_nexts: usize,
    /// If > 0, every measured phase runs this many seconds instead of a count.
    pub duration: f64,
    /// Seed of every random choice.
    pub seed: u64,
    /// Flush the memtable after an unmeasured load (where the engine can).
    pub flush_after_load: bool,
    /// Every Nth write of a thread is synced (0: none); synced writes are left out of the
    /// latency histogram, which then describes the plain writes around them.
    pub sync_every: u64,
    /// Probe the CPUs' placement around every phase (`placement` module).
    pub probe_placement: bool,
    /// Keys per batch of `multireadrandom`.
    pub multiget_batch: usize,
    /// Puts per second of readwhilewriting's unmeasured writer at most (0: as fast as it
    /// can), so two engines' readers compare at one write rate.
    pub writer_ops_per_sec: u64,
}

/// What the database holds, carried from one workload to the next in a sequence.
#[derive(Debug, Clone, Default)]
pub struct DbState {
    /// Something was written since the database was created.
    pub used: bool,
    /// Keys `0..num` (or a good part of them) are present.
    pub loaded: bool,
    /// Next key number for `Op::Append` (YCSB inserts).
    pub next_append: u64,
}

/// The figures of one measured phase.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Measurement {
    /// Operations counted.
    pub ops: u64,
    /// Wall time of the measured phase.
    pub seconds: f64,
    /// Operations per second.
    pub ops_per_sec: f64,
    /// Keys accessed per second (a scan counts every entry it returns).
    pub keys_per_sec: f64,
    /// Point reads issued and how many found their key.
    pub reads: u64,
    /// Point reads that found their key.
    pub found: u64,
    /// Latency percentiles in microseconds.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Largest latency.
    pub max_us: f64,
    /// Operations of the unmeasured writer thread (readwhilewriting).
    pub writer_ops: u64,
    /// Key + value bytes the workload asked to write.
    pub logical_bytes: u64,
    /// Bytes the process caused to be written to storage during the phase (`write_bytes` of
    /// /proc/self/io; `wchar` if unavailable).
    pub disk_bytes: u64,
    /// disk_bytes / logical_bytes (0 when nothing was written).
    pub write_amplification: f64,
    /// Bytes of the files in the database directory at the end of the phase.
    pub space_bytes: u64,
    /// space_bytes / (num * (key_size + value_size)): the directory against the logical size
    /// of a full key space (0 when the key space is empty). Meaningful once the key space is
    /// loaded (after a fill, or with a preload).
    #[serde(default)]
    pub space_amplification: f64,
    /// Engine counters that changed during the phase (cairn: its own byte counters).
    pub engine_counters: Vec<(String, u64)>,
    /// CPU time of the whole process during the phase (every thread: workers, the engine's
    /// background threads, the benchmark's own key generation), in seconds.
    pub cpu_seconds: f64,
    /// cpu_seconds per counted operation, in microseconds: unlike ops/s it does not depend on
    /// how much of the machine other processes took.
    pub cpu_us_per_op: f64,
    /// cpu_seconds split by thread name (Linux; empty elsewhere), so a phase that cost more CPU
    /// shows where: the engine's named background threads (cairn-flush, cairn-compact,
    /// rocksdb:low, ...) as measured, and `EXITED_THREADS` for the rest — threads that ended
    /// before the phase's end, mostly the benchmark's own workers (the foreground).
    #[serde(default)]
    pub cpu_seconds_by_thread: Vec<(String, f64)>,
    /// Round trip of a cache line between two CPUs just before the phase, in nanoseconds
    /// (`placement` module: tens of ns when the host placed the CPUs close, hundreds when
    /// far; `None` if it could not be measured or probing is off).
    #[serde(default)]
    pub cross_core_round_trip_ns_before: Option<f64>,
    /// The same probe just after the phase.
    #[serde(default)]
    pub cross_core_round_trip_ns_after: Option<f64>,
    /// Data blocks a point read touched, on average (cairn: block-cache hits + misses during
    /// the phase / point reads; `None` for other engines or phases without reads). On
    /// `readmissing` every block read is a Bloom false positive, so this is the zero-result
    /// lookup cost in a unit machine load does not move.
    #[serde(default)]
    pub blocks_per_read: Option<f64>,
    /// The tree's shape at the end of the phase (cairn: `Db::level_stats`, one
    /// `Lk:runs/files/MiB` entry per non-empty level).
    #[serde(default)]
    pub level_shape: Option<String>,
}

impl Measurement {
    /// The slower of the probes around this phase (None if neither was measured): a phase
    /// is only as close-placed as its worse end.
    pub fn cross_core_round_trip_ns(&self) -> Option<f64> {
        slower_round_trip(
            self.cross_core_round_trip_ns_before,
            self.cross_core_round_trip_ns_after,
        )
    }
}

/// The slower of two optional round trips (the one present if only one is).
pub fn slower_round_trip(first: Option<f64>, second: Option<f64>) -> Option<f64> {
    match (first, second) {
        (Some(first), Some(second)) => Some(first.max(second)),
        (first, second) => first.or(second),
    }
}

/// The `cpu_seconds_by_thread` entry for CPU of threads gone by the end of a phase (the
/// process total minus what live threads account for).
pub const EXITED_THREADS: &str = "(exited: workers)";

/// Latency histogram in nanoseconds, 1 ns to 100 s, 3 significant digits.
pub fn new_histogram() -> Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3)
        .map_err(|error| BenchError::new(format!("histogram: {error}")))
}

/// Where each operation's key number comes from.
#[derive(Debug, Clone)]
enum KeySource {
    /// Index `i` of the thread's slice maps to key `i`.
    Sequential,
    /// Index `i` maps to `permutation(i) * stride` (stride 2: even keys only).
    Permuted {
        permutation: Permutation,
        stride: u64,
    },
    /// Drawn from a distribution.
    Random(KeyDist),
}

/// Everything a worker thread reads.
struct Plan<'a> {
    engine: &'a dyn Engine,
    params: &'a Params,
    mix: Vec<(Op, f64)>,
    source: KeySource,
    scan_length: (usize, usize),
    /// Total index space split over the budgeted threads.
    total: u64,
    deadline: Option<Instant>,
    stop: AtomicBool,
    failed: AtomicBool,
    progress: AtomicU64,
    finished: AtomicUsize,
    next_append: AtomicU64,
    salt: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Runs the plan's mix over its slice of the index space.
    Budgeted { thread: usize, threads: usize },
    /// Puts uniform random keys until told to stop.
    Writer { seed_index: usize, counted: bool },
    /// Iterates over its slice in key order.
    Scanner { thread: usize, threads: usize },
}

struct WorkerOutcome {
    histogram: Histogram<u64>,
    ops: u64,
    keys: u64,
    reads: u64,
    found: u64,
    logical_bytes: u64,
    ended: Instant,
    counted: bool,
}

fn slice(total: u64, thread: usize, threads: usize) -> (u64, u64) {
    let threads = threads.max(1) as u64;
    let thread = thread as u64;
    let base = total / threads;
    let extra = total % threads;
    let start = thread * base + thread.min(extra);
    let length = base + u64::from(thread < extra);
    (start, length)
}

/// How long a writer that has done `done` operations since `began` must still wait to keep
/// to `per_second` (None: it is not ahead of its rate).
fn pace_wait(began: Instant, done: u64, per_second: u64) -> Option<Duration> {
    #[allow(clippy::cast_precision_loss)]
    let due = began + Duration::from_secs_f64(done as f64 / per_second.max(1) as f64);
    due.checked_duration_since(Instant::now())
        .filter(|wait| !wait.is_zero())
}

fn record(histogram: &mut Histogram<u64>, started: Instant) {
    let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
    histogram.saturating_record(nanos.max(1));
}

fn run_worker(plan: &Plan<'_>, role: Role) -> Result<WorkerOutcome> {
    let mut outcome = WorkerOutcome {
        histogram: new_histogram()?,
        ops: 0,
        keys: 0,
        reads: 0,
        found: 0,
        logical_bytes: 0,
        ended: Instant::now(),
        counted: true,
    };
    let params = plan.params;
    let seed_index = match role {
        Role::Budgeted { thread, .. } | Role::Scanner { thread, .. } => thread,
        Role::Writer { seed_index, .. } => seed_index,
    };
    let seed = params.seed ^ plan.salt ^ (seed_index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut values = ValuePool::with_ratio(
        params.seed ^ seed_index as u64,
        params.value_size,
        params.compression_ratio,
    );
    let mut key = Vec::with_capacity(params.key_size);
    let mut value = Vec::with_capacity(params.value_size);
    let weight_total: f64 = plan.mix.iter().map(|(_, weight)| weight).sum();

    if let Role::Scanner { thread, threads } = role {
        let (start, length) = slice(plan.total, thread, threads);
        make_key(start, params.key_size, &mut key);
        let mut last = Instant::now();
        let mut pending = 0u64;
        let histogram = &mut outcome.histogram;
        let seen = plan
            .engine
            .scan(&key, length as usize, &mut |_key, _value| {
                let now = Instant::now();
                let nanos = u64::try_from((now - last).as_nanos()).unwrap_or(u64::MAX);
                histogram.saturating_record(nanos.max(1));
                last = now;
                pending += 1;
                if pending == 4096 {
                    plan.progress.fetch_add(pending, Ordering::Relaxed);
                    pending = 0;
                }
            })?;
        plan.progress.fetch_add(pending, Ordering::Relaxed);
        outcome.ops = seen as u64;
        outcome.keys = seen as u64;
        outcome.ended = Instant::now();
        return Ok(outcome);
    }

    let (start, length, budgeted) = match role {
        Role::Budgeted { thread, threads } => {
            let (start, length) = slice(plan.total, thread, threads);
            (start, length, plan.deadline.is_none())
        }
        _ => (0, 0, false),
    };
    if let Role::Writer { counted, .. } = role {
        outcome.counted = counted;
    }
    let writer = matches!(role, Role::Writer { .. });
    let paced =
        matches!(role, Role::Writer { counted: false, .. }) && params.writer_ops_per_sec > 0;
    let began = Instant::now();
    let uniform = KeyDist::Uniform { n: params.num };
    let mut i: u64 = 0;
    let mut pending = 0u64;
    loop {
        if budgeted && i >= length {
            break;
        }
        if i.is_multiple_of(64) {
            if plan.stop.load(Ordering::Relaxed) {
                break;
            }
            if let Some(deadline) = plan.deadline {
                if Instant::now() >= deadline {
                    break;
                }
            }
            // Sleeps in slices of at most 10 ms, so a stop ends the phase at once however
            // low the rate.
            while paced && !plan.stop.load(Ordering::Relaxed) {
                let Some(wait) = pace_wait(began, i, params.writer_ops_per_sec) else {
                    break;
                };
                std::thread::sleep(wait.min(Duration::from_millis(10)));
            }
        }
        let op = if writer {
            Op::Put
        } else if plan.mix.len() == 1 {
            plan.mix[0].0
        } else {
            let mut pick = rng.gen::<f64>() * weight_total;
            let mut chosen = plan.mix[plan.mix.len() - 1].0;
            for &(op, weight) in &plan.mix {
                if pick < weight {
                    chosen = op;
                    break;
                }
                pick -= weight;
            }
            chosen
        };
        let index = start + if length > 0 { i % length } else { i };
        let number = if writer {
            uniform.sample(&mut rng, 0)
        } else if op == Op::Append {
            plan.next_append.fetch_add(1, Ordering::Relaxed)
        } else {
            match &plan.source {
                KeySource::Sequential => index,
                KeySource::Permuted {
                    permutation,
                    stride,
                } => permutation.at(index) * stride,
                KeySource::Random(dist) => {
                    let latest = plan.next_append.load(Ordering::Relaxed).saturating_sub(1);
                    dist.sample(&mut rng, latest)
                }
            }
        };
        if op == Op::ReadMissing {
            make_missing_key(number, params.num, params.key_size, &mut key);
        } else {
            make_key(number, params.key_size, &mut key);
        }
        let synced = matches!(op, Op::Put | Op::Append)
            && params.sync_every > 0
            && i % params.sync_every == params.sync_every - 1;
        let started = Instant::now();
        match op {
            Op::Read | Op::ReadMissing => {
                outcome.reads += 1;
                if plan.engine.get(&key, &mut value)? {
                    outcome.found += 1;
                }
                outcome.keys += 1;
            }
            Op::Compact => plan.engine.compact()?,
            Op::Settle => plan.engine.settle()?,
            Op::Put | Op::Append => {
                let bytes = values.next();
                if synced {
                    plan.engine.put_synced(&key, bytes)?;
                } else {
                    plan.engine.put(&key, bytes)?;
                }
                outcome.logical_bytes += (key.len() + bytes.len()) as u64;
                outcome.keys += 1;
            }
            Op::Delete => {
                plan.engine.delete(&key)?;
                outcome.logical_bytes += key.len() as u64;
                outcome.keys += 1;
            }
            Op::Scan => {
                let (low, high) = plan.scan_length;
                let count = if low >= high {
                    low
                } else {
                    rng.gen_range(low..=high)
                };
                outcome.keys += plan.engine.scan(&key, count, &mut |_, _| {})? as u64;
            }
            Op::MultiRead => {
                let batch = params.multiget_batch.max(1);
                let mut keys = vec![key.clone()];
                for _ in 1..batch {
                    let mut other = Vec::new();
                    make_key(uniform.sample(&mut rng, 0), params.key_size, &mut other);
                    keys.push(other);
                }
                let borrowed: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
                outcome.found += plan.engine.multi_get(&borrowed)? as u64;
                outcome.reads += batch as u64;
                outcome.keys += batch as u64;
                // Operations (and the --reads budget) count keys, so ops/s compares with
                // readrandom's; the latency histogram holds one sample per batch.
                i += batch as u64 - 1;
            }
            Op::Rmw => {
                outcome.reads += 1;
                let bytes = values.next();
                if plan.engine.read_modify_write(&key, bytes)? {
                    outcome.found += 1;
                }
                outcome.logical_bytes += (key.len() + bytes.len()) as u64;
                outcome.keys += 1;
            }
        }
        if !synced {
            record(&mut outcome.histogram, started);
        }
        i += 1;
        pending += 1;
        if pending == 256 {
            plan.progress.fetch_add(pending, Ordering::Relaxed);
            pending = 0;
        }
    }
    plan.progress.fetch_add(pending, Ordering::Relaxed);
    outcome.ops = i;
    outcome.ended = Instant::now();
    Ok(outcome)
}

/// Bytes this process has written into files (`write_bytes` of /proc/self/io; bytes passed
/// to write(2) where the kernel keeps no I/O accounting).
pub fn process_bytes_written() -> u64 {
    let Ok(text) = std::fs::read_to_string("/proc/self/io") else {
        return 0;
    };
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().parse::<u64>().ok())
    };
    // Counted when pages are dirtied, so it includes file bytes deleted before writeback
    // (a WAL removed after its flush): bytes the engine wrote into files.
    field("write_bytes:")
        .or_else(|| field("wchar:"))
        .unwrap_or(0)
}

/// CPU time this process has used, all threads, in seconds (0 where /proc is unavailable).
pub fn process_cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|text| parse_stat(&text))
        .map_or(0.0, |(_, seconds)| seconds)
}

/// The name and CPU seconds (user + system) in a /proc `stat` line.
fn parse_stat(text: &str) -> Option<(String, f64)> {
    // The command name (field 2) may hold spaces and parentheses: it runs from the first '('
    // to the last ')', and fields are counted after it. utime and stime are fields 14 and
    // 15, in USER_HZ ticks, which Linux fixes at 100 for user space.
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let name = text.get(open + 1..close)?.to_string();
    let fields: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    let ticks = |index: usize| -> Option<u64> { fields.get(index)?.parse::<u64>().ok() };
    Some((name, (ticks(11)? + ticks(12)?) as f64 / 100.0))
}

/// Each live thread of this process: thread id, name and CPU seconds (empty where /proc is
/// unavailable).
pub fn thread_cpu_seconds() -> Vec<(u64, String, f64)> {
    let Ok(entries) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| {
            let thread_id = entry.file_name().to_str()?.parse::<u64>().ok()?;
            let text = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let (name, seconds) = parse_stat(&text)?;
            Some((thread_id, name, seconds))
        })
        .collect()
}

/// CPU seconds per thread name between two `thread_cpu_seconds` readings, with the rest of
/// `process_seconds` (threads that exited in between) under `EXITED_THREADS`. A thread id
/// absent from `before` started in between and counts from zero.
pub fn cpu_by_thread_name(
    before: &[(u64, String, f64)],
    after: &[(u64, String, f64)],
    process_seconds: f64,
) -> Vec<(String, f64)> {
    let mut by_name: std::collections::BTreeMap<String, f64> = std::collections::BTreeMap::new();
    for (thread_id, name, seconds) in after {
        let earlier = before
            .iter()
            .find(|(id, _, _)| id == thread_id)
            .map_or(0.0, |(_, _, seconds)| *seconds);
        *by_name.entry(name.clone()).or_default() += (seconds - earlier).max(0.0);
    }
    let live: f64 = by_name.values().sum();
    by_name.insert(
        EXITED_THREADS.to_string(),
        (process_seconds - live).max(0.0),
    );
    by_name.into_iter().collect()
}

/// Total size of the files under `dir`.
pub fn directory_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(metadata) if metadata.is_dir() => directory_bytes(&entry.path()),
            Ok(metadata) => metadata.len(),
            Err(_) => 0,
        })
        .sum()
}

fn progress_bar(label: &str, total: Option<u64>, show: bool) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = match total {
        Some(total) => ProgressBar::new(total),
        None => ProgressBar::new_spinner(),
    };
    let template = if total.is_some() {
        "{prefix:>40} [{bar:30}] {pos}/{len} ({per_sec}, {eta})"
    } else {
        "{prefix:>40} {spinner} {pos} ops ({per_sec}) {elapsed}"
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(label.to_string());
    bar
}

/// The outcome of one phase: figures and the merged latency histogram.
pub struct PhaseOutput {
    /// Figures.
    pub measurement: Measurement,
    /// Latencies of the counted operations.
    pub histogram: Histogram<u64>,
}

struct PhaseSpec<'a> {
    mix: Vec<(Op, f64)>,
    source: KeySource,
    scan_length: (usize, usize),
    total: u64,
    deadline: Option<Duration>,
    shape: Shape,
    threads: usize,
    label: &'a str,
    salt: u64,
}

fn run_phase(
    engine: &dyn Engine,
    params: &Params,
    state: &mut DbState,
    spec: PhaseSpec<'_>,
    dir: &Path,
    show_progress: bool,
) -> Result<PhaseOutput> {
    let threads = spec.threads.max(1);
    let mut roles = Vec::new();
    match spec.shape {
        Shape::Mixed => {
            for thread in 0..threads {
                roles.push(Role::Budgeted { thread, threads });
            }
        }
        Shape::ReadersPlusWriter => {
            for thread in 0..threads {
                roles.push(Role::Budgeted { thread, threads });
            }
            roles.push(Role::Writer {
                seed_index: threads,
                counted: false,
            });
        }
        Shape::OneWriterManyReaders => {
            roles.push(Role::Writer {
                seed_index: 0,
                counted: true,
            });
            let readers = threads - 1;
            for thread in 0..readers {
                roles.push(Role::Budgeted {
                    thread,
                    threads: readers,
                });
            }
        }
        Shape::SequentialScan => {
            for thread in 0..threads {
                roles.push(Role::Scanner { thread, threads });
            }
        }
    }
    // Threads whose end ends the phase; a lone writer (FloDB one-writer at 1 thread) runs
    // for the budget's worth of time instead, so give it a deadline.
    let budgeted = roles
        .iter()
        .filter(|role| !matches!(role, Role::Writer { .. }))
        .count();
    let deadline = match (spec.deadline, budgeted) {
        (Some(duration), _) => Some(duration),
        (None, 0) => Some(Duration::from_secs(5)),
        (None, _) => None,
    };
    let bar_total = if deadline.is_some() {
        None
    } else {
        Some(spec.total)
    };
    let bar = progress_bar(spec.label, bar_total, show_progress);
    let round_trip_before = params
        .probe_placement
        .then(crate::placement::round_trip_ns)
        .flatten();
    let disk_before = process_bytes_written();
    let cpu_before = process_cpu_seconds();
    let threads_before = thread_cpu_seconds();
    let counters_before = engine.counters();
    let started = Instant::now();
    let plan = Plan {
        engine,
        params,
        mix: spec.mix,
        source: spec.source,
        scan_length: spec.scan_length,
        total: spec.total,
        deadline: deadline.map(|duration| started + duration),
        stop: AtomicBool::new(false),
        failed: AtomicBool::new(false),
        progress: AtomicU64::new(0),
        finished: AtomicUsize::new(0),
        next_append: AtomicU64::new(state.next_append.max(params.num)),
        salt: spec.salt,
    };
    let outcomes: Vec<Result<WorkerOutcome>> = std::thread::scope(|scope| {
        let handles: Vec<_> = roles
            .iter()
            .map(|&role| {
                let plan = &plan;
                scope.spawn(move || {
                    let outcome = run_worker(plan, role);
                    if outcome.is_err() {
                        plan.failed.store(true, Ordering::Relaxed);
                        plan.stop.store(true, Ordering::Relaxed);
                    }
                    if !matches!(role, Role::Writer { .. }) {
                        plan.finished.fetch_add(1, Ordering::Release);
                    }
                    outcome
                })
            })
            .collect();
        loop {
            std::thread::sleep(Duration::from_millis(50));
            bar.set_position(plan.progress.load(Ordering::Relaxed));
            let done = if budgeted > 0 {
                plan.finished.load(Ordering::Acquire) >= budgeted
            } else {
                plan.deadline
                    .is_some_and(|deadline| Instant::now() >= deadline)
            };
            if done || plan.failed.load(Ordering::Relaxed) {
                plan.stop.store(true, Ordering::Relaxed);
                break;
            }
        }
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|_| Err(BenchError::new("a worker thread panicked")))
            })
            .collect()
    });
    bar.finish_and_clear();
    let mut histogram = new_histogram()?;
    let mut measurement = Measurement::default();
    let mut ended = started;
    let mut keys = 0;
    for outcome in outcomes {
        let outcome = outcome?;
        measurement.logical_bytes += outcome.logical_bytes;
        if !outcome.counted {
            measurement.writer_ops += outcome.ops;
            continue;
        }
        histogram
            .add(&outcome.histogram)
            .map_err(|error| BenchError::new(format!("histogram merge: {error}")))?;
        measurement.ops += outcome.ops;
        measurement.reads += outcome.reads;
        measurement.found += outcome.found;
        keys += outcome.keys;
        ended = ended.max(outcome.ended);
    }
    let disk_after = process_bytes_written();
    let threads_after = thread_cpu_seconds();
    let cpu_after = process_cpu_seconds();
    let counters_after = engine.counters();
    measurement.cross_core_round_trip_ns_before = round_trip_before;
    measurement.cross_core_round_trip_ns_after = params
        .probe_placement
        .then(crate::placement::round_trip_ns)
        .flatten();
    let seconds = (ended - started).as_secs_f64().max(1e-9);
    measurement.seconds = seconds;
    measurement.ops_per_sec = measurement.ops as f64 / seconds;
    measurement.keys_per_sec = keys as f64 / seconds;
    let micros = |quantile: f64| histogram.value_at_quantile(quantile) as f64 / 1000.0;
    measurement.p50_us = micros(0.50);
    measurement.p99_us = micros(0.99);
    measurement.p999_us = micros(0.999);
    measurement.max_us = histogram.max() as f64 / 1000.0;
    measurement.cpu_seconds = (cpu_after - cpu_before).max(0.0);
    if !threads_after.is_empty() {
        measurement.cpu_seconds_by_thread =
            cpu_by_thread_name(&threads_before, &threads_after, measurement.cpu_seconds);
    }
    if measurement.ops > 0 {
        measurement.cpu_us_per_op = measurement.cpu_seconds * 1e6 / measurement.ops as f64;
    }
    measurement.disk_bytes = disk_after.saturating_sub(disk_before);
    measurement.write_amplification = if measurement.logical_bytes > 0 {
        measurement.disk_bytes as f64 / measurement.logical_bytes as f64
    } else {
        0.0
    };
    measurement.space_bytes = directory_bytes(dir);
    let logical_space = params.num * (params.key_size + params.value_size) as u64;
    measurement.space_amplification = if logical_space > 0 {
        measurement.space_bytes as f64 / logical_space as f64
    } else {
        0.0
    };
    measurement.engine_counters = counters_after
        .iter()
        .filter_map(|(name, after)| {
            let before = counters_before
                .iter()
                .find(|(other, _)| other == name)
                .map_or(0, |(_, value)| *value);
            (after != &before).then(|| (name.clone(), after.saturating_sub(before)))
        })
        .collect();
    let counts_blocks = counters_after
        .iter()
        .any(|(name, _)| name == "block_cache_hits");
    measurement.blocks_per_read = blocks_per_read(&measurement, counts_blocks);
    measurement.level_shape = engine.shape();
    state.next_append = plan.next_append.load(Ordering::Relaxed);
    state.used = true;
    Ok(PhaseOutput {
        measurement,
        histogram,
    })
}

/// Data blocks per point read (block-cache hits + misses + blocks read in place from mapped
/// tables), from the phase's counter deltas.
fn blocks_per_read(measurement: &Measurement, counts_blocks: bool) -> Option<f64> {
    let counter = |name: &str| {
        measurement
            .engine_counters
            .iter()
            .find(|(other, _)| other == name)
            .map(|(_, value)| *value)
    };
    let hits = counter("block_cache_hits");
    let misses = counter("block_cache_misses");
    let mapped = counter("block_mapped_reads");
    if measurement.reads == 0 || (hits.is_none() && misses.is_none() && mapped.is_none()) {
        // A phase of reads that touched no block leaves both counters unchanged (and so
        // absent from the deltas): zero blocks per read, if the engine counts them at all.
        return (measurement.reads > 0 && counts_blocks).then_some(0.0);
    }
    let blocks = hits.unwrap_or(0) + misses.unwrap_or(0) + mapped.unwrap_or(0);
    Some(blocks as f64 / measurement.reads as f64)
}

/// Loads keys before a measured phase (not measured).
pub fn load(
    engine: &dyn Engine,
    params: &Params,
    state: &mut DbState,
    kind: Preload,
    threads: usize,
    dir: &Path,
    show_progress: bool,
) -> Result<()> {
    let (source, total, label) = match kind {
        Preload::Sequential => (KeySource::Sequential, params.num, "load (sequential)"),
        Preload::Half => (
            KeySource::Permuted {
                permutation: Permutation::new(params.num.div_ceil(2), params.seed),
                stride: 2,
            },
            params.num.div_ceil(2),
            "load (half, scattered)",
        ),
        Preload::Existing | Preload::Fresh => (
            KeySource::Permuted {
                permutation: Permutation::new(params.num, params.seed),
                stride: 1,
            },
            params.num,
            "load (all, scattered)",
        ),
    };
    let spec = PhaseSpec {
        mix: vec![(Op::Put, 1.0)],
        source,
        scan_length: (1, 1),
        total,
        deadline: None,
        shape: Shape::Mixed,
        threads,
        label,
        salt: 0x10ad,
    };
    run_phase(engine, params, state, spec, dir, show_progress)?;
    if params.flush_after_load {
        engine.flush()?;
    }
    state.loaded = true;
    Ok(())
}

fn salt_of(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Runs `workload`'s measured phase with `threads` threads; `progress` labels a progress bar
/// (None: no bar).
pub fn measure(
    engine: &dyn Engine,
    params: &Params,
    state: &mut DbState,
    workload: &Workload,
    threads: usize,
    dir: &Path,
    progress: Option<&str>,
) -> Result<PhaseOutput> {
    let source = match workload.dist {
        Dist::Sequential => KeySource::Sequential,
        Dist::Uniform => KeySource::Random(KeyDist::Uniform { n: params.num }),
        Dist::Zipfian => KeySource::Random(KeyDist::ScrambledZipfian {
            zipf: Zipfian::new(params.num, 0.99),
            n: params.num,
        }),
        Dist::Latest => KeySource::Random(KeyDist::Latest {
            zipf: Zipfian::new(params.num, 0.99),
        }),
        Dist::Hot {
            fraction,
            probability,
        } => KeySource::Random(KeyDist::HotBlocks {
            n: params.num,
            hot_fraction: fraction,
            hot_probability: probability,
        }),
    };
    let total = match workload.budget {
        Budget::Num => params.num,
        Budget::Reads | Budget::Seconds(_) => params.reads,
        Budget::Once => 1,
        Budget::Entries(length) => (params.reads / length.max(1) as u64).max(1000),
    };
    let deadline = if workload.budget == Budget::Once {
        None
    } else if params.duration > 0.0 {
        Some(Duration::from_secs_f64(params.duration))
    } else if let Budget::Seconds(seconds) = workload.budget {
        Some(Duration::from_secs_f64(seconds))
    } else {
        None
    };
    let scan_length = workload
        .scan_length
        .unwrap_or((params.seek_nexts + 1, params.seek_nexts + 1));
    let total = if workload.shape == Shape::SequentialScan {
        // readseq covers the key space once (or --reads entries if fewer).
        total.min(params.num)
    } else {
        total
    };
    let spec = PhaseSpec {
        mix: workload.mix.to_vec(),
        source,
        scan_length,
        total,
        deadline,
        shape: workload.shape,
        threads,
        label: progress.unwrap_or(""),
        salt: salt_of(workload.name),
    };
    let output = run_phase(engine, params, state, spec, dir, progress.is_some())?;
    if workload.mix.iter().any(|(op, _)| {
        !matches!(
            op,
            Op::Read | Op::ReadMissing | Op::Scan | Op::MultiRead | Op::Compact | Op::Settle
        )
    }) {
        state.loaded = true;
    }
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_with_awkward_names() {
        // Fields after the name: state, ppid, pgrp, session, tty, tpgid, flags, minflt,
        // cminflt, majflt, cmajflt, utime (250 ticks), stime (50 ticks), ...
        let line = "4242 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0";
        assert_eq!(parse_stat(line), Some(("a (b) c".to_string(), 3.0)));
        assert_eq!(parse_stat("4242 (x) S 1 2"), None);
        assert_eq!(parse_stat("garbage"), None);
        #[cfg(target_os = "linux")]
        {
            assert!(!thread_cpu_seconds().is_empty());
            assert!(process_cpu_seconds() >= 0.0);
        }
    }

    #[test]
    fn cpu_is_split_by_thread_name_and_the_rest_is_exited() {
        let before = vec![
            (1, "main".to_string(), 1.0),
            (2, "cairn-flush".to_string(), 0.5),
            (3, "gone".to_string(), 0.2),
        ];
        let after = vec![
            (1, "main".to_string(), 1.25),
            (2, "cairn-flush".to_string(), 1.5),
            // Started during the phase: counts from zero.
            (4, "cairn-flush".to_string(), 0.25),
        ];
        let split = cpu_by_thread_name(&before, &after, 3.0);
        assert_eq!(
            split,
            vec![
                (EXITED_THREADS.to_string(), 1.5),
                ("cairn-flush".to_string(), 1.25),
                ("main".to_string(), 0.25),
            ]
        );
        let total: f64 = split.iter().map(|(_, seconds)| seconds).sum();
        assert_eq!(total, 3.0);
    }

    #[test]
    fn slices_cover_the_range_once() {
        for total in [0u64, 1, 7, 100, 101] {
            for threads in 1..5 {
                let mut next = 0;
                for thread in 0..threads {
                    let (start, length) = slice(total, thread, threads);
                    assert_eq!(start, next);
                    next += length;
                }
                assert_eq!(next, total);
            }
        }
    }
}
