//! [`StdFs`]: the operating system's file system.
//!
//! Job: plain files through `std::fs` (buffered appends, positional reads, `flock`-style
//! locks), and on Linux the memory-mapped write-ahead log of the `mapped` module behind
//! `create_log`.
//!
//! Thread-safety contract: `StdFs` is a stateless `Copy` value; the kernel serialises what
//! needs serialising. A writable file is used through `&mut self` by one writer.
//!
//! Invariants:
//! 1. `StdWritableFile::size_bytes` counts every appended byte, buffered or written.
//! 2. The user-space buffer never holds more than `WRITE_BUFFER_BYTES`; `flush` and `sync`
//!    empty it before returning `Ok`.

use super::{FileLock, FileSystem, RandomAccessFile, SyncHandle, WritableFile};
use crate::error::{Error, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The operating system's file system (the default of [`crate::Options::file_system`]).
///
/// ```
/// use cairn::FileSystem;
/// let directory = std::env::temp_dir().join("cairn-stdfs-doctest");
/// cairn::StdFs.create_dir_all(&directory)?;
/// assert!(cairn::StdFs.exists(&directory)?);
/// # Ok::<(), cairn::Error>(())
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct StdFs;

/// User-space buffer for appends; big enough that `SSTable` building does few syscalls.
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

    fn sync_handle(&self) -> Option<Box<dyn SyncHandle>> {
        StdSyncHandle::of(&self.file, &self.path)
    }
}

/// A second descriptor of a file: `fdatasync` on it covers every byte written through any
/// descriptor before the call (the kernel syncs the inode, not the descriptor).
#[derive(Debug)]
pub(super) struct StdSyncHandle {
    file: std::fs::File,
    path: PathBuf,
}

impl StdSyncHandle {
    /// A handle on `file`, or `None` if the descriptor cannot be duplicated (the caller then
    /// syncs through its writer).
    pub(super) fn of(file: &std::fs::File, path: &Path) -> Option<Box<dyn SyncHandle>> {
        let file = file.try_clone().ok()?;
        Some(Box::new(StdSyncHandle {
            file,
            path: path.to_path_buf(),
        }))
    }
}

impl SyncHandle for StdSyncHandle {
    fn sync(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|error| Error::io("sync", &self.path, error))
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
        match super::mapped::MappedWritableFile::create(path, size_hint_bytes)? {
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

    #[cfg(target_os = "linux")]
    fn open_read_mapped(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        Ok(Arc::new(super::mapped_read::MappedRandomAccessFile::open(
            path,
        )?))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|error| Error::io("rename", from, error))
    }

    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        match std::fs::hard_link(from, to) {
            // Across file systems a link cannot be made; a synced copy is as good to a
            // checkpoint (tables are never modified).
            Err(error) if error.kind() == std::io::ErrorKind::CrossesDevices => {
                std::fs::copy(from, to).map_err(|error| Error::io("copy", to, error))?;
                std::fs::File::open(to)
                    .and_then(|copy| copy.sync_all())
                    .map_err(|error| Error::io("sync", to, error))
            }
            other => other.map_err(|error| Error::io("hard link", to, error)),
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// A checkpoint links its tables; across devices (a database on disk, a checkpoint on
    /// tmpfs) a link fails with EXDEV, and the documented fallback is a synced copy.
    #[test]
    fn a_hard_link_across_devices_falls_back_to_a_copy() {
        let shm = Path::new("/dev/shm");
        let disk = std::env::temp_dir();
        let (Ok(shm_meta), Ok(disk_meta)) = (std::fs::metadata(shm), std::fs::metadata(&disk))
        else {
            return;
        };
        if shm_meta.dev() == disk_meta.dev() {
            return; // one device here: nothing to cross
        }
        let from = disk.join(format!("cairn-link-from-{}", std::process::id()));
        let to = shm.join(format!("cairn-link-to-{}", std::process::id()));
        std::fs::write(&from, b"table bytes").unwrap();
        let _ = std::fs::remove_file(&to);
        let linked = StdFs.hard_link(&from, &to);
        let copied = std::fs::read(&to).ok();
        let _ = std::fs::remove_file(&from);
        let _ = std::fs::remove_file(&to);
        linked.unwrap();
        assert_eq!(copied.as_deref(), Some(&b"table bytes"[..]));
    }
}
