//! `FaultFs`: an in-memory [`FileSystem`] that simulates power loss and injects I/O errors.
//!
//! Job: let tests reach the failure modes kill -9 never reaches (fsync, directory entries,
//! torn sectors) and the error paths a healthy disk never takes (EIO, ENOSPC), the way
//! LevelDB's fault_injection_test, RocksDB's FaultInjectionTestFS and Pebble's errorfs do.
//!
//! Model (what a crash may keep, see [`FaultFs::crash_image`]):
//! 1. Files are inodes. An inode has `data` (everything appended: what the page cache holds)
//!    and `synced_bytes` (the prefix made durable by `sync`). Files are append-only, as every
//!    file cairn writes is.
//! 2. Names live in two directory tables: the *live* one (what `list`/`open_read` see) and the
//!    *durable* one. `create`, `rename` and `remove` change the live table at once and append
//!    to a per-directory log of pending metadata operations; `sync_dir` applies that
//!    directory's pending operations to the durable table.
//! 3. A crash image keeps every durable name, applies a random prefix of the pending metadata
//!    operations (journaling file systems commit metadata in order; with probability 1/2 none),
//!    and gives each file its synced bytes plus a random prefix of its unsynced appends —
//!    sometimes with the last, partly written sector filled with garbage or zeros.
//!    Directories themselves are always durable.
//!
//! Faults ([`FaultPlan`]): every operation (create, open, read, append, flush, sync, rename,
//! remove, list, mkdir, exists, lock, sync_dir) gets an index from one counter; mutating
//! operations also get a *write point* index. A plan fails one operation index once, fails
//! every operation from a write point on (a crash: nothing reaches the disk after it), or
//! fails operations at random from a seed. An injected ENOSPC on an append writes a prefix of
//! the data first (a short write). [`FaultFs::injected`] reports what was injected where.
//!
//! Thread-safety contract: `FaultFs` is `Send + Sync` and cheap to clone (clones share state);
//! all state sits behind one mutex, so operations from many threads are linearised in the
//! order they take it — the operation indices are that order. Handles (`WritableFile`,
//! `RandomAccessFile`) refer to inodes, so a reader keeps working after its name is removed,
//! as on POSIX.
//!
//! Invariants: `synced_bytes <= data.len()` for every inode; an operation that fails by
//! injection changes nothing except the ENOSPC short write described above.

use crate::error::{Error, Result};
use crate::fs::{FileLock, FileSystem, RandomAccessFile, WritableFile};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

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
    /// Operation name ("append", "sync", "sync_dir", "read", ...).
    pub operation: &'static str,
    /// True if the operation was one of the syncs (`sync`, `sync_dir`).
    pub is_sync: bool,
    /// The file or directory.
    pub path: PathBuf,
    /// The error returned.
    pub kind: FaultKind,
}

/// A small deterministic generator (SplitMix64), so the library needs no `rand`.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..=max`.
    fn up_to(&mut self, max: u64) -> u64 {
        if max == u64::MAX {
            self.next()
        } else {
            self.next() % (max + 1)
        }
    }
}

#[derive(Debug, Default, Clone)]
struct Inode {
    data: Vec<u8>,
    synced_bytes: usize,
}

#[derive(Debug, Clone)]
enum MetadataOp {
    Create { path: PathBuf, inode: u64 },
    Rename { from: PathBuf, to: PathBuf },
    Remove { path: PathBuf },
}

impl MetadataOp {
    fn directory(&self) -> Option<&Path> {
        match self {
            MetadataOp::Create { path, .. } | MetadataOp::Remove { path } => path.parent(),
            // A rename across directories is durable only when both are synced; cairn never
            // does one, so the destination's directory decides.
            MetadataOp::Rename { to, .. } => to.parent(),
        }
    }

    fn apply(&self, table: &mut BTreeMap<PathBuf, u64>) {
        match self {
            MetadataOp::Create { path, inode } => {
                table.insert(path.clone(), *inode);
            }
            MetadataOp::Rename { from, to } => {
                if let Some(inode) = table.remove(from) {
                    table.insert(to.clone(), inode);
                }
            }
            MetadataOp::Remove { path } => {
                table.remove(path);
            }
        }
    }
}

