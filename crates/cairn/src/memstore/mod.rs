//! `MemStore`: a concurrent in-memory key-value store on log-structured memory (Nibble).
//!
//! Job: bounded by `capacity_bytes`, keep every key's latest value in a multi-head log
//! ([`crate::logmem`]), found through the optimistic hash index ([`crate::hashindex`]), with
//! background threads compacting fragmented segments by cost-benefit and recycling them through
//! distributed epochs ([`crate::epoch`]). Resident memory follows the data: the log returns the
//! memory of free blocks that stay unused (`free_decay`, 1 s by default) to the operating
//! system, and the index keeps its tables 0.90–0.97 full
//! (a delete that leaves its index partition under half full rebuilds it smaller before
//! returning). See `docs/memstore.md` for byte layouts and protocols.
//!
//! Where things are: `mutate` (the one write path: put, delete, update, waiting for space),
//! `compactor` (background compaction, relocation and reclaiming), `invariants` (a check of
//! the index and the log against each other, under the `invariants` feature) and `tests`.
//!
//! Thread-safety contract: `MemStore` is `Send + Sync`; every method takes `&self` and may be
//! called from any number of threads. `get`/`contains` never write shared memory except the
//! calling thread's own epoch slot. Writers of different keys contend only on their log head
//! (one per thread, chosen by thread) and on index buckets they share.
//!
//! Invariants:
//! 1. Lock order: log head → index buckets (ascending) → leaf mutexes (block pool, segment
//!    lists). Compaction takes only buckets and leaf mutexes. Nothing blocks on space or epochs
//!    while holding a bucket lock or a pin, so writers waiting for compaction cannot stall it.
//! 2. An object's bytes are complete before its location is stored in the index (the bucket
//!    lock's release fence orders them), and a segment is sealed only by its head's owner between
//!    appends, so a sealed segment holds no object whose index update is still to come.
//! 3. Compaction re-points an entry only if it still holds the old location (checked under the
//!    bucket lock); otherwise the copy is counted dead. A compacted segment is retired only after
//!    every object in it was re-pointed or found dead, and reused only after the epoch passes.
//! 4. A write either completes (its location is in the index) or returns an error without
//!    changing the index; an appended object that was not linked is counted dead.
//! 5. Every wait is bounded: writers waiting for space give up with [`Error::Full`] after
//!    `full_wait_limit`; retry loops have fixed limits.

mod compactor;
#[cfg(any(test, feature = "invariants"))]
mod invariants;
mod mutate;
#[cfg(test)]
mod tests;

