//! A read-only file read through a shared memory mapping of the whole file: a positional read
//! is a copy out of the page cache, not a `pread(2)` system call (CS265 §3.2).
//!
//! Job: `FileSystem::open_read_mapped` on Linux. The file is mapped once, at open, for the
//! length it had then; every read is bounds-checked against that length, so a read past the
//! end is an `Io` error exactly as with `pread`, never a touch outside the mapping.
//!
//! The rule that makes a mapped read safe: **a mapped file is never truncated or rewritten
//! while it is mapped.** A page of a `MAP_SHARED` mapping whose file was cut below it raises
//! `SIGBUS` on access, which no error path can catch. The engine keeps the rule because it
//! maps only `SSTables`, which are immutable once `TableBuilder::finish` returns, checked
//! against the MANIFEST's size and their own footer at open, and deleted (never truncated)
//! only when no version lists them; a deleted file's pages stay valid until the last
//! mapping goes (`munmap` on drop).
//!
//! Thread-safety contract: `Send + Sync`; reads copy out of memory no one writes, so any
//! number of threads may read at once.
//!
//! Invariants:
//! 1. `base` is null exactly when `size_bytes == 0`; otherwise it maps file bytes
//!    `[0, size_bytes)` read-only until drop.
//! 2. Every read lies in `[0, size_bytes)` (checked before the copy).

use super::RandomAccessFile;
use crate::error::{Error, Result};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// See the module documentation.
#[derive(Debug)]
pub struct MappedRandomAccessFile {
    path: PathBuf,
    base: *const u8,
    size_bytes: u64,
}

// SAFETY: the mapping is read-only and never written through any pointer (invariant 1), so
// sharing or sending the pointer cannot race; it is unmapped only in `drop` (owner only).
unsafe impl Send for MappedRandomAccessFile {}
// SAFETY: as above: `&self` methods only copy out of immutable memory.
unsafe impl Sync for MappedRandomAccessFile {}

impl MappedRandomAccessFile {
    /// Maps all of `path` read-only.
    pub fn open(path: &Path) -> Result<Self> {
        let file = std::fs::File::open(path).map_err(|error| Error::io("open", path, error))?;
        let size_bytes = file
            .metadata()
            .map_err(|error| Error::io("stat", path, error))?
            .len();
        let length = usize::try_from(size_bytes).map_err(|_| {
            Error::io(
                "mmap",
                path,
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "file too large to map"),
            )
        })?;
        if length == 0 {
            return Ok(MappedRandomAccessFile {
                path: path.to_path_buf(),
                base: std::ptr::null(),
                size_bytes,
            });
        }
        // SAFETY: a new read-only shared mapping of the whole file at an address of the
        // kernel's choosing; checked for MAP_FAILED below. The descriptor may close after
        // this (the mapping keeps the file referenced).
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                length,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(Error::io("mmap", path, std::io::Error::last_os_error()));
        }
        Ok(MappedRandomAccessFile {
            path: path.to_path_buf(),
            base: base.cast::<u8>().cast_const(),
            size_bytes,
        })
    }

    /// The mapped bytes (empty for an empty file).
    fn bytes(&self) -> &[u8] {
        if self.base.is_null() {
            return &[];
        }
        // `size_bytes` fit in a usize when the file was mapped (`open`).
        #[allow(clippy::cast_possible_truncation)]
        let length = self.size_bytes as usize;
        // SAFETY: `base` maps `length` readable bytes until drop (invariant 1), which cannot
        // happen while `&self` is borrowed; nothing writes them, and the file is never
        // truncated while mapped (module doc), so touching any of them cannot fault.
        unsafe { std::slice::from_raw_parts(self.base, length) }
    }
}

impl RandomAccessFile for MappedRandomAccessFile {
    fn read_exact_at(&self, offset: u64, buffer: &mut [u8]) -> Result<()> {
        super::copy_at(self.bytes(), offset, buffer, &self.path)
    }

    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for MappedRandomAccessFile {
    fn drop(&mut self) {
        if self.base.is_null() {
            return;
        }
        #[allow(clippy::cast_possible_truncation)]
        let length = self.size_bytes as usize;
        // SAFETY: `base` is the `length`-byte mapping made by `open` (invariant 1), unmapped
        // once, here; no borrow of it outlives `&self`.
        unsafe {
            libc::munmap(self.base.cast_mut().cast(), length);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_match_the_file_and_stay_in_bounds() {
        let directory =
            std::env::temp_dir().join(format!("cairn-mapped-read-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&directory);
        std::fs::create_dir_all(&directory).unwrap();
        let path = directory.join("t");
        std::fs::write(&path, b"hello mapped world").unwrap();
        let file = MappedRandomAccessFile::open(&path).unwrap();
        assert_eq!(file.size_bytes(), 18);
        let mut buffer = [0u8; 6];
        file.read_exact_at(6, &mut buffer).unwrap();
        assert_eq!(&buffer, b"mapped");
        assert!(file.read_exact_at(13, &mut buffer).is_err());
        assert!(file.read_exact_at(u64::MAX, &mut buffer).is_err());
        let empty = directory.join("e");
        std::fs::write(&empty, b"").unwrap();
        let file = MappedRandomAccessFile::open(&empty).unwrap();
        assert!(file.read_exact_at(0, &mut buffer).is_err());
        file.read_exact_at(0, &mut []).unwrap();
        let _ = std::fs::remove_dir_all(&directory);
    }
}
