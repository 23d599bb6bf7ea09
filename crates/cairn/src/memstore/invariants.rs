//! A check of the store's index and log against each other (under the `invariants`
//! feature): the hash index's own invariants, the log's, and that every segment's live-byte
//! count is exactly the bytes of its objects the index points at.
//!
//! Thread-safety contract: `check_invariants` may be called at any time: it holds every log
//! head (so no write is between its append and its index update, store invariant 2) and
//! every compaction slot (so no relocation is half done) while it checks, in the store's lock
//! order (heads, then buckets and leaf mutexes; slots are only try-locked by others).
//!
//! Invariants checked:
//! 1. The hash index's invariants 1, 2, 3, 5 and 6 (`HashIndex::check_invariants`).
//! 2. The log's invariants 1, 2, 3 and 6 (`LogMemory::check_invariants`), with live bytes
//!    counted against the index: an object is live exactly when the index holds its location.

use super::{lock_ignoring_poison, LogKeys, MemStore};

impl MemStore {
    /// Checks the index and the log and their agreement; see the module documentation.
    pub fn check_invariants(&self) -> Result<(), String> {
        let inner = &*self.inner;
        let _heads: Vec<_> = inner
            .heads
            .iter()
            .map(|head| lock_ignoring_poison(&head.0))
            .collect();
        let _slots: Vec<_> = inner
            .compaction_slots
            .iter()
            .map(lock_ignoring_poison)
            .collect();
        let guard = inner.epochs.pin();
        inner.index.check_invariants(&guard, LogKeys(inner))?;
        let mut indexed = |location: u64| {
            let hash = inner.hash_at(location);
            inner
                .index
                .lookup(&guard, hash, |current| current == location)
                .is_some()
        };
        inner.log.check_invariants(Some(&mut indexed))
    }

    /// Test hook: skews the live-byte count of the segment holding `key`'s object, so a test
    /// can break the log's books and watch the check fire.
    #[cfg(test)]
    pub(super) fn skew_live_bytes(&self, key: &[u8], delta: i64) {
        let inner = &*self.inner;
        let guard = inner.epochs.pin();
        let hash = crate::hashindex::hash_key(key);
        if let Some(location) = inner
            .index
            .lookup(&guard, hash, |location| inner.log.key_equals(location, key))
        {
            inner.log.skew_live_bytes(location, delta);
        }
    }
}
