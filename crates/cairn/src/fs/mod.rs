//! The file-system layer: the `FileSystem` trait, the only door between the engine and files,
//! and its implementations — [`StdFs`] (the operating system, with a memory-mapped WAL on
//! Linux), [`MemFs`] (in memory) and [`FaultFs`] (a wrapper over any of them that injects
//! errors, latency and power loss).
//!
//! Every file the engine touches (WAL, `SSTable`, MANIFEST, CURRENT, LOCK) is created, read,
//! renamed, synced and deleted through this trait, so tests can swap in another file system.
//! Module layering: the traits live here; `std`, `mem`, `mapped`, `mapping` and `fault` depend
//! on them and never the reverse (this file only declares and re-exports them).
//!
//! Thread-safety contract: a `FileSystem` and every `RandomAccessFile` are `Send + Sync` and may
//! be used from many threads at once (reads are positional). A `WritableFile` is owned by one
//! writer at a time (`&mut self`); callers that share one wrap it in their own lock.
//!
//! Invariants (the durability vocabulary every implementation keeps):
//! 1. `append` may buffer in user space.
//! 2. `flush` hands every appended byte to the operating system (write(2)): survives a process
//!    crash, not a power loss.
//! 3. `sync` flushes then makes the bytes — and the file's current length — durable
//!    (fdatasync): survives power loss.
//! 4. A newly created or renamed file's *name* is durable only after `sync_dir` on its parent.
//! 5. `size_bytes <= allocated_bytes`; a `trim` that returns true changed the length, which is
//!    durable only after the next `sync` of that file.
//! 6. A [`SyncHandle`]'s `sync` makes durable at least every byte flushed (and the length
//!    reached) before that call started, even while the file keeps being appended to.

pub mod fault;
#[cfg(target_os = "linux")]
pub(crate) mod mapped;
#[cfg(target_os = "linux")]
pub(crate) mod mapped_read;
mod mapping;
mod mem;
mod std;

pub use self::fault::FaultFs;
pub(crate) use self::mapping::MappedSlice;
pub use self::mapping::Mapping;
pub use self::mem::MemFs;
pub use self::std::StdFs;

use crate::error::{Error, Result};
use ::std::fmt::Debug;
use ::std::path::Path;
use ::std::sync::Arc;

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
    /// The file's length on disk: `size_bytes` plus any space reserved ahead (zeros that a
    /// crash can leave behind the appended bytes). Fault injection models power loss from it.
    fn allocated_bytes(&self) -> u64 {
        self.size_bytes()
    }
    /// A handle that syncs this file from another thread while its writer keeps appending
    /// (invariant 6), or `None` (the default) if syncing is only possible through `sync`.
    /// The write-ahead log uses it so that its fdatasync never holds up writers.
    ///
    /// ```
    /// use cairn::fs::{FileSystem, MemFs};
    /// let fs = MemFs::new();
    /// let mut file = fs.create(std::path::Path::new("/log")).unwrap();
    /// file.append(b"record").unwrap();
    /// file.flush().unwrap();
    /// if let Some(handle) = file.sync_handle() {
    ///     handle.sync().unwrap(); // "record" is durable; `file` stays usable meanwhile
    /// }
    /// ```
    fn sync_handle(&self) -> Option<Box<dyn SyncHandle>> {
        None
    }
    /// Whether `append` plus `flush` is a memory copy with no system call (a shared mapping,
    /// or a file in memory); `false` (the default) otherwise. The write-ahead log then lets
    /// every writer append its own record right after publishing it; with a system call per
    /// append that costs more than the wait it saves (measured with `write(2)`: 4–10 % fewer
    /// puts at 2 and 16 threads).
    ///
    /// ```
    /// use cairn::fs::{FileSystem, MemFs};
    /// let file = MemFs::new().create(std::path::Path::new("/log")).unwrap();
    /// assert!(file.appends_in_memory());
    /// ```
    fn appends_in_memory(&self) -> bool {
        false
    }
}

/// Syncs a [`WritableFile`] independently of its writer (see [`WritableFile::sync_handle`]).
pub trait SyncHandle: Send + Sync + Debug {
    /// Makes every byte flushed before this call started durable, with the file's length.
    fn sync(&self) -> Result<()>;
}

/// A file opened for positional reads.
pub trait RandomAccessFile: Send + Sync + Debug {
    /// Reads exactly `buffer.len()` bytes at `offset`; a short file is an error.
    fn read_exact_at(&self, offset: u64, buffer: &mut [u8]) -> Result<()>;
    /// Size of the file in bytes when it was opened.
    fn size_bytes(&self) -> u64;
    /// The path the file was opened from (for error messages).
    fn path(&self) -> &Path;
    /// The whole file as a read-only memory mapping, where the file is read through one
    /// (`FileSystem::open_read_mapped` on Linux). A reader may then use the bytes in place
    /// instead of copying them out. The rule for any implementation: the mapped bytes are
    /// exactly what `read_exact_at` returns (a wrapper that transforms or observes reads must
    /// not lend its inner file's mapping). The default, and every wrapper that must see each
    /// read (such as [`FaultFs`]'s), answers `None`.
    fn mapping(&self) -> Option<&Arc<Mapping>> {
        None
    }
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
    /// Opens `path` for positional reads through a memory mapping where the implementation
    /// has one (a read is then a copy from the page cache instead of a `pread(2)`, and the
    /// file may lend the mapping itself through [`RandomAccessFile::mapping`]). The caller
    /// promises that the file is never truncated or rewritten while open (a mapped page past
    /// a new end would fault). The default is `open_read`.
    fn open_read_mapped(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.open_read(path)
    }
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
    /// Makes `to` a second name of the immutable file `from` (a checkpoint's tables). The
    /// default copies the bytes and syncs the copy; file systems with hard links override it.
    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        let bytes = self.read_all(from)?;
        let mut copy = self.create(to)?;
        copy.append(&bytes)?;
        copy.sync()
    }
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
            ::std::io::Error::new(::std::io::ErrorKind::UnexpectedEof, "read past end of file"),
        )),
    }
}

pub(crate) fn not_found(operation: &'static str, path: &Path) -> Error {
    Error::io(
        operation,
        path,
        ::std::io::Error::new(::std::io::ErrorKind::NotFound, "no such file"),
    )
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
        let directory =
            ::std::env::temp_dir().join(format!("cairn-fs-test-{}", ::std::process::id()));
        let _ = ::std::fs::remove_dir_all(&directory);
        round_trip(&StdFs, &directory);
        let _ = ::std::fs::remove_dir_all(&directory);
    }
}
