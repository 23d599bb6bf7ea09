//! Snapshots: a sequence number that pins a consistent view of the database.
//!
//! A snapshot at sequence S sees, for each key, the newest version with sequence <= S. S is
//! the database's visible sequence when the snapshot is registered: below every in-flight
//! write (those are not yet visible) and at or above every acknowledged one (registration
//! first waits for the visible sequence to reach `sequence::Acknowledged`) — the linearizable
//! variant of cLSM §3.2.
//!
//! Live snapshots are registered so that flush and compaction keep the versions they need
//! (`compaction::VersionFilter`). Registration is lock-free: a snapshot claims a free slot with
//! a compare-and-swap (marking it *pending*), then reads the visible sequence, then publishes
//! it. A flush or compaction reads the slots after fixing its inputs, and waits for a pending
//! slot to be published (a window of two loads and a store, unless the registering thread is
//! preempted in it: the waiter then parks on the list's `Parker`, which every registration
//! notifies after it publishes). It must not skip a pending slot: the snapshot may have read
//! its sequence *before* the slots were read and be about to publish a sequence below versions
//! the flush would then drop (this happened: a history-checked scan missed keys). A slot still
//! free when read is safe to miss: that snapshot reads the visible sequence later, which is at
//! least every sequence in the inputs, so it sits in the newest stripe, whose newest version is
//! kept anyway. When every slot is taken, snapshots fall back to a mutex-guarded list
//! (registered under the mutex that compactions read it under).
//!
//! Invariants:
//! 1. A snapshot's sequence is in `sequences()` for every call that starts after the
//!    snapshot's slot was claimed, until it is released.
//! 2. A slot is `PENDING` only between its claim and its publication, and every publication
//!    notifies `parker` after the store (a parked `sequences()` misses no publication).
//! 3. A snapshot belongs to the one list that registered it (`belongs_to`): only that list's
//!    database pins its versions, so only that database may read at it.
//!
//! Thread-safety contract: all methods take `&self` and may be called from any thread; the
//! fast path (`acquire` with a free slot, `release`) takes no lock.

use crate::key::SequenceNumber;
use crate::sync::{AtomicU64, Ordering, Parker};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Lock-free slots before the fallback list is used.
pub const SNAPSHOT_SLOTS: usize = 1024;

const FREE: u64 = 0;
const PENDING: u64 = u64::MAX;

/// The registry of live snapshots.
#[derive(Debug)]
pub struct SnapshotList {
    /// `FREE`, `PENDING`, or `sequence + 1`.
    slots: Box<[AtomicU64]>,
    overflow: Mutex<BTreeMap<SequenceNumber, usize>>,
    /// Where `sequences()` sleeps when a registration is preempted while pending.
    parker: Parker,
    /// The newest live snapshot's sequence + 1 (0: none), kept under `newest_lock` (invariant
    /// 4): read by every Membuffer update that would drop a version (`membuffer::gate`).
    newest: AtomicU64,
    newest_lock: Mutex<()>,
}

impl Default for SnapshotList {
    fn default() -> Self {
        SnapshotList {
            slots: (0..SNAPSHOT_SLOTS).map(|_| AtomicU64::new(FREE)).collect(),
            overflow: Mutex::new(BTreeMap::new()),
            parker: Parker::default(),
            newest: AtomicU64::new(0),
            newest_lock: Mutex::new(()),
        }
    }
}

impl SnapshotList {
    fn overflow(&self) -> std::sync::MutexGuard<'_, BTreeMap<SequenceNumber, usize>> {
        // The map is updated in single statements; a panic cannot leave it inconsistent.
        self.overflow
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers a snapshot at the sequence `visible()` returns once the slot is claimed.
    pub fn acquire(self: &Arc<Self>, visible: impl Fn() -> SequenceNumber) -> Snapshot {
        // Start at a per-thread position so concurrent snapshots rarely contend for a slot.
        let start = thread_slot_hint();
        for probe in 0..self.slots.len() {
            let index = (start + probe) % self.slots.len();
            let Some(slot) = self.slots.get(index) else {
                continue;
            };
            if slot
                .compare_exchange(FREE, PENDING, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                let sequence = visible();
                slot.store(sequence + 1, Ordering::Release);
                // Invariant 2: a flush or compaction may be parked on this slot.
                self.parker.notify();
                self.raise_newest(sequence);
                return Snapshot {
                    inner: Arc::new(SnapshotInner {
                        sequence,
                        place: Place::Slot(index),
                        list: Arc::clone(self),
                    }),
                };
            }
        }
        let mut overflow = self.overflow();
        let sequence = visible();
        *overflow.entry(sequence).or_insert(0) += 1;
        drop(overflow);
        self.raise_newest(sequence);
        Snapshot {
            inner: Arc::new(SnapshotInner {
                sequence,
                place: Place::Overflow,
                list: Arc::clone(self),
            }),
        }
    }

    /// Live snapshot sequences, ascending, without duplicates. Waits for pending slots to be
    /// published (see the module documentation for why they cannot be skipped).
    pub fn sequences(&self) -> Vec<SequenceNumber> {
        let mut sequences: Vec<SequenceNumber> = Vec::new();
        for slot in &self.slots {
            let mut value = slot.load(Ordering::Acquire);
            let mut round = 0u32;
            while value == PENDING {
                self.parker
                    .wait(&mut round, || slot.load(Ordering::Acquire) != PENDING);
                value = slot.load(Ordering::Acquire);
            }
            if value != FREE {
                sequences.push(value - 1);
            }
        }
        sequences.extend(self.overflow().keys().copied());
        sequences.sort_unstable();
        sequences.dedup();
        sequences
    }

