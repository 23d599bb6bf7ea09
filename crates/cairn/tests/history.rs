//! History-checked stress test of the cLSM layer.
//!
//! Four threads (on two cores) run puts, deletes, gets, `put_if_absent`s (a read-modify-write
//! that may keep the value: a read of the newest version, which must be visible before it is
//! reported), increments, atomic batches and snapshot scans against a `Db` whose memtable is tiny, so memtable switches, flushes and
//! compactions happen constantly. Every operation is recorded with invocation and response
//! times from one logical clock, and every write with the sequence number the engine gave it
//! (`write_with_sequence`, `read_modify_write`). The checker then verifies:
//!
//! 1. **Write order respects real time**: a write that responded before another was invoked
//!    has the smaller sequence number (the sequence order is the engine's claimed
//!    linearization of writes).
//! 2. **Per-key linearizability, searched** (`common/linearizability.rs`, Wing & Gong's search
//!    with Lowe's memoization, as in Porcupine): for every key, the operations on it — puts,
//!    deletes, gets, increments, each batch's write of the key and each scan's read of the
//!    key — must have a sequential order, consistent with real time, under a register and
//!    counter model. This check uses only times, inputs and outputs, never the engine's
//!    sequence numbers, so a bug that corrupts the sequence numbers cannot hide from it.
//!    Projecting a multi-key operation onto each key is sound because linearizability is
//!    local: a linearization of the whole history restricts to one of every key.
//! 3. **Per-key linearizability of point operations against the engine's order** (a witness
//!    check, with the order supplied by the engine's sequence numbers instead of searched; it
//!    is linear-time and ties the sequence numbers to what readers saw): a get returns the
//!    value of a write w (or nothing: a delete or the initial state) such that w was invoked
//!    before the get responded, no later write of the key had responded before the get was
//!    invoked, and gets that follow each other in real time never go back in the write order.
//! 4. **Increments are counted exactly once**: per counter, the returned values are exactly
//!    1..=n in sequence order and the final value is n.
//! 5. **Snapshot scans equal the state at their timestamp**, reconstructed from the write
//!    history (every write with sequence <= S, newest per key), and the timestamp is at or
//!    above every write that responded before `snapshot()` was called.
//! 6. **Batches are all-or-nothing**: in every scan the batch keys hold the same value.
//!
//! Duration: `CAIRN_HISTORY_SECONDS` (default 3 in CI; run with 10 or more for the soak).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
// Included here only, so its own unit tests run in this binary and not in every test file.
#[path = "common/linearizability.rs"]
mod linearizability;

use cairn::{Db, MemFs, Options, SequenceNumber, Update, WriteBatch, WriteOptions};
use linearizability::{KeyModel, KeyOperation, Timed, Verdict};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const THREADS: usize = 4;
const REGISTERS: usize = 12;
const COUNTERS: usize = 3;
const BATCH_KEYS: usize = 4;

#[derive(Debug, Clone)]
enum Kind {
    Put {
        key: String,
        value: String,
        sequence: SequenceNumber,
    },
    Delete {
        key: String,
        sequence: SequenceNumber,
    },
    Get {
        key: String,
        value: Option<String>,
    },
    /// `put_if_absent` through `read_modify_write`: stored at `sequence`, or (None) found the
    /// key present and kept it — a read that must see every acknowledged write.
    PutIfAbsent {
        key: String,
        value: String,
        sequence: Option<SequenceNumber>,
    },
    Increment {
        key: String,
        value: i64,
        sequence: SequenceNumber,
    },
    Batch {
        value: String,
        last_sequence: SequenceNumber,
    },
    Scan {
        sequence: SequenceNumber,
        contents: BTreeMap<String, String>,
    },
}

#[derive(Debug, Clone)]
struct Event {
    invoke: u64,
    response: u64,
    kind: Kind,
}

fn register(index: usize) -> String {
    format!("r{index:02}")
}
fn counter(index: usize) -> String {
    format!("c{index}")
}
fn batch_key(index: usize) -> String {
    format!("b{index}")
}

/// Collects a scan of string keys and values (the test writes only UTF-8).
fn string_entries(
    entries: impl Iterator<Item = cairn::Result<(Vec<u8>, Vec<u8>)>>,
) -> BTreeMap<String, String> {
    entries
        .map(|entry| {
            let (key, value) = entry.unwrap();
            (
                String::from_utf8(key).unwrap(),
                String::from_utf8(value).unwrap(),
            )
        })
        .collect()
}