use crate::epoch::{CachePadded, EpochTable};
use crate::error::{Error, Result};
use crate::hashindex::{hash_key, HashIndex, KeyHasher};
use crate::logmem::object::object_len;
use crate::logmem::{Head, LogMemory, LogMemoryOptions};
use mutate::Mutation;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// Attempts of one write before giving up (each failed attempt made room or grew the index).
const MAX_WRITE_ATTEMPTS: usize = 64;
/// Victim segments compacted into one destination segment per round.
const MAX_VICTIMS_PER_ROUND: usize = 64;
/// Writers that must wait for space let compaction take segments up to this utilization.
const PRESSURE_MAX_UTILIZATION: f64 = 0.995;
thread_local! {
    /// Reused buffer for reading keys back from the log while resizing the index.
    static KEY_SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Largest key accepted (the brief's limit: 64 KiB).
pub const MAX_KEY_BYTES: usize = 64 * 1024;

/// Options of a [`MemStore`].
///
/// ```
/// let mut options = cairn::MemStoreOptions::default();
/// options.capacity_bytes = 64 << 20;
/// let store = cairn::MemStore::new(options)?;
/// # Ok::<(), cairn::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct MemStoreOptions {
    /// Bytes of log memory (objects, their headers and slack); the index is extra.
    pub capacity_bytes: usize,
    /// Log heads; writers on different heads append without contending.
    pub heads: usize,
    /// Largest segment (unit of compaction). Objects larger than this are rejected.
    pub segment_bytes: usize,
    /// Block size, a multiple of 4 KiB dividing `segment_bytes`.
    pub block_bytes: usize,
    /// Background compaction threads (0: writers compact when they run out of space).
    pub compaction_threads: usize,
    /// Index partitions (power of two, at most 256), each resized independently.
    pub index_partitions: usize,
    /// Initial buckets per index partition.
    pub index_initial_buckets: usize,
    /// Largest key (at most 64 KiB).
    pub max_key_bytes: usize,
    /// Largest value (also limited by `segment_bytes`).
    pub max_value_bytes: usize,
    /// Background compaction runs while the free fraction of capacity is below this.
    pub compaction_trigger_free_fraction: f64,
    /// Background compaction (without waiting writers) skips segments fuller than this.
    pub background_max_utilization: f64,
    /// Background compaction also runs while free space is plentiful, for sealed segments at
    /// most this full (0, the default, disables it). Copying at most `u / (1 - u)` bytes per
    /// byte freed, it keeps mostly-dead segments from holding resident memory after mass
    /// deletes in a log much larger than its live data; it costs compaction CPU in
    /// update-heavy workloads (YCSB A), and a log near its capacity is compacted anyway.
    pub eager_max_utilization: f64,
    /// How long a writer waits for compaction to free space before returning `Error::Full`.
    pub full_wait_limit: Duration,
    /// Most free log memory kept resident for reuse (default: no limit); the memory of further
    /// free blocks is returned to the operating system at once.
    pub resident_free_bytes: usize,
    /// Free log blocks unused for this long have their memory returned to the operating system
    /// by the compaction thread (default 1 s), so resident memory follows the bytes in use while
    /// a churning log still reuses warm blocks. Reusing a returned block costs page faults (one
    /// `MADV_POPULATE_WRITE` per block). Without compaction threads, only writers waiting for
    /// space and `compact_now` release idle blocks.
    pub free_decay: Duration,
}

impl Default for MemStoreOptions {
    fn default() -> Self {
        let parallelism = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        MemStoreOptions {
            capacity_bytes: 256 << 20,
            heads: parallelism,
            segment_bytes: 8 << 20,
            block_bytes: 64 << 10,
            compaction_threads: 1,
            index_partitions: 64,
            index_initial_buckets: 64,
            max_key_bytes: MAX_KEY_BYTES,
            max_value_bytes: 8 << 20,
            compaction_trigger_free_fraction: 0.2,
            background_max_utilization: 0.9,
            eager_max_utilization: 0.0,
            full_wait_limit: Duration::from_secs(10),
            resident_free_bytes: usize::MAX,
            free_decay: Duration::from_secs(1),
        }
    }
}

/// Accounting snapshot of a [`MemStore`].
///
/// ```
/// let store = cairn::MemStore::new(cairn::MemStoreOptions::default())?;
/// store.put("k", "v")?;
/// assert!(store.stats().live_bytes > 0);
/// # Ok::<(), cairn::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct MemStoreStats {
    /// Configured log capacity.
    pub capacity_bytes: u64,
    /// Bytes of live objects (header, key and value).
    pub live_bytes: u64,
    /// Bytes of log blocks attached to segments (live, dead and slack).
    pub used_bytes: u64,
    /// Log bytes that may be resident: blocks in use plus free blocks whose memory was not
    /// returned to the operating system.
    pub touched_bytes: u64,
    /// Free log bytes whose memory was returned to the operating system.
    pub released_bytes: u64,
    /// Bytes of index buckets (current tables plus retired ones not yet freed).
    pub index_bytes: u64,
    /// Entries in the index (one per key).
    pub index_entries: u64,
    /// Entry slots in the current index tables (`index_entries / index_slots` is the load).
    pub index_slots: u64,
    /// Index partition resizes (grow or shrink) so far.
    pub index_resizes: u64,
    /// Entries rehashed by those resizes (each reads its key from the log).
    pub index_rehashed_entries: u64,
    /// Time spent in index resizes, in nanoseconds.
    pub index_resize_nanos: u64,
    /// Segments in use (heads, sealed, compacting, awaiting reclamation).
    pub segments: u64,
    /// Segments awaiting the epoch before reuse.
    pub retired_segments: u64,
    /// Segments compacted so far.
    pub compactions: u64,
    /// Object bytes copied by compaction.
    pub relocated_bytes: u64,
    /// Time writers spent waiting for space, in nanoseconds.
    pub writer_wait_nanos: u64,
    /// Writes refused with `Error::Full`.
    pub full_errors: u64,
}

