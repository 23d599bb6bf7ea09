//! Crash and I/O-error tests on the fault-injecting file system (`cairn::fs::fault`).
//!
//! One fixed workload (a few hundred writes: puts, deletes and batches, some with `sync`,
//! explicit flushes, a compaction, a close/reopen; a tiny memtable and MANIFEST limit so it
//! spans memtable switches, flushes, compactions and MANIFEST rollovers) runs against an
//! oracle kept outside the engine: the list of writes in the order they were issued, which
//! were acknowledged, and how many must be durable.
//!
//! - `crash_at_every_write_point`: for every write point k (a mutating file-system operation),
//!   the file system dies at k (everything fails from there), the workload stops, and the
//!   database is reopened on power-loss images of the disk (several seeds). It must open, and
//!   hold exactly the first m writes for some m between the durable floor (every sync- or
//!   flush-acknowledged write) and the number of writes issued: a prefix, no holes.
//! - `eio_at_every_operation` / `enospc_at_every_operation`: operation i fails once. The
//!   workload goes on. No panic; a failed write returns an error (and is not visible), an
//!   acknowledged one is; after a failed sync every write is refused with `WritesStopped`;
//!   reopening (process restart, and power loss) gives a prefix state again.
//!
//! Each sweep also runs (`*_mapped_wal`) with `FaultFs` over the real file system in a
//! temporary directory, so the production memory-mapped WAL (fallocate, windows, trim) is
//! what fails and loses power; power-loss images are rebuilt in memory at the same paths.
//!
//! Scale: `CAIRN_CRASH_SEEDS` (images per crash point, default 2), `CAIRN_CRASH_STRIDE` /
//! `CAIRN_IO_STRIDE` (test every n-th point in memory, default 1), `CAIRN_MAPPED_POINTS`
//! (points per mapped-WAL sweep, spread evenly, default 6), `CAIRN_CRASH_HOLES=1` (images keep
//! unsynced pages out of order). Failures print the point and seed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cairn::fs::fault::{FaultFs, FaultKind, FaultPlan};
use cairn::{Db, Error, Options, WriteBatch, WriteOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

type State = BTreeMap<Vec<u8>, Vec<u8>>;
/// One atomic write: `(key, Some(value))` puts, `(key, None)` deletes.
type Write = Vec<(Vec<u8>, Option<Vec<u8>>)>;

#[derive(Debug, Clone)]
enum Step {
    Write { write: Write, sync: bool },
    Flush,
    Compact,
    Reopen,
    Scan,
}

const KEY_COUNT: u32 = 80;

fn key(index: u32) -> Vec<u8> {
    common::key(index.into(), 4)
}

/// The fixed workload. Values carry their write index, so a value from the wrong write can
/// never pass for the right one.
fn workload() -> Vec<Step> {
    let mut rng = SmallRng::seed_from_u64(0x0c4a_54ed);
    let mut steps = Vec::new();
    for round in 0..320usize {
        let index = round;
        let sync = rng.gen_ratio(1, 6);
        let value = |index: usize, rng: &mut SmallRng| {
            let mut value = format!("w{index:05}-").into_bytes();
            value.resize(
                value.len() + rng.gen_range(20..140),
                b'a' + (index % 26) as u8,
            );
            value
        };
        let write: Write = match rng.gen_range(0..20) {
            0..=1 => vec![(key(rng.gen_range(0..KEY_COUNT)), None)],
            2 => (0..rng.gen_range(2..5))
                .map(|_| {
                    let key = key(rng.gen_range(0..KEY_COUNT));
                    (key, rng.gen_ratio(4, 5).then(|| value(index, &mut rng)))
                })
                .collect(),
            _ => vec![(
                key(rng.gen_range(0..KEY_COUNT)),
                Some(value(index, &mut rng)),
            )],
        };
        steps.push(Step::Write { write, sync });
        match round {
            60 | 200 => steps.push(Step::Flush),
            120 => steps.push(Step::Compact),
            160 => steps.push(Step::Reopen),
            _ if round % 50 == 25 => steps.push(Step::Scan),
            _ => {}
        }
    }
    steps
}

fn writes_of(steps: &[Step]) -> Vec<Write> {
    steps
        .iter()
        .filter_map(|step| match step {
            Step::Write { write, .. } => Some(write.clone()),
            _ => None,
        })
        .collect()
}

fn apply(state: &mut State, write: &Write) {
    for (key, value) in write {
        match value {
            Some(value) => state.insert(key.clone(), value.clone()),
            None => state.remove(key),
        };
    }
}

std::thread_local! {
    /// The compaction style this test thread's databases take (None: `options` as it is,
    /// which follows `CAIRN_COMPACTION_STYLE`); set by the policy-slice tests.
    static STYLE: std::cell::Cell<Option<cairn::CompactionStyle>> =
        const { std::cell::Cell::new(None) };
}

fn options(fs: &FaultFs) -> Options {
    let mut options = common::small_lsm_options(Arc::new(fs.clone()));
    options.block_cache_size_bytes = 16 * 1024;
    options.level_size_ratio = 4;
    // Tables read through mappings: on the real file system the sweep then checks that a
    // crash never leaves a mapped table to fault on.
    options.table_read_mode = cairn::TableReadMode::Mmap;
    match STYLE.get() {
        Some(style) => common::with_style(options, style),
        None => options,
    }
}

/// The database path on the in-memory file system.
const MEM_DB: &str = "/db";

/// Where a sweep runs: on the in-memory file system, or on the real one (a temporary
/// directory) with the production memory-mapped WAL under the fault wrapper.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Target {
    Mem,
    Mapped,
}