    /// The newest live snapshot's sequence, if any (invariant 4).
    pub fn newest(&self) -> Option<SequenceNumber> {
        self.newest.load(Ordering::Acquire).checked_sub(1)
    }

    fn lock_newest(&self) -> std::sync::MutexGuard<'_, ()> {
        self.newest_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Invariant 4 after a registration of `sequence` (already published).
    fn raise_newest(&self, sequence: SequenceNumber) {
        let _lock = self.lock_newest();
        if self.newest.load(Ordering::Acquire) < sequence + 1 {
            self.newest.store(sequence + 1, Ordering::Release);
        }
    }

    /// Invariant 4 after a release: the newest of the snapshots still published. One still
    /// pending raises it itself once published (after this, under the same lock).
    fn lower_newest(&self) {
        let _lock = self.lock_newest();
        let in_slots = self
            .slots
            .iter()
            .map(|slot| slot.load(Ordering::Acquire))
            .filter(|&value| value != PENDING)
            .max()
            .unwrap_or(FREE);
        let in_overflow = self.overflow().keys().next_back().map_or(FREE, |&s| s + 1);
        self.newest
            .store(in_slots.max(in_overflow), Ordering::Release);
    }

    /// Number of live snapshots.
    pub fn count(&self) -> usize {
        let in_slots = self
            .slots
            .iter()
            .filter(|slot| slot.load(Ordering::Acquire) != FREE)
            .count();
        in_slots + self.overflow().values().sum::<usize>()
    }

    fn release(&self, place: Place, sequence: SequenceNumber) {
        match place {
            Place::Slot(index) => {
                if let Some(slot) = self.slots.get(index) {
                    if cfg!(feature = "invariants") {
                        // Invariant 2: only a published slot is ever released.
                        let published = slot.load(Ordering::Acquire);
                        assert_eq!(published, sequence + 1, "released an unpublished slot");
                    }
                    slot.store(FREE, Ordering::Release);
                }
            }
            Place::Overflow => {
                let mut overflow = self.overflow();
                if let Some(count) = overflow.get_mut(&sequence) {
                    *count -= 1;
                    if *count == 0 {
                        overflow.remove(&sequence);
                    }
                }
            }
        }
        self.lower_newest();
    }
}

// The hash is folded to `usize` on purpose: any bits make a good slot hint.
#[allow(clippy::cast_possible_truncation)]
fn thread_slot_hint() -> usize {
    use std::hash::{BuildHasher, Hasher};
    thread_local! {
        static HINT: usize = {
            let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
            hasher.write_usize(0);
            hasher.finish() as usize
        };
    }
    HINT.with(|hint| *hint)
}

#[derive(Debug, Clone, Copy)]
enum Place {
    Slot(usize),
    Overflow,
}

#[derive(Debug)]
struct SnapshotInner {
    sequence: SequenceNumber,
    place: Place,
    list: Arc<SnapshotList>,
}

impl Drop for SnapshotInner {
    fn drop(&mut self) {
        self.list.release(self.place, self.sequence);
    }
}

/// A consistent read-only view of the database; cheap to clone, released on drop. It is tied
/// to the database it came from: passing it to another one fails with `InvalidArgument`.
///
/// ```
/// let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
/// db.put("k", "1")?;
/// let snapshot = db.snapshot();
/// db.put("k", "2")?;
/// assert_eq!(db.get_at(&snapshot, "k")?, Some(b"1".to_vec()));
/// let other = cairn::Db::open("/other", cairn::Options::in_memory())?;
/// assert!(other.get_at(&snapshot, "k").is_err());
/// # Ok::<(), cairn::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Snapshot {
    inner: Arc<SnapshotInner>,
}

impl Snapshot {
    /// The snapshot's sequence number.
    ///
    /// ```
    /// let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// let before = db.snapshot();
    /// db.put("k", "v")?;
    /// assert!(db.snapshot().sequence() > before.sequence());
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn sequence(&self) -> SequenceNumber {
        self.inner.sequence
    }

    /// True if this snapshot was registered in `list` (taken from the database owning it).
    pub(crate) fn belongs_to(&self, list: &Arc<SnapshotList>) -> bool {
        Arc::ptr_eq(&self.inner.list, list)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn snapshots_register_and_release() {
        let list = Arc::new(SnapshotList::default());
        let a = list.acquire(|| 5);
        let b = list.acquire(|| 5);
        let c = list.acquire(|| 9);
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

    /// Regression: a flush that read the slots while a snapshot was between reading its
    /// sequence and publishing it skipped the snapshot and dropped versions it needed.
    #[test]
    fn sequences_wait_for_a_pending_slot() {
        let list = Arc::new(SnapshotList::default());
        let index = 17;
        list.slots[index].store(PENDING, Ordering::Release);
        let reader = {
            let list = Arc::clone(&list);
            std::thread::spawn(move || list.sequences())
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!reader.is_finished(), "sequences() skipped a pending slot");
        list.slots[index].store(41 + 1, Ordering::Release);
        assert_eq!(reader.join().unwrap(), vec![41]);
    }

    #[test]
    fn more_snapshots_than_slots_use_the_fallback() {
        let list = Arc::new(SnapshotList::default());
        let held: Vec<Snapshot> = (0..SNAPSHOT_SLOTS as u64 + 10)
            .map(|sequence| list.acquire(|| sequence))
            .collect();
        assert_eq!(list.count(), SNAPSHOT_SLOTS + 10);
        assert_eq!(list.sequences().len(), SNAPSHOT_SLOTS + 10);
        drop(held);
        assert_eq!(list.count(), 0);
        assert!(list.sequences().is_empty());
    }
}