#[derive(Debug, Default)]
struct Counters {
    compactions: AtomicU64,
    relocated_bytes: AtomicU64,
    writer_wait_nanos: AtomicU64,
    full_errors: AtomicU64,
}

#[derive(Debug)]
struct Inner {
    options: MemStoreOptions,
    epochs: EpochTable,
    index: HashIndex,
    log: LogMemory,
    heads: Box<[CachePadded<Mutex<Head>>]>,
    compaction_slots: Box<[Mutex<()>]>,
    shutdown: AtomicBool,
    wake_lock: Mutex<()>,
    wake: Condvar,
    waiting_writers: AtomicUsize,
    counters: Counters,
}

/// The in-memory log-structured store. Dropping it stops the compaction threads. `Send +
/// Sync`; its operations have the shapes of [`crate::Db`]'s.
///
/// ```
/// let store = cairn::MemStore::new(cairn::MemStoreOptions::default())?;
/// store.put("k", "v")?;
/// assert_eq!(store.update("k", |_| Some(b"w".to_vec()))?, Some(b"w".to_vec()));
/// store.delete("k")?;
/// assert!(!store.contains("k")?);
/// # Ok::<(), cairn::Error>(())
/// ```
#[derive(Debug)]
pub struct MemStore {
    inner: Arc<Inner>,
    compactors: Vec<JoinHandle<()>>,
}
static NEXT_THREAD_NUMBER: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static THREAD_NUMBER: usize = NEXT_THREAD_NUMBER.fetch_add(1, Ordering::Relaxed);
}

/// Checks the options `MemStore::new` depends on; returns the log reserve for compaction.
fn validate_options(options: &MemStoreOptions) -> Result<usize> {
    let invalid = |message: String| Err(Error::InvalidArgument(message));
    if options.heads == 0 || options.heads > 1024 {
        return invalid(format!("heads ({}) must be in 1..=1024", options.heads));
    }
    if options.compaction_threads > 64 {
        return invalid(format!(
            "compaction_threads ({}) must be at most 64",
            options.compaction_threads
        ));
    }
    if options.max_key_bytes > MAX_KEY_BYTES {
        return invalid(format!(
            "max_key_bytes ({}) must be at most {MAX_KEY_BYTES}",
            options.max_key_bytes
        ));
    }
    // Each concurrent compaction may need up to one segment of destination space. Checked:
    // an absurd `segment_bytes` is an error here, not an overflow.
    let slots = options.compaction_threads.max(1);
    let reserve_bytes = slots.checked_mul(options.segment_bytes);
    let headroom = options
        .heads
        .checked_add(2)
        .and_then(|segments| segments.checked_mul(options.segment_bytes))
        .zip(reserve_bytes)
        .and_then(|(heads, reserve)| heads.checked_add(reserve));
    let (Some(reserve_bytes), Some(headroom)) = (reserve_bytes, headroom) else {
        return invalid(format!(
            "segment_bytes ({}) times the heads and compaction slots overflows",
            options.segment_bytes
        ));
    };
    if options.capacity_bytes < headroom {
        return invalid(format!(
            "capacity_bytes ({}) must be at least (heads + 2 + compaction slots) x segment_bytes = {headroom}",
            options.capacity_bytes
        ));
    }
    Ok(reserve_bytes)
}

