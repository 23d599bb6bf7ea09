//! `Db`: the persistent store's public API. Each method is thin and delegates to the step
//! that implements it: `open` (open and WAL recovery), `write` (the write path), `read`
//! (point reads and iterators), `rmw` (read-modify-write), `flush`, `compact` (the
//! compaction loop and obsolete-file deletion), over the shared state in `inner` and the
//! RCU-published `super_version`. The memory component lives in `crate::memory`.
//!
//! Steps are numbered in `ARCHITECTURE.md`; this doc states the contract.
//!
//! Thread-safety contract: `Db` is `Send + Sync`; every method may be called from any thread,
//! and no client operation takes a lock on its fast path (cLSM §3):
//! - Reads (`get`, iterators, snapshots) load the visible sequence (two atomics) and the
//!   current [`SuperVersion`] (an `ArcSwap`, RCU-style), then read immutable or
//!   concurrently-readable structures.
//! - Writes reserve their sequence numbers and WAL space together in the active write
//!   buffer's log (`wal_writer`, one compare-and-swap), copy their record and insert into the
//!   memory component in parallel, share group-commit writes and syncs, and publish through
//!   the watermark (`sequence`). A writer waits only for other writers' progress: lower
//!   sequences to finish, the group-commit leader's I/O, or a buffer switch in progress.
//! - Read-modify-write is optimistic (cLSM Algorithm 3): read, compute, reserve, then validate
//!   that no version was written in between; on a conflict the reservation is logged as a
//!   void record and the operation retries. It never sleeps while it holds a sequence (see
//!   `DbInner::read_modify_write` in `rmw`).
//! - Background threads hold `versions` across MANIFEST I/O; clients never take it.
//!   `super_version_update` is held only for pointer swaps.
//!
//! Lock order: `compaction_lock` → `versions` → `super_version_update`; `background`
//! (condition-variable state only, used when a writer must stall), `pending_outputs` and
//! `sticky_error` are leaves: taken under any of the others, never holding another.
//!
//! Invariants:
//! 1. Every write with sequence <= `visible()` is fully in some write buffer of the current
//!    super version or in a table of its version, and its WAL record is written.
//! 2. A super version's sealed write buffers are ordered newest first and hold disjoint,
//!    increasing sequence ranges: all sequences of a newer buffer exceed all of an older
//!    one (the log seal hands the next log the next sequence).
//! 3. A buffer leaves the super version only in the same swap that installs a version
//!    holding its flushed table (after the MANIFEST edit is durable), and is flushed only
//!    once its last sequence is visible — which implies no writer is inside it, because a
//!    writer holds an unfinished sequence from its reservation until its inserts are done.
//! 4. A WAL is deleted only when its number is below the MANIFEST's durable `log_number`.

mod compact;
mod flush;
mod inner;
mod multi_get;
mod open;
mod parallel_get;
mod read;
mod rmw;
mod super_version;
#[cfg(all(test, not(loom)))]
mod tests;
mod write;

use crate::batch::WriteBatch;
use crate::db_iter::{DbIterator, RangeIter};
use crate::error::Result;
use crate::key::SequenceNumber;
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::snapshot::Snapshot;
use crate::stats::Stats;
use inner::{lock, DbInner};
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

pub use super_version::SuperVersion;

/// What a read-modify-write function decides to do with the current value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Update {
    /// Leave the key as it is (nothing is written).
    Keep,
    /// Store this value.
    Put(Vec<u8>),
    /// Delete the key.
    Delete,
}

/// A persistent key-value store. See the module documentation for the concurrency contract.
pub struct Db {
    inner: Arc<DbInner>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Db")
            .field("directory", &self.inner.directory)
            .finish()
    }
}