#[derive(Debug, Default)]
struct State {
    matched: u64,
    inodes: HashMap<u64, Inode>,
    next_inode: u64,
    live: BTreeMap<PathBuf, u64>,
    durable: BTreeMap<PathBuf, u64>,
    pending: Vec<MetadataOp>,
    directories: HashSet<PathBuf>,
    locks: HashSet<PathBuf>,
    operations: u64,
    write_points: u64,
    plan: FaultPlan,
    random: Option<SplitMix64>,
    crashed: bool,
    injected: Vec<InjectedFault>,
}

impl State {
    /// Counts one operation and decides whether it fails.
    fn check(&mut self, operation: &'static str, path: &Path, mutating: bool) -> Option<FaultKind> {
        let index = self.operations;
        self.operations += 1;
        let write_point = self.write_points;
        if mutating {
            self.write_points += 1;
        }
        let fault = match self.plan {
            FaultPlan::None => None,
            FaultPlan::Once { index: at, kind } => (index == at).then_some(kind),
            FaultPlan::CrashAtWritePoint { index: at } => {
                if mutating && write_point == at {
                    self.crashed = true;
                }
                self.crashed.then_some(FaultKind::Eio)
            }
            FaultPlan::Matching {
                operation: name,
                path_contains,
                skip,
                kind,
                crash,
            } => {
                let matches = operation == name
                    && path
                        .to_str()
                        .is_some_and(|path| path.contains(path_contains));
                let fire = matches && self.matched == skip && !self.crashed;
                if matches {
                    self.matched += 1;
                }
                if fire && crash {
                    self.crashed = true;
                }
                if self.crashed {
                    Some(FaultKind::Eio)
                } else {
                    fire.then_some(kind)
                }
            }
            FaultPlan::Random { one_in, kind, .. } => {
                let generator = self.random.get_or_insert(SplitMix64(0));
                (one_in <= 1 || generator.next().is_multiple_of(one_in)).then_some(kind)
            }
        };
        if let Some(kind) = fault {
            self.injected.push(InjectedFault {
                operation_index: index,
                operation,
                is_sync: matches!(operation, "sync" | "sync_dir"),
                path: path.to_path_buf(),
                kind,
            });
        }
        fault
    }

    fn new_inode(&mut self) -> u64 {
        let number = self.next_inode;
        self.next_inode += 1;
        self.inodes.insert(number, Inode::default());
        number
    }
}

fn injected_error(operation: &'static str, path: &Path, kind: FaultKind) -> Error {
    Error::io(operation, path, kind.to_io_error())
}

fn not_found(operation: &'static str, path: &Path) -> Error {
    Error::io(
        operation,
        path,
        std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
    )
}

/// The fault-injecting, power-loss-simulating in-memory file system (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct FaultFs {
    state: Arc<Mutex<State>>,
}

impl FaultFs {
    /// An empty file system with no faults planned.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every critical section completes its update before anything can panic; a poisoned
        // lock (a test assertion failed elsewhere) still guards consistent state.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
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

    /// True once a [`FaultPlan::CrashAtWritePoint`] fired (or [`Self::crash_now`] ran).
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
    /// `FaultFs` in which everything is durable and no fault is planned. `seed` chooses which
    /// unsynced metadata operations and bytes survive.
    pub fn crash_image(&self, seed: u64) -> FaultFs {
        let state = self.state();
        let mut random = SplitMix64(seed ^ 0x5eed_c0de_0bad_f00d);
        let mut names = state.durable.clone();
        if !state.pending.is_empty() && random.next() % 2 == 1 {
            let kept = random.up_to(state.pending.len() as u64) as usize;
            for operation in state.pending.iter().take(kept) {
                operation.apply(&mut names);
            }
        }
        let mut image = State {
            directories: state.directories.clone(),
            ..State::default()
        };
        let mut copied: HashMap<u64, u64> = HashMap::new();
        for (path, inode_number) in names {
            let target = match copied.get(&inode_number) {
                Some(&target) => target,
                None => {
                    let Some(inode) = state.inodes.get(&inode_number) else {
                        continue;
                    };
                    let data = surviving_bytes(inode, &mut random);
                    let target = image.new_inode();
                    if let Some(copy) = image.inodes.get_mut(&target) {
                        copy.synced_bytes = data.len();
                        copy.data = data;
                    }
                    copied.insert(inode_number, target);
                    target
                }
            };
            image.live.insert(path.clone(), target);
            image.durable.insert(path, target);
        }
        FaultFs {
            state: Arc::new(Mutex::new(image)),
        }
    }

