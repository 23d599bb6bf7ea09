//! `Copied`: the Membuffer versions a scan copied instead of draining (`membuffer::scan`
//! invariant 3), one sorted run the scan's cursor merges with the memtable, forward only.
//!
//! Why its own run: a partition a scan copied is not in the memtable, so the cursor reads it
//! beside the memtable cursor. Copies of several partitions go into one run: partitions are
//! disjoint key ranges, so each copy is appended and the run re-sorted (a forward scan copies
//! them in key order, which keeps the append already sorted).
//!
//! Thread-safety contract: owned by one cursor; no shared state.
//!
//! Invariants:
//! 1. `versions` is sorted by internal key, each internal key once.
//! 2. `position <= versions.len()`; the entries before it are behind the cursor.

use crate::key::compare_internal_keys;
use std::cmp::Ordering;

/// See the module documentation.
#[derive(Debug, Default)]
pub(crate) struct Copied {
    versions: Vec<(Vec<u8>, Vec<u8>)>,
    position: usize,
}

impl Copied {
    /// Adds one partition's copy (sorted, each internal key once, disjoint from the copies
    /// already held: `membuffer::scan` invariant 2). The position is then the first version:
    /// the caller seeks.
    pub(crate) fn add(&mut self, copy: Vec<(Vec<u8>, Vec<u8>)>) {
        let sorted_after = self
            .versions
            .last()
            .zip(copy.first())
            .is_none_or(|(last, first)| compare_internal_keys(&last.0, &first.0) == Ordering::Less);
        self.versions.extend(copy);
        if !sorted_after {
            self.versions
                .sort_unstable_by(|a, b| compare_internal_keys(&a.0, &b.0));
        }
        debug_assert!(self.is_sorted(), "invariant 1");
        self.position = 0;
    }

    /// Positions at the first version at or after internal key `target`.
    pub(crate) fn seek(&mut self, target: &[u8]) {
        self.position = self
            .versions
            .partition_point(|(key, _)| compare_internal_keys(key, target) == Ordering::Less);
    }

    /// Positions at the first version.
    pub(crate) fn seek_to_first(&mut self) {
        self.position = 0;
    }

    /// The version at the position, if any.
    pub(crate) fn current(&self) -> Option<(&[u8], &[u8])> {
        self.versions
            .get(self.position)
            .map(|(key, value)| (key.as_slice(), value.as_slice()))
    }

    /// Steps past the current version.
    pub(crate) fn advance(&mut self) {
        self.position = (self.position + 1).min(self.versions.len());
    }

    fn is_sorted(&self) -> bool {
        self.versions.windows(2).all(|pair| match pair {
            [a, b] => compare_internal_keys(&a.0, &b.0) == Ordering::Less,
            _ => true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Copied;
    use crate::key::{internal_key, ValueKind};

    fn version(key: &[u8], sequence: u64) -> (Vec<u8>, Vec<u8>) {
        (internal_key(key, sequence, ValueKind::Put), key.to_vec())
    }

    fn rest(copied: &mut Copied) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut seen = Vec::new();
        while let Some((key, value)) = copied.current() {
            seen.push((key.to_vec(), value.to_vec()));
            copied.advance();
        }
        seen
    }

    /// Copies added in key order or out of it read back merged and sorted; a seek lands on
    /// the first version at or after its target.
    #[test]
    fn copies_in_any_order_read_back_sorted() {
        let low = vec![version(b"a", 3), version(b"b", 9), version(b"b", 2)];
        let high = vec![version(b"m", 1), version(b"z", 5)];
        let every: Vec<_> = low.iter().chain(high.iter()).cloned().collect();
        for order in [[&low, &high], [&high, &low]] {
            let mut copied = Copied::default();
            assert!(copied.current().is_none());
            for copy in order {
                copied.add(copy.clone());
            }
            copied.seek_to_first();
            assert_eq!(rest(&mut copied), every);
            copied.seek(&internal_key(b"b", 5, ValueKind::SEEK));
            assert_eq!(
                rest(&mut copied),
                every[2..].to_vec(),
                "b@2 is the first at or after b@5"
            );
        }
    }
}
