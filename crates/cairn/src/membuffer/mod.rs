//! The Membuffer (`FloDB` §3–§4): the upper level of a write buffer's two-level memory
//! component, a bounded concurrent hash table holding the versions of recently written keys,
//! partitioned by key range and drained into the memtable (the skiplist) in sorted batches.
//!
//! Why: a put of a new key into the skiplist is a search, a chain of dependent cache misses
//! that grows with the memtable. A put into the Membuffer is a hash probe; the skiplist work is
//! done later by a drain, which inserts a whole partition — one key range — sorted, each
//! search starting from the previous key's predecessors (`Memtable::insert_sorted`).
//!
//! Structure: `boundaries` (key ranges from a sample of the keys written: the first
//! `sample_keys` writes of a buffer go to the memtable directly and are sampled), one
//! `Partition` per range, each with a current `table::Table` (the generation writers insert
//! into) and at most one draining table (sealed, being moved into the memtable). A table holds
//! one record per key, updated in place (`table`, `record`). A drained table is retired with an
//! epoch stamp (`crate::epoch`, the project's own: a pin is a store to the thread's own slot and
//! a fence, and the Membuffer retires one table per drain, so its slower retiring does not
//! matter) and freed once every thread pinned when it was unlinked has unpinned; lookups copy
//! the version out while pinned, so nothing borrows a table after its pin.
//!
//! Write (`insert`, pinned; `prefetch` just before, while the writer reserves its sequence,
//! fetches the lines the insert probes first): pick the partition; load its current table;
//! `enter` (fails only if a drainer sealed it, then reload); insert — a key already in the
//! table is overwritten in place (`table` invariant 1), its old version first moved to the
//! memtable or, when the `gate` allows (no snapshot or scan can want it; latest-state reads
//! validate against the gate's drop marks), dropped; account the table's arena growth
//! (invariant 4); `exit`; the insert that takes a table past three quarters full unparks
//! the drainer threads (`drainer`), which drain every such partition whose drain lock is
//! free. A full table: the writer drains the partition itself if nobody else is (`try_lock`
//! of the partition's drain lock; time counted in stats) and retries once, else the version
//! goes to the memtable directly. On the write path (`insert_deferring`) that drain is
//! split: the writer swaps in a fresh table and retries into it at once, and moves the full
//! table into the memtable only after its write is published (`DeferredDrain`, still under
//! the drain lock), because every later writer waits for this one's sequence to be
//! published.
//!
//! Drain (one thread per partition at a time, holding its drain lock): publish the current
//! table as `draining`, install a fresh current table (sized by `sizing` from how full the
//! old one got: the partition's share of the budget while writers fill it, down to 16 KiB
//! while scans drain it nearly empty; its slot array for the old one's mean record), seal
//! the old one (at once, so no writer enters it while a writer's move is deferred); then the
//! move: wait for the writers inside to leave, gather and sort its versions (`order`),
//! insert them into the memtable (multi-insert or, for the benchmark variant, one by one),
//! then clear `draining`, stop counting its versions (invariant 4) and retire
//! the table.
//!
//! Read (`get`, pinned): the current table, then the draining table (each asks its presence
//! `filter` before its slots: most reads are of keys the Membuffer does not hold), the version
//! at or below the read's sequence from either, copied out; the caller then asks the memtable
//! and keeps the newer. By the drain's order (draining set before the swap, cleared after the
//! memtable inserts; all `SeqCst`), a reader that misses a version in both tables finds it in
//! the memtable.
//!
//! Scan (`scan`): a scan keeps a bitset of the partitions it drained, and its cursor drains a
//! partition just before it enters the partition's key range (`memory::scan`), so a short
//! scan drains the one or two partitions it reads, not all of them. A scan piggybacks on a
//! drain that swapped its partition after the scan reached it (that drain moved everything
//! the scan needs).
//! A drain moves at most one table's versions, so a scan finishes in bounded time however
//! many writes continue: no retry loop, hence no fallback is ever taken. `drain_all` (the
//! flush's gathering, and cursors that need every version at once) drains every partition.
//!
//! Bypass (`bypass`): when a window's scans outnumber its writes by a configured factor, a
//! drainer drains every partition into the memtable and leaves it without a table, for the
//! rest of the write buffer's life: writers then go to the memtable directly, and scans read
//! it through a plain cursor (a scan over a Membuffer costs more than the few writes save).
//!
//! Thread-safety contract: `insert`, `get` and `drain_for_scan` run on any number of threads;
//! readers never write shared memory (their epoch slot is their own); a writer may spin for a
//! drainer's table swap (a few instructions) or for another writer of the same key (one
//! memtable insert), a reader for a rewrite of the record it copies. Drains of one partition
//! are serialised by its drain lock.
//!
//! Invariants:
//! 1. Every version inserted is, at any moment, in one of: a partition's current table, its
//!    draining table, or the memtable — and moves only in that order (an in-place update puts
//!    the old version in the memtable before the record changes: for that instant it is in
//!    both, which readers tolerate as they take the newer of equal versions) — or it was
//!    dropped by an in-place update the `gate` allowed (`gate` invariants 1 and 2).
//! 2. A partition's `draining` is non-null only while its drain lock is held.
//! 3. A table is freed only after no partition points to it and every thread pinned at its
//!    retirement has unpinned; every access to a table is pinned or by the holder of its
//!    partition's drain lock (the only thread that retires it). The Membuffer frees the rest
//!    when it drops.
//! 4. `slot_bytes` is the sum of the slot arrays and filters of the tables not yet freed
//!    (added when made, subtracted when freed). `version_bytes` is the sum of the accounted
//!    arena bytes of the tables not yet drained (added by writers inside the table as it
//!    grows, so a sealed table's count is final; subtracted once its versions are in the
//!    memtable, which counts them from then on); it trails the arenas by less than a
//!    sixteenth of a table each.
//! 5. `drains.started` counts a drain before it moves any version into the memtable and
//!    `drains.finished` after it moved the last one (both `SeqCst`), so a memtable that no
//!    drain touched between two moments shows the same start count at both and no drain
//!    running at the first (`scan::DrainStamp`).
//! 6. A partition's `occupied` exceeds the generation of every table of it that a writer
//!    put a version into (or found full), from before that writer returns; a table's
//!    generation is the partition's swap count while it is current, and a drain sets
//!    `draining` before it counts the swap. So a partition whose `occupied`, loaded after
//!    its swap count `s`, is at most `s`, and whose `draining` is null after that, holds no
//!    version whose insert completed before the load of `s`: its current table (generation
//!    `s`) holds none, and every older table was moved (`Partition::pending_since`). A scan
//!    tells whether to drain from these words alone, without pinning or reading a table.