    /// A copy of a file's live bytes (for tests that inspect or corrupt files).
    pub fn file_contents(&self, path: &Path) -> Option<Vec<u8>> {
        let state = self.state();
        let inode = state.live.get(path)?;
        state.inodes.get(inode).map(|inode| inode.data.clone())
    }

    /// Replaces a file's bytes with durable `contents` (for tests that corrupt files).
    pub fn set_file_contents(&self, path: &Path, contents: Vec<u8>) {
        let mut state = self.state();
        let number = state.new_inode();
        if let Some(inode) = state.inodes.get_mut(&number) {
            inode.synced_bytes = contents.len();
            inode.data = contents;
        }
        state.live.insert(path.to_path_buf(), number);
        state.durable.insert(path.to_path_buf(), number);
    }
}

/// Synced bytes plus a random prefix of the unsynced ones, the last sector sometimes torn.
fn surviving_bytes(inode: &Inode, random: &mut SplitMix64) -> Vec<u8> {
    const SECTOR: usize = 512;
    let synced = inode.synced_bytes.min(inode.data.len());
    let unsynced = inode.data.len() - synced;
    let kept = random.up_to(unsynced as u64) as usize;
    let mut data = inode.data[..synced + kept].to_vec();
    if kept < unsynced {
        // The sector being written when power failed may hold anything up to its end.
        let sector_end = (data.len() / SECTOR + 1) * SECTOR;
        let torn_end = sector_end.min(inode.data.len());
        match random.next() % 4 {
            0 => {
                while data.len() < torn_end {
                    data.push(random.next() as u8);
                }
            }
            1 => data.resize(torn_end, 0),
            _ => {}
        }
    }
    data
}

#[derive(Debug)]
struct FaultWritableFile {
    state: Arc<Mutex<State>>,
    path: PathBuf,
    inode: u64,
    size_bytes: u64,
}

impl FaultWritableFile {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl WritableFile for FaultWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let mut state = self.state();
        let fault = state.check("append", &self.path, true);
        let written = match fault {
            None => data.len(),
            // A full disk takes what fits: a short write, then the error.
            Some(FaultKind::Enospc) if !state.crashed => data.len() / 2,
            Some(_) => 0,
        };
        if let Some(inode) = state.inodes.get_mut(&self.inode) {
            inode.data.extend_from_slice(&data[..written]);
        }
        drop(state);
        self.size_bytes += written as u64;
        match fault {
            None => Ok(()),
            Some(kind) => Err(injected_error("append", &self.path, kind)),
        }
    }

    fn flush(&mut self) -> Result<()> {
        let mut state = self.state();
        match state.check("flush", &self.path, true) {
            None => Ok(()),
            Some(kind) => Err(injected_error("write", &self.path, kind)),
        }
    }

    fn sync(&mut self) -> Result<()> {
        let mut state = self.state();
        if let Some(kind) = state.check("sync", &self.path, true) {
            return Err(injected_error("sync", &self.path, kind));
        }
        if let Some(inode) = state.inodes.get_mut(&self.inode) {
            inode.synced_bytes = inode.data.len();
        }
        Ok(())
    }

    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }
}

#[derive(Debug)]
struct FaultRandomAccessFile {
    state: Arc<Mutex<State>>,
    path: PathBuf,
    inode: u64,
    size_bytes: u64,
}

