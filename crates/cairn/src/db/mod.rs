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
//! (condition-variable state only, used when a writer must stall), `running` (the compactions
//! under way), `pending_outputs` and `sticky_error` are leaves: taken under any of the others,
//! never holding another.
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
//! 5. A read-only handle (`Options::read_only`) changes nothing: every changing method is
//!    refused by `Db::writable` before it reaches `DbInner`, and it starts no thread.
//! 6. A snapshot is read only by the database whose snapshot list registered it
//!    (`Db::snapshot_sequence`); another database's versions are not pinned by it.

mod checkpoint;
mod compact;
mod flush;
mod inner;
mod multi_get;
mod open;
mod parallel_get;
mod pinned_get;
mod read;
mod rmw;
mod salvage;
mod scans;
mod super_version;
#[cfg(all(test, not(loom)))]
mod tests;
mod write;

use crate::batch::WriteBatch;
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
///
/// ```
/// use cairn::Update;
/// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
/// db.put("stock", "3")?;
/// // Take one item if any is left; delete the key at zero.
/// let (left, _) = db.read_modify_write("stock", |current| match current {
///     Some(b"1") => Update::Delete,
///     Some(count) => {
///         let count: u32 = std::str::from_utf8(count).unwrap().parse().unwrap();
///         Update::Put((count - 1).to_string().into_bytes())
///     }
///     None => Update::Keep,
/// })?;
/// assert_eq!(left, Some(b"2".to_vec()));
/// # Ok::<(), cairn::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Update {
    /// Leave the key as it is (nothing is written).
    Keep,
    /// Store this value (without an expiry: a previous expiry is cleared).
    Put(Vec<u8>),
    /// Store this value, reading as absent from the given time on (see
    /// [`Db::put_with_expiry`]); to keep a key's expiry, pass back the one the function was
    /// given by [`Db::update_with`].
    PutWithExpiry(Vec<u8>, std::time::SystemTime),
    /// Delete the key.
    Delete,
}

/// Whether a conditional write ([`Db::put_if_absent`], [`Db::compare_and_swap`]) took
/// effect. `#[must_use]`, so `db.put_if_absent(..)?;` warns that the answer was dropped.
///
/// ```
/// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
/// let outcome = db.put_if_absent("k", "v")?;
/// assert_eq!(outcome, cairn::WriteOutcome::Written);
/// assert!(bool::from(outcome));
/// # Ok::<(), cairn::Error>(())
/// ```
#[must_use = "a conditional write may have changed nothing; check the outcome"]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The condition held and the write was applied.
    Written,
    /// The condition did not hold; nothing was written.
    Unchanged,
}

impl WriteOutcome {
    /// True for [`WriteOutcome::Written`].
    pub const fn is_written(self) -> bool {
        matches!(self, WriteOutcome::Written)
    }
}

impl From<bool> for WriteOutcome {
    fn from(written: bool) -> Self {
        if written {
            WriteOutcome::Written
        } else {
            WriteOutcome::Unchanged
        }
    }
}

impl From<WriteOutcome> for bool {
    fn from(outcome: WriteOutcome) -> bool {
        outcome.is_written()
    }
}

