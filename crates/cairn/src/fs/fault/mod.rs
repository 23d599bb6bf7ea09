//! `FaultFs`: a [`FileSystem`] wrapper that injects I/O errors and latency and simulates
//! power loss, over any inner file system — [`MemFs`] by default ([`FaultFs::new`]), or the
//! real one ([`FaultFs::wrap`]`(StdFs)`), so the production memory-mapped WAL runs under it.
//!
//! Job: let tests reach the failure modes kill -9 never reaches (fsync, directory entries,
//! torn sectors, reserved zero tails, pages reaching the disk out of order) and the error paths
//! a healthy disk never takes (EIO, ENOSPC, stalls), the way `LevelDB`'s `fault_injection_test`,
//! `RocksDB`'s `FaultInjectionTestFS` and Pebble's errorfs do.
//!
//! Every operation goes to the inner file system; a shadow model (the `model` submodule)
//! records what the disk holds durably, so [`FaultFs::crash_image`] can build what a power
//! loss would leave: synced data and lengths, directory entries made durable by `sync_dir`,
//! and a seeded choice of everything else — including a memory-mapped log's `fallocate`d zero
//! tail, and a `trim` that no sync has made durable yet. [`FaultFs::set_crash_holes`] lets
//! unsynced pages survive in any order (holes).
//!
//! Faults ([`FaultPlan`]): every operation (create, open, read, append, flush, sync, trim,
//! rename, remove, list, mkdir, exists, lock, `sync_dir`) gets an index from one counter;
//! mutating operations also get a *write point* index. A plan fails one operation index once,
//! fails every operation from a write point on (a crash: nothing reaches the disk after it),
//! fails a named operation on a matching path, or fails operations at random from a seed. An
//! injected ENOSPC on an append writes a prefix of the data first (a short write).
//! [`FaultFs::injected`] reports what was injected where. [`FaultFs::set_latency`] delays
//! matching operations (a stalled `sync` or `create_log`) before they run;
//! [`FaultFs::set_gate`] holds them until the test releases the gate (or a timeout passes),
//! so a test decides how long an operation lasts by what it has checked, not by a clock.
//!
//! Thread-safety contract: `FaultFs` is `Send + Sync` and cheap to clone (clones share state);
//! the fault state and model sit behind one mutex, held across every mutating forward, so
//! operations from many threads are linearised in the order they take it — the operation
//! indices are that order. Latency sleeps and gate holds happen outside the mutex. Handles
//! refer to inodes, so a reader keeps working after its name is removed, as on POSIX.
//!
//! Invariants:
//! 1. The model's per-file invariants (durable never past written; see `model`) hold after
//!    every operation; checked under the `invariants` feature.
//! 2. An operation that fails by injection changes nothing, inner or modelled, except the
//!    ENOSPC short write described above.
//! 3. The model's live name table equals the inner file system's names for every path created
//!    through this wrapper (both change under the same mutex, inner first).

mod files;
mod gate;
mod model;
#[cfg(test)]
mod tests;

use self::files::{
    lock_state, wait_latency, FaultFileLock, FaultRandomAccessFile, FaultWritableFile,
};
pub use self::gate::FaultGate;
use self::model::{Inode, LatencyRule, MetadataOp, SplitMix64, State};
use crate::error::{Error, Result};
use crate::fs::{FileLock, FileSystem, MemFs, RandomAccessFile, WritableFile};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The error an injected fault produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// `EIO`: the device failed.
    Eio,
    /// `ENOSPC`: the device is full (an append may write part of its data first).
    Enospc,
}

impl FaultKind {
    fn to_io_error(self) -> std::io::Error {
        match self {
            FaultKind::Eio => std::io::Error::from_raw_os_error(5),
            FaultKind::Enospc => std::io::Error::from_raw_os_error(28),
        }
    }
}