fn run_history(seconds: u64) -> (Vec<Event>, BTreeMap<String, String>) {
    let fs = MemFs::new();
    let options = Options {
        file_system: Arc::new(fs),
        write_buffer_size_bytes: 4096,
        max_immutable_memtables: 2,
        block_size_bytes: 256,
        target_file_size_bytes: 8192,
        level1_size_bytes_max: 16 * 1024,
        level0_compaction_trigger: 2,
        level0_slowdown_trigger: 6,
        level0_stop_trigger: 12,
        level_count: 4,
        ..Options::default()
    };
    let db = Arc::new(Db::open("/history", options).unwrap());
    let clock = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let events = Arc::new(Mutex::new(Vec::new()));
    let handles: Vec<_> = (0..THREADS)
        .map(|thread| {
            let (db, clock, stop, events) = (
                Arc::clone(&db),
                Arc::clone(&clock),
                Arc::clone(&stop),
                Arc::clone(&events),
            );
            std::thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(thread as u64 + 1);
                let mut local = Vec::new();
                let mut counter_value = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    counter_value += 1;
                    let invoke = clock.fetch_add(1, Ordering::SeqCst);
                    let kind = match rng.gen_range(0..100) {
                        0..=29 => {
                            let key = register(rng.gen_range(0..REGISTERS));
                            let value = format!("t{thread}-{counter_value}");
                            let mut batch = WriteBatch::new();
                            batch.put(key.as_bytes(), value.as_bytes());
                            let sequence = db
                                .write_with_sequence(&WriteOptions::default(), batch)
                                .unwrap();
                            Kind::Put {
                                key,
                                value,
                                sequence,
                            }
                        }
                        30..=39 => {
                            let key = register(rng.gen_range(0..REGISTERS));
                            let mut batch = WriteBatch::new();
                            batch.delete(key.as_bytes());
                            let sequence = db
                                .write_with_sequence(&WriteOptions::default(), batch)
                                .unwrap();
                            Kind::Delete { key, sequence }
                        }
                        65..=69 => {
                            let key = register(rng.gen_range(0..REGISTERS));
                            let value = format!("a{thread}-{counter_value}");
                            let (_, sequence) = db
                                .read_modify_write(key.as_bytes(), |current| match current {
                                    None => Update::Put(value.clone().into_bytes()),
                                    Some(_) => Update::Keep,
                                })
                                .unwrap();
                            Kind::PutIfAbsent {
                                key,
                                value,
                                sequence,
                            }
                        }
                        40..=64 => {
                            let key = register(rng.gen_range(0..REGISTERS));
                            let value = db
                                .get(key.as_bytes())
                                .unwrap()
                                .map(|bytes| String::from_utf8(bytes).unwrap());
                            Kind::Get { key, value }
                        }
                        70..=84 => {
                            let key = counter(rng.gen_range(0..COUNTERS));
                            let (value, sequence) = db
                                .read_modify_write(key.as_bytes(), |current| {
                                    let now: i64 = current
                                        .map(|bytes| {
                                            std::str::from_utf8(bytes).unwrap().parse().unwrap()
                                        })
                                        .unwrap_or(0);
                                    Update::Put((now + 1).to_string().into_bytes())
                                })
                                .unwrap();
                            let value = String::from_utf8(value.unwrap()).unwrap().parse().unwrap();
                            Kind::Increment {
                                key,
                                value,
                                sequence: sequence.unwrap(),
                            }
                        }
                        85..=92 => {
                            let value = format!("batch-{thread}-{counter_value}");
                            let mut batch = WriteBatch::new();
                            for index in 0..BATCH_KEYS {
                                batch.put(batch_key(index).as_bytes(), value.as_bytes());
                            }
                            let last_sequence = db
                                .write_with_sequence(&WriteOptions::default(), batch)
                                .unwrap();
                            Kind::Batch {
                                value,
                                last_sequence,
                            }
                        }
                        _ => {
                            let snapshot = db.snapshot();
                            let contents = string_entries(
                                db.range_at(
                                    Some(&snapshot),
                                    Bound::Unbounded,
                                    Bound::Unbounded,
                                    false,
                                )
                                .unwrap(),
                            );
                            Kind::Scan {
                                sequence: snapshot.sequence(),
                                contents,
                            }
                        }
                    };
                    let response = clock.fetch_add(1, Ordering::SeqCst);
                    local.push(Event {
                        invoke,
                        response,
                        kind,
                    });
                }
                events.lock().unwrap().extend(local);
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    for handle in handles {
        handle.join().unwrap();
    }
    let stats = db.stats();
    eprintln!(
        "history: flushes {}, compactions {}, switches {}, rmw conflicts {}, rmw busy {}",
        stats.counter("flushes"),
        stats.counter("compactions"),
        stats.counter("memtable_switches"),
        stats.counter("read_modify_write_conflicts"),
        stats.counter("read_modify_write_busy")
    );
    assert!(
        stats.counter("flushes") > 0,
        "the tiny memtable never flushed"
    );
    let final_state = string_entries(db.range(Bound::Unbounded, Bound::Unbounded).unwrap());
    let events = std::mem::take(&mut *events.lock().unwrap());
    (events, final_state)
}

/// A write as the checker sees it: key, value (None = delete), sequence, interval.
#[derive(Debug, Clone)]
struct Write {
    key: String,
    value: Option<String>,
    sequence: SequenceNumber,
    invoke: u64,
    response: u64,
}

fn writes_of(events: &[Event]) -> Vec<Write> {
    let mut writes = Vec::new();
    for event in events {
        let (invoke, response) = (event.invoke, event.response);
        match &event.kind {
            Kind::Put {
                key,
                value,
                sequence,
            } => writes.push(Write {
                key: key.clone(),
                value: Some(value.clone()),
                sequence: *sequence,
                invoke,
                response,
            }),
            Kind::PutIfAbsent {
                key,
                value,
                sequence: Some(sequence),
            } => writes.push(Write {
                key: key.clone(),
                value: Some(value.clone()),
                sequence: *sequence,
                invoke,
                response,
            }),
            Kind::Delete { key, sequence } => writes.push(Write {
                key: key.clone(),
                value: None,
                sequence: *sequence,
                invoke,
                response,
            }),
            Kind::Increment {
                key,
                value,
                sequence,
            } => writes.push(Write {
                key: key.clone(),
                value: Some(value.to_string()),
                sequence: *sequence,
                invoke,
                response,
            }),
            Kind::Batch {
                value,
                last_sequence,
            } => {
                for index in 0..BATCH_KEYS {
                    writes.push(Write {
                        key: batch_key(index),
                        value: Some(value.clone()),
                        sequence: last_sequence - (BATCH_KEYS - 1 - index) as u64,
                        invoke,
                        response,
                    });
                }
            }
            Kind::Get { .. } | Kind::Scan { .. } | Kind::PutIfAbsent { sequence: None, .. } => {}
        }
    }
    writes.sort_by_key(|write| write.sequence);
    writes
}

fn check(events: &[Event], final_state: &BTreeMap<String, String>) -> Vec<String> {
    let mut violations = Vec::new();
    let writes = writes_of(events);
    // Sequence numbers are unique.
    for pair in writes.windows(2) {
        if pair[0].sequence == pair[1].sequence {
            violations.push(format!("sequence {} used twice", pair[0].sequence));
        }
    }
    // 1. Real-time order of writes: scanning in sequence order, no write may have responded
    // before an earlier-sequenced write was invoked.
    let mut latest_invoke = 0u64;
    let mut latest_invoke_sequence = 0;
    for write in &writes {
        if write.response < latest_invoke {
            violations.push(format!(
                "write seq {} responded at {} before write seq {} was invoked at {}",
                write.sequence, write.response, latest_invoke_sequence, latest_invoke
            ));
        }
        if write.invoke > latest_invoke {
            latest_invoke = write.invoke;
            latest_invoke_sequence = write.sequence;
        }
    }
    // 3. Gets, per key. For each key: writes in sequence order, the index of each value
    // (values are unique), and the suffix minimum of response times, which gives the first
    // position a get may observe (no later write had responded before the get began).
    struct KeyIndex<'a> {
        writes: Vec<&'a Write>,
        by_value: HashMap<&'a str, usize>,
        suffix_min_response: Vec<u64>,
    }
    let mut per_key: HashMap<&str, KeyIndex> = HashMap::new();
    for write in &writes {
        let entry = per_key.entry(&write.key).or_insert_with(|| KeyIndex {
            writes: Vec::new(),
            by_value: HashMap::new(),
            suffix_min_response: Vec::new(),
        });
        if let Some(value) = &write.value {
            entry.by_value.insert(value.as_str(), entry.writes.len());
        }
        entry.writes.push(write);
    }
    for index in per_key.values_mut() {
        let mut minimum = u64::MAX;
        index.suffix_min_response = vec![u64::MAX; index.writes.len() + 1];
        for position in (0..index.writes.len()).rev() {
            minimum = minimum.min(index.writes[position].response);
            index.suffix_min_response[position] = minimum;
        }
    }
    let empty = KeyIndex {
        writes: Vec::new(),
        by_value: HashMap::new(),
        suffix_min_response: vec![u64::MAX],
    };
    // Positions: 0 = initial state, p + 1 = after write p. A get that returned a value has
    // one candidate position; a get that returned nothing has one per allowed delete (and the
    // initial state), and the real-time check below picks among them.
    // Per key: (invoke, response, candidate positions).
    type KeyGets = Vec<(u64, u64, Vec<usize>)>;
    let mut gets: HashMap<&str, KeyGets> = HashMap::new();
    for event in events {
        let Kind::Get { key, value } = &event.kind else {
            continue;
        };
        let index = per_key.get(key.as_str()).unwrap_or(&empty);
        // Lowest allowed position: after every write that responded before the get began.
        let lowest = index
            .suffix_min_response
            .partition_point(|&minimum| minimum < event.invoke);
        let allowed = |position: usize| {
            position >= lowest
                && (position == 0 || index.writes[position - 1].invoke < event.response)
        };
        let candidates: Vec<usize> = match value {
            Some(value) => index
                .by_value
                .get(value.as_str())
                .map(|&write| write + 1)
                .filter(|&position| allowed(position))
                .into_iter()
                .collect(),
            None => (lowest..=index.writes.len())
                .take_while(|&position| {
                    position == 0 || index.writes[position - 1].invoke < event.response
                })
                .filter(|&position| position == 0 || index.writes[position - 1].value.is_none())
                .collect(),
        };
        if candidates.is_empty() {
            violations.push(format!(
                "get({key}) at [{}, {}] returned {value:?}, which no linearization allows",
                event.invoke, event.response
            ));
        } else {
            gets.entry(key)
                .or_default()
                .push((event.invoke, event.response, candidates));
        }
    }
    for (key, mut key_gets) in gets {
        // Gets ordered in real time must not go back in the write order. Taken in invocation
        // order, each get gets the smallest candidate at or above every position chosen for
        // a get that responded before it began: choosing the smallest keeps later lower
        // bounds as low as possible, so this finds an assignment whenever one exists. (Taking
        // the earliest delete regardless — the old rule — flagged a "nothing" read after a
        // later delete as going back in time.)
        key_gets.sort_by_key(|&(invoke, _, _)| invoke);
        // Chosen positions of earlier gets, smallest response first: (response, position).
        type Finished = std::collections::BinaryHeap<std::cmp::Reverse<(u64, usize)>>;
        let mut by_response = Finished::new();
        let mut best_finished: Option<usize> = None;
        for (invoke, response, candidates) in &key_gets {
            while let Some(&std::cmp::Reverse((finished_response, position))) = by_response.peek() {
                if finished_response < *invoke {
                    best_finished = Some(best_finished.map_or(position, |best| best.max(position)));
                    by_response.pop();
                } else {
                    break;
                }
            }
            let bound = best_finished.unwrap_or(0);
            match candidates
                .iter()
                .copied()
                .filter(|&position| position >= bound)
                .min()
            {
                Some(position) => {
                    by_response.push(std::cmp::Reverse((*response, position)));
                }
                None => violations.push(format!("get({key}) at {invoke} went back in time")),
            }
        }
    }
    // 4. Increments.
    for index in 0..COUNTERS {
        let key = counter(index);
        let mut values: Vec<(SequenceNumber, i64)> = events
            .iter()
            .filter_map(|event| match &event.kind {
                Kind::Increment {
                    key: k,
                    value,
                    sequence,
                } if *k == key => Some((*sequence, *value)),
                _ => None,
            })
            .collect();
        values.sort();
        for (position, (_, value)) in values.iter().enumerate() {
            if *value != position as i64 + 1 {
                violations.push(format!(
                    "counter {key}: increment #{} returned {value}",
                    position + 1
                ));
                break;
            }
        }
        let expected = values.len().to_string();
        let stored = final_state.get(&key).cloned().unwrap_or_else(|| "0".into());
        if !values.is_empty() && stored != expected {
            violations.push(format!(
                "counter {key}: final {stored}, {expected} increments"
            ));
        }
    }
    // 5 and 6. Snapshot scans: sweep the writes once in sequence order.
    let mut scans: Vec<&Event> = events
        .iter()
        .filter(|event| matches!(event.kind, Kind::Scan { .. }))
        .collect();
    scans.sort_by_key(|event| match event.kind {
        Kind::Scan { sequence, .. } => sequence,
        _ => 0,
    });
    // Largest sequence among writes that responded before time t.
    let mut by_response: Vec<(u64, SequenceNumber)> = writes
        .iter()
        .map(|write| (write.response, write.sequence))
        .collect();
    by_response.sort();
    let mut prefix_max = Vec::with_capacity(by_response.len());
    let mut maximum = 0;
    for &(_, sequence) in &by_response {
        maximum = maximum.max(sequence);
        prefix_max.push(maximum);
    }
    let mut state: BTreeMap<String, String> = BTreeMap::new();
    let mut next_write = 0;
    for event in scans {
        let Kind::Scan { sequence, contents } = &event.kind else {
            continue;
        };
        while let Some(write) = writes
            .get(next_write)
            .filter(|write| write.sequence <= *sequence)
        {
            match &write.value {
                Some(value) => state.insert(write.key.clone(), value.clone()),
                None => state.remove(&write.key),
            };
            next_write += 1;
        }
        if &state != contents {
            let differing: Vec<_> = state
                .keys()
                .chain(contents.keys())
                .filter(|key| state.get(*key) != contents.get(*key))
                .take(3)
                .collect();
            violations.push(format!(
                "scan at snapshot {sequence} differs from the history at {differing:?}"
            ));
        }
        let responded = by_response.partition_point(|&(response, _)| response < event.invoke);
        if responded > 0 && prefix_max[responded - 1] > *sequence {
            violations.push(format!(
                "snapshot {sequence} taken after write seq {} responded",
                prefix_max[responded - 1]
            ));
        }
        let batch_values: Vec<Option<&String>> = (0..BATCH_KEYS)
            .map(|index| contents.get(&batch_key(index)))
            .collect();
        if batch_values.windows(2).any(|pair| pair[0] != pair[1]) {
            violations.push(format!(
                "snapshot {sequence} sees a partial batch: {batch_values:?}"
            ));
        }
    }
    violations
}

