//! The `FileSystem` trait: the only door between the engine and files.
//!
//! Every file the engine touches (WAL, SSTable, MANIFEST, CURRENT, LOCK) is created, read,
//! renamed, synced and deleted through this trait, so tests can swap in [`MemFs`] (or a
//! fault-injecting wrapper) and simulate I/O errors and power loss.
//!
//! Thread-safety contract: a `FileSystem` and every `RandomAccessFile` are `Send + Sync` and may
//! be used from many threads at once (reads are positional). A `WritableFile` is owned by one
//! writer at a time (`&mut self`); callers that share one wrap it in their own lock.
//!
//! Durability vocabulary used across the crate:
//! 1. `append` may buffer in user space.
//! 2. `flush` hands every appended byte to the operating system (write(2)): survives a process
//!    crash, not a power loss.
//! 3. `sync` flushes then makes the bytes durable (fdatasync): survives power loss.
//! 4. A newly created or renamed file's *name* is durable only after `sync_dir` on its parent.

use crate::error::{Error, Result};
use std::collections::{BTreeMap, HashSet};
use std::fmt::Debug;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

/// A file opened for appending.
pub trait WritableFile: Send + Sync + Debug {
    /// Appends `data` (may stay in a user-space buffer until `flush`).
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Hands all appended bytes to the operating system.
    fn flush(&mut self) -> Result<()>;
    /// Flushes, then makes all appended bytes durable.
    fn sync(&mut self) -> Result<()>;
    /// Bytes appended so far (including still-buffered ones).
    fn size_bytes(&self) -> u64;
    /// Gives back space reserved past the appended bytes, so the file ends exactly at
    /// `size_bytes` (a memory-mapped log reserves ahead; see `FileSystem::create_log`).
    /// Returns whether the file changed; the caller syncs afterwards to make the new length
    /// durable. Appending after a trim is allowed. The default has nothing reserved.
    fn trim(&mut self) -> Result<bool> {
        Ok(false)
    }
}

/// A file opened for positional reads.
pub trait RandomAccessFile: Send + Sync + Debug {
    /// Reads exactly `buffer.len()` bytes at `offset`; a short file is an error.
    fn read_exact_at(&self, offset: u64, buffer: &mut [u8]) -> Result<()>;
    /// Size of the file in bytes when it was opened.
    fn size_bytes(&self) -> u64;
    /// The path the file was opened from (for error messages).
    fn path(&self) -> &Path;
}

/// A held directory lock; released on drop.
pub trait FileLock: Send + Sync + Debug {}

/// All file operations the engine performs.
pub trait FileSystem: Send + Sync + Debug {
    /// Creates (or truncates) `path` for appending.
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Creates (or truncates) `path` for a write-ahead log. Appends behave as for `create`,
    /// but an implementation may write the file through a memory mapping (an append is then
    /// a copy into the page cache, and `flush` has nothing left to do). Such a file may end in
    /// zeros after a crash, up to the space it had reserved; the log reader treats a zero
    /// tail as a torn tail. `size_hint_bytes` is about how large the log will grow (the
    /// memtable size): a mapped log reserves space ahead in steps sized from it. The default
    /// is `create`.
    fn create_log(&self, path: &Path, size_hint_bytes: u64) -> Result<Box<dyn WritableFile>> {
        let _ = size_hint_bytes;
        self.create(path)
    }
    /// Opens `path` for positional reads.
    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>>;
    /// Reads a whole (small) file.
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        let file = self.open_read(path)?;
        let size = usize::try_from(file.size_bytes())
            .map_err(|_| Error::InvalidArgument(format!("{} is too large", path.display())))?;
        let mut buffer = vec![0u8; size];
        file.read_exact_at(0, &mut buffer)?;
        Ok(buffer)
    }
    /// Atomically renames `from` to `to`, replacing `to`.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> Result<()>;
    /// Lists the file names (not paths) in `directory`.
    fn list(&self, directory: &Path) -> Result<Vec<String>>;
    /// Creates `directory` and its parents.
    fn create_dir_all(&self, directory: &Path) -> Result<()>;
    /// True if `path` exists.
    fn exists(&self, path: &Path) -> Result<bool>;
    /// Takes an exclusive lock on `path` (creating it), failing with [`Error::Locked`] if held.
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>>;
    /// Makes the directory entries of `directory` durable.
    fn sync_dir(&self, directory: &Path) -> Result<()>;
}

// ---------------------------------------------------------------------------------------------
// The real file system.

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct StdFs;

/// User-space buffer for appends; big enough that SSTable building does few syscalls.
const WRITE_BUFFER_BYTES: usize = 64 * 1024;

#[derive(Debug)]
struct StdWritableFile {
    path: PathBuf,
    file: std::fs::File,
    buffer: Vec<u8>,
    size_bytes: u64,
}

impl WritableFile for StdWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        if self.buffer.len() + data.len() > WRITE_BUFFER_BYTES {
            self.flush()?;
        }
        if data.len() >= WRITE_BUFFER_BYTES {
            self.file
                .write_all(data)
                .map_err(|error| Error::io("append", &self.path, error))?;
        } else {
            self.buffer.extend_from_slice(data);
        }
        self.size_bytes += data.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if !self.buffer.is_empty() {
            self.file
                .write_all(&self.buffer)
                .map_err(|error| Error::io("write", &self.path, error))?;
            self.buffer.clear();
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.flush()?;
        self.file
            .sync_data()
            .map_err(|error| Error::io("sync", &self.path, error))
    }

    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }
}

