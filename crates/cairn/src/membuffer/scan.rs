//! Scans over a Membuffer, one partition at a time: a scan drains only the partitions its
//! cursor enters (`FloDB` §4.4 drains the whole Membuffer; a short scan touches one key range,
//! so draining the other fifteen is wasted work that writers then wait for).
//!
//! A scan takes its `ScanMarks` right after its read point: which partitions it has drained,
//! nothing else, so taking them touches no shared memory. Before the cursor reads a
//! partition's key range it calls `drain_for_scan`, which loads the partition's swap count,
//! skips the partition if it holds nothing to move (told from two more words, with no pin:
//! `mod` invariant 6), and drains it unless a drain swapped it since that load (that drain
//! moved every version inserted before it, so the scan piggybacks on it once it finished).
//! The load comes after the read point, so a swap counted after it happened after the read
//! point too.
//!
//! A cursor that crosses into the next partition must look again for that partition's
//! versions behind its position only if a drain moved versions into the memtable since it
//! positioned itself: a `DrainStamp` taken just before it positioned tells (`mod` invariant 5;
//! in a read-mostly phase the cursor then keeps its place instead of paying another memtable
//! seek per partition crossed).
//!
//! Thread-safety contract: `ScanMarks` belongs to one scan (one thread at a time); the
//! Membuffer methods here take `&self` from any thread and serialise with other drains of the
//! same partition through its drain lock.
//!
//! Invariants:
//! 1. After `drain_for_scan(marks, p)` returns, the memtable holds every version of partition
//!    `p` whose insert completed before `marks` were taken, unless an in-place update dropped
//!    it: the caller keeps the overwrite gate held until its last partition is drained (or it
//!    ends), so no version at or below its read point is dropped meanwhile (`gate` step 2;
//!    a snapshot scan holds it too, since its snapshot may be released first).
//! 2. A partition is drained (or copied) at most once per `ScanMarks` (its bit is set), and
//!    `remaining` counts the partitions whose bit is clear.
//! 3. Instead of waiting for another thread's drain, a forward scan may copy the partition
//!    (`enter_for_scan`): the copy holds every version its current and draining tables held
//!    at the copy, so the copy and the memtable together hold every version of the partition
//!    at or below the read point — a version the copy missed left its record for the
//!    memtable before the copy read it (`table` invariant 1), and none at or below the read
//!    point was dropped while the caller held the overwrite gate, which it keeps until it no
//!    longer needs the copy. The memtable cursor must position itself after the copy (a
//!    version moved there earlier may lie behind its old position). A partition whose tables
//!    hold more than `COPY_BYTES_MAX` of records and slots is waited for instead, so no scan
//!    reads or holds a larger copy.
//!
//! Why the copy: a scan that waits on the drain lock waits for the holder, and on an
//! oversubscribed machine the holder may have lost its core for a scheduler slice (measured
//! before this: YCSB E at 16 threads on 2 cores, p99 3.5–24 ms with the Membuffer on against
//! ~50 µs off, hundreds of futex sleeps on drain locks). A copy costs the scan one pass over
//! the partition's tables, bounded by their size, and never waits for a thread that is not
//! running (beyond a short spin and a rewrite in progress).

use super::Membuffer;
use crate::key::compare_internal_keys;
use crate::memtable::Memtable;
use std::sync::atomic::Ordering;

/// Spins on a busy drain lock before a scan copies the partition instead of waiting: the
/// holder is usually a few microseconds from done, unless the scheduler took its core.
const TRY_LOCK_ROUNDS: u32 = 32;

/// The largest partition (bytes of records and slot arrays in its tables) a scan copies; a
/// larger one it waits for, so a scan never reads or holds more than this per copy (with the
/// default 64 MiB write buffer a whole partition's table is about 1.1 MiB).
const COPY_BYTES_MAX: usize = 4 << 20;

/// The drains started so far, and whether all of them had finished, loaded in that order
/// (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DrainStamp {
    started: u64,
    quiet: bool,
}

/// One scan's view of the Membuffer's partitions (see the module documentation).
#[derive(Debug)]
pub(crate) struct ScanMarks {
    /// Bit `p % 64` of word `p / 64`: partition `p` is drained (or piggybacked) for this scan
    /// (invariant 2). The first word is inline: with up to 64 partitions (the default is 16)
    /// a scan allocates nothing.
    first: u64,
    rest: Vec<u64>,
    partitions: usize,
    remaining: usize,
}

impl ScanMarks {
    fn new(partitions: usize) -> ScanMarks {
        ScanMarks {
            first: 0,
            rest: vec![0; partitions.saturating_sub(1) / 64],
            partitions,
            remaining: partitions,
        }
    }

    /// Whether every partition is drained for this scan.
    pub(crate) fn all_drained(&self) -> bool {
        self.remaining == 0
    }