/// Which operations fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FaultPlan {
    /// Nothing fails.
    #[default]
    None,
    /// Operation number `index` (0-based, counting every operation) fails once.
    Once {
        /// The operation index.
        index: u64,
        /// The error.
        kind: FaultKind,
    },
    /// Write point number `index` (0-based, counting mutating operations) and every
    /// operation after it fail with EIO: the machine has crashed there.
    CrashAtWritePoint {
        /// The write point index.
        index: u64,
    },
    /// The operation named `operation` ("append", "sync", "rename", ...) whose path contains
    /// `path_contains` fails on its `skip + 1`-th occurrence; with `crash`, every operation
    /// from there on fails too.
    Matching {
        /// Operation name, as in [`InjectedFault::operation`].
        operation: &'static str,
        /// A substring of the path ("MANIFEST-", ".log", "CURRENT.tmp", ...).
        path_contains: &'static str,
        /// Matching occurrences to let through first.
        skip: u64,
        /// The error.
        kind: FaultKind,
        /// Crash there (fail everything afterwards) instead of failing once.
        crash: bool,
    },
    /// Each operation fails with probability `1 / one_in`, chosen by a generator seeded with
    /// `seed` (deterministic for a given operation order).
    Random {
        /// Generator seed.
        seed: u64,
        /// Inverse failure probability (0 or 1 = every operation fails).
        one_in: u64,
        /// The error.
        kind: FaultKind,
    },
}

/// One injected failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InjectedFault {
    /// Operation index (see [`FaultPlan`]).
    pub operation_index: u64,
    /// Operation name ("append", "sync", "`sync_dir`", "read", ...).
    pub operation: &'static str,
    /// True if the operation was one of the syncs (`sync`, `sync_dir`).
    pub is_sync: bool,
    /// The file or directory.
    pub path: PathBuf,
    /// The error returned.
    pub kind: FaultKind,
}

fn injected_error(operation: &'static str, path: &Path, kind: FaultKind) -> Error {
    Error::io(operation, path, kind.to_io_error())
}

/// The fault-injecting, power-loss-simulating wrapper (see the module doc), for tests.
///
/// ```
/// let file_system = cairn::FaultFs::new();
/// let mut options = cairn::Options::default();
/// options.file_system = std::sync::Arc::new(file_system.clone());
/// cairn::Db::open("/db", options)?.put("k", "v")?;
/// # Ok::<(), cairn::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct FaultFs {
    state: Arc<Mutex<State>>,
    inner: Arc<dyn FileSystem>,
}

impl Default for FaultFs {
    fn default() -> Self {
        Self::new()
    }
}

impl FaultFs {
    /// An empty in-memory file system with no faults planned.
    pub fn new() -> Self {
        Self::wrap_shared(Arc::new(MemFs::new()))
    }