impl Db {
    /// Opens (creating if allowed) the database in `path`, recovering from its MANIFEST and
    /// WALs. Fails with [`Error::Locked`](crate::Error::Locked) if another handle has it open.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let inner = open::open_inner(path.as_ref(), options)?;
        let threads = open::spawn_background(&inner)?;
        Ok(Db { inner, threads })
    }

    /// Sets `key` to `value`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_with(&WriteOptions::default(), key, value)
    }

    /// Sets `key` to `value` with explicit write options.
    pub fn put_with(&self, options: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        self.write(options, WriteBatch::single_put(key, value))
    }

    /// Removes `key` (a tombstone; absent keys may be deleted).
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.delete_with(&WriteOptions::default(), key)
    }

    /// Removes `key` with explicit write options.
    pub fn delete_with(&self, options: &WriteOptions, key: &[u8]) -> Result<()> {
        self.write(options, WriteBatch::single_delete(key))
    }

    /// Applies `batch` atomically: a reader at any snapshot sees all of it or none.
    pub fn write(&self, options: &WriteOptions, batch: WriteBatch) -> Result<()> {
        self.inner.write(options, batch).map(|_| ())
    }

    /// Like [`Db::write`], returning the sequence number of the batch's last entry (tests use
    /// it to reconstruct histories).
    #[cfg(any(test, feature = "testing"))]
    #[doc(hidden)]
    pub fn write_with_sequence(
        &self,
        options: &WriteOptions,
        batch: WriteBatch,
    ) -> Result<SequenceNumber> {
        self.inner.write(options, batch)
    }

    /// The value of `key` in the latest state.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(key, None)
    }

    /// The values of several keys in the latest state, in the order given (`None` for a key
    /// that is absent). All answers come from one consistent state, as if read at one
    /// instant. Cheaper than one `get` per key when many keys miss the memory component:
    /// the keys are sorted and each table is visited once for all the keys in its range,
    /// so keys sharing a data block share its read.
    ///
    /// ```
    /// let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// db.put(b"a", b"1")?;
    /// db.put(b"c", b"3")?;
    /// db.flush()?;
    /// let keys: [&[u8]; 3] = [b"c", b"b", b"a"];
    /// let values = db.multi_get(&keys)?;
    /// assert_eq!(values, vec![Some(b"3".to_vec()), None, Some(b"1".to_vec())]);
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn multi_get(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        self.inner.multi_get(keys, None)
    }

    /// The value of `key` as of `snapshot`.
    pub fn get_at(&self, snapshot: &Snapshot, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(key, Some(snapshot.sequence()))
    }

    /// Atomically replaces the value of `key` with `f(current)` (`None` deletes) and returns
    /// the new value. `f` runs outside any lock and may run more than once if another write to
    /// `key` races it (see `read_modify_write` in the source); the call takes no lock but may
    /// wait for lower writes still in flight. A panic in `f` leaves the database usable.
    pub fn update<F>(&self, key: &[u8], mut f: F) -> Result<Option<Vec<u8>>>
    where
        F: FnMut(Option<&[u8]>) -> Option<Vec<u8>>,
    {
        let mut decide = |current: Option<&[u8]>| match f(current) {
            Some(value) => Update::Put(value),
            None => Update::Delete,
        };
        self.inner
            .read_modify_write(key, &mut decide)
            .map(|(value, _)| value)
    }

    /// The general form of `update`: `decide` may also keep the value unchanged. Returns the
    /// value now stored and the sequence number of the write (None when nothing was written).
    pub fn read_modify_write<F>(
        &self,
        key: &[u8],
        mut decide: F,
    ) -> Result<(Option<Vec<u8>>, Option<SequenceNumber>)>
    where
        F: FnMut(Option<&[u8]>) -> Update,
    {
        self.inner.read_modify_write(key, &mut decide)
    }

    /// Stores `value` only if `key` is absent; returns whether it stored it.
    pub fn put_if_absent(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        self.inner.put_if_absent(key, value)
    }

    /// Replaces the value of `key` with `new` (None deletes) only if it currently equals
    /// `expected` (None: absent); returns whether it did.
    pub fn compare_and_swap(
        &self,
        key: &[u8],
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<bool> {
        self.inner.compare_and_swap(key, expected, new)
    }

    /// Adds `delta` to the integer stored at `key` (decimal ASCII, as Redis stores it; absent
    /// counts as 0) and returns the new value. Fails with `InvalidArgument` if the value is not
    /// an integer or the sum overflows.
    pub fn increment(&self, key: &[u8], delta: i64) -> Result<i64> {
        self.inner.increment(key, delta)
    }

    /// A consistent view of the current state, kept until dropped.
    pub fn snapshot(&self) -> Snapshot {
        self.inner.snapshots.acquire(|| self.inner.read_sequence())
    }

    /// A cursor over the latest state (or `snapshot`), bounded to `[lower, upper)`.
    pub fn iter(
        &self,
        options: &ReadOptions,
        snapshot: Option<&Snapshot>,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Result<DbIterator> {
        self.inner.iterator(options, snapshot, lower, upper)
    }

    /// Key-value pairs in the range, ascending.
    pub fn range(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> Result<RangeIter> {
        self.range_at(None, lower, upper, false)
    }

    /// Key-value pairs in the range, descending.
    pub fn range_rev(&self, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> Result<RangeIter> {
        self.range_at(None, lower, upper, true)
    }

    /// Key-value pairs in the range as of `snapshot` (None: latest), in either direction.
    pub fn range_at(
        &self,
        snapshot: Option<&Snapshot>,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        reverse: bool,
    ) -> Result<RangeIter> {
        self.inner.range(snapshot, lower, upper, reverse)
    }

    /// Seals the active write buffer (if not empty) and waits until every sealed buffer is
    /// on disk.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    /// Compacts every level's files overlapping `[lower, upper]` (None = unbounded) down into
    /// the next level, after a flush.
    pub fn compact_range(&self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> Result<()> {
        self.inner.flush()?;
        self.inner.compact_range(lower, upper)
    }

    /// A report of the database's shape and counters.
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.inner.directory
    }

    /// Closes the database, reporting any error from the final flush (with the WAL off) or
    /// from background work. Dropping a `Db` does the same but cannot report errors.
    pub fn close(mut self) -> Result<()> {
        let result = self.shutdown();
        std::mem::take(&mut self.threads);
        result
    }

    fn shutdown(&mut self) -> Result<()> {
        let mut result = Ok(());
        if !self.inner.options.wal_enabled && !self.inner.has_sticky_error.load(Ordering::Acquire) {
            // Without a WAL, unflushed writes exist only in memory: a clean close keeps them.
            result = self.inner.flush();
        }
        lock(&self.inner.background).shutting_down = true;
        self.inner.background_changed.notify_all();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
        if let Some(error) = lock(&self.inner.sticky_error).clone() {
            if result.is_ok() {
                result = Err(error);
            }
        }
        debug_assert!(self.threads.is_empty());
        result
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            let _ = self.shutdown();
        }
    }
}

// The contract in the module doc: a `Db` can be shared across threads.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Db>();
};