mod boundaries;
mod bypass;
mod drainer;
mod filter;
mod gate;
mod order;
mod record;
mod scan;
mod sizing;
mod slots;
mod table;

pub(crate) use boundaries::prefix as key_prefix;
pub(crate) use gate::{DetachedHold, GateHold, OverwriteGate};
pub(crate) use scan::{DrainStamp, ScanMarks};

use crate::epoch::EpochTable;
use crate::key::{SequenceNumber, ValueKind};
use crate::memtable::Memtable;
use crate::stats::MembufferCounters;
use crate::sync::CachePadded;
use boundaries::{Boundaries, Sampler};
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use table::{Put, Table};

/// A version as a Membuffer lookup returns it: sequence, kind, value (copied out, so the
/// table it came from may be freed once the lookup unpins).
pub(crate) type Entry = record::Version;

/// How a Membuffer is sized and drained.
#[derive(Debug, Clone)]
pub(crate) struct MembufferConfig {
    /// Bytes of records all current tables hold together (the Membuffer's share of the
    /// write buffer).
    pub budget_bytes: usize,
    /// Partitions wanted (fewer if the sampled keys have fewer distinct values).
    pub partitions: usize,
    /// Writes sampled (and sent to the memtable) before the partition boundaries are set.
    pub sample_keys: usize,
    /// Multi-insert drains (false: one insert per version, the benchmark's variant).
    pub multi_insert: bool,
    /// Background drainer threads (0: writers drain full partitions themselves).
    pub drainers: usize,
    /// Where the counters go.
    pub counters: Arc<MembufferCounters>,
    /// Decides whether an in-place update may drop the version it replaces (`gate`); None:
    /// every replaced version moves to the memtable.
    pub gate: Option<Arc<OverwriteGate>>,
    /// Scans copy every partition instead of draining it (tests of the scan's fallback,
    /// which otherwise needs a drain lock held by a descheduled thread).
    pub scans_always_copy: bool,
    /// A drainer bypasses the Membuffer when a window's scans reach this many times its
    /// writes (`bypass`); 0: never.
    pub bypass_scans_per_write: u32,
    /// Bypass at the first judgement once the partitions exist, whatever the mix (tests that
    /// race the bypass against every operation).
    pub bypass_at_once: bool,
}

