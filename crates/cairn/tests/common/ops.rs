//! Seeded operation sequences for the model and metamorphic tests: the operation type, its
//! generator, its executor against a `Db`, its oracle against a `BTreeMap`, and delta
//! debugging over an operation list. Included by `model.rs` and `metamorphic.rs` alone, with
//! `#[path]`, so other test binaries do not build it.
//!
//! Thread-safety contract: everything here runs on the test's one thread; the executor and
//! the oracle own their state (`Snapshots`, `Oracle`) and share nothing.
//!
//! Invariants:
//! 1. `execute` and `Oracle::apply` give equal `Outcome`s for every operation on a correct
//!    engine: the read-modify-write decisions (`update_value`, the counter parse) are the same
//!    functions on both sides, and a compare-and-swap against `Expect::Current` reads the
//!    current value first on both sides.
//! 2. `generate(seed, count, crash)` depends only on its arguments, so a seed replays; with
//!    `crash == false` it never yields `Op::Crash` (whose outcome depends on timing).
//! 3. Structural operations (`Reopen`, `Crash`) are left to the runner: `execute` and
//!    `Oracle::apply` return `Outcome::Done` for them without acting.

#![allow(dead_code)]

use cairn::{Db, Error, Snapshot, WriteBatch, WriteOptions};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::ops::Bound;

pub type Key = Vec<u8>;
pub type Value = Vec<u8>;
pub type Model = BTreeMap<Key, Value>;
/// One atomic write as the oracle sees it: every key it sets (`Some`) or deletes (`None`).
pub type Mutation = Vec<(Key, Option<Value>)>;

/// The expected value of a compare-and-swap.
#[derive(Clone)]
pub enum Expect {
    /// Whatever the key holds just before (read first): the swap succeeds.
    Current,
    /// This value (`None`: absent): the swap usually fails.
    Value(Option<Value>),
}

#[derive(Clone)]
pub enum Op {
    Put {
        key: Key,
        value: Value,
        sync: bool,
    },
    Delete {
        key: Key,
        sync: bool,
    },
    Get(Key),
    Range {
        lower: Bound<Key>,
        upper: Bound<Key>,
        reverse: bool,
    },
    Batch {
        entries: Mutation,
        sync: bool,
    },
    /// `Db::update` with `update_value(current, tag)`.
    Update {
        key: Key,
        tag: u8,
    },
    PutIfAbsent {
        key: Key,
        value: Value,
    },
    CompareAndSwap {
        key: Key,
        expected: Expect,
        new: Option<Value>,
    },
    Increment {
        key: Key,
        delta: i64,
    },
    TakeSnapshot,
    ReadSnapshot {
        index: usize,
        key: Key,
    },
    ScanSnapshot {
        index: usize,
        lower: Bound<Key>,
        upper: Bound<Key>,
        reverse: bool,
    },
    ReleaseSnapshot {
        index: usize,
    },
    Flush,
    Compact {
        lower: Option<Key>,
        upper: Option<Key>,
    },
    Reopen,
    /// Power loss: reopen on a `FaultFs` crash image built with this seed.
    Crash {
        seed: u64,
    },
}

impl Op {
    /// True for a write acknowledged only once durable (`WriteOptions { sync: true }`).
    pub fn is_sync_write(&self) -> bool {
        matches!(
            self,
            Op::Put { sync: true, .. }
                | Op::Delete { sync: true, .. }
                | Op::Batch { sync: true, .. }
        )
    }
}

/// A key as escaped text (keys here are ASCII).
fn k(key: &[u8]) -> String {
    format!("\"{}\"", key.escape_ascii())
}

/// A value by its length and first bytes (values are mostly random bytes).
fn v(value: &Option<Value>) -> String {
    match value {
        Some(value) if value.len() <= 8 => format!("\"{}\"", value.escape_ascii()),
        Some(value) => format!("<{} bytes {:02x?}..>", value.len(), &value[..4]),
        None => "None".into(),
    }
}

fn b(bound: &Bound<Key>) -> String {
    match bound {
        Bound::Included(key) => format!("Included({})", k(key)),
        Bound::Excluded(key) => format!("Excluded({})", k(key)),
        Bound::Unbounded => "Unbounded".into(),
    }
}

fn sync_mark(sync: bool) -> &'static str {
    if sync {
        ", sync"
    } else {
        ""
    }
}