impl Target {
    /// A fresh, empty file system and the database path on it; `name` keeps the directories
    /// of tests running at once apart.
    fn fresh(self, name: &str) -> (FaultFs, PathBuf) {
        match self {
            Target::Mem => (FaultFs::new(), PathBuf::from(MEM_DB)),
            Target::Mapped => {
                let directory =
                    std::env::temp_dir().join(format!("cairn-crash-{}-{name}", std::process::id()));
                let _ = std::fs::remove_dir_all(&directory);
                std::fs::create_dir_all(&directory).unwrap();
                (FaultFs::wrap(cairn::StdFs), directory.join("db"))
            }
        }
    }

    /// Points to test out of `0..end`: every `stride`-th in memory; on the real file system
    /// (slow: real fdatasyncs) `CAIRN_MAPPED_POINTS` points spread evenly (default 6).
    fn points(self, end: u64, stride: usize) -> Vec<u64> {
        match self {
            Target::Mem => (0..end).step_by(stride).collect(),
            Target::Mapped => {
                let wanted = common::env_or::<u64>("CAIRN_MAPPED_POINTS", 6).max(1);
                let step = end.div_ceil(wanted).max(1);
                (0..end).step_by(step as usize).collect()
            }
        }
    }

    fn cleanup(self, db_path: &Path) {
        if self == Target::Mapped {
            if let Some(directory) = db_path.parent() {
                let _ = std::fs::remove_dir_all(directory);
            }
        }
    }
}

/// What a workload run observed.
#[derive(Debug, Default)]
struct Outcome {
    /// Per write issued (in order): its result.
    results: Vec<WriteResult>,
    /// Writes that must survive a power loss (sync or flush acknowledged).
    power_floor: usize,
    /// Errors that are bugs whatever happened (internal errors).
    violations: Vec<String>,
    /// Operation count when the last successful open returned (faults before it belong to
    /// an earlier instance or to a failed open).
    opened_at_operation: u64,
}

#[derive(Debug, Clone, PartialEq)]
enum WriteResult {
    Acked,
    /// Refused before reaching the log (`WritesStopped`).
    Refused,
    /// Failed with another error: may or may not be in the log.
    Failed,
}

impl Outcome {
    fn issued(&self) -> usize {
        self.results.len()
    }

    fn acked(&self) -> usize {
        self.results
            .iter()
            .filter(|result| **result == WriteResult::Acked)
            .count()
    }
}

fn check_error(outcome: &mut Outcome, context: &str, error: &Error) {
    if matches!(error, Error::Internal(_))
        || matches!(error, Error::WritesStopped { cause } if matches!(**cause, Error::Internal(_)))
    {
        outcome
            .violations
            .push(format!("{context}: internal error {error}"));
    }
}

