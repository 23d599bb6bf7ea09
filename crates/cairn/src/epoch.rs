//! Distributed epochs (Nibble §3.3, §4.3): knowing when no thread can still hold a reference
//! into memory that has been unlinked, so that memory can be reused.
//!
//! Job: every operation that may follow a reference it read from shared state (an index entry
//! pointing into a log segment, a pointer to an index table) runs inside a *pin*. A pin records
//! the current global epoch in the calling thread's own slot; the slot is one cache line that no
//! other thread writes, so pinning never writes a shared cache line (only the thread's own). A
//! reclaimer that unlinked something calls [`EpochTable::advance`] to get a *stamp*, and may free
//! the thing once [`EpochTable::safe_below`] is greater than that stamp, i.e. once every thread
//! that was pinned when the thing was unlinked has unpinned.
//!
//! The global epoch is a software counter that only reclaimers increment (rarely: once per
//! compacted segment or resized index partition), so on the read path it is a read of a cache
//! line that stays shared in every core's cache. Nibble uses the CPU time-stamp counter instead;
//! a counter is portable and its cost is the same here because readers never write it.
//!
//! Thread-safety contract: `EpochTable` is `Send + Sync`. Any thread may pin; guards are not
//! `Send` (a guard refers to the pinning thread's slot). Pins nest: an inner pin on the same
//! table while an outer one is alive is a no-op, so the slot keeps the older (smaller) epoch.
//!
//! Invariants:
//! 1. A slot holds `NOT_PINNED` (0) or the global epoch value the thread read when it pinned;
//!    epochs start at 1 and only grow.
//! 2. Pinning is `load global; store slot; fence(SeqCst)`; reclaiming is `unlink; advance (SeqCst
//!    read-modify-write); fence(SeqCst); scan slots`. By the fence rule, either the scan sees the
//!    slot store, or every load the pinned thread makes after its fence sees the unlink. So a
//!    thread whose slot the scan did not see, or saw with a value above the stamp, cannot reach
//!    the unlinked thing.
//! 3. `safe_below()` never exceeds the smallest pinned slot, and never exceeds the current global
//!    epoch; a stamp `s` returned by `advance` is below the global epoch from then on.
//! 4. At most `MAX_SLOT_THREADS` threads get a private slot; further threads record their epoch
//!    in a mutex-protected overflow list (slower, still correct).
//!
//! `EpochTable::check_invariants` checks 1 and 3 (the parts that hold under concurrent pins);
//! with the `invariants` feature every `advance` runs it.

use crate::sync::{fence, AtomicU64, Ordering};
#[cfg(not(loom))]
use std::cell::Cell;
// The slot registry is process-wide bookkeeping outside the modelled protocol, so it keeps std
// atomics even under loom (loom atomics cannot live in statics).
use std::sync::atomic::AtomicUsize;
use std::sync::Mutex;

/// Value of a slot whose thread is not inside a pinned section.
const NOT_PINNED: u64 = 0;

/// Threads that get a private cache-line slot in every table; later threads use the overflow list.
#[cfg(not(loom))]
pub const MAX_SLOT_THREADS: usize = 512;
/// Threads that get a private slot (a loom model has at most 5 threads).
#[cfg(loom)]
pub const MAX_SLOT_THREADS: usize = 8;