impl std::fmt::Debug for Expect {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Expect::Current => write!(formatter, "Current"),
            Expect::Value(value) => write!(formatter, "{}", v(value)),
        }
    }
}

/// Compact, readable operations for shrunk sequences in failure messages.
impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Op::Put { key, value, sync } => {
                let value = v(&Some(value.clone()));
                write!(f, "Put({}, {value}{})", k(key), sync_mark(*sync))
            }
            Op::Delete { key, sync } => write!(f, "Delete({}{})", k(key), sync_mark(*sync)),
            Op::Get(key) => write!(f, "Get({})", k(key)),
            Op::Range {
                lower,
                upper,
                reverse,
            } => write!(f, "Range({}, {}, reverse: {reverse})", b(lower), b(upper)),
            Op::Batch { entries, sync } => {
                let entries: Vec<String> = entries
                    .iter()
                    .map(|(key, value)| format!("{} => {}", k(key), v(value)))
                    .collect();
                write!(f, "Batch([{}]{})", entries.join(", "), sync_mark(*sync))
            }
            Op::Update { key, tag } => write!(f, "Update({}, tag {tag})", k(key)),
            Op::PutIfAbsent { key, value } => {
                write!(f, "PutIfAbsent({}, {})", k(key), v(&Some(value.clone())))
            }
            Op::CompareAndSwap { key, expected, new } => {
                write!(f, "CompareAndSwap({}, {expected:?} -> {})", k(key), v(new))
            }
            Op::Increment { key, delta } => write!(f, "Increment({}, {delta})", k(key)),
            Op::TakeSnapshot => write!(f, "TakeSnapshot"),
            Op::ReadSnapshot { index, key } => write!(f, "ReadSnapshot({index}, {})", k(key)),
            Op::ScanSnapshot {
                index,
                lower,
                upper,
                reverse,
            } => write!(
                f,
                "ScanSnapshot({index}, {}, {}, reverse: {reverse})",
                b(lower),
                b(upper)
            ),
            Op::ReleaseSnapshot { index } => write!(f, "ReleaseSnapshot({index})"),
            Op::Flush => write!(f, "Flush"),
            Op::Compact { lower, upper } => write!(f, "Compact({}, {})", v(lower), v(upper)),
            Op::Reopen => write!(f, "Reopen"),
            Op::Crash { seed } => write!(f, "Crash(seed {seed})"),
        }
    }
}

/// What one operation returned, compared between the engine and the oracle (or between
/// option sets).
#[derive(Clone, PartialEq, Eq)]
pub enum Outcome {
    Done,
    Value(Option<Value>),
    Applied(bool),
    /// An increment's new value, or `None` when the engine rejected it (not an integer).
    Counter(Option<i64>),
    Entries(Vec<(Key, Value)>),
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Done => write!(formatter, "Done"),
            Outcome::Value(value) => write!(formatter, "Value({:?})", value.as_deref().map(short)),
            Outcome::Applied(applied) => write!(formatter, "Applied({applied})"),
            Outcome::Counter(counter) => write!(formatter, "Counter({counter:?})"),
            // Scans can be long: print their size and the keys only.
            Outcome::Entries(entries) => {
                let keys: Vec<String> = entries.iter().map(|(key, _)| short(key)).collect();
                write!(formatter, "Entries[{}]{keys:?}", entries.len())
            }
        }
    }
}

fn short(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(24)]).into_owned();
    if bytes.len() > 24 {
        format!("{text}..({} bytes)", bytes.len())
    } else {
        text
    }
}

pub fn random_key(rng: &mut SmallRng) -> Key {
    // A small key space so keys are overwritten and deleted often; some keys are prefixes
    // of others, and the empty key is legal.
    match rng.gen_range(0..10) {
        0 => Vec::new(),
        1 => vec![b'k'; rng.gen_range(1..4)],
        _ => format!("key{:03}", rng.gen_range(0..150)).into_bytes(),
    }
}

pub fn random_value(rng: &mut SmallRng) -> Value {
    let length = match rng.gen_range(0..20) {
        0 => 0,
        1 => rng.gen_range(200..3000),
        _ => rng.gen_range(1..40),
    };
    (0..length).map(|_| rng.gen()).collect()
}

fn random_bound(rng: &mut SmallRng) -> Bound<Key> {
    match rng.gen_range(0..5) {
        0 => Bound::Unbounded,
        1 | 2 => Bound::Included(random_key(rng)),
        _ => Bound::Excluded(random_key(rng)),
    }
}