    /// Whether partition `partition` is drained for this scan (true past the last one).
    pub(crate) fn is_drained(&self, partition: usize) -> bool {
        if partition >= self.partitions {
            return true;
        }
        let bit = 1u64 << (partition % 64);
        let word = match partition / 64 {
            0 => Some(self.first),
            n => self.rest.get(n - 1).copied(),
        };
        word.is_none_or(|word| word & bit != 0)
    }

    /// Marks partition `partition` drained; false if it already was (or does not exist).
    fn take(&mut self, partition: usize) -> bool {
        if self.is_drained(partition) {
            return false;
        }
        let bit = 1u64 << (partition % 64);
        let word = match partition / 64 {
            0 => Some(&mut self.first),
            n => self.rest.get_mut(n - 1),
        };
        if let Some(word) = word {
            *word |= bit;
            self.remaining -= 1;
        }
        true
    }

    /// Number of partitions.
    pub(crate) fn partitions(&self) -> usize {
        self.partitions
    }
}

impl Membuffer {
    /// The marks of a scan whose read point was just taken; None before the partitions exist
    /// (every version inserted so far went to the memtable directly: the sample).
    pub(crate) fn scan_marks(&self) -> Option<ScanMarks> {
        let layout = self.layout.get()?;
        Some(ScanMarks::new(layout.partitions.len()))
    }

    /// The partition holding user key `key` (0 before the partitions exist).
    pub(crate) fn partition_of(&self, key: &[u8]) -> usize {
        self.layout
            .get()
            .map_or(0, |layout| layout.boundaries.partition_of(key))
    }

    /// The smallest user key of partition `partition` (None for the first, or past the last).
    pub(crate) fn partition_start(&self, partition: usize) -> Option<&[u8]> {
        let layout = self.layout.get()?;
        layout.boundaries.start_of(partition)
    }

    /// The prefix of `partition_start(partition)` (`key_prefix`), `u64::MAX` past the last
    /// partition (and before the partitions exist).
    pub(crate) fn partition_start_prefix(&self, partition: usize) -> u64 {
        self.layout.get().map_or(u64::MAX, |layout| {
            layout.boundaries.start_prefix_of(partition)
        })
    }

    /// Drains partition `partition` for the scan of `marks` (invariant 1), waiting for a
    /// drain in progress; a no-op if it is already drained for it.
    pub(crate) fn drain_for_scan(
        &self,
        marks: &mut ScanMarks,
        partition: usize,
        memtable: &Memtable,
    ) {
        if marks.take(partition) {
            self.drain_again_for_scan(partition, memtable);
        }
    }

    /// Drains partition `partition` for a scan whose read point was taken before this call,
    /// waiting for a drain in progress, whatever its marks say (a cursor that copied the
    /// partition and now needs its versions in the memtable: invariant 3).
    pub(crate) fn drain_again_for_scan(&self, partition: usize, memtable: &Memtable) {
        let Some(layout) = self.layout.get() else {
            return;
        };
        let Some(state) = layout.partitions.get(partition) else {
            return;
        };
        // Loaded after the read point (module documentation): a swap counted after this load
        // drained what the scan needs.
        let seen = state.swaps.load(Ordering::SeqCst);
        if !state.pending_since(seen) {
            return;
        }
        let guard = state
            .drain_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.drain_or_piggyback(state, seen, layout.partitions.len(), memtable);
        drop(guard);
    }