    /// Wraps `inner` (e.g. [`crate::StdFs`]: then logs are memory-mapped where supported).
    /// Only files created through the wrapper are modelled.
    pub fn wrap<F: FileSystem + 'static>(inner: F) -> Self {
        Self::wrap_shared(Arc::new(inner))
    }

    /// Wraps a shared inner file system.
    pub fn wrap_shared(inner: Arc<dyn FileSystem>) -> Self {
        FaultFs {
            state: Arc::new(Mutex::new(State::default())),
            inner,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock_state(&self.state)
    }

    /// Counts an operation after its latency; the guard stays held for the forward.
    fn begin(
        &self,
        operation: &'static str,
        path: &Path,
        mutating: bool,
    ) -> Result<MutexGuard<'_, State>> {
        wait_latency(&self.state, operation, path);
        let mut state = self.state();
        match state.check(operation, path, mutating) {
            None => Ok(state),
            Some(kind) => Err(injected_error(operation, path, kind)),
        }
    }

    /// Replaces the fault plan (counters keep running; use [`Self::reset_counters`]).
    pub fn set_plan(&self, plan: FaultPlan) {
        let mut state = self.state();
        state.plan = plan;
        state.crashed = false;
        state.matched = 0;
        state.random = match plan {
            FaultPlan::Random { seed, .. } => Some(SplitMix64(seed)),
            _ => None,
        };
    }

    /// Delays every `operation` (an [`InjectedFault::operation`] name, or `"create_log"`)
    /// whose path contains `path_contains` by `delay`, before it runs (and before it is
    /// counted). Rules add up; the first matching one applies.
    pub fn set_latency(
        &self,
        operation: &'static str,
        path_contains: &'static str,
        delay: Duration,
    ) {
        self.state().latency.push(LatencyRule {
            operation,
            path_contains,
            delay,
        });
    }

    /// Holds every `operation` (named as for [`Self::set_latency`]) whose path contains
    /// `path_contains` before it runs, until the returned gate is released or `timeout`
    /// passes (the gate then records that it timed out). Gates add up; the first matching
    /// one applies.
    ///
    /// ```
    /// use std::time::Duration;
    /// let file_system = cairn::FaultFs::new();
    /// let gate = file_system.set_gate("sync_dir", "/db", Duration::from_secs(20));
    /// gate.release(); // nothing held: later matching operations pass
    /// assert!(!gate.timed_out());
    /// ```
    pub fn set_gate(
        &self,
        operation: &'static str,
        path_contains: &'static str,
        timeout: Duration,
    ) -> Arc<FaultGate> {
        let gate = Arc::new(FaultGate::new(operation, path_contains, timeout));
        self.state().gates.push(Arc::clone(&gate));
        gate
    }

    /// Removes every latency rule.
    pub fn clear_latency(&self) {
        self.state().latency.clear();
    }

    /// With `holes`, crash images let unsynced pages survive independently of each other
    /// (a later page present, an earlier one zeros), as a disk writing back in any order may.
    pub fn set_crash_holes(&self, holes: bool) {
        self.state().holes = holes;
    }

    /// Zeroes the operation and write-point counters and forgets injected faults.
    pub fn reset_counters(&self) {
        let mut state = self.state();
        state.operations = 0;
        state.write_points = 0;
        state.injected.clear();
    }

    /// Fails every operation from now on, as if the machine stopped here.
    pub fn crash_now(&self) {
        let mut state = self.state();
        state.plan = FaultPlan::CrashAtWritePoint { index: 0 };
        state.crashed = true;
    }

    /// Stops injecting faults (the plan becomes [`FaultPlan::None`]).
    pub fn heal(&self) {
        self.set_plan(FaultPlan::None);
    }

    /// True once a crash plan fired (or [`Self::crash_now`] ran).
    pub fn crashed(&self) -> bool {
        self.state().crashed
    }

    /// Operations counted so far.
    pub fn operation_count(&self) -> u64 {
        self.state().operations
    }

    /// Mutating operations (write points) counted so far.
    pub fn write_point_count(&self) -> u64 {
        self.state().write_points
    }

    /// Every fault injected so far, in order.
    pub fn injected(&self) -> Vec<InjectedFault> {
        self.state().injected.clone()
    }

    /// What the disk would hold after a power loss now (see the module doc), as a fresh
    /// in-memory `FaultFs` (same paths) in which everything is durable and no fault is
    /// planned. `seed` chooses which unsynced metadata operations and bytes survive.
    pub fn crash_image(&self, seed: u64) -> FaultFs {
        let image = FaultFs::new();
        // An in-memory file system does not fail, so the image is always whole.
        let _ = self.write_crash_image(seed, &image);
        image
    }

    /// Like [`Self::crash_image`], but writes the image through `inner` (e.g. `StdFs`; the
    /// caller empties the directories first) and returns it wrapped.
    pub fn crash_image_onto<F: FileSystem + 'static>(
        &self,
        seed: u64,
        inner: F,
    ) -> Result<FaultFs> {
        let image = FaultFs::wrap(inner);
        self.write_crash_image(seed, &image)?;
        Ok(image)
    }

    fn write_crash_image(&self, seed: u64, image: &FaultFs) -> Result<()> {
        let (files, directories, holes) = {
            let state = self.state();
            let directories: Vec<PathBuf> = state.directories.iter().cloned().collect();
            (state.crash_files(seed), directories, state.holes)
        };
        image.set_crash_holes(holes);
        for directory in &directories {
            image.inner.create_dir_all(directory)?;
            image.state().directories.insert(directory.clone());
        }
        for (path, bytes) in files {
            image.set_file_contents_checked(&path, bytes)?;
        }
        Ok(())
    }

    /// A copy of a file's live bytes (for tests that inspect or corrupt files); not counted.
    pub fn file_contents(&self, path: &Path) -> Option<Vec<u8>> {
        self.inner.read_all(path).ok()
    }

    /// Replaces a file's bytes with durable `contents` (for tests that corrupt files); not
    /// counted.
    ///
    /// # Panics
    ///
    /// If the inner file system fails: this is a test helper, and a test cannot go on
    /// without the file it meant to plant.
    pub fn set_file_contents(&self, path: &Path, contents: Vec<u8>) {
        if let Err(error) = self.set_file_contents_checked(path, contents) {
            panic!("set_file_contents({}): {error}", path.display());
        }
    }

    fn set_file_contents_checked(&self, path: &Path, contents: Vec<u8>) -> Result<()> {
        let mut state = self.state();
        let mut file = self.inner.create(path)?;
        file.append(&contents)?;
        file.sync()?;
        let number = state.add_inode(Inode::durable(contents));
        state.live.insert(path.to_path_buf(), number);
        state.durable.insert(path.to_path_buf(), number);
        state.check_invariants();
        Ok(())
    }

    /// Registers a new writable file created by the inner file system under `path`.
    fn created(
        &self,
        state: &mut State,
        path: &Path,
        inner: Box<dyn WritableFile>,
    ) -> Box<dyn WritableFile> {
        let mut inode = Inode::default();
        inode.set_allocated(inner.allocated_bytes());
        let number = state.add_inode(inode);
        state.live.insert(path.to_path_buf(), number);
        state.pending.push(MetadataOp::Create {
            path: path.to_path_buf(),
            inode: number,
        });
        state.check_invariants();
        Box::new(FaultWritableFile {
            state: Arc::clone(&self.state),
            inner,
            path: path.to_path_buf(),
            inode: number,
        })
    }
}