/// Counter keys hold integers (only increments touch them); one increment in five goes to an
/// ordinary key instead, which usually holds bytes that do not parse.
fn counter_key(rng: &mut SmallRng) -> Key {
    if rng.gen_bool(0.8) {
        format!("cnt{}", rng.gen_range(0..4)).into_bytes()
    } else {
        random_key(rng)
    }
}

fn random_op(rng: &mut SmallRng, crash: bool) -> Op {
    let sync = rng.gen_ratio(1, 10);
    match rng.gen_range(0..1000) {
        0..=299 | 970..=999 => Op::Put {
            key: random_key(rng),
            value: random_value(rng),
            sync,
        },
        300..=399 => Op::Delete {
            key: random_key(rng),
            sync,
        },
        400..=549 => Op::Get(random_key(rng)),
        550..=629 => Op::Range {
            lower: random_bound(rng),
            upper: random_bound(rng),
            reverse: rng.gen_bool(0.5),
        },
        630..=679 => Op::Batch {
            entries: (0..rng.gen_range(1..8))
                .map(|_| {
                    let key = random_key(rng);
                    (key, rng.gen_bool(0.7).then(|| random_value(rng)))
                })
                .collect(),
            sync,
        },
        680..=709 => Op::Update {
            key: random_key(rng),
            tag: rng.gen(),
        },
        710..=734 => Op::PutIfAbsent {
            key: random_key(rng),
            value: random_value(rng),
        },
        735..=764 => Op::CompareAndSwap {
            key: random_key(rng),
            expected: if rng.gen_bool(0.6) {
                Expect::Current
            } else {
                Expect::Value(rng.gen_bool(0.5).then(|| random_value(rng)))
            },
            new: rng.gen_bool(0.8).then(|| random_value(rng)),
        },
        765..=794 => Op::Increment {
            key: counter_key(rng),
            delta: rng.gen_range(-1000..1000),
        },
        795..=814 => Op::TakeSnapshot,
        815..=849 => Op::ReadSnapshot {
            index: rng.gen_range(0..4),
            key: random_key(rng),
        },
        850..=869 => Op::ScanSnapshot {
            index: rng.gen_range(0..4),
            lower: random_bound(rng),
            upper: random_bound(rng),
            reverse: rng.gen_bool(0.5),
        },
        870..=889 => Op::ReleaseSnapshot {
            index: rng.gen_range(0..4),
        },
        890..=919 => Op::Flush,
        920..=939 => Op::Compact {
            lower: rng.gen_bool(0.5).then(|| random_key(rng)),
            upper: rng.gen_bool(0.5).then(|| random_key(rng)),
        },
        940..=954 => Op::Reopen,
        955..=969 if crash => Op::Crash { seed: rng.gen() },
        _ => Op::Get(random_key(rng)),
    }
}

/// `count` operations from `seed`; `crash` allows power-loss operations.
pub fn generate(seed: u64, count: usize, crash: bool) -> Vec<Op> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..count).map(|_| random_op(&mut rng, crash)).collect()
}

/// The read-modify-write function of `Op::Update`: creates, grows, and past 48 bytes deletes.
pub fn update_value(current: Option<&[u8]>, tag: u8) -> Option<Value> {
    match current {
        None => Some(vec![b'u', tag]),
        Some(value) if value.len() > 48 => None,
        Some(value) => {
            let mut value = value.to_vec();
            value.push(tag);
            Some(value)
        }
    }
}

/// The engine's counter parse (decimal ASCII `i64`, absent = 0), as the oracle applies it.
fn parse_counter(current: Option<&Value>) -> Option<i64> {
    match current {
        None => Some(0),
        Some(bytes) => std::str::from_utf8(bytes).ok()?.parse().ok(),
    }
}