fn lock_ignoring_poison<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `try_lock` that takes a poisoned mutex too: a head whose writer panicked (an `update`
/// closure) is whole (the closure runs before its append) and must stay usable, and
/// sealable, or its segment's garbage is never reclaimed. None only while another holds it.
fn try_lock_ignoring_poison<T>(mutex: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match mutex.try_lock() {
        Ok(guard) => Some(guard),
        Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

impl MemStore {
    /// Creates a store and starts its compaction threads.
    pub fn new(options: MemStoreOptions) -> Result<Self> {
        let reserve_bytes = validate_options(&options)?;
        let compaction_slots = options.compaction_threads.max(1);
        let log = LogMemory::new(LogMemoryOptions {
            capacity_bytes: options.capacity_bytes,
            segment_bytes: options.segment_bytes,
            block_bytes: options.block_bytes,
            reserve_bytes,
            resident_free_bytes: options.resident_free_bytes,
            free_decay: options.free_decay,
        })?;
        let inner = Arc::new(Inner {
            epochs: EpochTable::new(),
            index: HashIndex::new(
                options.index_partitions,
                options.index_initial_buckets,
                log.location_bits(),
            )?,
            log,
            heads: (0..options.heads)
                .map(|_| CachePadded(Mutex::new(Head::new())))
                .collect(),
            compaction_slots: (0..compaction_slots).map(|_| Mutex::new(())).collect(),
            shutdown: AtomicBool::new(false),
            wake_lock: Mutex::new(()),
            wake: Condvar::new(),
            waiting_writers: AtomicUsize::new(0),
            counters: Counters::default(),
            options,
        });
        let mut compactors = Vec::new();
        for number in 0..inner.options.compaction_threads {
            let worker = inner.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("cairn-compact-{number}"))
                .spawn(move || worker.compaction_loop());
            match spawned {
                Ok(handle) => compactors.push(handle),
                Err(error) => {
                    let store = MemStore { inner, compactors };
                    drop(store);
                    return Err(Error::io("spawn compaction thread", "", error));
                }
            }
        }
        Ok(MemStore { inner, compactors })
    }

    /// Stores `value` under `key`, replacing any previous value.
    ///
    /// ```
    /// let store = cairn::MemStore::new(cairn::MemStoreOptions::default())?;
    /// store.put("k", "v")?;
    /// assert_eq!(store.get("k")?, Some(b"v".to_vec()));
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.inner.check_sizes(key, value.len())?;
        self.inner.mutate(key, Mutation::Put(value)).map(|_| ())
    }

    /// Refuses, with the error [`put`](MemStore::put) would return, a key or a value length
    /// over this store's limits, without writing anything: a caller applying several writes
    /// checks them all before the first.
    ///
    /// ```
    /// let store = cairn::MemStore::new(cairn::MemStoreOptions::default())?;
    /// assert!(store.check_put("k", 1024).is_ok());
    /// assert!(matches!(
    ///     store.check_put("k", 1 << 30),
    ///     Err(cairn::Error::InvalidArgument(_))
    /// ));
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn check_put(&self, key: impl AsRef<[u8]>, value_bytes: usize) -> Result<()> {
        self.inner.check_sizes(key.as_ref(), value_bytes)
    }

    /// Returns a copy of the value stored under `key`.
    ///
    /// ```
    /// let store = cairn::MemStore::new(cairn::MemStoreOptions::default())?;
    /// assert_eq!(store.get("missing")?, None);
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_head(key, usize::MAX)
    }

    /// Returns a copy of at most the first `bytes_max` bytes of the value stored under `key`;
    /// the rest of the value is not read. For listings that need a short header of each value
    /// (a type tag, an expiry) without paying for values of any size.
    ///
    /// ```
    /// let store = cairn::MemStore::new(cairn::MemStoreOptions::default())?;
    /// store.put("k", "header:body")?;
    /// assert_eq!(store.get_head("k", 6)?.as_deref(), Some(&b"header"[..]));
    /// assert_eq!(store.get_head("k", 100)?.as_deref(), Some(&b"header:body"[..]));
    /// assert_eq!(store.get_head("missing", 6)?, None);
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn get_head(&self, key: impl AsRef<[u8]>, bytes_max: usize) -> Result<Option<Vec<u8>>> {
        let key = key.as_ref();
        self.inner.check_key(key)?;
        let hash = hash_key(key);
        let guard = self.inner.epochs.pin();
        let location = self.inner.index.lookup(&guard, hash, |location| {
            self.inner.log.key_equals(location, key)
        });
        Ok(location.and_then(|location| {
            let mut value = Vec::new();
            self.inner
                .log
                .read_value_head(location, bytes_max, &mut value)
                .map(|_| value)
        }))
    }

    /// True when `key` has a value.
    ///
    /// ```
    /// let store = cairn::MemStore::new(cairn::MemStoreOptions::default())?;
    /// store.put("k", "v")?;
    /// assert!(store.contains("k")?);
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn contains(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        let key = key.as_ref();
        self.inner.check_key(key)?;
        let hash = hash_key(key);
        let guard = self.inner.epochs.pin();
        Ok(self
            .inner
            .index
            .lookup(&guard, hash, |location| {
                self.inner.log.key_equals(location, key)
            })
            .is_some())
    }

    /// Removes `key` (absent keys may be deleted); returns nothing, like
    /// [`Db::delete`](crate::Db::delete). [`MemStore::remove`] also says whether it existed.
    ///
    /// ```
    /// let store = cairn::MemStore::new(cairn::MemStoreOptions::default())?;
    /// store.put("k", "v")?;
    /// store.delete("k")?;
    /// assert_eq!(store.get("k")?, None);
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.remove(key).map(|_| ())
    }

    /// Removes `key`; returns whether it had a value.
    ///
    /// ```
    /// let store = cairn::MemStore::new(cairn::MemStoreOptions::default())?;
    /// store.put("k", "v")?;
    /// assert!(store.remove("k")?);
    /// assert!(!store.remove("k")?);
    /// # Ok::<(), cairn::Error>(())
    /// ```
    #[must_use = "use `delete` when whether the key existed does not matter"]
    pub fn remove(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        let key = key.as_ref();
        self.inner.check_key(key)?;
        self.inner.mutate(key, Mutation::Delete)
    }

    /// Atomic read-modify-write of one key: `f` gets the current value (or `None`) and returns
    /// the new one (or `None` to delete); returns the value now stored, like
    /// [`Db::update`](crate::Db::update). No other write to the key happens between the read
    /// and the write. `f` runs while the key's index buckets are locked: keep it short and do
    /// not call back into the store. `f` may run more than once if the write must first wait
    /// for space; only the last result is stored.
    ///
    /// ```
    /// let store = cairn::MemStore::new(cairn::MemStoreOptions::default())?;
    /// let bump = |current: Option<&[u8]>| Some(vec![current.map_or(0, |value| value[0]) + 1]);
    /// assert_eq!(store.update("n", bump)?, Some(vec![1]));
    /// assert_eq!(store.update("n", bump)?, Some(vec![2]));
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn update<F>(&self, key: impl AsRef<[u8]>, mut f: F) -> Result<Option<Vec<u8>>>
    where
        F: FnMut(Option<&[u8]>) -> Option<Vec<u8>>,
    {
        let key = key.as_ref();
        self.inner.check_key(key)?;
        // The value is returned by copy: the stored one may move as soon as the bucket lock
        // is released. Only the last run of `f` is stored, so only its result is kept.
        let mut stored = None;
        let mut run = |current: Option<&[u8]>| {
            let value = f(current);
            stored.clone_from(&value);
            value
        };
        self.inner.mutate(key, Mutation::Update(&mut run))?;
        Ok(stored)
    }

    /// Accounting snapshot.
    pub fn stats(&self) -> MemStoreStats {
        let log = self.inner.log.stats();
        let resizes = self.inner.index.resize_stats();
        let counters = &self.inner.counters;
        MemStoreStats {
            capacity_bytes: log.capacity_bytes,
            live_bytes: log.live_bytes,
            used_bytes: log.used_bytes,
            touched_bytes: log.touched_bytes,
            released_bytes: log.released_bytes,
            index_bytes: (self.inner.index.memory_bytes() + self.inner.index.retired_memory_bytes())
                as u64,
            index_entries: self.inner.index.entry_count() as u64,
            index_slots: self.inner.index.slot_count() as u64,
            index_resizes: resizes.resizes,
            index_rehashed_entries: resizes.rehashed_entries,
            index_resize_nanos: resizes.nanos,
            segments: log.segments,
            retired_segments: log.retired_segments,
            compactions: counters.compactions.load(Ordering::Relaxed),
            relocated_bytes: counters.relocated_bytes.load(Ordering::Relaxed),
            writer_wait_nanos: counters.writer_wait_nanos.load(Ordering::Relaxed),
            full_errors: counters.full_errors.load(Ordering::Relaxed),
        }
    }

    /// Seals idle heads and compacts every sealed segment whose utilization is at most
    /// `max_utilization`, then reclaims what the epoch allows. For tests and maintenance; returns
    /// the number of segments compacted.
    pub fn compact_now(&self, max_utilization: f64) -> usize {
        self.inner.seal_idle_heads(true);
        let before = self.inner.counters.compactions.load(Ordering::Relaxed);
        for _ in 0..1024 {
            if !self.inner.compact_round(max_utilization) {
                break;
            }
        }
        self.inner.reclaim();
        usize::try_from(self.inner.counters.compactions.load(Ordering::Relaxed) - before)
            .unwrap_or(usize::MAX)
    }
}