/// Runs `steps`. `stop_on_error`: stop at the first error (a crash), else keep going (one-shot
/// faults), retrying a failed open once.
fn run(fs: &FaultFs, db_path: &Path, steps: &[Step], stop_on_error: bool) -> (Outcome, Option<Db>) {
    let mut outcome = Outcome::default();
    let open = |outcome: &mut Outcome| -> Option<Db> {
        let opened = |db: Db, outcome: &mut Outcome| {
            outcome.opened_at_operation = fs.operation_count();
            Some(db)
        };
        match Db::open(db_path, options(fs)) {
            Ok(db) => opened(db, outcome),
            Err(error) => {
                check_error(outcome, "open", &error);
                if stop_on_error {
                    return None;
                }
                match Db::open(db_path, options(fs)) {
                    Ok(db) => opened(db, outcome),
                    Err(error) => {
                        outcome
                            .violations
                            .push(format!("open failed twice: {error}"));
                        None
                    }
                }
            }
        }
    };
    let Some(mut db) = open(&mut outcome) else {
        return (outcome, None);
    };
    for step in steps {
        let result = match step {
            Step::Write { write, sync } => {
                let mut batch = WriteBatch::new();
                for (key, value) in write {
                    match value {
                        Some(value) => batch.put(key, value),
                        None => batch.delete(key),
                    };
                }
                let result = db.write(&WriteOptions::with_sync(*sync), batch);
                outcome.results.push(match &result {
                    Ok(()) => WriteResult::Acked,
                    Err(Error::WritesStopped { .. }) => WriteResult::Refused,
                    Err(_) => WriteResult::Failed,
                });
                if result.is_ok() && *sync {
                    outcome.power_floor = outcome.results.len();
                }
                result
            }
            Step::Flush => {
                let result = db.flush();
                if result.is_ok() && outcome.results.iter().all(|r| *r == WriteResult::Acked) {
                    outcome.power_floor = outcome.results.len();
                }
                result
            }
            Step::Compact => db.compact_range(None, None),
            Step::Scan => db
                .iter()
                .and_then(|iter| iter.collect::<Result<Vec<_>, _>>())
                .map(|_| ()),
            Step::Reopen => {
                drop(db);
                match open(&mut outcome) {
                    Some(reopened) => {
                        db = reopened;
                        // Recovery wrote everything it replayed to a synced table.
                        if outcome.results.iter().all(|r| *r == WriteResult::Acked) {
                            outcome.power_floor = outcome.results.len();
                        }
                        Ok(())
                    }
                    None => return (outcome, None),
                }
            }
        };
        if let Err(error) = result {
            check_error(&mut outcome, &format!("{step:?}"), &error);
            if stop_on_error {
                break;
            }
        }
    }
    (outcome, Some(db))
}

fn read_state(db: &Db) -> Result<State, Error> {
    common::try_scan(db)
}

/// Reads every key through `get` as well as a scan; both must agree with one state.
fn check_gets(db: &Db, state: &State) -> Result<(), String> {
    for index in 0..KEY_COUNT {
        let key = key(index);
        let got = db.get(&key).map_err(|error| format!("get: {error}"))?;
        if got.as_ref() != state.get(&key) {
            return Err(format!(
                "get({}) = {:?}, scan says {:?}",
                String::from_utf8_lossy(&key),
                got.map(|v| String::from_utf8_lossy(&v[..8.min(v.len())]).into_owned()),
                state
                    .get(&key)
                    .map(|v| String::from_utf8_lossy(&v[..8.min(v.len())]).into_owned())
            ));
        }
    }
    Ok(())
}

/// Opens `fs` and checks it holds the first m writes of one of the `candidates`
/// (`(writes, floor)`) for some m in `floor..=writes.len()`. Then writes, reopens and reads
/// again. Returns m.
fn verify_recovery(
    fs: &FaultFs,
    db_path: &Path,
    candidates: &[(&[Write], usize)],
) -> Result<usize, String> {
    let db = Db::open(db_path, options(fs)).map_err(|error| format!("reopen failed: {error}"))?;
    let recovered = read_state(&db).map_err(|error| format!("scan failed: {error}"))?;
    let mut matched = None;
    'candidates: for (writes, floor) in candidates {
        let mut state = State::new();
        for m in 0..=writes.len() {
            if m > 0 {
                apply(&mut state, &writes[m - 1]);
            }
            if m >= *floor && state == recovered {
                matched = Some(m);
                break 'candidates;
            }
        }
    }
    let Some(matched) = matched else {
        return Err(format!(
            "recovered state ({} keys) is not a prefix of the writes that includes every durable one (candidates: {:?})",
            recovered.len(),
            candidates
                .iter()
                .map(|(writes, floor)| (writes.len(), *floor))
                .collect::<Vec<_>>()
        ));
    };
    check_gets(&db, &recovered)?;
    // The recovered database must accept writes and survive another restart.
    db.put_with(&WriteOptions::with_sync(true), b"after-recovery", b"1")
        .map_err(|error| format!("write after recovery: {error}"))?;
    drop(db);
    let db = Db::open(db_path, options(fs)).map_err(|error| format!("second reopen: {error}"))?;
    let mut again = read_state(&db).map_err(|error| format!("second scan: {error}"))?;
    if again.remove(b"after-recovery".as_slice()).as_deref() != Some(b"1".as_slice()) {
        return Err("write after recovery lost".into());
    }
    if again != recovered {
        return Err("second reopen changed the state".into());
    }
    Ok(matched)
}