/// Search work allowed per key: list entries visited per operation on the key, plus a floor
/// for short histories. A linearizable history of this test, at most four operations wide,
/// needs a few steps per operation (most entries are visited once, on the way to being
/// linearized); the budget leaves room for backtracking without letting a pathological
/// search run for minutes. Running out is reported as inconclusive and fails the test.
const SEARCH_STEPS_PER_OPERATION: u64 = 100;
const SEARCH_STEPS_MINIMUM: u64 = 1_000_000;

/// What the search-based checker (check 2) found.
#[derive(Debug, Default)]
struct SearchReport {
    keys: usize,
    operations: usize,
    violations: Vec<String>,
    inconclusive: Vec<String>,
    /// The most search steps one key needed, with that key and its operation count.
    max_steps: u64,
    max_steps_key: String,
    max_steps_operations: usize,
    /// The largest memo (distinct linearized set and state pairs) of one key.
    max_cache_entries: usize,
    elapsed: Duration,
}

/// Every key the workload touches; a scan's absence of a key is a read of "absent".
fn all_keys() -> Vec<String> {
    (0..REGISTERS)
        .map(register)
        .chain((0..COUNTERS).map(counter))
        .chain((0..BATCH_KEYS).map(batch_key))
        .collect()
}

/// Splits the history per key: each operation, projected onto every key it touches.
fn per_key_histories(events: &[Event]) -> BTreeMap<String, Vec<Timed<KeyOperation>>> {
    let keys = all_keys();
    let mut histories: BTreeMap<String, Vec<Timed<KeyOperation>>> =
        keys.iter().map(|key| (key.clone(), Vec::new())).collect();
    for event in events {
        let mut record = |key: &str, operation: KeyOperation| {
            histories
                .get_mut(key)
                .unwrap_or_else(|| panic!("operation on unknown key {key}"))
                .push(Timed {
                    invoke: event.invoke,
                    response: event.response,
                    operation,
                });
        };
        match &event.kind {
            Kind::Put { key, value, .. } => record(key, KeyOperation::put(value)),
            Kind::Delete { key, .. } => record(key, KeyOperation::Delete),
            Kind::Get { key, value } => record(key, KeyOperation::get(value.as_deref())),
            Kind::PutIfAbsent {
                key,
                value,
                sequence,
            } => record(
                key,
                KeyOperation::PutIfAbsent {
                    value: value.as_str().into(),
                    stored: sequence.is_some(),
                },
            ),
            Kind::Increment { key, value, .. } => record(key, KeyOperation::increment(*value)),
            Kind::Batch { value, .. } => {
                let value: Arc<str> = value.as_str().into();
                for index in 0..BATCH_KEYS {
                    record(&batch_key(index), KeyOperation::Put(Arc::clone(&value)));
                }
            }
            Kind::Scan { contents, .. } => {
                // The scan read a snapshot taken inside its interval, so its value of each key
                // is a read of that key somewhere in the interval.
                for key in &keys {
                    record(
                        key,
                        KeyOperation::get(contents.get(key).map(String::as_str)),
                    );
                }
            }
        }
    }
    histories
}

