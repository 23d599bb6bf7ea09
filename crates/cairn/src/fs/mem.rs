//! [`MemFs`]: an in-memory file system.
//!
//! Job: fast tests, and the default base [`super::FaultFs`] wraps. Every operation is durable
//! at once (there is no page cache to lose); power loss is the wrapper's business.
//!
//! Thread-safety contract: `MemFs` is `Send + Sync` and cheap to clone (clones share state).
//! The name table sits behind one mutex; each file's bytes behind their own `RwLock`, so a
//! reader keeps its file's bytes after the name is removed or replaced, as on POSIX.
//!
//! Invariants:
//! 1. A `MemWritableFile`'s `size_bytes` equals the length of its byte vector (appends are the
//!    only writes through a handle).
//! 2. A path is in `locks` exactly while a `MemFileLock` for it is alive.

use super::{copy_at, not_found, FileLock, FileSystem, RandomAccessFile, SyncHandle, WritableFile};
use crate::error::{Error, Result};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

type SharedBytes = Arc<RwLock<Vec<u8>>>;

/// An in-memory file system: fast tests, and the base that fault-injecting test file systems
/// wrap. Every operation is durable at once (there is no page cache to lose). Clones share
/// the files.
///
/// ```
/// let file_system = cairn::MemFs::new();
/// let mut options = cairn::Options::default();
/// options.file_system = std::sync::Arc::new(file_system.clone());
/// cairn::Db::open("/db", options.clone())?.put("k", "v")?;
/// assert_eq!(cairn::Db::open("/db", options)?.get("k")?, Some(b"v".to_vec()));
/// # Ok::<(), cairn::Error>(())
/// ```
#[derive(Debug, Default, Clone)]
pub struct MemFs {
    state: Arc<Mutex<MemFsState>>,
}

#[derive(Debug, Default)]
struct MemFsState {
    files: BTreeMap<PathBuf, SharedBytes>,
    directories: HashSet<PathBuf>,
    locks: HashSet<PathBuf>,
}

impl MemFs {
    /// An empty in-memory file system.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, MemFsState> {
        // A panic while holding this lock can only come from a test assertion; the map itself
        // is never left half-updated, so recovering the guard is sound.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A copy of a file's bytes (for tests that corrupt or inspect files).
    pub fn file_contents(&self, path: &Path) -> Option<Vec<u8>> {
        let state = self.state();
        state.files.get(path).map(|bytes| {
            bytes
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone()
        })
    }

    /// Replaces a file's bytes (for tests that corrupt files).
    pub fn set_file_contents(&self, path: &Path, contents: Vec<u8>) {
        let mut state = self.state();
        state
            .files
            .insert(path.to_path_buf(), Arc::new(RwLock::new(contents)));
    }
}

#[derive(Debug)]
struct MemWritableFile {
    bytes: SharedBytes,
    size_bytes: u64,
}

impl WritableFile for MemWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.bytes
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(data);
        self.size_bytes += data.len() as u64;
        if cfg!(feature = "invariants") {
            let length = self
                .bytes
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .len();
            assert_eq!(self.size_bytes, length as u64, "MemFs invariant 1");
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        Ok(())
    }

    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn sync_handle(&self) -> Option<Box<dyn SyncHandle>> {
        Some(Box::new(MemSyncHandle))
    }

    fn appends_in_memory(&self) -> bool {
        true
    }
}

/// Nothing to make durable in memory.
#[derive(Debug)]
struct MemSyncHandle;

impl SyncHandle for MemSyncHandle {
    fn sync(&self) -> Result<()> {
        Ok(())
    }
}

#[derive(Debug)]
struct MemRandomAccessFile {
    path: PathBuf,
    bytes: SharedBytes,
    size_bytes: u64,
}

impl RandomAccessFile for MemRandomAccessFile {
    fn read_exact_at(&self, offset: u64, buffer: &mut [u8]) -> Result<()> {
        let bytes = self
            .bytes
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        copy_at(&bytes, offset, buffer, &self.path)
    }

    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

#[derive(Debug)]
struct MemFileLock {
    state: Arc<Mutex<MemFsState>>,
    path: PathBuf,
}

impl FileLock for MemFileLock {}

impl Drop for MemFileLock {
    fn drop(&mut self) {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        state.locks.remove(&self.path);
    }
}

impl FileSystem for MemFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let bytes: SharedBytes = Arc::new(RwLock::new(Vec::new()));
        self.state()
            .files
            .insert(path.to_path_buf(), Arc::clone(&bytes));
        Ok(Box::new(MemWritableFile {
            bytes,
            size_bytes: 0,
        }))
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let bytes = self
            .state()
            .files
            .get(path)
            .cloned()
            .ok_or_else(|| not_found("open", path))?;
        let size_bytes = bytes
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len() as u64;
        Ok(Arc::new(MemRandomAccessFile {
            path: path.to_path_buf(),
            bytes,
            size_bytes,
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut state = self.state();
        let bytes = state
            .files
            .remove(from)
            .ok_or_else(|| not_found("rename", from))?;
        state.files.insert(to.to_path_buf(), bytes);
        Ok(())
    }

    fn remove(&self, path: &Path) -> Result<()> {
        self.state()
            .files
            .remove(path)
            .map(|_| ())
            .ok_or_else(|| not_found("remove", path))
    }

    fn list(&self, directory: &Path) -> Result<Vec<String>> {
        let state = self.state();
        Ok(state
            .files
            .keys()
            .filter(|path| path.parent() == Some(directory))
            .filter_map(|path| path.file_name()?.to_str().map(str::to_string))
            .collect())
    }

    fn create_dir_all(&self, directory: &Path) -> Result<()> {
        self.state().directories.insert(directory.to_path_buf());
        Ok(())
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        let state = self.state();
        Ok(state.files.contains_key(path) || state.directories.contains(path))
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let mut state = self.state();
        if !state.locks.insert(path.to_path_buf()) {
            return Err(Error::Locked {
                path: path.to_path_buf(),
            });
        }
        state
            .files
            .entry(path.to_path_buf())
            .or_insert_with(|| Arc::new(RwLock::new(Vec::new())));
        Ok(Box::new(MemFileLock {
            state: Arc::clone(&self.state),
            path: path.to_path_buf(),
        }))
    }

    fn sync_dir(&self, _directory: &Path) -> Result<()> {
        Ok(())
    }
}
