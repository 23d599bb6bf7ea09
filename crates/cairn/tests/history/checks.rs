//! The sequence-based checks of the history test (checks 1 and 3–7 of `history.rs`'s module
//! doc): they take the engine's sequence numbers as its claimed linearization of writes and
//! verify that every read, snapshot and counter agrees with it. Compare-and-swap keys are left
//! to the search checker: `compare_and_swap` does not report a sequence number.
//!
//! Thread-safety contract: plain functions over a finished history; no shared state.
//!
//! Invariants:
//! 1. Every write the workload acknowledged (puts, deletes, stored put-if-absents,
//!    increments, each key of every batch and wide batch) appears in `writes_of` exactly once,
//!    with the sequence number the engine gave it; nothing else does.
//! 2. A key is checked here iff `sequenced(key)`; for those keys the write list is complete,
//!    so the state replayed at a sequence is the whole state of those keys at it.

use super::{
    batch_key, counter, sequenced, wide_key, Event, Kind, BATCH_KEYS, COUNTERS, WIDE_BATCH,
};
use cairn::SequenceNumber;
use std::collections::{BTreeMap, BinaryHeap, HashMap};

/// A write as the checker sees it: key, value (None = delete), sequence, interval.
#[derive(Debug, Clone)]
pub struct Write {
    pub key: String,
    pub value: Option<String>,
    pub sequence: SequenceNumber,
    pub invoke: u64,
    pub response: u64,
}

/// The keys and values a multi-key write stores, first entry first (the engine numbers a
/// batch's entries consecutively, ending at its last sequence).
fn batch_entries(kind: &Kind) -> Vec<(String, Option<String>)> {
    match kind {
        Kind::Batch { value, .. } => (0..BATCH_KEYS)
            .map(|index| (batch_key(index), Some(value.clone())))
            .collect(),
        Kind::WideBatch { start, value, .. } => (0..WIDE_BATCH)
            .map(|offset| (wide_key(start + offset), value.clone()))
            .collect(),
        _ => Vec::new(),
    }
}

pub fn writes_of(events: &[Event]) -> Vec<Write> {
    let mut writes = Vec::new();
    for event in events {
        let mut push = |key: &str, value: Option<&str>, sequence: SequenceNumber| {
            writes.push(Write {
                key: key.to_owned(),
                value: value.map(str::to_owned),
                sequence,
                invoke: event.invoke,
                response: event.response,
            });
        };
        match &event.kind {
            Kind::Put {
                key,
                value,
                sequence,
                ..
            } => push(key, Some(value), *sequence),
            Kind::PutIfAbsent {
                key,
                value,
                sequence: Some(sequence),
            } => push(key, Some(value), *sequence),
            Kind::Delete { key, sequence, .. } => push(key, None, *sequence),
            Kind::Increment {
                key,
                value,
                sequence,
            } => push(key, Some(&value.to_string()), *sequence),
            Kind::Batch { last_sequence, .. } | Kind::WideBatch { last_sequence, .. } => {
                let entries = batch_entries(&event.kind);
                let first = last_sequence + 1 - entries.len() as u64;
                for (offset, (key, value)) in entries.iter().enumerate() {
                    push(key, value.as_deref(), first + offset as u64);
                }
            }
            _ => {}
        }
    }
    writes.sort_by_key(|write| write.sequence);
    writes
}

/// Runs every sequence-based check; returns the violations found.
pub fn check(events: &[Event], final_state: &BTreeMap<String, String>) -> Vec<String> {
    let mut violations = Vec::new();
    let writes = writes_of(events);
    write_order(&writes, &mut violations);
    point_reads(events, &writes, &mut violations);
    increments(events, final_state, &mut violations);
    snapshot_reads(events, &writes, &mut violations);
    for event in events {
        let shape = match &event.kind {
            Kind::Scan { shape_error, .. } | Kind::LatestScan { shape_error, .. } => shape_error,
            _ => &None,
        };
        if let Some(problem) = shape {
            violations.push(format!(
                "scan at [{}, {}]: {problem}",
                event.invoke, event.response
            ));
        }
    }
    violations
}