/// Check 2: searches each key's history for a linearization (see the module doc).
fn search_check(events: &[Event]) -> SearchReport {
    let started = Instant::now();
    let mut report = SearchReport::default();
    for (key, history) in per_key_histories(events) {
        let budget = SEARCH_STEPS_MINIMUM.max(SEARCH_STEPS_PER_OPERATION * history.len() as u64);
        let outcome = linearizability::check(&KeyModel, &history, budget);
        report.keys += 1;
        report.operations += history.len();
        if outcome.steps > report.max_steps {
            report.max_steps = outcome.steps;
            report.max_steps_key = key.clone();
            report.max_steps_operations = history.len();
        }
        report.max_cache_entries = report.max_cache_entries.max(outcome.cache_entries);
        match outcome.verdict {
            Verdict::Linearizable => {}
            Verdict::Violation(explanation) => report.violations.push(format!(
                "key {key} ({} operations): {explanation}",
                history.len()
            )),
            Verdict::Inconclusive => report.inconclusive.push(format!(
                "key {key} ({} operations): search budget of {budget} steps exhausted",
                history.len()
            )),
        }
    }
    report.elapsed = started.elapsed();
    report
}

#[test]
fn concurrent_history_is_linearizable() {
    let seconds: u64 = common::env_or("CAIRN_HISTORY_SECONDS", 3);
    let started = Instant::now();
    let (events, final_state) = run_history(seconds);
    let running = started.elapsed();
    let violations = check(&events, &final_state);
    let search = search_check(&events);
    let count = |predicate: fn(&Kind) -> bool| events.iter().filter(|e| predicate(&e.kind)).count();
    eprintln!(
        "history: {} operations in {:.1} s of running, checked in {:.1} s ({} puts, {} deletes, {} gets, {} put-if-absent ({} stored), {} increments, {} batches, {} scans), {} violations in the sequence-based checks",
        events.len(),
        running.as_secs_f64(),
        (started.elapsed() - running).as_secs_f64(),
        count(|k| matches!(k, Kind::Put { .. })),
        count(|k| matches!(k, Kind::Delete { .. })),
        count(|k| matches!(k, Kind::Get { .. })),
        count(|k| matches!(k, Kind::PutIfAbsent { .. })),
        count(|k| matches!(
            k,
            Kind::PutIfAbsent {
                sequence: Some(_),
                ..
            }
        )),
        count(|k| matches!(k, Kind::Increment { .. })),
        count(|k| matches!(k, Kind::Batch { .. })),
        count(|k| matches!(k, Kind::Scan { .. })),
        violations.len()
    );
    eprintln!(
        "history: search checker: {} per-key operations on {} keys in {:.2} s, {} violations, {} inconclusive; max {} steps (key {}, {} operations), max memo {} entries",
        search.operations,
        search.keys,
        search.elapsed.as_secs_f64(),
        search.violations.len(),
        search.inconclusive.len(),
        search.max_steps,
        search.max_steps_key,
        search.max_steps_operations,
        search.max_cache_entries
    );
    // Print both checkers' findings before failing: when one fires, what the other saw (or
    // missed) tells whether the engine's sequence numbers or the values went wrong.
    for violation in violations.iter().take(10) {
        eprintln!("history: sequence-based check: {violation}");
    }
    for finding in search
        .violations
        .iter()
        .chain(&search.inconclusive)
        .take(10)
    {
        eprintln!("history: search checker: {finding}");
    }
    assert!(
        violations.is_empty() && search.violations.is_empty() && search.inconclusive.is_empty(),
        "{} violations in the sequence-based checks; search checker: {} violations, {} inconclusive (listed above)",
        violations.len(),
        search.violations.len(),
        search.inconclusive.len()
    );
}