/// One cache line holding one value, so neighbouring slots never share a line.
#[derive(Debug, Default)]
#[repr(align(64))]
pub struct CachePadded<T>(pub T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Process-wide assignment of slot indexes to threads. An index is handed back when its thread
/// exits, so a process that keeps creating short-lived threads does not run out.
#[cfg(not(loom))]
struct SlotRegistry {
    free: Mutex<Vec<usize>>,
    next: AtomicUsize,
}

#[cfg(not(loom))]
static REGISTRY: SlotRegistry = SlotRegistry {
    free: Mutex::new(Vec::new()),
    next: AtomicUsize::new(0),
};

/// Highest slot index ever handed out plus one: reclaimers scan only this prefix.
#[cfg(not(loom))]
static SLOTS_IN_USE: AtomicUsize = AtomicUsize::new(0);

#[cfg(not(loom))]
struct ThreadSlot {
    index: Option<usize>,
}

#[cfg(not(loom))]
impl ThreadSlot {
    fn acquire() -> Self {
        let reused = REGISTRY.free.lock().ok().and_then(|mut free| free.pop());
        let index = reused.or_else(|| {
            let index = REGISTRY.next.fetch_add(1, Ordering::Relaxed);
            if index < MAX_SLOT_THREADS {
                SLOTS_IN_USE.fetch_max(index + 1, Ordering::SeqCst);
                Some(index)
            } else {
                // Keep the counter from growing without bound.
                REGISTRY.next.fetch_sub(1, Ordering::Relaxed);
                None
            }
        });
        ThreadSlot { index }
    }
}

#[cfg(not(loom))]
impl Drop for ThreadSlot {
    fn drop(&mut self) {
        // Pins made later on this thread (from other thread-locals' destructors) must not
        // use the cached index once another thread can take it: they fall back to the
        // overflow list. The cache has no destructor, so it is still reachable here.
        let _ = THREAD_SLOT_INDEX.try_with(|cell| cell.set(usize::MAX - 1));
        if let Some(index) = self.index {
            if let Ok(mut free) = REGISTRY.free.lock() {
                free.push(index);
            }
        }
    }
}

#[cfg(not(loom))]
thread_local! {
    static THREAD_SLOT: ThreadSlot = ThreadSlot::acquire();
    /// Cached copy of the slot index (`usize::MAX` = not yet looked up, `usize::MAX - 1` = none).
    static THREAD_SLOT_INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
}

// Loom runs its model threads on one OS thread and replays every execution, so under loom the
// slot is a loom thread-local numbered by a per-execution counter: the same schedule gives the
// same slots, whatever other tests do with the process-wide registry.
#[cfg(loom)]
loom::lazy_static! {
    static ref LOOM_NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);
}