/// A fresh file system for one run of a sweep; `CAIRN_CRASH_HOLES=1` lets its power-loss
/// images keep unsynced pages out of order.
fn fresh(target: Target, name: &str) -> (FaultFs, PathBuf) {
    let (fs, db_path) = target.fresh(name);
    fs.set_crash_holes(common::env_or::<usize>("CAIRN_CRASH_HOLES", 0) != 0);
    (fs, db_path)
}

#[test]
fn crash_at_every_write_point() {
    crash_sweep(Target::Mem, "crash");
}

/// The policy slice: the sweep under tiering and under lazy leveling, every third point (the
/// full sweep per style: `CAIRN_COMPACTION_STYLE`, see `common::env_style`).
#[test]
fn crash_at_every_third_write_point_tiered() {
    for (style, name) in [
        (cairn::CompactionStyle::Tiering, "crash-tiering"),
        (cairn::CompactionStyle::LazyLeveling, "crash-lazy"),
    ] {
        STYLE.set(Some(style));
        crash_sweep_with_stride(Target::Mem, name, 3);
    }
}

/// The same sweep on the real file system with the memory-mapped WAL (a slice of the points).
#[cfg(target_os = "linux")]
#[test]
fn crash_at_every_write_point_mapped_wal() {
    crash_sweep(Target::Mapped, "crash");
}

fn crash_sweep(target: Target, name: &str) {
    crash_sweep_with_stride(target, name, 1);
}

/// The sweep over every `stride`-th point (times `CAIRN_CRASH_STRIDE`).
fn crash_sweep_with_stride(target: Target, name: &str, stride: usize) {
    let steps = workload();
    let writes = writes_of(&steps);
    // A clean run counts the write points (background threads make the exact count vary a
    // little from run to run; points past the end of a run simply never fire).
    let (fs, db_path) = fresh(target, name);
    let (outcome, db) = run(&fs, &db_path, &steps, true);
    assert!(outcome.violations.is_empty(), "{:?}", outcome.violations);
    assert_eq!(outcome.acked(), writes.len());
    drop(db);
    let total = fs.write_point_count();
    let seeds = common::env_or::<u64>("CAIRN_CRASH_SEEDS", 2);
    let stride = common::env_or::<usize>("CAIRN_CRASH_STRIDE", 1).max(1) * stride;
    let (mut points, mut images, mut failures) = (0u64, 0u64, Vec::new());
    let mut recovered_counts = Vec::new();
    for point in target.points(total + 20, stride) {
        let (fs, db_path) = fresh(target, name);
        fs.set_plan(FaultPlan::CrashAtWritePoint { index: point });
        let (outcome, db) = run(&fs, &db_path, &steps, true);
        drop(db);
        points += 1;
        for violation in &outcome.violations {
            failures.push(format!("point {point}: {violation}"));
        }
        for seed in 0..seeds {
            let image = fs.crash_image(point * 1000 + seed);
            images += 1;
            match verify_recovery(
                &image,
                &db_path,
                &[(&writes[..outcome.issued()], outcome.power_floor)],
            ) {
                Ok(m) => recovered_counts.push(m),
                Err(message) => failures.push(format!(
                    "point {point} seed {} (issued {}, acked {}, floor {}): {message}",
                    point * 1000 + seed,
                    outcome.issued(),
                    outcome.acked(),
                    outcome.power_floor
                )),
            }
        }
    }
    target.cleanup(&db_path);
    eprintln!(
        "crash_at_every_write_point ({target:?}): {points} crash points (of {total} write points), {images} images, {} violations",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} violations:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
}

