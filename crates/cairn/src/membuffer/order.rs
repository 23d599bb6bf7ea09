//! The order a drain moves a sealed table's versions into the memtable in: by user key
//! ascending, the newer of two versions of one key first (the memtable's order, so that a
//! multi-insert's finger only moves forward).
//!
//! Why a cached prefix: a table's records sit in its arena in insertion order and `records`
//! gathers them in slot (hash) order, so a sort that compares keys through their slices
//! loads a random record per comparison — at tens of megabytes per table, a cache miss each,
//! about twenty per version. Sorting pairs of (the key's first 8 bytes as a big-endian
//! number, index) compares integers in a dense array; keys sharing those 8 bytes (equal
//! prefixes decide nothing, `boundaries` invariant 3) fall back to the bytes.
//!
//! Thread-safety contract: `drain_order` is a pure function of the caller's data;
//! `insert_prefetching` runs on the drain-lock holder and has `Memtable::insert_sorted`'s
//! contract (any number of concurrent inserts and readers); a prefetch changes no state.
//!
//! Invariants:
//! 1. The result is a permutation of the input: every version exactly once.
//! 2. It is sorted by (user key ascending, sequence descending).

use super::boundaries::prefix;
use crate::memtable::{BatchEntry, Memtable};
use crate::sync::prefetch;
use std::cmp::Ordering;

/// How far ahead of the insert in progress a drain fetches a version's record (its key and
/// value, scattered over the table's arena), and half as far its memtable index slot (whose
/// address needs the key, fetched by then).
const PREFETCH_DISTANCE: usize = 8;

/// `records` in drain order (see the module documentation).
pub(super) fn drain_order<'a>(records: &[BatchEntry<'a>]) -> Vec<BatchEntry<'a>> {
    let mut order: Vec<(u64, usize)> = records
        .iter()
        .enumerate()
        .map(|(index, record)| (prefix(record.0), index))
        .collect();
    order.sort_unstable_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| tie_break(records.get(a.1), records.get(b.1)))
    });
    let sorted: Vec<BatchEntry<'_>> = order
        .iter()
        .filter_map(|&(_, index)| records.get(index).copied())
        .collect();
    debug_assert_eq!(sorted.len(), records.len(), "invariant 1");
    debug_assert!(
        sorted
            .windows(2)
            .all(|pair| matches!(pair, [a, b] if compare(a, b) != Ordering::Greater)),
        "invariant 2"
    );
    sorted
}

/// Multi-inserts `sorted` (drain order) into `memtable`, fetching each version's record and
/// index slot a few inserts ahead: the records are in arena order, not key order, so each is
/// a cache miss the skiplist walk would otherwise wait for.
pub(super) fn insert_prefetching(memtable: &Memtable, sorted: &[BatchEntry<'_>]) {
    let half = PREFETCH_DISTANCE / 2;
    for (key, _, _, value) in sorted.iter().take(PREFETCH_DISTANCE) {
        prefetch(key.as_ptr());
        prefetch(value.as_ptr());
    }
    memtable.insert_sorted(sorted.iter().enumerate().map(|(index, entry)| {
        if let Some((key, _, _, value)) = sorted.get(index + PREFETCH_DISTANCE) {
            prefetch(key.as_ptr());
            prefetch(value.as_ptr());
            prefetch(value.as_ptr().wrapping_add(value.len().saturating_sub(1)));
        }
        if let Some((key, ..)) = sorted.get(index + half) {
            memtable.prefetch_key(key);
        }
        *entry
    }));
}

/// Two versions whose keys share a prefix, in drain order.
fn tie_break(a: Option<&BatchEntry<'_>>, b: Option<&BatchEntry<'_>>) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) => compare(a, b),
        // Indices come from `records` itself: unreachable, and any order is a total one.
        _ => Ordering::Equal,
    }
}

/// Drain order of two versions (invariant 2).
fn compare(a: &BatchEntry<'_>, b: &BatchEntry<'_>) -> Ordering {
    crate::key::compare_user_keys(a.0, b.0).then_with(|| b.1.cmp(&a.1))
}

#[cfg(test)]
mod tests {
    use super::{compare, drain_order};
    use crate::key::ValueKind;
    use crate::memtable::BatchEntry;
    use std::cmp::Ordering;

    /// Keys of every shape — shorter than the prefix, sharing it, differing past it, one
    /// key at two sequences — come out in the order a plain sort by key gives.
    #[test]
    fn matches_a_plain_sort_by_key_then_newest_first() {
        let keys: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"a".to_vec(),
            b"a\0".to_vec(),
            b"abcdefgh".to_vec(),
            b"abcdefgh\0".to_vec(),
            b"abcdefghz".to_vec(),
            b"abcdefgha".to_vec(),
            vec![0xFF; 12],
            vec![0; 8],
            vec![0; 7],
            b"zz".to_vec(),
        ];
        let mut records: Vec<BatchEntry<'_>> = Vec::new();
        for (index, key) in keys.iter().enumerate().rev() {
            records.push((key, index as u64 + 10, ValueKind::Put, b"v"));
        }
        records.push((&keys[3], 2, ValueKind::Delete, b""));
        let mut expected = records.clone();
        expected.sort_by(compare);
        let sorted = drain_order(&records);
        assert_eq!(sorted, expected);
        assert!(sorted
            .windows(2)
            .all(|pair| compare(&pair[0], &pair[1]) != Ordering::Greater));
    }
}