#[cfg(loom)]
loom::thread_local! {
    static LOOM_SLOT: usize = LOOM_NEXT_SLOT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

#[cfg(loom)]
fn current_thread_slot() -> Option<usize> {
    LOOM_SLOT
        .try_with(|index| *index)
        .ok()
        .filter(|&index| index < MAX_SLOT_THREADS)
}

/// Slots a reclaimer must scan.
#[cfg(not(loom))]
fn slots_in_use() -> usize {
    SLOTS_IN_USE.load(std::sync::atomic::Ordering::SeqCst)
}

/// Under loom every slot is scanned, so replays of one schedule make the same loads.
#[cfg(loom)]
fn slots_in_use() -> usize {
    MAX_SLOT_THREADS
}

#[cfg(not(loom))]
fn current_thread_slot() -> Option<usize> {
    let cached = THREAD_SLOT_INDEX
        .try_with(Cell::get)
        .unwrap_or(usize::MAX - 1);
    match cached {
        usize::MAX => {
            let index = THREAD_SLOT.try_with(|slot| slot.index).ok().flatten();
            let _ = THREAD_SLOT_INDEX.try_with(|cell| cell.set(index.unwrap_or(usize::MAX - 1)));
            index
        }
        value if value == usize::MAX - 1 => None,
        value => Some(value),
    }
}

/// The epoch table of one store: a global epoch and one slot per thread.
#[derive(Debug)]
pub struct EpochTable {
    global: CachePadded<AtomicU64>,
    slots: Box<[CachePadded<AtomicU64>]>,
    overflow: Mutex<Vec<u64>>,
}

impl Default for EpochTable {
    fn default() -> Self {
        Self::new()
    }
}

impl EpochTable {
    /// Creates a table with every slot unpinned and the global epoch at 1.
    pub fn new() -> Self {
        EpochTable {
            global: CachePadded(AtomicU64::new(1)),
            slots: (0..MAX_SLOT_THREADS)
                .map(|_| CachePadded(AtomicU64::new(NOT_PINNED)))
                .collect(),
            overflow: Mutex::new(Vec::new()),
        }
    }

    /// Enters a pinned section; everything reachable from shared state stays allocated until the
    /// guard is dropped.
    pub fn pin(&self) -> EpochGuard<'_> {
        // Loom models never use the overflow list (its mutex is invisible to loom).
        #[cfg(loom)]
        assert!(
            current_thread_slot().is_some(),
            "loom thread without a slot"
        );
        match current_thread_slot().and_then(|index| self.slots.get(index)) {
            Some(slot) => {
                if slot.load(Ordering::Relaxed) != NOT_PINNED {
                    // Nested pin: the outer guard's older epoch already protects us.
                    return EpochGuard {
                        table: self,
                        kind: GuardKind::Nested,
                        _pinned_here: std::marker::PhantomData,
                    };
                }
                let epoch = self.global.load(Ordering::SeqCst);
                // Release, not `SeqCst`: the fence below orders it against later loads
                // (invariant 2), and a `SeqCst` store would be a second full barrier on x86
                // (an `xchg`). Not relaxed: a reclaimer that reads this slot must also see
                // this thread's reads of its previous pin as done (a plain `mov` on x86).
                slot.store(epoch, Ordering::Release);
                // Invariant 2: order the slot store before every load of shared state.
                fence(Ordering::SeqCst);
                EpochGuard {
                    table: self,
                    kind: GuardKind::Slot(slot),
                    _pinned_here: std::marker::PhantomData,
                }
            }
            None => {
                // Same order as a slot: read the epoch, publish it, fence. The mutex only guards
                // the list (no atomic of the protocol is touched while it is held).
                let epoch = self.global.load(Ordering::SeqCst);
                self.overflow
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(epoch);
                fence(Ordering::SeqCst);
                EpochGuard {
                    table: self,
                    kind: GuardKind::Overflow(epoch),
                    _pinned_here: std::marker::PhantomData,
                }
            }
        }
    }

    /// Called after unlinking something: returns the stamp to retire it with.
    pub fn advance(&self) -> u64 {
        let stamp = self.global.fetch_add(1, Ordering::SeqCst);
        // Rare (once per retired segment or table) and a scan of the slots in use: cheap.
        #[cfg(feature = "invariants")]
        if let Err(broken) = self.check_invariants() {
            panic!("epoch table broke an invariant: {broken}");
        }
        stamp
    }

    /// Checks invariants 1 and 3 (the parts that hold while other threads pin and unpin):
    /// every pinned slot and overflow entry holds an epoch in `1..=global`, and `safe_below()`
    /// does not exceed the global epoch.
    #[cfg(any(test, feature = "invariants"))]
    pub fn check_invariants(&self) -> Result<(), String> {
        let in_use = slots_in_use().min(self.slots.len());
        let mut pinned: Vec<(String, u64)> = Vec::new();
        for (index, slot) in self.slots.iter().take(in_use).enumerate() {
            let epoch = slot.load(Ordering::SeqCst);
            if epoch != NOT_PINNED {
                pinned.push((format!("slot {index}"), epoch));
            }
        }
        for &epoch in self
            .overflow
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
        {
            pinned.push(("an overflow entry".to_string(), epoch));
        }
        // Read after the slots: the global epoch only grows, so every epoch read above that a
        // thread took from it is at most this value.
        let global = self.global.load(Ordering::SeqCst);
        if global == 0 {
            return Err("invariant 1: the global epoch is 0".to_string());
        }
        if let Some((holder, epoch)) = pinned.iter().find(|(_, epoch)| *epoch > global) {
            return Err(format!(
                "invariant 1: {holder} is pinned at {epoch}, above the global epoch {global}"
            ));
        }
        let safe = self.safe_below();
        let global = self.global.load(Ordering::SeqCst);
        if safe > global {
            return Err(format!(
                "invariant 3: safe_below {safe} exceeds the global epoch {global}"
            ));
        }
        Ok(())
    }

    /// Test hook: stores `epoch` in this thread's slot as if it had pinned there, so a test can
    /// break invariant 1 and watch the check fire. Clears the slot when `epoch` is 0.
    #[cfg(all(test, not(loom)))]
    fn force_slot(&self, epoch: u64) {
        if let Some(slot) = current_thread_slot().and_then(|index| self.slots.get(index)) {
            slot.store(epoch, Ordering::SeqCst);
        }
    }

    #[cfg(test)]
    /// Current global epoch (for tests and diagnostics).
    pub fn current(&self) -> u64 {
        self.global.load(Ordering::SeqCst)
    }

    /// Everything retired with a stamp strictly below the returned value may be freed.
    pub fn safe_below(&self) -> u64 {
        // Invariant 2: the scan must not be reordered before the unlink / advance.
        fence(Ordering::SeqCst);
        let mut minimum = self.global.load(Ordering::SeqCst);
        let in_use = slots_in_use().min(self.slots.len());
        for slot in self.slots.iter().take(in_use) {
            let epoch = slot.load(Ordering::SeqCst);
            if epoch != NOT_PINNED && epoch < minimum {
                minimum = epoch;
            }
        }
        let overflow = self
            .overflow
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for &epoch in overflow.iter() {
            minimum = minimum.min(epoch);
        }
        minimum
    }

    #[cfg(test)]
    /// True when something retired with `stamp` can no longer be reached by any thread.
    pub fn is_safe(&self, stamp: u64) -> bool {
        stamp < self.safe_below()
    }
}

#[derive(Debug)]
enum GuardKind<'table> {
    Slot(&'table AtomicU64),
    Overflow(u64),
    Nested,
}

/// Proof that the current thread is pinned; unpins on drop.
#[derive(Debug)]
pub struct EpochGuard<'table> {
    table: &'table EpochTable,
    kind: GuardKind<'table>,
    /// Not `Send`: the guard unpins the slot of the thread that pinned (module contract).
    _pinned_here: std::marker::PhantomData<*const ()>,
}