fn io_error_sweep(kind: FaultKind, target: Target) {
    let name = format!("{kind:?}");
    let steps = workload();
    let (fs, db_path) = fresh(target, &name);
    let (outcome, db) = run(&fs, &db_path, &steps, false);
    assert!(outcome.violations.is_empty(), "{:?}", outcome.violations);
    drop(db);
    let total = fs.operation_count();
    let stride = common::env_or::<usize>("CAIRN_IO_STRIDE", 1).max(1);
    let (mut injections, mut failures) = (0u64, Vec::new());
    for index in target.points(total + 20, stride) {
        let (fs, db_path) = fresh(target, &name);
        fs.set_plan(FaultPlan::Once { index, kind });
        let (mut outcome, db) = run(&fs, &db_path, &steps, false);
        let injected = fs.injected();
        let fired_open = injected.first().cloned();
        if fired_open.is_some() {
            injections += 1;
        }
        let mut report = |message: String| {
            failures.push(format!(
                "{kind:?} at operation {index} ({:?}): {message}",
                fired_open.as_ref().map(|fault| format!(
                    "{} {}",
                    fault.operation,
                    fault.path.display()
                ))
            ))
        };
        for violation in outcome.violations.drain(..) {
            report(violation);
        }
        let issued: Vec<Write> = writes_of(&steps)[..outcome.issued()].to_vec();
        // Writes that may be in the log: acknowledged ones and those that failed with an
        // error other than WritesStopped.
        let maybe_logged: Vec<Write> = issued
            .iter()
            .zip(&outcome.results)
            .filter(|(_, result)| **result != WriteResult::Refused)
            .map(|(write, _)| write.clone())
            .collect();
        let maybe_results: Vec<&WriteResult> = outcome
            .results
            .iter()
            .filter(|result| **result != WriteResult::Refused)
            .collect();
        let last_acked = maybe_results
            .iter()
            .rposition(|result| **result == WriteResult::Acked)
            .map_or(0, |position| position + 1);
        let mut acked_state = State::new();
        for (write, result) in issued.iter().zip(&outcome.results) {
            if *result == WriteResult::Acked {
                apply(&mut acked_state, write);
            }
        }
        let Some(db) = db else {
            report("the database could not be reopened on a healthy file system".into());
            continue;
        };
        let probe_ok = check_live_and_probe(
            &fs,
            db,
            &outcome,
            &acked_state,
            &maybe_logged,
            fired_open.as_ref(),
            &mut report,
        );
        let history = IoHistory {
            issued: &issued,
            maybe_logged,
            last_acked,
            probe_ok,
        };
        check_io_recovery(&fs, &db_path, index, &outcome, history, &mut report);
    }
    target.cleanup(&db_path);
    eprintln!(
        "{kind:?} at every operation ({target:?}): {injections} injections (of {total} operations), {} violations",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} violations:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
}