impl Drop for MemStore {
    fn drop(&mut self) {
        self.inner.shutdown.store(true, Ordering::SeqCst);
        {
            let _lock = lock_ignoring_poison(&self.inner.wake_lock);
            self.inner.wake.notify_all();
        }
        for handle in self.compactors.drain(..) {
            let _ = handle.join();
        }
    }
}

impl Inner {
    fn check_key(&self, key: &[u8]) -> Result<()> {
        if key.len() > self.options.max_key_bytes {
            return Err(Error::InvalidArgument(format!(
                "key of {} bytes exceeds max_key_bytes ({})",
                key.len(),
                self.options.max_key_bytes
            )));
        }
        Ok(())
    }

    fn check_sizes(&self, key: &[u8], value_len: usize) -> Result<()> {
        self.check_key(key)?;
        // Checked before `object_len`, whose sum could overflow for a value near `usize::MAX`.
        if value_len > self.options.max_value_bytes
            || value_len as u64 > self.log.max_object_bytes()
            || object_len(key.len(), value_len) > self.log.max_object_bytes()
        {
            return Err(Error::InvalidArgument(format!(
                "value of {value_len} bytes exceeds max_value_bytes ({}) or does not fit a segment ({} bytes)",
                self.options.max_value_bytes,
                self.log.max_object_bytes()
            )));
        }
        Ok(())
    }