    /// Makes partition `partition`'s versions visible to the scan of `marks` without waiting
    /// for another thread: drains it if its drain lock is free within a short spin (then
    /// returns None, invariant 1), else returns a private copy of its tables' versions,
    /// sorted, that the scan merges with the memtable (invariant 3; `membuffer_scan_fallbacks`)
    /// — unless the partition is too large to copy, and then it waits for the drain. None too
    /// if it is already drained for the scan, or holds nothing.
    pub(crate) fn enter_for_scan(
        &self,
        marks: &mut ScanMarks,
        partition: usize,
        memtable: &Memtable,
    ) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
        let layout = self.layout.get()?;
        if !marks.take(partition) {
            return None;
        }
        let state = layout.partitions.get(partition)?;
        // As in `drain_again_for_scan`.
        let seen = state.swaps.load(Ordering::SeqCst);
        if !state.pending_since(seen) {
            return None;
        }
        let mut round = 0;
        let mut try_lock = !self.config.scans_always_copy;
        while try_lock {
            let guard = match state.drain_lock.try_lock() {
                Ok(guard) => Some(guard),
                // Poisoned or not, as every other taker of a drain lock does.
                Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => None,
            };
            if let Some(guard) = guard {
                self.drain_or_piggyback(state, seen, layout.partitions.len(), memtable);
                drop(guard);
                return None;
            }
            if round < TRY_LOCK_ROUNDS {
                crate::sync::spin_wait(&mut round);
            } else if self.copy_bytes(state) > COPY_BYTES_MAX {
                // Too large to copy per scan (memory and time): wait for the drain.
                self.drain_again_for_scan(partition, memtable);
                return None;
            } else {
                try_lock = false;
            }
        }
        self.config.counters.scan_fallbacks.add(1);
        Some(self.copy_partition(state))
    }

    /// Bytes a copy of the partition would read: its tables' records and slot arrays (a
    /// copy walks every slot, and a fresh table of a large write buffer has many empty ones).
    fn copy_bytes(&self, state: &super::Partition) -> usize {
        let _pin = self.epoch.pin();
        [&state.current, &state.draining]
            .into_iter()
            .filter_map(|pointer| Self::table(pointer))
            .map(|table| table.arena_bytes().saturating_add(table.slot_bytes()))
            .sum()
    }

    /// Drains a partition for a scan that loaded its swap count `seen` after its read point,
    /// unless a drain swapped it since: that drain (finished, as the caller holds the lock)
    /// moved what the scan needs. Precondition: the caller holds the partition's drain lock.
    fn drain_or_piggyback(
        &self,
        state: &super::Partition,
        seen: u64,
        partitions: usize,
        memtable: &Memtable,
    ) {
        if state.swaps.load(Ordering::SeqCst) > seen {
            self.config.counters.scan_piggybacks.add(1);
            return;
        }
        self.drain_locked(state, partitions, memtable);
        self.config.counters.scan_drains.add(1);
    }

    /// The (internal key, value) pairs of a partition's current and draining tables, sorted,
    /// each internal key once (invariant 3).
    fn copy_partition(&self, state: &super::Partition) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut versions = Vec::new();
        {
            let _pin = self.epoch.pin();
            // Current first: a swap between the two loads shows the same table twice (the
            // copies are merged below), never a sealed table that neither load saw.
            let current = Self::table(&state.current);
            let draining = Self::table(&state.draining);
            for table in [current, draining].into_iter().flatten() {
                table.versions_into(&mut versions);
            }
        }
        versions.sort_unstable_by(|a, b| compare_internal_keys(&a.0, &b.0));
        versions.dedup_by(|later, earlier| later.0 == earlier.0);
        versions
    }

    /// A stamp no drain is quiet since, for a cursor not positioned yet. Its first seek
    /// replaces it before any partition crossing reads it; a crossing that did read it would
    /// only re-seek, which is always safe.
    pub(crate) fn unpositioned_stamp() -> DrainStamp {
        DrainStamp {
            started: u64::MAX,
            quiet: false,
        }
    }

    /// A stamp of the drains so far; take it just before positioning a memtable cursor.
    pub(crate) fn drain_stamp(&self) -> DrainStamp {
        let started = self.drains.started.load(Ordering::SeqCst);
        let finished = self.drains.finished.load(Ordering::SeqCst);
        DrainStamp {
            started,
            quiet: started == finished,
        }
    }

    /// Whether no drain moved a version into the memtable since `stamp` was taken, so a
    /// cursor positioned after the stamp saw every version drained so far.
    ///
    /// Why it holds (`mod` invariant 5, all `SeqCst`): a drain counted in `stamp.started`
    /// that had not finished when `finished` was loaded leaves `finished` short, unless a
    /// drain that started after `started` was loaded made up the count, and then the start
    /// count has grown by now. A drain started after the stamp has grown it too. A version
    /// an in-place update moves to the memtable is not a drain's, but its key's record stays
    /// in the partition's current table, so the scan's own drain of that partition runs, and
    /// counts. A false answer is counted in `membuffer_scan_reseeks` (the caller re-seeks).
    pub(crate) fn quiet_since(&self, stamp: DrainStamp) -> bool {
        let quiet = stamp.quiet && self.drains.started.load(Ordering::SeqCst) == stamp.started;
        if !quiet {
            self.config.counters.scan_reseeks.add(1);
        }
        quiet
    }

    /// Drains every partition holding versions into `memtable`, so that the memtable holds
    /// every version whose insert completed before the call (the flush once the buffer is
    /// quiet, and cursors that cannot drain as they go). A partition swapped by another drain
    /// since the call began is skipped once that drain finished (piggybacking).
    pub(crate) fn drain_all(&self, memtable: &Memtable) {
        let Some(mut marks) = self.scan_marks() else {
            return;
        };
        for partition in 0..marks.partitions() {
            self.drain_for_scan(&mut marks, partition, memtable);
        }
        debug_assert!(marks.all_drained(), "invariant 2");
    }
}

#[cfg(test)]
mod tests {
    use super::ScanMarks;

    /// Partitions past the inline word (up to 1,024 are allowed) are tracked in the rest.
    #[test]
    fn marks_track_every_partition_once_beyond_the_inline_word() {
        for partitions in [1, 16, 64, 65, 128, 130, 1024] {
            let mut marks = ScanMarks::new(partitions);
            assert_eq!(marks.partitions(), partitions);
            for partition in (0..partitions).rev() {
                assert!(!marks.is_drained(partition), "{partitions}: {partition}");
                assert!(marks.take(partition));
                assert!(!marks.take(partition), "taken once");
                assert!(marks.is_drained(partition));
            }
            assert!(marks.all_drained(), "{partitions}");
            assert!(marks.is_drained(partitions), "past the last one");
            assert!(!marks.take(partitions));
        }
    }
}