/// Check 1: sequence numbers are unique and a write that responded before another was
/// invoked has the smaller one.
fn write_order(writes: &[Write], violations: &mut Vec<String>) {
    for pair in writes.windows(2) {
        if pair[0].sequence == pair[1].sequence {
            violations.push(format!("sequence {} used twice", pair[0].sequence));
        }
    }
    let mut latest_invoke = 0u64;
    let mut latest_invoke_sequence = 0;
    for write in writes {
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
}

/// A latest-state read of one key: a get, or one key's entry (or absence) in a scan without
/// a snapshot.
struct Read<'a> {
    key: &'a str,
    value: Option<&'a str>,
    invoke: u64,
    response: u64,
}

fn latest_reads<'a>(events: &'a [Event], keys: &'a [String]) -> Vec<Read<'a>> {
    let mut reads = Vec::new();
    for event in events {
        let (invoke, response) = (event.invoke, event.response);
        match &event.kind {
            Kind::Get { key, value } => reads.push(Read {
                key,
                value: value.as_deref(),
                invoke,
                response,
            }),
            Kind::LatestScan {
                lower,
                upper,
                contents,
                ..
            } => reads.extend(super::keys_in(keys, lower, upper).map(|key| Read {
                key,
                value: contents.get(key).map(String::as_str),
                invoke,
                response,
            })),
            _ => {}
        }
    }
    reads.retain(|read| sequenced(read.key));
    reads
}

/// Per key: writes in sequence order, the position of each value (values are unique per key)
/// and the suffix minimum of response times, which gives the first position a read may
/// observe (no later write had responded before the read began).
struct KeyIndex<'a> {
    writes: Vec<&'a Write>,
    by_value: HashMap<&'a str, usize>,
    suffix_min_response: Vec<u64>,
}

fn key_indexes(writes: &[Write]) -> HashMap<&str, KeyIndex<'_>> {
    let mut per_key: HashMap<&str, KeyIndex> = HashMap::new();
    for write in writes {
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
    per_key
}

/// The write-order positions a read may have observed (0 = initial state, p + 1 = after
/// write p): a read of a value has one candidate, a read of nothing one per allowed delete.
fn candidates(index: &KeyIndex, read: &Read) -> Vec<usize> {
    let lowest = index
        .suffix_min_response
        .partition_point(|&minimum| minimum < read.invoke);
    let invoked_in_time =
        |position: usize| position == 0 || index.writes[position - 1].invoke < read.response;
    match read.value {
        Some(value) => index
            .by_value
            .get(value)
            .map(|&write| write + 1)
            .filter(|&position| position >= lowest && invoked_in_time(position))
            .into_iter()
            .collect(),
        None => (lowest..=index.writes.len())
            .take_while(|&position| invoked_in_time(position))
            .filter(|&position| position == 0 || index.writes[position - 1].value.is_none())
            .collect(),
    }
}

/// Check 3: latest-state reads per key against the engine's write order.
fn point_reads(events: &[Event], writes: &[Write], violations: &mut Vec<String>) {
    let per_key = key_indexes(writes);
    let empty = KeyIndex {
        writes: Vec::new(),
        by_value: HashMap::new(),
        suffix_min_response: vec![u64::MAX],
    };
    let keys = super::all_keys();
    type KeyReads = Vec<(u64, u64, Vec<usize>)>;
    let mut reads: HashMap<&str, KeyReads> = HashMap::new();
    for read in latest_reads(events, &keys) {
        let index = per_key.get(read.key).unwrap_or(&empty);
        let positions = candidates(index, &read);
        if positions.is_empty() {
            violations.push(format!(
                "read of {} at [{}, {}] returned {:?}, which no linearization allows",
                read.key, read.invoke, read.response, read.value
            ));
        } else {
            reads
                .entry(read.key)
                .or_default()
                .push((read.invoke, read.response, positions));
        }
    }
    for (key, key_reads) in reads {
        monotonic_reads(key, key_reads, violations);
    }
}