    fn lock_head(&self) -> MutexGuard<'_, Head> {
        let count = self.heads.len().max(1);
        let preferred = THREAD_NUMBER.try_with(|number| *number).unwrap_or(0) % count;
        for step in 0..count {
            if let Some(head) = self.heads.get((preferred + step) % count) {
                if let Some(guard) = try_lock_ignoring_poison(&head.0) {
                    return guard;
                }
            }
        }
        // Every head is busy: wait for our own. `heads` is never empty (checked in `new`).
        match self.heads.get(preferred).or_else(|| self.heads.first()) {
            Some(head) => lock_ignoring_poison(&head.0),
            None => unreachable!("a MemStore has at least one head"),
        }
    }

    fn full(&self) -> Error {
        self.counters.full_errors.fetch_add(1, Ordering::Relaxed);
        Error::Full {
            capacity_bytes: self.log.stats().capacity_bytes,
        }
    }

    /// Key hash of the object at `location` (for moving index entries). Caller is pinned.
    fn hash_at(&self, location: u64) -> u64 {
        let hash_with = |key: &mut Vec<u8>| {
            self.log
                .with_key(location, key, hash_key)
                .unwrap_or_else(|| hash_key(&[]))
        };
        // `try_with`: a write from a thread-local destructor may run after the scratch
        // buffer's own destructor (a panic there would abort the process).
        KEY_SCRATCH
            .try_with(|scratch| {
                let mut key = scratch.take();
                let hash = hash_with(&mut key);
                scratch.set(key);
                hash
            })
            .unwrap_or_else(|_| hash_with(&mut Vec::new()))
    }
}

/// The index's view of the log: key hashes of stored objects, with prefetch hints for resizes.
struct LogKeys<'a>(&'a Inner);

impl KeyHasher for LogKeys<'_> {
    fn hash_at(&mut self, location: u64) -> u64 {
        self.0.hash_at(location)
    }

    fn prefetch(&mut self, location: u64) {
        self.0.log.prefetch(location);
    }
}

fn destination_offset(head: &Head, segment_bytes: u64) -> u64 {
    head.offset_in_segment()
        .map_or(0, |offset| offset.min(segment_bytes))
}