/// Checks the live state of the run's database after a one-shot fault, then probes it with
/// a synced write; returns whether the probe was acknowledged. Consumes (closes) the database.
fn check_live_and_probe(
    fs: &FaultFs,
    db: Db,
    outcome: &Outcome,
    acked_state: &State,
    maybe_logged: &[Write],
    fired_open: Option<&cairn::fs::fault::InjectedFault>,
    report: &mut dyn FnMut(String),
) -> bool {
    // Live state: the acknowledged writes, or those plus the write that failed: a write
    // whose record reached the OS before its sync failed is inserted and visible (the
    // error is sticky, so nothing follows it) — unless the fault hit an earlier instance,
    // whose failed write the reopen may replay.
    let mut logged_state = State::new();
    for write in maybe_logged {
        apply(&mut logged_state, write);
    }
    let allowed = |live: &State| live == acked_state || *live == logged_state;
    let fault_in_this_instance =
        fired_open.is_none_or(|fault| fault.operation_index >= outcome.opened_at_operation);
    if fault_in_this_instance {
        match read_state(&db) {
            Ok(live) if allowed(&live) => {}
            Ok(_) => report("live state differs from the acknowledged writes".into()),
            // The one-shot fault may land on these reads; they are retried once.
            Err(_) => match read_state(&db) {
                Ok(live) if allowed(&live) => {}
                Ok(_) => report("live state differs from the acknowledged writes".into()),
                Err(error) => report(format!("scan failed twice: {error}")),
            },
        }
    }
    // Synchronise with background work, so a failure there is recorded, then probe.
    let _ = db.flush();
    let _ = db.compact_range(None, None);
    let fault = fs.injected().first().cloned();
    // Only a failed sync seen by this instance must stop it (one that failed an open, or
    // hit an instance closed since, does not).
    let stopped_by_sync = fault
        .as_ref()
        .is_some_and(|fault| fault.is_sync && fault.operation_index >= outcome.opened_at_operation);
    let probe = db.put_with(&WriteOptions::with_sync(true), b"probe", b"p");
    match (&probe, stopped_by_sync) {
        (Err(Error::WritesStopped { .. }), _) => {}
        (Err(error), true) => report(format!("probe after a failed sync: {error}")),
        (Ok(()), false) => {}
        (Err(error), false) => {
            // A fault that hit a read or a removal may legitimately be invisible to
            // writers, but a write that fails after the fault passed must be sticky.
            report(format!("probe write failed without WritesStopped: {error}"));
        }
        (Ok(()), true) if !writes_stop_soon(&db) => report(format!(
            "writes accepted after a failed {:?}",
            fault.map(|fault| fault.operation)
        )),
        (Ok(()), true) => {}
    }
    let probe_ok = probe.is_ok();
    drop(db);
    probe_ok
}

/// Whether writes stop within a second: a sync that failed in a background flush or
/// compaction the checks did not wait for (one scheduled after `compact_range` returned)
/// makes the error sticky a moment after the file system reported it, and a write issued in
/// that moment may be acknowledged. The retries rewrite the probe's own key and value, so
/// the state the recovery checks expect does not change.
fn writes_stop_soon(db: &Db) -> bool {
    for _ in 0..50 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        if let Err(Error::WritesStopped { .. }) =
            db.put_with(&WriteOptions::with_sync(true), b"probe", b"p")
        {
            return true;
        }
    }
    false
}

/// What a one-shot-fault run may have logged (see `io_error_sweep`).
struct IoHistory<'a> {
    issued: &'a [Write],
    maybe_logged: Vec<Write>,
    last_acked: usize,
    probe_ok: bool,
}

/// Reopens after a process restart and after a power loss; both must give a prefix holding
/// every acknowledged (resp. durable) write.
fn check_io_recovery(
    fs: &FaultFs,
    db_path: &Path,
    index: u64,
    outcome: &Outcome,
    history: IoHistory<'_>,
    report: &mut dyn FnMut(String),
) {
    let IoHistory {
        issued,
        maybe_logged,
        last_acked,
        probe_ok,
    } = history;
    let probe_write = vec![(b"probe".to_vec(), Some(b"p".to_vec()))];
    // Candidate histories: the writes that may be logged, or only the acknowledged ones
    // (a failed write is allowed to be absent), each plus the probe if it was acked.
    let mut acked_writes: Vec<Write> = issued
        .iter()
        .zip(&outcome.results)
        .filter(|(_, result)| **result == WriteResult::Acked)
        .map(|(write, _)| write.clone())
        .collect();
    let mut maybe_logged = maybe_logged;
    if probe_ok {
        maybe_logged.push(probe_write.clone());
        acked_writes.push(probe_write);
    }
    let restart_floor = if probe_ok {
        maybe_logged.len()
    } else {
        last_acked
    };
    // Writes acknowledged durable (sync or flush) before the power loss, counted in each
    // candidate list.
    let durable_issued = outcome.power_floor;
    let floor_in = |keep: &dyn Fn(&WriteResult) -> bool| {
        outcome.results[..durable_issued]
            .iter()
            .filter(|result| keep(result))
            .count()
    };
    let power_floor_logged = floor_in(&|result| *result != WriteResult::Refused);
    let power_floor_acked = floor_in(&|result| *result == WriteResult::Acked);
    let probe_floor = |list: &[Write], floor: usize| if probe_ok { list.len() } else { floor };
    // Power loss right after the run: only synced data and directory entries survive.
    let image = fs.crash_image(index);
    fs.heal();
    // Process restart: everything handed to the OS is still there.
    if let Err(message) = verify_recovery(
        fs,
        db_path,
        &[
            (&maybe_logged, restart_floor),
            (&acked_writes, acked_writes.len()),
        ],
    ) {
        report(format!("restart: {message}"));
    }
    if let Err(message) = verify_recovery(
        &image,
        db_path,
        &[
            (
                &maybe_logged,
                probe_floor(&maybe_logged, power_floor_logged),
            ),
            (&acked_writes, probe_floor(&acked_writes, power_floor_acked)),
        ],
    ) {
        report(format!("power loss: {message}"));
    }
}