/// One key range's tables (see the module documentation).
struct Partition {
    current: AtomicPtr<Table>,
    draining: AtomicPtr<Table>,
    drain_lock: Mutex<()>,
    /// Table swaps so far: a scan that sees this grow past its start piggybacks.
    swaps: AtomicU64,
    /// Byte budget of the partition's current table (`sizing::next_table_bytes`); read and
    /// written only by the holder of `drain_lock` (and when the layout is built).
    table_bytes: AtomicUsize,
    /// Record size the current table expects (`sizing::next_record_bytes`); as `table_bytes`.
    record_bytes: AtomicUsize,
    /// One more than the newest generation a writer put a version into or found full
    /// (invariant 6).
    occupied: AtomicU64,
}

impl Partition {
    /// After a writer put a version into (or found full) its table of `generation`
    /// (invariant 6). A load first: the word is written once per table, not per write.
    #[inline]
    fn mark_occupied(&self, generation: u64) {
        if self.occupied.load(Ordering::Relaxed) <= generation {
            self.occupied.fetch_max(generation + 1, Ordering::SeqCst);
        }
    }

    /// Whether the partition may hold versions a scan must see moved (or copied), for a scan
    /// that loaded its swap count `seen` just before (invariant 6).
    ///
    /// Why a writer's skipped `fetch_max` is still seen: its load saw another writer's
    /// raise, and that load comes before its write is published, so a scan whose read point
    /// covers the write loads the raise or a larger value (read-read coherence).
    fn pending_since(&self, seen: u64) -> bool {
        self.occupied.load(Ordering::SeqCst) > seen
            || !self.draining.load(Ordering::SeqCst).is_null()
    }
}

/// The boundaries and their partitions, built once the sample is complete.
struct Layout {
    boundaries: Boundaries,
    partitions: Box<[Partition]>,
}

/// See the module documentation.
///
/// Aligned to two cache lines so that, behind an `Arc`, the reference counts every scan's
/// cursor bumps sit on their own line, not on the line of fields every scan reads.
#[repr(align(128))]
pub(crate) struct Membuffer {
    config: MembufferConfig,
    sampler: Sampler,
    layout: OnceLock<Layout>,
    /// Every access to a table runs pinned here (invariant 3).
    epoch: EpochTable,
    /// Drained tables with the epoch stamp they were retired at, freed once it is safe.
    retired: Mutex<Vec<(u64, *mut Table)>>,
    /// Arena bytes the writers of tables not yet drained accounted (`Table::account_growth`):
    /// the versions the write buffer counts for the Membuffer (invariant 4).
    version_bytes: AtomicUsize,
    /// Bytes of the slot arrays and filters of the tables not yet freed (invariant 4).
    slot_bytes: AtomicUsize,
    /// The drainer threads, unparked when a table passes three quarters full.
    drainers: Mutex<Vec<std::thread::Thread>>,
    /// Set when the buffer is sealed: drainers exit.
    stopped: std::sync::atomic::AtomicBool,
    /// Drains started and finished (`scan::DrainStamp`; invariant 5): one cache line, which
    /// every scan loads both words of, and only drains write.
    drains: CachePadded<DrainCounts>,
    /// Set once every partition lost its table for good (`bypass` invariant 1).
    bypassed: std::sync::atomic::AtomicBool,
    /// Scans made through a draining cursor over this Membuffer (`bypass`'s policy counts).
    scans: crate::sync::StripedCounter,
}

/// The drain counts of `Membuffer::drains` (invariant 5).
#[derive(Debug, Default)]
struct DrainCounts {
    started: AtomicU64,
    finished: AtomicU64,
}

impl std::fmt::Debug for Membuffer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Membuffer")
            .field("partitions", &self.layout.get().map(|l| l.partitions.len()))
            .field("version_bytes", &self.version_bytes.load(Ordering::Relaxed))
            .field("slot_bytes", &self.slot_bytes.load(Ordering::Relaxed))
            .finish()
    }
}