fn as_ref_bound(bound: &Bound<Key>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(key) => Bound::Included(key.as_slice()),
        Bound::Excluded(key) => Bound::Excluded(key.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn within(key: &[u8], lower: &Bound<Key>, upper: &Bound<Key>) -> bool {
    let above = match lower {
        Bound::Included(lower) => key >= lower.as_slice(),
        Bound::Excluded(lower) => key > lower.as_slice(),
        Bound::Unbounded => true,
    };
    let below = match upper {
        Bound::Included(upper) => key <= upper.as_slice(),
        Bound::Excluded(upper) => key < upper.as_slice(),
        Bound::Unbounded => true,
    };
    above && below
}

/// The model's entries within the bounds, in the requested order (any bounds, even crossed).
pub fn model_range(
    model: &Model,
    lower: &Bound<Key>,
    upper: &Bound<Key>,
    reverse: bool,
) -> Vec<(Key, Value)> {
    let mut entries: Vec<(Key, Value)> = model
        .iter()
        .filter(|(key, _)| within(key, lower, upper))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    if reverse {
        entries.reverse();
    }
    entries
}

/// Open snapshots on the engine side (at most four; cleared by the runner on reopen).
pub type Snapshots = Vec<Snapshot>;

fn scan(
    db: &Db,
    snapshot: Option<&Snapshot>,
    lower: &Bound<Key>,
    upper: &Bound<Key>,
    reverse: bool,
) -> Result<Outcome, Error> {
    let entries = crate::common::range_at(
        db,
        snapshot,
        as_ref_bound(lower),
        as_ref_bound(upper),
        reverse,
    )?
    .collect::<Result<Vec<_>, _>>()?;
    Ok(Outcome::Entries(entries))
}

fn write_options(sync: bool) -> WriteOptions {
    WriteOptions::with_sync(sync)
}

/// Runs a non-structural `op` on `db`; `Reopen` and `Crash` return `Done` untouched.
pub fn execute(db: &Db, snapshots: &mut Snapshots, op: &Op) -> Result<Outcome, Error> {
    let outcome = match op {
        Op::Put { key, value, sync } => {
            db.put_with(&write_options(*sync), key, value)?;
            Outcome::Done
        }
        Op::Delete { key, sync } => {
            db.delete_with(&write_options(*sync), key)?;
            Outcome::Done
        }
        Op::Get(key) => Outcome::Value(db.get(key)?),
        Op::Range {
            lower,
            upper,
            reverse,
        } => scan(db, None, lower, upper, *reverse)?,
        Op::Batch { entries, sync } => {
            let mut batch = WriteBatch::new();
            for (key, value) in entries {
                match value {
                    Some(value) => batch.put(key, value),
                    None => batch.delete(key),
                };
            }
            db.write(&write_options(*sync), batch)?;
            Outcome::Done
        }
        Op::Update { key, tag } => {
            Outcome::Value(db.update(key, |current| update_value(current, *tag))?)
        }
        Op::PutIfAbsent { key, value } => {
            Outcome::Applied(db.put_if_absent(key, value)?.is_written())
        }
        Op::CompareAndSwap { key, expected, new } => {
            let expected = match expected {
                Expect::Current => db.get(key)?,
                Expect::Value(value) => value.clone(),
            };
            Outcome::Applied(
                db.compare_and_swap(key, expected.as_deref(), new.as_deref())?
                    .is_written(),
            )
        }
        Op::Increment { key, delta } => match db.increment(key, *delta) {
            Ok(value) => Outcome::Counter(Some(value)),
            Err(Error::InvalidArgument(_)) => Outcome::Counter(None),
            Err(error) => return Err(error),
        },
        Op::TakeSnapshot
        | Op::ReadSnapshot { .. }
        | Op::ScanSnapshot { .. }
        | Op::ReleaseSnapshot { .. } => execute_snapshot_op(db, snapshots, op)?,
        Op::Flush => {
            db.flush()?;
            Outcome::Done
        }
        Op::Compact { lower, upper } => {
            db.compact_range(lower.as_deref(), upper.as_deref())?;
            Outcome::Done
        }
        Op::Reopen | Op::Crash { .. } => Outcome::Done,
    };
    Ok(outcome)
}

fn execute_snapshot_op(db: &Db, snapshots: &mut Snapshots, op: &Op) -> Result<Outcome, Error> {
    let outcome = match op {
        Op::TakeSnapshot => {
            if snapshots.len() < 4 {
                snapshots.push(db.snapshot());
            }
            Outcome::Done
        }
        Op::ReadSnapshot { index, key } => match snapshots.get(*index) {
            Some(snapshot) => Outcome::Value(db.get_at(snapshot, key)?),
            None => Outcome::Done,
        },
        Op::ScanSnapshot {
            index,
            lower,
            upper,
            reverse,
        } => match snapshots.get(*index) {
            Some(snapshot) => scan(db, Some(snapshot), lower, upper, *reverse)?,
            None => Outcome::Done,
        },
        Op::ReleaseSnapshot { index } => {
            if *index < snapshots.len() {
                snapshots.remove(*index);
            }
            Outcome::Done
        }
        _ => Outcome::Done,
    };
    Ok(outcome)
}

/// The `BTreeMap` oracle: the live state, frozen copies for snapshots, and the atomic writes
/// applied since the runner last cleared `log` (the runner's durability bookkeeping).
#[derive(Debug, Default)]
pub struct Oracle {
    pub model: Model,
    pub snapshots: Vec<Model>,
    pub log: Vec<Mutation>,
}

impl Oracle {
    fn mutate(&mut self, mutation: Mutation) {
        for (key, value) in &mutation {
            match value {
                Some(value) => self.model.insert(key.clone(), value.clone()),
                None => self.model.remove(key),
            };
        }
        self.log.push(mutation);
    }

    /// What `execute` must return for `op`, applying its writes to the model.
    pub fn apply(&mut self, op: &Op) -> Outcome {
        match op {
            Op::Put { key, value, .. } => self.mutate(vec![(key.clone(), Some(value.clone()))]),
            Op::Delete { key, .. } => self.mutate(vec![(key.clone(), None)]),
            Op::Get(key) => return Outcome::Value(self.model.get(key).cloned()),
            Op::Range {
                lower,
                upper,
                reverse,
            } => return Outcome::Entries(model_range(&self.model, lower, upper, *reverse)),
            Op::Batch { entries, .. } => self.mutate(entries.clone()),
            Op::Update { key, tag } => {
                let new = update_value(self.model.get(key).map(Vec::as_slice), *tag);
                self.mutate(vec![(key.clone(), new.clone())]);
                return Outcome::Value(new);
            }
            Op::PutIfAbsent { key, value } => {
                let absent = !self.model.contains_key(key);
                if absent {
                    self.mutate(vec![(key.clone(), Some(value.clone()))]);
                }
                return Outcome::Applied(absent);
            }
            Op::CompareAndSwap { key, expected, new } => {
                let matches = match expected {
                    Expect::Current => true,
                    Expect::Value(value) => self.model.get(key) == value.as_ref(),
                };
                if matches {
                    self.mutate(vec![(key.clone(), new.clone())]);
                }
                return Outcome::Applied(matches);
            }
            Op::Increment { key, delta } => {
                let sum = parse_counter(self.model.get(key)).and_then(|v| v.checked_add(*delta));
                if let Some(sum) = sum {
                    self.mutate(vec![(key.clone(), Some(sum.to_string().into_bytes()))]);
                }
                return Outcome::Counter(sum);
            }
            _ => return self.apply_snapshot_op(op),
        }
        Outcome::Done
    }

    fn apply_snapshot_op(&mut self, op: &Op) -> Outcome {
        match op {
            Op::TakeSnapshot if self.snapshots.len() < 4 => {
                self.snapshots.push(self.model.clone());
            }
            Op::ReadSnapshot { index, key } => {
                if let Some(frozen) = self.snapshots.get(*index) {
                    return Outcome::Value(frozen.get(key).cloned());
                }
            }
            Op::ScanSnapshot {
                index,
                lower,
                upper,
                reverse,
            } => {
                if let Some(frozen) = self.snapshots.get(*index) {
                    return Outcome::Entries(model_range(frozen, lower, upper, *reverse));
                }
            }
            Op::ReleaseSnapshot { index } if *index < self.snapshots.len() => {
                self.snapshots.remove(*index);
            }
            _ => {}
        }
        Outcome::Done
    }
}

/// Delta debugging: removes chunks of operations while `fails` still holds, within a budget
/// of 2000 runs; returns the smallest failing list found.
pub fn shrink(mut ops: Vec<Op>, fails: &dyn Fn(&[Op]) -> bool) -> Vec<Op> {
    let mut chunk = ops.len() / 2;
    let mut attempts = 0;
    while chunk >= 1 && attempts < 2000 {
        let mut start = 0;
        let mut removed_any = false;
        while start < ops.len() && attempts < 2000 {
            attempts += 1;
            let end = (start + chunk).min(ops.len());
            let mut candidate = ops.clone();
            candidate.drain(start..end);
            if fails(&candidate) {
                ops = candidate;
                removed_any = true;
            } else {
                start += chunk;
            }
        }
        if !removed_any {
            chunk /= 2;
        }
    }
    ops
}