#[test]
fn eio_at_every_operation() {
    io_error_sweep(FaultKind::Eio, Target::Mem);
}

#[test]
fn enospc_at_every_operation() {
    io_error_sweep(FaultKind::Enospc, Target::Mem);
}

#[cfg(target_os = "linux")]
#[test]
fn eio_at_every_operation_mapped_wal() {
    io_error_sweep(FaultKind::Eio, Target::Mapped);
}

#[cfg(target_os = "linux")]
#[test]
fn enospc_at_every_operation_mapped_wal() {
    io_error_sweep(FaultKind::Enospc, Target::Mapped);
}

#[test]
fn workload_spans_switches_flushes_compactions_and_manifest_rollovers() {
    let fs = FaultFs::new();
    let (outcome, db) = run(&fs, Path::new(MEM_DB), &workload(), true);
    assert!(outcome.violations.is_empty());
    let db = db.unwrap();
    let stats = db.stats();
    // Counters restart at the reopen, so these count the second half only.
    assert!(stats.counter("memtable_switches") >= 5, "{stats:?}");
    assert!(stats.counter("flushes") >= 5, "{stats:?}");
    // Compactions run on a background thread: on a loaded machine it falls behind and the
    // second half saw one compaction where an idle machine sees three or more (seen when CI-like
    // loads shared the cores). At least one is what the sweep's coverage needs.
    assert!(stats.counter("compactions") >= 1, "{stats:?}");
    drop(db);
    let names = cairn::FileSystem::list(&fs, Path::new(MEM_DB)).unwrap();
    let manifest = names
        .iter()
        .filter_map(|name| name.strip_prefix("MANIFEST-"))
        .map(|number| number.parse::<u64>().unwrap())
        .max()
        .unwrap();
    // Rollovers number MANIFESTs past many other files; two opens alone would not.
    assert!(manifest > 20, "MANIFEST number {manifest}: no rollover");
    let sync_writes = workload()
        .iter()
        .filter(|step| matches!(step, Step::Write { sync: true, .. }))
        .count();
    assert!(sync_writes > 20 && sync_writes < 150);
}

/// Unsynced WAL pages may reach the disk in any order: a power-loss image can hold a later
/// page of the log while an earlier one reads as zeros. Recovery must still open and keep a
/// prefix of the writes holding every synced one: the WAL's sync markers show the hole is
/// past the synced bytes, so `WalRecovery::PointInTime` (the default) ends the prefix there.
#[test]
fn power_loss_with_holes_in_the_unsynced_wal_tail() {
    let fs = FaultFs::new();
    fs.set_crash_holes(true);
    let db_path = Path::new(MEM_DB);
    let db = Db::open(db_path, {
        let mut options = Options::default();
        options.file_system = Arc::new(fs.clone());
        options.write_buffer_size_bytes = 1 << 20;
        options
    })
    .unwrap();
    let mut writes: Vec<Write> = Vec::new();
    let mut floor = 0;
    for index in 0..400u32 {
        let write = vec![(
            key(index % KEY_COUNT),
            Some(vec![b'a' + (index % 26) as u8; 150 + index as usize]),
        )];
        let sync = index % 97 == 0;
        let mut batch = WriteBatch::new();
        if let (key, Some(value)) = &write[0] {
            batch.put(key, value);
        }
        db.write(&WriteOptions::with_sync(sync), batch).unwrap();
        writes.push(write);
        if sync {
            floor = writes.len();
        }
    }
    fs.crash_now();
    drop(db);
    let mut failures = Vec::new();
    for seed in 0..common::env_or::<u64>("CAIRN_CRASH_SEEDS", 2) * 16 {
        let image = fs.crash_image(seed);
        if let Err(message) = verify_recovery(&image, db_path, &[(&writes, floor)]) {
            failures.push(format!("seed {seed}: {message}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