// Raw table pointers are boxes this Membuffer owns (invariant 3); tables are Sync.
// SAFETY: all shared state is atomics, mutexes, and tables whose own contract is thread-safe.
unsafe impl Send for Membuffer {}
// SAFETY: as above.
unsafe impl Sync for Membuffer {}

impl Membuffer {
    /// An empty Membuffer; its partitions appear after `config.sample_keys` writes.
    pub(crate) fn new(config: MembufferConfig) -> Membuffer {
        Membuffer {
            sampler: Sampler::new(config.sample_keys),
            config,
            layout: OnceLock::new(),
            epoch: EpochTable::new(),
            retired: Mutex::new(Vec::new()),
            version_bytes: AtomicUsize::new(0),
            slot_bytes: AtomicUsize::new(0),
            drainers: Mutex::new(Vec::new()),
            stopped: std::sync::atomic::AtomicBool::new(false),
            drains: CachePadded(DrainCounts::default()),
            bypassed: std::sync::atomic::AtomicBool::new(false),
            scans: crate::sync::StripedCounter::default(),
        }
    }

    /// A shared Membuffer with its drainer threads (`config.drainers`) over `memtable`.
    pub(crate) fn start(config: MembufferConfig, memtable: &Arc<Memtable>) -> Arc<Membuffer> {
        let drainers = config.drainers;
        let membuffer = Arc::new(Membuffer::new(config));
        if drainers > 0 {
            let _ = drainer::start(&membuffer, memtable, drainers);
        }
        membuffer
    }

    fn register_drainer(&self, thread: std::thread::Thread) {
        self.drainers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(thread);
    }