impl Drop for EpochGuard<'_> {
    fn drop(&mut self) {
        match self.kind {
            GuardKind::Slot(slot) => slot.store(NOT_PINNED, Ordering::Release),
            GuardKind::Overflow(epoch) => {
                let mut overflow = self
                    .table
                    .overflow
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if let Some(position) = overflow.iter().position(|&value| value == epoch) {
                    overflow.swap_remove(position);
                }
            }
            GuardKind::Nested => {}
        }
    }
}

// The loom build runs only `loom_tests` (these use real threads).
#[cfg(test)]
#[cfg(not(loom))]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// Set by `LateReader`'s destructor: the slot the exiting thread would pin with.
    static LATE_SLOT: std::sync::Mutex<Vec<Option<usize>>> = std::sync::Mutex::new(Vec::new());

    /// A thread-local registered before the thread's epoch slot, so its destructor runs
    /// after the slot's (destructors run in reverse order of registration).
    struct LateReader;

    impl Drop for LateReader {
        fn drop(&mut self) {
            if let Ok(mut late) = LATE_SLOT.lock() {
                late.push(current_thread_slot());
            }
        }
    }

    thread_local! {
        static LATE_READER: LateReader = const { LateReader };
    }

    /// Once a thread's slot went back to the free list, a later pin on that thread (from
    /// another thread-local's destructor, such as a store flushed on drop) must not use the
    /// cached index: a new thread may already own that slot, and two threads sharing one
    /// slot protect nothing.
    #[test]
    fn a_pin_after_the_threads_slot_was_freed_does_not_use_it() {
        std::thread::spawn(|| {
            LATE_READER.with(|_| {});
            let table = EpochTable::new();
            drop(table.pin());
            assert!(current_thread_slot().is_some());
        })
        .join()
        .unwrap();
        let late = std::mem::take(&mut *LATE_SLOT.lock().unwrap());
        assert_eq!(late, [None], "the freed slot was still cached");
    }

    #[test]
    fn the_check_catches_a_slot_pinned_above_the_global_epoch() {
        let table = EpochTable::new();
        table.advance();
        {
            let _guard = table.pin();
            table.check_invariants().unwrap();
        }
        table.force_slot(table.current() + 5);
        let broken = table.check_invariants().unwrap_err();
        table.force_slot(NOT_PINNED);
        assert!(broken.contains("invariant 1"), "{broken}");
        table.check_invariants().unwrap();
    }

    #[test]
    fn unpinned_table_is_safe_for_every_stamp() {
        let table = EpochTable::new();
        let stamp = table.advance();
        assert!(table.is_safe(stamp));
    }

    #[test]
    fn pin_blocks_reclamation_until_dropped() {
        let table = EpochTable::new();
        let guard = table.pin();
        let stamp = table.advance();
        assert!(!table.is_safe(stamp));
        {
            let _nested = table.pin();
            assert!(!table.is_safe(stamp));
        }
        // The nested guard must not have cleared the outer pin.
        assert!(!table.is_safe(stamp));
        drop(guard);
        assert!(table.is_safe(stamp));
    }

    #[test]
    fn pin_after_advance_does_not_block_older_stamp() {
        let table = EpochTable::new();
        let stamp = table.advance();
        let _guard = table.pin();
        assert!(table.is_safe(stamp));
        let later = table.advance();
        assert!(!table.is_safe(later));
    }

    /// Focused stress test of the epoch minimum (stands in for a loom model): readers repeatedly
    /// pin, load a shared pointer, and check the pointed-to cell is not poisoned; a reclaimer
    /// swaps the pointer, retires the old cell, and poisons it only once `is_safe` says so. A
    /// reader observing a poisoned cell means reclamation ran while a reference could be held.
    #[test]
    fn stress_reclaimer_never_frees_a_reachable_cell() {
        const CELLS: usize = 64;
        const LIVE: u64 = 1;
        const POISONED: u64 = 2;
        let table = Arc::new(EpochTable::new());
        let cells: Arc<Vec<AtomicU64>> = Arc::new((0..CELLS).map(|_| AtomicU64::new(0)).collect());
        let current = Arc::new(AtomicUsize::new(0));
        cells[0].store(LIVE, Ordering::SeqCst);
        let stop = Arc::new(AtomicBool::new(false));
        let violations = Arc::new(AtomicU64::new(0));
        let mut readers = Vec::new();
        for _ in 0..3 {
            let (table, cells, current, stop, violations) = (
                table.clone(),
                cells.clone(),
                current.clone(),
                stop.clone(),
                violations.clone(),
            );
            readers.push(std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let _guard = table.pin();
                    let index = current.load(Ordering::SeqCst);
                    for _ in 0..8 {
                        if cells[index].load(Ordering::SeqCst) == POISONED {
                            violations.fetch_add(1, Ordering::SeqCst);
                        }
                        std::hint::spin_loop();
                    }
                }
            }));
        }
        let mut retired: Vec<(usize, u64)> = Vec::new();
        let mut free: Vec<usize> = (1..CELLS).collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(1500);
        let mut swaps = 0u64;
        while std::time::Instant::now() < deadline {
            if let Some(next) = free.pop() {
                cells[next].store(LIVE, Ordering::SeqCst);
                let old = current.swap(next, Ordering::SeqCst);
                let stamp = table.advance();
                retired.push((old, stamp));
                swaps += 1;
            }
            let safe_below = table.safe_below();
            retired.retain(|&(cell, stamp)| {
                if stamp < safe_below {
                    cells[cell].store(POISONED, Ordering::SeqCst);
                    free.push(cell);
                    false
                } else {
                    true
                }
            });
        }
        stop.store(true, Ordering::SeqCst);
        for reader in readers {
            reader.join().unwrap();
        }
        assert_eq!(violations.load(Ordering::SeqCst), 0);
        assert!(swaps > 100, "reclaimer made too little progress: {swaps}");
        table.check_invariants().unwrap();
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;

    const LIVE: u64 = 7;
    const FREED: u64 = 0xdead;

    /// Two objects and a shared "pointer" (the id of the current one), as an index entry
    /// points at a segment.
    struct Shared {
        table: EpochTable,
        current: crate::sync::AtomicUsize,
        objects: [UnsafeCell<u64>; 2],
    }

    impl Shared {
        fn new() -> Self {
            Shared {
                table: EpochTable::new(),
                current: crate::sync::AtomicUsize::new(0),
                objects: [UnsafeCell::new(LIVE), UnsafeCell::new(LIVE)],
            }
        }

        /// Reads object `id` (loom reports a causality violation if a free races with it).
        fn read(&self, id: usize) -> u64 {
            // SAFETY: loom's cell checks that no write (free) is concurrent with this read.
            self.objects[id].with(|value| unsafe { *value })
        }

        /// "Frees" object `id` by overwriting it.
        fn free(&self, id: usize) {
            // SAFETY: loom's cell checks that no read is concurrent with this write.
            self.objects[id].with_mut(|value| unsafe { *value = FREED });
        }
    }

    fn reader(shared: &Shared, nested: bool) {
        let guard = shared.table.pin();
        let inner = nested.then(|| shared.table.pin());
        // A nested guard dropped early must not unpin the outer one.
        drop(inner);
        let id = shared.current.load(Ordering::Acquire);
        assert_eq!(shared.read(id), LIVE, "reader reached a freed object");
        drop(guard);
    }

    /// A reader pins, reads the current object id, and uses the object; the reclaimer unlinks
    /// it, retires it with a stamp, and frees it only if the minimum epoch is past the stamp.
    /// The object is never freed while the reader can use it, and is freeable once the reader
    /// has unpinned.
    #[test]
    fn retired_object_is_freed_only_after_reader_unpins() {
        loom::model(|| {
            let shared = Arc::new(Shared::new());
            let reader_thread = {
                let shared = shared.clone();
                loom::thread::spawn(move || reader(&shared, false))
            };
            let old = shared.current.swap(1, Ordering::AcqRel);
            let stamp = shared.table.advance();
            let freed = shared.table.is_safe(stamp);
            if freed {
                shared.free(old);
            }
            reader_thread.join().expect("reader");
            assert!(
                shared.table.is_safe(stamp),
                "not freeable after the reader unpinned"
            );
            if !freed {
                shared.free(old);
            }
        });
    }

    /// Same with the reclaimer on its own thread polling the minimum epoch until it may free,
    /// and a reader that nests a second pin: the poll terminates, and the free never races the
    /// read.
    #[test]
    fn polling_reclaimer_frees_after_nested_reader() {
        loom::model(|| {
            let shared = Arc::new(Shared::new());
            let reclaimer = {
                let shared = shared.clone();
                loom::thread::spawn(move || {
                    let old = shared.current.swap(1, Ordering::AcqRel);
                    let stamp = shared.table.advance();
                    while !shared.table.is_safe(stamp) {
                        loom::thread::yield_now();
                    }
                    shared.free(old);
                })
            };
            reader(&shared, true);
            reclaimer.join().expect("reclaimer");
        });
    }
}