impl FileSystem for FaultFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let mut state = self.begin("create", path, true)?;
        let inner = self.inner.create(path)?;
        Ok(self.created(&mut state, path, inner))
    }

    fn create_log(&self, path: &Path, size_hint_bytes: u64) -> Result<Box<dyn WritableFile>> {
        // Counted (and matched by plans) as a "create"; latency may single it out.
        wait_latency(&self.state, "create_log", path);
        let mut state = self.begin("create", path, true)?;
        let inner = self.inner.create_log(path, size_hint_bytes)?;
        Ok(self.created(&mut state, path, inner))
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let state = self.begin("open", path, false)?;
        drop(state);
        let inner = self.inner.open_read(path)?;
        Ok(Arc::new(FaultRandomAccessFile {
            state: Arc::clone(&self.state),
            inner,
            path: path.to_path_buf(),
        }))
    }

    fn open_read_mapped(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let state = self.begin("open", path, false)?;
        drop(state);
        let inner = self.inner.open_read_mapped(path)?;
        Ok(Arc::new(FaultRandomAccessFile {
            state: Arc::clone(&self.state),
            inner,
            path: path.to_path_buf(),
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut state = self.begin("rename", from, true)?;
        self.inner.rename(from, to)?;
        if let Some(inode) = state.live.remove(from) {
            state.live.insert(to.to_path_buf(), inode);
            state.pending.push(MetadataOp::Rename {
                from: from.to_path_buf(),
                to: to.to_path_buf(),
            });
        }
        Ok(())
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let mut state = self.begin("remove", path, true)?;
        self.inner.remove(path)?;
        if state.live.remove(path).is_some() {
            state.pending.push(MetadataOp::Remove {
                path: path.to_path_buf(),
            });
        }
        Ok(())
    }

    fn list(&self, directory: &Path) -> Result<Vec<String>> {
        drop(self.begin("list", directory, false)?);
        self.inner.list(directory)
    }

    fn create_dir_all(&self, directory: &Path) -> Result<()> {
        let mut state = self.begin("mkdir", directory, true)?;
        self.inner.create_dir_all(directory)?;
        state.directories.insert(directory.to_path_buf());
        Ok(())
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        drop(self.begin("exists", path, false)?);
        self.inner.exists(path)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let mut state = self.begin("lock", path, true)?;
        let inner = self.inner.lock(path)?;
        if !state.live.contains_key(path) {
            let number = state.add_inode(Inode::default());
            state.live.insert(path.to_path_buf(), number);
            state.pending.push(MetadataOp::Create {
                path: path.to_path_buf(),
                inode: number,
            });
        }
        Ok(Box::new(FaultFileLock { _inner: inner }))
    }

    fn sync_dir(&self, directory: &Path) -> Result<()> {
        let mut state = self.begin("sync_dir", directory, true)?;
        self.inner.sync_dir(directory)?;
        let pending = std::mem::take(&mut state.pending);
        let mut durable = std::mem::take(&mut state.durable);
        let mut rest = Vec::new();
        for operation in pending {
            if operation.directory() == Some(directory) {
                operation.apply(&mut durable);
            } else {
                rest.push(operation);
            }
        }
        state.durable = durable;
        state.pending = rest;
        state.check_invariants();
        Ok(())
    }
}