    /// Stops the drainers (the buffer was sealed: the flush drains what is left).
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.wake_drainers();
    }

    fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    fn wake_drainers(&self) {
        let drainers = self
            .drainers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for thread in drainers.iter() {
            thread.unpark();
        }
    }

    /// Drains every partition whose current table wants a drain (`Table::wants_drain`) and
    /// whose drain lock is free; true if it drained any (a drainer's round).
    fn drain_wanted(&self, memtable: &Memtable) -> bool {
        let Some(layout) = self.layout.get() else {
            return false;
        };
        self.free_retired();
        let mut worked = false;
        for partition in &layout.partitions {
            let wanted = {
                let _pin = self.epoch.pin();
                Self::table(&partition.current).is_some_and(Table::wants_drain)
            };
            if !wanted {
                continue;
            }
            if let Ok(_guard) = partition.drain_lock.try_lock() {
                self.drain_locked(partition, layout.partitions.len(), memtable);
                worked = true;
            }
        }
        worked
    }

    /// The overwrite gate this Membuffer's updates ask (the database's, shared by every
    /// write buffer), to release a scan's detached hold on.
    pub(crate) fn gate(&self) -> Option<&OverwriteGate> {
        self.config.gate.as_deref()
    }

    /// Bytes of the versions the Membuffer holds (invariant 4), not its budget — a
    /// near-empty Membuffer lets the memtable use the rest of the write buffer. This is what
    /// the write buffer's limit counts; the slot arrays are not (as the memtable's key index
    /// is not): a limit counting them would make every flush with the Membuffer on carry
    /// ~3 % less data than with it off, for the same versions.
    pub(crate) fn version_bytes(&self) -> usize {
        self.version_bytes.load(Ordering::Relaxed)
    }

    /// Bytes the Membuffer occupies: `version_bytes` and the slot arrays and filters of its
    /// tables not yet freed (invariant 4).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.version_bytes() + self.slot_bytes.load(Ordering::Relaxed)
    }

    /// Versions not yet drained into the memtable (current and draining tables).
    pub(crate) fn undrained(&self) -> usize {
        let _pin = self.epoch.pin();
        self.layout.get().map_or(0, |layout| {
            layout
                .partitions
                .iter()
                .map(|partition| {
                    Self::table(&partition.current).map_or(0, Table::len)
                        + Self::table(&partition.draining).map_or(0, Table::len)
                })
                .sum()
        })
    }

    /// The table a partition pointer names, if any. Precondition: the caller is pinned
    /// (`epoch`) or holds the partition's drain lock, for as long as it uses the table.
    fn table(pointer: &AtomicPtr<Table>) -> Option<&Table> {
        // SAFETY: a non-null table pointer names a live box (invariant 3): it is freed only
        // after it was unlinked and every thread pinned at that time unpinned, and only by a
        // drain lock holder's retire.
        unsafe { pointer.load(Ordering::SeqCst).as_ref() }
    }

    /// The largest table of one partition: its share of the budget.
    fn table_bytes_max(&self, partitions: usize) -> usize {
        self.config.budget_bytes / partitions.max(1)
    }

    /// A fresh table of about `byte_limit` bytes for one partition, owned by the Membuffer
    /// until retired (invariant 3).
    fn new_table(
        &self,
        byte_limit: usize,
        record_bytes: usize,
        partitions: usize,
        generation: u64,
    ) -> *mut Table {
        let table = Table::new(
            byte_limit,
            record_bytes,
            self.table_bytes_max(partitions) / 4,
            generation,
        );
        self.slot_bytes
            .fetch_add(table.slot_bytes(), Ordering::Relaxed);
        Box::into_raw(Box::new(table))
    }

    /// Retires a drained table no partition points to any more: it is freed once no pinned
    /// thread can still reach it.
    fn retire(&self, table: *mut Table) {
        let stamp = self.epoch.advance();
        self.retired
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((stamp, table));
        self.free_retired();
    }

    /// Frees the retired tables no pinned thread can reach.
    fn free_retired(&self) {
        let mut retired = self
            .retired
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if retired.is_empty() {
            return;
        }
        let safe_below = self.epoch.safe_below();
        retired.retain(|&(stamp, table)| {
            if stamp >= safe_below {
                return true;
            }
            // SAFETY: unlinked before `stamp` was taken, and every thread pinned then has
            // unpinned (epoch invariant 2): nobody holds a reference; it was boxed by
            // `new_table` and is freed once (it leaves the list here).
            let table = unsafe { Box::from_raw(table) };
            // Invariant 4: its arena bytes left the count when it was drained.
            self.slot_bytes
                .fetch_sub(table.slot_bytes(), Ordering::Relaxed);
            false
        });
    }

    /// The layout, building it when `sample` completes it.
    fn build_layout(&self, sample: Vec<Vec<u8>>) {
        let boundaries = Boundaries::from_sample(sample, self.config.partitions);
        let count = boundaries.partitions();
        let table_bytes = self.table_bytes_max(count);
        let partitions = (0..count)
            .map(|_| Partition {
                current: AtomicPtr::new(self.new_table(
                    table_bytes,
                    sizing::RECORD_BYTES_MIN,
                    count,
                    0,
                )),
                draining: AtomicPtr::new(ptr::null_mut()),
                drain_lock: Mutex::new(()),
                swaps: AtomicU64::new(0),
                table_bytes: AtomicUsize::new(table_bytes),
                record_bytes: AtomicUsize::new(sizing::RECORD_BYTES_MIN),
                occupied: AtomicU64::new(0),
            })
            .collect();
        let _ = self.layout.set(Layout {
            boundaries,
            partitions,
        });
    }

    /// Hints the processor to fetch the slot and filter word an `insert` of `key` reads
    /// first: the writer calls it before reserving its sequence, so these misses overlap the
    /// reservation's (another core's cache lines) instead of following it.
    pub(crate) fn prefetch(&self, key: &[u8]) {
        if self.bypassed.load(Ordering::Relaxed) {
            return;
        }
        let Some(layout) = self.layout.get() else {
            return;
        };
        let Some(partition) = layout.partitions.get(layout.boundaries.partition_of(key)) else {
            return;
        };
        let _pin = self.epoch.pin();
        if let Some(table) = Self::table(&partition.current) {
            table.prefetch(crate::hashindex::hash_key(key));
        }
    }

    /// Inserts a version into its partition's table, draining a full partition first if no
    /// other thread is. Returns false if the version was not taken: the caller inserts it into
    /// `memtable` directly. Precondition: as `Memtable::insert`. (The write path uses
    /// `insert_deferring`.)
    #[cfg(test)]
    pub(crate) fn insert(
        &self,
        memtable: &Memtable,
        key: &[u8],
        sequence: SequenceNumber,
        kind: ValueKind,
        value: &[u8],
    ) -> bool {
        let mut deferred = None;
        let taken = self.insert_deferring(memtable, key, sequence, kind, value, &mut deferred);
        // The drain (if any) runs here, before returning, as the token drops.
        drop(deferred);
        taken
    }

    /// As `insert`, except that a writer which finds its partition full and takes its drain
    /// lock only swaps in a fresh table (its version goes there) and leaves the move of the
    /// full one into the memtable to `deferred`, which does it when dropped: the write path
    /// drops it after the write is published and its WAL wait is over (an fdatasync with
    /// `sync`), so the writers behind it in sequence order do
    /// not wait for a whole table's drain (measured: on `FloDB`'s Fig. 17 at 4 GiB they slept
    /// in `finish_write` through each writer drain, a quarter of the two cores idle).
    /// `deferred` must be None on entry.
    pub(crate) fn insert_deferring<'a>(
        &'a self,
        memtable: &'a Memtable,
        key: &[u8],
        sequence: SequenceNumber,
        kind: ValueKind,
        value: &[u8],
        deferred: &mut Option<DeferredDrain<'a>>,
    ) -> bool {
        debug_assert!(deferred.is_none(), "one deferred drain per insert");
        // A relaxed load: a writer that misses the flag finds no table (`bypass`).
        if self.bypassed.load(Ordering::Relaxed) {
            return self.direct();
        }
        let Some(layout) = self.layout.get() else {
            if let Some(sample) = self.sampler.offer(key) {
                self.build_layout(sample);
            }
            return self.direct();
        };
        let Some(partition) = layout.partitions.get(layout.boundaries.partition_of(key)) else {
            return self.direct();
        };
        let hash = crate::hashindex::hash_key(key);
        let mut drained = false;
        let mut round = 0;
        let new_sequence = sequence;
        let mut move_old = |key: &[u8], sequence, kind, value: &[u8]| {
            // `gate` invariant 1: a dropped version's bucket mark is raised before the
            // record is rewritten.
            let drop = self
                .config
                .gate
                .as_ref()
                .is_some_and(|gate| gate.may_drop(hash, sequence, new_sequence));
            if drop {
                self.config.counters.dropped_versions.add(1);
            } else {
                memtable.insert(key, sequence, kind, value);
                self.config.counters.moved_versions.add(1);
            }
        };
        let _pin = self.epoch.pin();
        loop {
            let Some(table) = Self::table(&partition.current) else {
                return self.direct();
            };
            if !table.enter() {
                // A drainer sealed it and is about to (or did) install the next table.
                crate::sync::spin_wait(&mut round);
                continue;
            }
            let put = table.insert(hash, key, sequence, kind, value, &mut move_old);
            if matches!(put, Put::Done | Put::Full) {
                partition.mark_occupied(table.generation());
            }
            if put == Put::Done {
                // Invariant 4: growth is accounted inside, so a sealed table's count is final.
                let grown = table.account_growth();
                if grown > 0 {
                    self.version_bytes.fetch_add(grown, Ordering::Relaxed);
                }
            }
            table.exit();
            match put {
                Put::Done => {
                    self.config.counters.writes.add(1);
                    if self.config.drainers > 0 && table.take_drain_request() {
                        self.wake_drainers();
                    }
                    return true;
                }
                Put::Full if !drained => {
                    let Ok(guard) = partition.drain_lock.try_lock() else {
                        return self.direct();
                    };
                    let started = std::time::Instant::now();
                    let old = self.swap_locked(partition, layout.partitions.len());
                    *deferred = Some(DeferredDrain {
                        membuffer: self,
                        memtable,
                        partition,
                        old,
                        swap: started.elapsed(),
                        _guard: guard,
                    });
                    drained = true;
                }
                Put::Full | Put::Oversized | Put::Older => return self.direct(),
            }
        }
    }

    /// Counts a version the caller writes to the memtable directly.
    fn direct(&self) -> bool {
        self.config.counters.direct_writes.add(1);
        false
    }

    /// The newest version of `key` at or below `sequence` in the Membuffer (the caller also
    /// asks the memtable, after this, and keeps the newer: see the module documentation).
    pub(crate) fn get(&self, key: &[u8], sequence: SequenceNumber) -> Option<Entry> {
        // Bypassed, it holds nothing (`bypass` invariant 1).
        if self.is_bypassed() {
            return None;
        }
        let layout = self.layout.get()?;
        let partition = layout.partitions.get(layout.boundaries.partition_of(key))?;
        let hash = crate::hashindex::hash_key(key);
        let _pin = self.epoch.pin();
        let current = Self::table(&partition.current).and_then(|t| t.get(hash, key, sequence));
        let draining = Self::table(&partition.draining).and_then(|t| t.get(hash, key, sequence));
        newer(current, draining)
    }

    /// Moves one partition's current table into the memtable. Precondition: the caller holds
    /// the partition's drain lock (invariant 2).
    fn drain_locked(&self, partition: &Partition, partitions: usize, memtable: &Memtable) {
        let old = self.swap_locked(partition, partitions);
        self.move_locked(partition, old, memtable);
    }

    /// A drain's first half: publishes the partition's current table as `draining` and
    /// installs a fresh current one; returns the old one (null if there was nothing to
    /// drain: then nothing changed). Precondition: the caller holds the partition's drain
    /// lock and calls `move_locked` with the result before releasing it (invariant 2).
    fn swap_locked(&self, partition: &Partition, partitions: usize) -> *mut Table {
        let old = partition.current.load(Ordering::SeqCst);
        // SAFETY: invariant 3.
        let Some(old_table) = (unsafe { old.as_ref() }) else {
            return ptr::null_mut();
        };
        if old_table.len() == 0 && !old_table.overflowed() {
            return ptr::null_mut();
        }
        // Sized by how full the drained table got: a scan's drain of a partition holding a
        // few versions must not pay for a full-size table (allocating and zeroing its slots,
        // then reading them all back).
        // Invariant 5: counted before any of its versions can reach the memtable.
        self.drains.started.fetch_add(1, Ordering::SeqCst);
        let max = self.table_bytes_max(partitions);
        let bytes = sizing::next_table_bytes(
            partition.table_bytes.load(Ordering::Relaxed),
            old_table.fill(),
            sizing::table_bytes_min(max),
            max,
        );
        partition.table_bytes.store(bytes, Ordering::Relaxed);
        // Sealed or not, the mean so far is what the next table should expect.
        let record_bytes = sizing::next_record_bytes(
            partition.record_bytes.load(Ordering::Relaxed),
            old_table.arena_bytes(),
            old_table.len(),
        );
        partition
            .record_bytes
            .store(record_bytes, Ordering::Relaxed);
        // The drain lock holder is the only one to change the swap count: the fresh table's
        // generation is the count after this swap (invariant 6).
        let generation = partition.swaps.load(Ordering::SeqCst) + 1;
        let fresh = self.new_table(bytes, record_bytes, partitions, generation);
        Self::install_locked(partition, old_table, fresh);
        old
    }

    /// Publishes `old` (the partition's current table) as `draining` and `fresh` (a new table,
    /// or null to leave none: `bypass`) as current, in the order scans rely on, then seals
    /// `old`. Precondition: the caller holds the partition's drain lock, counted the drain in
    /// `drains.started`, and moves `old` (`move_locked`) before releasing the lock.
    fn install_locked(partition: &Partition, old: &Table, fresh: *mut Table) {
        // Invariant 2: only the lock holder sets `draining`, and it clears it before leaving.
        debug_assert!(partition.draining.load(Ordering::SeqCst).is_null());
        // Before the swap is counted (invariant 6): a scan that loads the grown count then
        // finds the old table draining, or already moved.
        partition
            .draining
            .store(ptr::from_ref(old).cast_mut(), Ordering::SeqCst);
        // Counted before the fresh table is installed: a scan that loads the count and finds
        // it grown later piggybacks on this drain (`scan` module documentation), which is
        // right only if no version the scan needs can be in the fresh table. One that loaded
        // the count before this increment took its read point before the fresh table
        // existed, so nothing at or below that point is there; one that loaded it after
        // drains the fresh table itself.
        partition.swaps.fetch_add(1, Ordering::SeqCst);
        partition.current.store(fresh, Ordering::SeqCst);
        #[cfg(test)]
        tests::run_swap_hook();
        // Sealed now, not when the move starts: a writer that loaded the old table before the
        // swap goes to the fresh one (or, bypassed, to the memtable) instead of entering a
        // table whose move a writer may have deferred (`DeferredDrain`): only writers already
        // inside add to it, as with an undeferred drain.
        old.seal();
    }

    /// A drain's second half: with `old` (the table `swap_locked` returned and sealed; null:
    /// nothing), waits for the writers still inside, moves its versions into the memtable,
    /// clears `draining` and retires it. Precondition: the caller still holds the drain lock
    /// `swap_locked` ran under.
    fn move_locked(&self, partition: &Partition, old: *mut Table, memtable: &Memtable) {
        // SAFETY: invariant 3: the drain lock holder is the only thread that retires it.
        let Some(old_table) = (unsafe { old.as_ref() }) else {
            return;
        };
        debug_assert_eq!(partition.draining.load(Ordering::SeqCst), old);
        // `swap_locked` sealed it.
        old_table.wait_for_writers();
        #[cfg(feature = "invariants")]
        if let Err(broken) = old_table.check_invariants() {
            panic!("Membuffer table invariant broken: {broken}");
        }
        let records = order::drain_order(&old_table.records());
        let count = records.len() as u64;
        if self.config.multi_insert {
            order::insert_prefetching(memtable, &records);
        } else {
            for (key, sequence, kind, value) in records {
                memtable.insert(key, sequence, kind, value);
            }
        }
        partition.draining.store(ptr::null_mut(), Ordering::SeqCst);
        // Invariant 4: its versions are counted in the memtable now; counting them here too
        // until the table is freed (after the next drain, often: writers stay pinned) would
        // seal every write buffer a couple of tables' worth of data early.
        self.version_bytes
            .fetch_sub(old_table.accounted_bytes(), Ordering::Relaxed);
        // Invariant 5: counted after its last version reached the memtable.
        self.drains.finished.fetch_add(1, Ordering::SeqCst);
        self.config.counters.drains.add(1);
        self.config.counters.drained_versions.add(count);
        self.retire(old);
    }
}