/// Reads ordered in real time must not go back in the write order. Taken in invocation
/// order, each read gets the smallest candidate at or above every position chosen for a read
/// that responded before it began: choosing the smallest keeps later lower bounds as low as
/// possible, so this finds an assignment whenever one exists.
fn monotonic_reads(
    key: &str,
    mut key_reads: Vec<(u64, u64, Vec<usize>)>,
    violations: &mut Vec<String>,
) {
    key_reads.sort_by_key(|&(invoke, _, _)| invoke);
    let mut by_response = BinaryHeap::<std::cmp::Reverse<(u64, usize)>>::new();
    let mut best_finished: Option<usize> = None;
    for (invoke, response, positions) in &key_reads {
        while let Some(&std::cmp::Reverse((finished_response, position))) = by_response.peek() {
            if finished_response >= *invoke {
                break;
            }
            best_finished = Some(best_finished.map_or(position, |best| best.max(position)));
            by_response.pop();
        }
        let bound = best_finished.unwrap_or(0);
        match positions.iter().copied().filter(|&p| p >= bound).min() {
            Some(position) => by_response.push(std::cmp::Reverse((*response, position))),
            None => violations.push(format!("read of {key} at {invoke} went back in time")),
        }
    }
}

/// Check 4: per counter, the returned values are 1..=n in sequence order and the final
/// value is n.
fn increments(
    events: &[Event],
    final_state: &BTreeMap<String, String>,
    violations: &mut Vec<String>,
) {
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
}

/// Checks 5 and 6: every snapshot scan and `get_at` equals the state replayed up to its
/// snapshot's sequence, every snapshot is at or above each write that responded before it
/// was taken, and no snapshot scan sees part of a batch. One sweep of the writes in
/// sequence order.
fn snapshot_reads(events: &[Event], writes: &[Write], violations: &mut Vec<String>) {
    let mut reads: Vec<(&Event, SequenceNumber)> = events
        .iter()
        .filter_map(|event| match &event.kind {
            Kind::Scan { sequence, .. } | Kind::GetAt { sequence, .. } => Some((event, *sequence)),
            _ => None,
        })
        .collect();
    reads.sort_by_key(|&(_, sequence)| sequence);
    // Largest sequence among writes that responded before time t.
    let mut by_response: Vec<(u64, SequenceNumber)> = writes
        .iter()
        .map(|write| (write.response, write.sequence))
        .collect();
    by_response.sort_unstable();
    let prefix_max: Vec<SequenceNumber> = by_response
        .iter()
        .scan(0, |maximum, &(_, sequence)| {
            *maximum = sequence.max(*maximum);
            Some(*maximum)
        })
        .collect();
    let mut state: BTreeMap<&str, &str> = BTreeMap::new();
    let mut next_write = 0;
    for (event, sequence) in reads {
        while let Some(write) = writes.get(next_write).filter(|w| w.sequence <= sequence) {
            match &write.value {
                Some(value) => state.insert(&write.key, value),
                None => state.remove(write.key.as_str()),
            };
            next_write += 1;
        }
        let responded = by_response.partition_point(|&(response, _)| response < event.invoke);
        if responded > 0 && prefix_max[responded - 1] > sequence {
            violations.push(format!(
                "snapshot {sequence} taken after write seq {} responded",
                prefix_max[responded - 1]
            ));
        }
        match &event.kind {
            Kind::Scan { contents, .. } => scan_at(sequence, &state, contents, violations),
            Kind::GetAt { key, value, .. }
                if sequenced(key) && state.get(key.as_str()).copied() != value.as_deref() =>
            {
                violations.push(format!(
                    "get_at({key}) at snapshot {sequence} returned {value:?}, the history has {:?}",
                    state.get(key.as_str())
                ));
            }
            _ => {}
        }
    }
}

fn scan_at(
    sequence: SequenceNumber,
    state: &BTreeMap<&str, &str>,
    contents: &BTreeMap<String, String>,
    violations: &mut Vec<String>,
) {
    let seen: BTreeMap<&str, &str> = contents
        .iter()
        .filter(|(key, _)| sequenced(key))
        .map(|(key, value)| (key.as_str(), value.as_str()))
        .collect();
    if &seen != state {
        let differing: Vec<_> = state
            .keys()
            .chain(seen.keys())
            .filter(|key| state.get(*key) != seen.get(*key))
            .take(3)
            .collect();
        violations.push(format!(
            "scan at snapshot {sequence} differs from the history at {differing:?}"
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