/// A range bound over any byte-string-like key, as a bound over bytes.
fn bound_bytes<K: AsRef<[u8]> + ?Sized>(bound: Bound<&K>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(key) => Bound::Included(key.as_ref()),
        Bound::Excluded(key) => Bound::Excluded(key.as_ref()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// A persistent key-value store. `Send + Sync`: share one handle among threads (`Arc<Db>`);
/// no client operation takes a lock on its fast path.
///
/// ```
/// use std::sync::Arc;
/// let db = Arc::new(cairn::Db::open("/db", cairn::Options::in_memory())?);
/// let writers: Vec<_> = (0..4)
///     .map(|thread| {
///         let db = Arc::clone(&db);
///         std::thread::spawn(move || db.put(format!("key{thread}"), "v"))
///     })
///     .collect();
/// for writer in writers {
///     writer.join().unwrap()?;
/// }
/// assert_eq!(db.iter()?.count(), 4);
/// # Ok::<(), cairn::Error>(())
/// ```
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
    ///
    /// ```
    /// let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// db.put("k", "v")?;
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let inner = open::open_inner(path.as_ref(), options)?;
        let threads = if inner.options.read_only {
            Vec::new()
        } else {
            open::spawn_background(&inner)?
        };
        Ok(Db { inner, threads })
    }

    /// Opens the existing database in `path` without writing anything (`options.read_only`
    /// set): no WAL, MANIFEST or CURRENT is written and no LOCK is taken, so it works beside a
    /// writer that holds the database. It reads the state as of its open, the WAL tail
    /// included, and never changes; writes fail with `InvalidArgument`. If a writer later
    /// deletes a table the handle has not opened yet, reads of it fail with an I/O error
    /// naming the file (never wrong data); reopen to see the newer state.
    ///
    /// ```
    /// # let file_system = std::sync::Arc::new(cairn::MemFs::new());
    /// let mut options = cairn::Options::default();
    /// # options.file_system = file_system;
    /// let writer = cairn::Db::open("/db", options.clone())?;
    /// writer.put("k", "1")?;
    /// let reader = cairn::Db::open_read_only("/db", options)?;
    /// writer.put("k", "2")?;
    /// assert_eq!(reader.get("k")?, Some(b"1".to_vec()));
    /// assert!(reader.put("k", "3").is_err());
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn open_read_only(path: impl AsRef<Path>, mut options: Options) -> Result<Db> {
        options.read_only = true;
        options.create_if_missing = false;
        Db::open(path, options)
    }

    /// Writes a consistent copy of the database into `destination` (absent or empty) and
    /// returns its sequence number: the copy holds exactly the writes up to it, a prefix of
    /// the writes even under concurrent load, and opens as a database. Tables are hard-linked
    /// (copied where the file system cannot link), so a checkpoint costs little space while
    /// they are shared; the MANIFEST and CURRENT are written fresh. Flushes first.
    ///
    /// A hard-linked table is the same file as the live one: never modify a checkpoint's
    /// tables in place (`cp` over one, truncate it). Besides damaging the live database, a
    /// live table read through a mapping ([`crate::TableReadMode::Mmap`], the default) that
    /// is cut short makes its next read stop the process with `SIGBUS`. Replace files by
    /// writing a new one and renaming it over the old, which leaves the linked file intact.
    ///
    /// ```
    /// # let file_system = std::sync::Arc::new(cairn::MemFs::new());
    /// let mut options = cairn::Options::default();
    /// # options.file_system = file_system;
    /// let db = cairn::Db::open("/db", options.clone())?;
    /// db.put("k", "v")?;
    /// db.checkpoint("/backup")?;
    /// db.put("k", "after")?;
    /// let copy = cairn::Db::open("/backup", options)?;
    /// assert_eq!(copy.get("k")?, Some(b"v".to_vec()));
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn checkpoint(&self, destination: impl AsRef<Path>) -> Result<SequenceNumber> {
        self.writable()?;
        self.inner.checkpoint(destination.as_ref())
    }

    /// Refuses a change to a read-only handle.
    fn writable(&self) -> Result<()> {
        if self.inner.options.read_only {
            return Err(crate::Error::InvalidArgument(format!(
                "{} is open read-only",
                self.inner.directory.display()
            )));
        }
        Ok(())
    }

    /// Sets `key` to `value`.
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// db.put("fruit", "apple")?;
    /// db.put(b"bytes", [0u8, 1, 2])?;
    /// assert_eq!(db.get("fruit")?, Some(b"apple".to_vec()));
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_with(&WriteOptions::default(), key, value)
    }

    /// Sets `key` to `value` with explicit write options.
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// db.put_with(&cairn::WriteOptions::with_sync(true), "durable", "yes")?;
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn put_with(
        &self,
        options: &WriteOptions,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.write(
            options,
            WriteBatch::single_put(key.as_ref(), value.as_ref()),
        )
    }

    /// Removes `key` (a tombstone; absent keys may be deleted). Like
    /// [`MemStore::delete`](crate::MemStore::delete) it returns nothing: finding out whether
    /// the key existed would cost a read.
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// db.put("k", "v")?;
    /// db.delete("k")?;
    /// assert_eq!(db.get("k")?, None);
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_with(&WriteOptions::default(), key)
    }

    /// Removes `key` with explicit write options.
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// db.delete_with(&cairn::WriteOptions::with_sync(true), "k")?;
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn delete_with(&self, options: &WriteOptions, key: impl AsRef<[u8]>) -> Result<()> {
        self.write(options, WriteBatch::single_delete(key.as_ref()))
    }

    /// Applies `batch` atomically: a reader at any snapshot sees all of it or none.
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// let mut batch = cairn::WriteBatch::new();
    /// batch.put("a", "1").put("b", "2");
    /// db.write(&cairn::WriteOptions::default(), batch)?;
    /// assert_eq!(db.iter()?.count(), 2);
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn write(&self, options: &WriteOptions, batch: WriteBatch) -> Result<()> {
        self.writable()?;
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
        self.writable()?;
        self.inner.write(options, batch)
    }

    /// The value of `key` in the latest state.
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// assert_eq!(db.get("missing")?, None);
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.inner.get(key.as_ref(), None)
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

    /// Sets `key` to `value` until `expiry`: from then on the key reads as absent (from
    /// `get`, `get_at`, iterators and read-modify-write alike, hiding any older value), and
    /// a compaction that rewrites its file drops it. A file compaction only moves down
    /// (nothing under it overlaps) keeps it until a later merge reads the file;
    /// `compact_range(None, None)` rewrites every file. Expiry is measured with the system
    /// clock.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// # let dir = std::env::temp_dir().join(format!("cairn-doc-put-expiry-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let db = cairn::Db::open(&dir, cairn::Options::default())?;
    /// let expiry = SystemTime::now() + Duration::from_secs(3600);
    /// db.put_with_expiry(b"k", b"v", expiry)?;
    /// let (value, stored_expiry) = db.get_with_expiry(b"k")?.unwrap();
    /// assert_eq!(value, b"v");
    /// assert!(stored_expiry.is_some());
    /// db.put_with_expiry(b"k", b"v", SystemTime::now() - Duration::from_secs(1))?;
    /// assert_eq!(db.get(b"k")?, None);
    /// # drop(db);
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn put_with_expiry(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        expiry: std::time::SystemTime,
    ) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put_with_expiry(key.as_ref(), value.as_ref(), expiry);
        self.write(&WriteOptions::default(), batch)
    }

    /// The value of `key` in the latest state with its expiry (`None`: the value never
    /// expires). The expiry is stored in whole milliseconds since the Unix epoch.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// db.put("plain", "v")?;
    /// assert_eq!(db.get_with_expiry("plain")?, Some((b"v".to_vec(), None)));
    /// let at = SystemTime::UNIX_EPOCH + Duration::from_secs(4_000_000_000);
    /// db.put_with_expiry("session", "token", at)?;
    /// assert_eq!(db.get_with_expiry("session")?, Some((b"token".to_vec(), Some(at))));
    /// assert_eq!(db.get_with_expiry("absent")?, None);
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn get_with_expiry(
        &self,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<(Vec<u8>, Option<std::time::SystemTime>)>> {
        let found = self.inner.get_with_expiry(key.as_ref(), None)?;
        Ok(found.map(|(value, expiry)| (value, expiry.map(crate::expiry::from_millis))))
    }

    /// The value of `key` as `options` say: at `options.snapshot` if set, else the latest.
    /// (`fill_cache` applies to scans; a point read reads one block per table and caches it.)
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// db.put("k", "old")?;
    /// let mut options = cairn::ReadOptions::default();
    /// options.snapshot = Some(db.snapshot());
    /// db.put("k", "new")?;
    /// assert_eq!(db.get_with(&options, "k")?, Some(b"old".to_vec()));
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn get_with(
        &self,
        options: &ReadOptions,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<Vec<u8>>> {
        let sequence = match &options.snapshot {
            Some(snapshot) => Some(self.snapshot_sequence(snapshot)?),
            None => None,
        };
        self.inner.get(key.as_ref(), sequence)
    }

    /// The value of `key` as of `snapshot`. Fails with `InvalidArgument` if the snapshot was
    /// taken from another database.
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// db.put("k", "1")?;
    /// let snapshot = db.snapshot();
    /// db.delete("k")?;
    /// assert_eq!(db.get_at(&snapshot, "k")?, Some(b"1".to_vec()));
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn get_at(&self, snapshot: &Snapshot, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let sequence = self.snapshot_sequence(snapshot)?;
        self.inner.get(key.as_ref(), Some(sequence))
    }

    /// Atomically replaces the value of `key` with `f(current)` (`None` deletes) and returns
    /// the new value, as [`MemStore::update`](crate::MemStore::update) does. `f` runs outside
    /// any lock and may run more than once if another write to `key` races it (see
    /// `read_modify_write` in the source); the call takes no lock but may wait for lower
    /// writes still in flight. A panic in `f` leaves the database usable. The new value has
    /// no expiry; [`Db::update_with`] can keep or set one.
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// let append = |current: Option<&[u8]>| {
    ///     let mut value = current.unwrap_or_default().to_vec();
    ///     value.push(b'!');
    ///     Some(value)
    /// };
    /// assert_eq!(db.update("k", append)?, Some(b"!".to_vec()));
    /// assert_eq!(db.update("k", append)?, Some(b"!!".to_vec()));
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn update<F>(&self, key: impl AsRef<[u8]>, mut f: F) -> Result<Option<Vec<u8>>>
    where
        F: FnMut(Option<&[u8]>) -> Option<Vec<u8>>,
    {
        let mut decide =
            |current: Option<(&[u8], Option<u64>)>| match f(current.map(|(value, _)| value)) {
                Some(value) => Update::Put(value),
                None => Update::Delete,
            };
        self.writable()?;
        self.inner
            .read_modify_write(&WriteOptions::default(), key.as_ref(), &mut decide)
            .map(|(value, _)| value)
    }

    /// The general form of `update`: `decide` may also keep the value unchanged. Returns the
    /// value now stored and the sequence number of the write (None when nothing was written).
    ///
    /// ```
    /// use cairn::Update;
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// let (value, written) = db.read_modify_write("k", |current| match current {
    ///     Some(_) => Update::Keep,
    ///     None => Update::Put(b"first".to_vec()),
    /// })?;
    /// assert_eq!((value, written.is_some()), (Some(b"first".to_vec()), true));
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn read_modify_write<F>(
        &self,
        key: impl AsRef<[u8]>,
        mut decide: F,
    ) -> Result<(Option<Vec<u8>>, Option<SequenceNumber>)>
    where
        F: FnMut(Option<&[u8]>) -> Update,
    {
        let mut decide =
            |current: Option<(&[u8], Option<u64>)>| decide(current.map(|(value, _)| value));
        self.writable()?;
        self.inner
            .read_modify_write(&WriteOptions::default(), key.as_ref(), &mut decide)
    }

    /// The most general read-modify-write: like [`Db::read_modify_write`], with write
    /// `options` (so `sync` covers it) and `decide` given the current value's expiry too, so
    /// it can keep it ([`Update::PutWithExpiry`] with the same time), set it, or clear it
    /// ([`Update::Put`]).
    ///
    /// ```
    /// use cairn::{Update, WriteOptions};
    /// use std::time::{Duration, SystemTime};
    /// # let dir = std::env::temp_dir().join(format!("cairn-doc-update-with-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let db = cairn::Db::open(&dir, cairn::Options::default())?;
    /// db.put_with_expiry(b"greeting", b"hello", SystemTime::now() + Duration::from_secs(60))?;
    /// let mut options = WriteOptions::default();
    /// options.sync = true;
    /// // Append, keeping the expiry.
    /// db.update_with(&options, b"greeting", |current| match current {
    ///     Some((value, Some(expiry))) => Update::PutWithExpiry([value, b" world"].concat(), expiry),
    ///     Some((value, None)) => Update::Put([value, b" world"].concat()),
    ///     None => Update::Put(b" world".to_vec()),
    /// })?;
    /// let (value, expiry) = db.get_with_expiry(b"greeting")?.unwrap();
    /// assert_eq!((value.as_slice(), expiry.is_some()), (&b"hello world"[..], true));
    /// # drop(db);
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn update_with<F>(
        &self,
        options: &WriteOptions,
        key: impl AsRef<[u8]>,
        mut decide: F,
    ) -> Result<(Option<Vec<u8>>, Option<SequenceNumber>)>
    where
        F: FnMut(Option<(&[u8], Option<std::time::SystemTime>)>) -> Update,
    {
        let mut decide = |current: Option<(&[u8], Option<u64>)>| {
            decide(current.map(|(value, expiry)| (value, expiry.map(crate::expiry::from_millis))))
        };
        self.writable()?;
        self.inner
            .read_modify_write(options, key.as_ref(), &mut decide)
    }

    /// Stores `value` only if `key` is absent; the outcome says whether it did.
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// assert!(db.put_if_absent("k", "1")?.is_written());
    /// assert!(!db.put_if_absent("k", "2")?.is_written());
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn put_if_absent(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<WriteOutcome> {
        self.writable()?;
        self.inner
            .put_if_absent(key.as_ref(), value.as_ref())
            .map(WriteOutcome::from)
    }

    /// Replaces the value of `key` with `new` (None deletes) only if it currently equals
    /// `expected` (None: absent, or expired); the outcome says whether it did. `new` has no
    /// expiry.
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// db.put("k", "1")?;
    /// assert!(!db.compare_and_swap("k", Some(b"9"), Some(b"2"))?.is_written());
    /// assert!(db.compare_and_swap("k", Some(b"1"), Some(b"2"))?.is_written());
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn compare_and_swap(
        &self,
        key: impl AsRef<[u8]>,
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<WriteOutcome> {
        self.writable()?;
        self.inner
            .compare_and_swap(key.as_ref(), expected, new)
            .map(WriteOutcome::from)
    }

    /// Adds `delta` to the integer stored at `key` (decimal ASCII, as Redis stores it; absent
    /// counts as 0) and returns the new value. Fails with `InvalidArgument` if the value is not
    /// an integer or the sum overflows. A counter written with an expiry keeps it (as Redis's
    /// INCR keeps a key's TTL); an expired one counts as absent.
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// assert_eq!(db.increment("hits", 5)?, 5);
    /// assert_eq!(db.increment("hits", -2)?, 3);
    /// assert_eq!(db.get("hits")?, Some(b"3".to_vec()));
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn increment(&self, key: impl AsRef<[u8]>, delta: i64) -> Result<i64> {
        self.writable()?;
        self.inner.increment(key.as_ref(), delta)
    }

    /// A consistent view of the current state, kept until dropped. It can be used only with
    /// this database: others refuse it with `InvalidArgument`.
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// db.put("k", "1")?;
    /// let snapshot = db.snapshot();
    /// db.put("k", "2")?;
    /// assert_eq!(db.get_at(&snapshot, "k")?, Some(b"1".to_vec()));
    /// # Ok::<(), cairn::Error>(())
    /// ```
    #[must_use = "a snapshot pins versions only while it is held"]
    pub fn snapshot(&self) -> Snapshot {
        // With the Membuffer on, no in-place update drops a version this snapshot could
        // see: it registers inside a hold of the overwrite gate (`membuffer::gate`).
        let _hold = self.inner.hold_overwrites();
        self.inner.snapshots.acquire(|| self.inner.read_sequence())
    }

    /// The sequence of `snapshot`, if it was taken from this database.
    fn snapshot_sequence(&self, snapshot: &Snapshot) -> Result<SequenceNumber> {
        if snapshot.belongs_to(&self.inner.snapshots) {
            Ok(snapshot.sequence())
        } else {
            Err(crate::Error::InvalidArgument(
                "the snapshot was taken from another database".into(),
            ))
        }
    }

    /// Seals the active write buffer (if not empty) and waits until every sealed buffer is
    /// on disk.
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// db.put("k", "v")?;
    /// db.flush()?;
    /// assert!(db.stats().counter("flushes") >= 1);
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn flush(&self) -> Result<()> {
        self.writable()?;
        self.inner.flush()
    }

    /// Compacts every level's files overlapping `[lower, upper]` (None = unbounded) down into
    /// the next level, after a flush. With both bounds None it then rewrites every file of
    /// the last level, even one sorted run of them, so every value is read again: expired
    /// values and tombstones that compaction only moved down (keys that never overlapped the
    /// level below, such as time-ordered ones) are dropped and their space reclaimed.
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// db.put("k", "v")?;
    /// db.compact_range(None, None)?;
    /// assert_eq!(db.get("k")?, Some(b"v".to_vec()));
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn compact_range(&self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> Result<()> {
        self.writable()?;
        self.inner.flush()?;
        self.inner.compact_range(lower, upper)
    }

    /// The shape of the tree now: per level its files, bytes, compaction score, sorted runs
    /// (newest first) and the bytes written into it since open. Cheap: reads the current
    /// version only.
    ///
    /// ```
    /// let db = cairn::Db::open("/level-stats", cairn::Options::in_memory()).unwrap();
    /// db.put(b"k", b"v").unwrap();
    /// db.flush().unwrap();
    /// let levels = db.level_stats();
    /// assert_eq!(levels[0].files, 1);
    /// assert_eq!(levels[0].runs.len(), 1);
    /// ```
    pub fn level_stats(&self) -> Vec<crate::LevelStats> {
        let super_version = self.inner.super_version.load_full();
        self.inner.level_stats_of(&super_version.version)
    }

    /// The entries physically stored in one place of the tree, for inspection (the CS265
    /// shell's `s` dump): `None` for the write buffers in memory, `Some(level)` for on-disk
    /// level `level`. Every `Put` version present is listed — overwritten ones too, which is
    /// what makes space amplification visible — run by run (newest run first) and by key
    /// within a run; tombstones are left out. At most `limit` entries.
    ///
    /// ```
    /// let db = cairn::Db::open("/level-entries", cairn::Options::in_memory()).unwrap();
    /// db.put(b"k", b"v1").unwrap();
    /// db.flush().unwrap();
    /// db.put(b"k", b"v2").unwrap();
    /// assert_eq!(db.level_entries(None, 10).unwrap(), vec![(b"k".to_vec(), b"v2".to_vec())]);
    /// assert_eq!(db.level_entries(Some(0), 10).unwrap(), vec![(b"k".to_vec(), b"v1".to_vec())]);
    /// ```
    pub fn level_entries(
        &self,
        level: Option<usize>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.inner.level_entries(level, limit)
    }

    /// Calls `visit` with each entry [`Db::level_entries`] would list, in the same order,
    /// until it returns false: a place of the tree can be counted or sampled without holding
    /// its entries (the CS265 shell's `s N` counts every level and keeps N pairs of each).
    ///
    /// ```
    /// let db = cairn::Db::open("/visit-level-entries", cairn::Options::in_memory()).unwrap();
    /// db.put(b"a", b"1").unwrap();
    /// db.put(b"b", b"2").unwrap();
    /// db.flush().unwrap();
    /// let mut count = 0;
    /// db.visit_level_entries(Some(0), |_key, _value| {
    ///     count += 1;
    ///     true
    /// })
    /// .unwrap();
    /// assert_eq!(count, 2);
    /// ```
    pub fn visit_level_entries(
        &self,
        level: Option<usize>,
        mut visit: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<()> {
        self.inner.visit_level_entries(level, &mut visit)
    }

    /// A report of the database's shape and counters.
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// db.put("k", "v")?;
    /// println!("{}", db.stats());
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }

    /// The database directory.
    ///
    /// ```
    /// # let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// assert_eq!(db.path(), std::path::Path::new("/db"));
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn path(&self) -> &Path {
        &self.inner.directory
    }

    /// Closes the database, reporting any error from the final flush (with the WAL off) or
    /// from background work. Dropping a `Db` does the same but cannot report errors.
    ///
    /// ```
    /// let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// db.put("k", "v")?;
    /// db.close()?;
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn close(mut self) -> Result<()> {
        let result = self.shutdown();
        std::mem::take(&mut self.threads);
        result
    }

    fn shutdown(&mut self) -> Result<()> {
        let mut result = Ok(());
        if !self.inner.options.wal_enabled
            && !self.inner.options.read_only
            && !self.inner.has_sticky_error.load(Ordering::Acquire)
        {
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