/// A writer's drain whose move into the memtable waits until the token drops
/// (`Membuffer::insert_deferring`). It holds the partition's drain lock from the table swap
/// to the end of the move, so scans and drainers see one drain (invariant 2), as with an
/// undeferred one.
#[must_use = "dropping the token runs the drain"]
pub(crate) struct DeferredDrain<'a> {
    membuffer: &'a Membuffer,
    memtable: &'a Memtable,
    partition: &'a Partition,
    /// The swapped-out table (null: it was empty, nothing to move).
    old: *mut Table,
    /// How long the swap took: with the move's time, what the writer spent draining (the
    /// wait between them is the writer publishing its write, not drain work).
    swap: std::time::Duration,
    _guard: std::sync::MutexGuard<'a, ()>,
}

impl std::fmt::Debug for DeferredDrain<'_> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("DeferredDrain")
            .field("empty", &self.old.is_null())
            .finish_non_exhaustive()
    }
}

impl Drop for DeferredDrain<'_> {
    fn drop(&mut self) {
        let started = std::time::Instant::now();
        self.membuffer
            .move_locked(self.partition, self.old, self.memtable);
        let spent = self.swap.saturating_add(started.elapsed());
        let micros = u64::try_from(spent.as_micros()).unwrap_or(u64::MAX);
        let counters = &self.membuffer.config.counters;
        counters.writer_drains.add(1);
        counters.writer_drain_micros.add(micros);
        // The guard drops after this: the drain lock covers the move (invariant 2).
    }
}

impl Drop for Membuffer {
    fn drop(&mut self) {
        if let Some(layout) = self.layout.take() {
            for partition in &layout.partitions {
                for pointer in [&partition.current, &partition.draining] {
                    let table = pointer.swap(ptr::null_mut(), Ordering::SeqCst);
                    if !table.is_null() {
                        // SAFETY: `&mut self`: no other thread holds the Membuffer, so none
                        // reaches its tables; a live table is freed once (it was unlinked).
                        drop(unsafe { Box::from_raw(table) });
                    }
                }
            }
        }
        let retired = std::mem::take(
            self.retired
                .get_mut()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for (_, table) in retired {
            // SAFETY: as above; a retired table is in the list once.
            drop(unsafe { Box::from_raw(table) });
        }
    }
}

/// The newer of two versions of one key.
fn newer(first: Option<Entry>, second: Option<Entry>) -> Option<Entry> {
    match (first, second) {
        (Some(first), Some(second)) => Some(if first.0 >= second.0 { first } else { second }),
        (first, second) => first.or(second),
    }
}

#[cfg(test)]
mod tests;