impl RandomAccessFile for FaultRandomAccessFile {
    fn read_exact_at(&self, offset: u64, buffer: &mut [u8]) -> Result<()> {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(kind) = state.check("read", &self.path, false) {
            return Err(injected_error("read", &self.path, kind));
        }
        let visible = usize::try_from(self.size_bytes).unwrap_or(usize::MAX);
        let data = state
            .inodes
            .get(&self.inode)
            .and_then(|inode| inode.data.get(..visible.min(inode.data.len())))
            .unwrap_or(&[]);
        crate::fs::copy_at(data, offset, buffer, &self.path)
    }

    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

#[derive(Debug)]
struct FaultFileLock {
    state: Arc<Mutex<State>>,
    path: PathBuf,
}

impl FileLock for FaultFileLock {}

impl Drop for FaultFileLock {
    fn drop(&mut self) {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        state.locks.remove(&self.path);
    }
}

impl FileSystem for FaultFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let mut state = self.state();
        if let Some(kind) = state.check("create", path, true) {
            return Err(injected_error("create", path, kind));
        }
        let inode = state.new_inode();
        state.live.insert(path.to_path_buf(), inode);
        state.pending.push(MetadataOp::Create {
            path: path.to_path_buf(),
            inode,
        });
        Ok(Box::new(FaultWritableFile {
            state: Arc::clone(&self.state),
            path: path.to_path_buf(),
            inode,
            size_bytes: 0,
        }))
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let mut state = self.state();
        if let Some(kind) = state.check("open", path, false) {
            return Err(injected_error("open", path, kind));
        }
        let inode = *state
            .live
            .get(path)
            .ok_or_else(|| not_found("open", path))?;
        let size_bytes = state
            .inodes
            .get(&inode)
            .map_or(0, |inode| inode.data.len() as u64);
        Ok(Arc::new(FaultRandomAccessFile {
            state: Arc::clone(&self.state),
            path: path.to_path_buf(),
            inode,
            size_bytes,
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut state = self.state();
        if let Some(kind) = state.check("rename", from, true) {
            return Err(injected_error("rename", from, kind));
        }
        let inode = state
            .live
            .remove(from)
            .ok_or_else(|| not_found("rename", from))?;
        state.live.insert(to.to_path_buf(), inode);
        state.pending.push(MetadataOp::Rename {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
        });
        Ok(())
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let mut state = self.state();
        if let Some(kind) = state.check("remove", path, true) {
            return Err(injected_error("remove", path, kind));
        }
        state
            .live
            .remove(path)
            .ok_or_else(|| not_found("remove", path))?;
        state.pending.push(MetadataOp::Remove {
            path: path.to_path_buf(),
        });
        Ok(())
    }

    fn list(&self, directory: &Path) -> Result<Vec<String>> {
        let mut state = self.state();
        if let Some(kind) = state.check("list", directory, false) {
            return Err(injected_error("list", directory, kind));
        }
        Ok(state
            .live
            .keys()
            .filter(|path| path.parent() == Some(directory))
            .filter_map(|path| path.file_name()?.to_str().map(str::to_string))
            .collect())
    }

    fn create_dir_all(&self, directory: &Path) -> Result<()> {
        let mut state = self.state();
        if let Some(kind) = state.check("mkdir", directory, true) {
            return Err(injected_error("mkdir", directory, kind));
        }
        state.directories.insert(directory.to_path_buf());
        Ok(())
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        let mut state = self.state();
        if let Some(kind) = state.check("exists", path, false) {
            return Err(injected_error("stat", path, kind));
        }
        Ok(state.live.contains_key(path) || state.directories.contains(path))
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let mut state = self.state();
        if let Some(kind) = state.check("lock", path, true) {
            return Err(injected_error("lock", path, kind));
        }
        if !state.locks.insert(path.to_path_buf()) {
            return Err(Error::Locked {
                path: path.to_path_buf(),
            });
        }
        if !state.live.contains_key(path) {
            let inode = state.new_inode();
            state.live.insert(path.to_path_buf(), inode);
            state.pending.push(MetadataOp::Create {
                path: path.to_path_buf(),
                inode,
            });
        }
        Ok(Box::new(FaultFileLock {
            state: Arc::clone(&self.state),
            path: path.to_path_buf(),
        }))
    }

    fn sync_dir(&self, directory: &Path) -> Result<()> {
        let mut state = self.state();
        if let Some(kind) = state.check("sync_dir", directory, true) {
            return Err(injected_error("sync dir", directory, kind));
        }
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
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn write(fs: &FaultFs, path: &Path, data: &[u8], sync: bool) -> Box<dyn WritableFile> {
        let mut file = fs.create(path).unwrap();
        file.append(data).unwrap();
        if sync {
            file.sync().unwrap();
        }
        file
    }

    #[test]
    fn unsynced_create_disappears_and_synced_data_survives() {
        let fs = FaultFs::new();
        let directory = Path::new("/d");
        fs.create_dir_all(directory).unwrap();
        let _a = write(&fs, &directory.join("a"), b"durable", true);
        fs.sync_dir(directory).unwrap();
        let _b = write(
            &fs,
            &directory.join("b"),
            b"synced data, unsynced name",
            true,
        );
        for seed in 0..50 {
            let image = fs.crash_image(seed);
            assert_eq!(
                image.file_contents(&directory.join("a")).unwrap(),
                b"durable"
            );
            // `b`'s create is pending: kept only if the random metadata prefix includes it,
            // and then with its synced data.
            if let Some(data) = image.file_contents(&directory.join("b")) {
                assert_eq!(data, b"synced data, unsynced name");
            }
        }
        let dropped = (0..50).any(|seed| {
            fs.crash_image(seed)
                .file_contents(&directory.join("b"))
                .is_none()
        });
        assert!(dropped);
    }

    #[test]
    fn unsynced_appends_keep_a_prefix_possibly_torn() {
        let fs = FaultFs::new();
        let directory = Path::new("/d");
        let path = directory.join("log");
        let mut file = write(&fs, &path, &[1u8; 100], true);
        fs.sync_dir(directory).unwrap();
        file.append(&[2u8; 2000]).unwrap();
        let mut lengths = HashSet::new();
        for seed in 0..200 {
            let data = fs.crash_image(seed).file_contents(&path).unwrap();
            assert!(data.len() >= 100 && data.len() <= 2100);
            assert_eq!(&data[..100], &[1u8; 100]);
            lengths.insert(data.len());
        }
        assert!(lengths.len() > 10);
    }

    #[test]
    fn unsynced_rename_reverts() {
        let fs = FaultFs::new();
        let directory = Path::new("/d");
        let _old = write(&fs, &directory.join("CURRENT"), b"old", true);
        fs.sync_dir(directory).unwrap();
        let _new = write(&fs, &directory.join("CURRENT.tmp"), b"new", true);
        fs.rename(&directory.join("CURRENT.tmp"), &directory.join("CURRENT"))
            .unwrap();
        let mut seen = HashSet::new();
        for seed in 0..100 {
            let image = fs.crash_image(seed);
            seen.insert(image.file_contents(&directory.join("CURRENT")).unwrap());
        }
        assert!(seen.contains(b"old".as_slice()) && seen.contains(b"new".as_slice()));
        fs.sync_dir(directory).unwrap();
        for seed in 0..20 {
            let image = fs.crash_image(seed);
            assert_eq!(
                image.file_contents(&directory.join("CURRENT")).unwrap(),
                b"new"
            );
            assert!(image
                .file_contents(&directory.join("CURRENT.tmp"))
                .is_none());
        }
    }

    #[test]
    fn faults_fire_where_planned_and_are_reported() {
        let fs = FaultFs::new();
        let directory = Path::new("/d");
        fs.set_plan(FaultPlan::Once {
            index: 2,
            kind: FaultKind::Enospc,
        });
        let mut file = fs.create(&directory.join("a")).unwrap(); // 0
        file.append(b"0123").unwrap(); // 1
        let error = file.append(b"4567").unwrap_err(); // 2: short write
        assert!(error.is_io());
        file.append(b"89").unwrap(); // 3
        assert_eq!(fs.file_contents(&directory.join("a")).unwrap(), b"01234589");
        assert_eq!(fs.operation_count(), 4);
        let injected = fs.injected();
        assert_eq!(injected.len(), 1);
        assert_eq!(injected[0].operation_index, 2);
        assert_eq!(injected[0].operation, "append");

        fs.reset_counters();
        fs.set_plan(FaultPlan::CrashAtWritePoint { index: 1 });
        assert!(fs.exists(&directory.join("a")).unwrap()); // not a write point
        file.sync().unwrap(); // write point 0
        assert!(file.append(b"x").is_err()); // write point 1: crash
        assert!(fs.exists(&directory.join("a")).is_err()); // everything fails afterwards
        assert!(fs.crashed());
    }
}