#[derive(Debug)]
struct StdRandomAccessFile {
    path: PathBuf,
    file: std::fs::File,
    size_bytes: u64,
}

impl RandomAccessFile for StdRandomAccessFile {
    fn read_exact_at(&self, offset: u64, buffer: &mut [u8]) -> Result<()> {
        use std::os::unix::fs::FileExt;
        self.file
            .read_exact_at(buffer, offset)
            .map_err(|error| Error::io("read", &self.path, error))
    }

    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

#[derive(Debug)]
struct StdFileLock {
    _file: std::fs::File,
}

impl FileLock for StdFileLock {}

impl FileSystem for StdFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|error| Error::io("create", path, error))?;
        Ok(Box::new(StdWritableFile {
            path: path.to_path_buf(),
            file,
            buffer: Vec::with_capacity(WRITE_BUFFER_BYTES),
            size_bytes: 0,
        }))
    }

    #[cfg(target_os = "linux")]
    fn create_log(&self, path: &Path, size_hint_bytes: u64) -> Result<Box<dyn WritableFile>> {
        match crate::mapped_file::MappedWritableFile::create(path, size_hint_bytes)? {
            Some(file) => Ok(Box::new(file)),
            None => self.create(path),
        }
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let file = std::fs::File::open(path).map_err(|error| Error::io("open", path, error))?;
        let size_bytes = file
            .metadata()
            .map_err(|error| Error::io("stat", path, error))?
            .len();
        Ok(Arc::new(StdRandomAccessFile {
            path: path.to_path_buf(),
            file,
            size_bytes,
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|error| Error::io("rename", from, error))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|error| Error::io("remove", path, error))
    }

    fn list(&self, directory: &Path) -> Result<Vec<String>> {
        let entries =
            std::fs::read_dir(directory).map_err(|error| Error::io("list", directory, error))?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|error| Error::io("list", directory, error))?;
            if let Some(name) = entry.file_name().to_str() {
                names.push(name.to_string());
            }
        }
        names.sort();
        Ok(names)
    }

    fn create_dir_all(&self, directory: &Path) -> Result<()> {
        std::fs::create_dir_all(directory).map_err(|error| Error::io("mkdir", directory, error))
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        path.try_exists()
            .map_err(|error| Error::io("stat", path, error))
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|error| Error::io("open lock", path, error))?;
        match file.try_lock() {
            Ok(()) => Ok(Box::new(StdFileLock { _file: file })),
            Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked {
                path: path.to_path_buf(),
            }),
            Err(std::fs::TryLockError::Error(error)) => Err(Error::io("lock", path, error)),
        }
    }

    fn sync_dir(&self, directory: &Path) -> Result<()> {
        let file = std::fs::File::open(directory)
            .map_err(|error| Error::io("open dir", directory, error))?;
        file.sync_all()
            .map_err(|error| Error::io("sync dir", directory, error))
    }
}

// ---------------------------------------------------------------------------------------------
// An in-memory file system for tests.

type SharedBytes = Arc<RwLock<Vec<u8>>>;

/// An in-memory file system: fast tests, and the base that fault-injecting test file systems
/// wrap. Every operation is durable at once (there is no page cache to lose).
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

/// Copies `buffer.len()` bytes of `data` at `offset` into `buffer`, or reports a read past the
/// end of `path` (shared by the in-memory file systems).
pub(crate) fn copy_at(data: &[u8], offset: u64, buffer: &mut [u8], path: &Path) -> Result<()> {
    let start = usize::try_from(offset).unwrap_or(usize::MAX);
    let end = start.saturating_add(buffer.len());
    match data.get(start..end) {
        Some(source) => {
            buffer.copy_from_slice(source);
            Ok(())
        }
        None => Err(Error::io(
            "read",
            path,
            std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "read past end of file"),
        )),
    }
}

fn not_found(operation: &'static str, path: &Path) -> Error {
    Error::io(
        operation,
        path,
        std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(fs: &dyn FileSystem, directory: &Path) {
        fs.create_dir_all(directory).unwrap();
        let path = directory.join("a");
        let mut file = fs.create(&path).unwrap();
        file.append(b"hello ").unwrap();
        file.append(b"world").unwrap();
        file.sync().unwrap();
        assert_eq!(file.size_bytes(), 11);
        let reader = fs.open_read(&path).unwrap();
        let mut buffer = [0u8; 5];
        reader.read_exact_at(6, &mut buffer).unwrap();
        assert_eq!(&buffer, b"world");
        assert!(reader.read_exact_at(8, &mut buffer).is_err());
        fs.rename(&path, &directory.join("b")).unwrap();
        assert_eq!(fs.list(directory).unwrap(), vec!["b".to_string()]);
        assert!(!fs.exists(&path).unwrap());
        let lock = fs.lock(&directory.join("LOCK")).unwrap();
        assert!(matches!(
            fs.lock(&directory.join("LOCK")),
            Err(Error::Locked { .. })
        ));
        drop(lock);
        fs.lock(&directory.join("LOCK")).unwrap();
        fs.remove(&directory.join("b")).unwrap();
        fs.sync_dir(directory).unwrap();
    }

    #[test]
    fn mem_fs_round_trip() {
        round_trip(&MemFs::new(), Path::new("/db"));
    }

    #[test]
    fn std_fs_round_trip() {
        let directory = std::env::temp_dir().join(format!("cairn-fs-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&directory);
        round_trip(&StdFs, &directory);
        let _ = std::fs::remove_dir_all(&directory);
    }
}
