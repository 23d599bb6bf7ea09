//! Snapshots: a sequence number that pins a consistent view of the database.
//!
//! A snapshot at sequence S sees, for each key, the newest version with sequence <= S. Every
//! write with sequence <= S is complete when the snapshot is taken (the database publishes its
//! visible sequence only after a write is fully applied), and every write acknowledged before
//! `snapshot()` was called has sequence <= S.
//!
//! Live snapshots are registered so that flush and compaction keep the versions they need
//! (`compaction::VersionFilter`). A snapshot is released when its last clone drops.
//!
//! Thread-safety contract: `SnapshotList` is shared by `Arc` and guarded by a mutex held only to
//! register, release or list snapshots — never across I/O.

use crate::key::SequenceNumber;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The registry of live snapshots.
#[derive(Debug, Default)]
pub struct SnapshotList {
    live: Mutex<BTreeMap<SequenceNumber, usize>>,
}

impl SnapshotList {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<SequenceNumber, usize>> {
        // The map is updated in single statements; a panic cannot leave it inconsistent.
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers a snapshot at `sequence`.
    pub fn acquire(self: &Arc<Self>, sequence: SequenceNumber) -> Snapshot {
        *self.lock().entry(sequence).or_insert(0) += 1;
        Snapshot {
            inner: Arc::new(SnapshotInner {
                sequence,
                list: Arc::clone(self),
            }),
        }
    }

    /// Live snapshot sequences, ascending, without duplicates.
    pub fn sequences(&self) -> Vec<SequenceNumber> {
        self.lock().keys().copied().collect()
    }

    /// Number of live snapshots.
    pub fn count(&self) -> usize {
        self.lock().values().sum()
    }

    fn release(&self, sequence: SequenceNumber) {
        let mut live = self.lock();
        if let Some(count) = live.get_mut(&sequence) {
            *count -= 1;
            if *count == 0 {
                live.remove(&sequence);
            }
        }
    }
}

#[derive(Debug)]
struct SnapshotInner {
    sequence: SequenceNumber,
    list: Arc<SnapshotList>,
}

impl Drop for SnapshotInner {
    fn drop(&mut self) {
        self.list.release(self.sequence);
    }
}

/// A consistent read-only view of the database; cheap to clone, released on drop.
#[derive(Debug, Clone)]
pub struct Snapshot {
    inner: Arc<SnapshotInner>,
}

impl Snapshot {
    /// The snapshot's sequence number.
    pub fn sequence(&self) -> SequenceNumber {
        self.inner.sequence
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_register_and_release() {
        let list = Arc::new(SnapshotList::default());
        let a = list.acquire(5);
        let b = list.acquire(5);
        let c = list.acquire(9);
        assert_eq!(list.sequences(), vec![5, 9]);
        drop(a);
        assert_eq!(list.sequences(), vec![5, 9]);
        let b2 = b.clone();
        drop(b);
        assert_eq!(list.sequences(), vec![5, 9]);
        drop(b2);
        assert_eq!(list.sequences(), vec![9]);
        assert_eq!(c.sequence(), 9);
        drop(c);
        assert_eq!(list.count(), 0);
    }
}
