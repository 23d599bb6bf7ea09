//! [`Mapping`]: a read-only shared memory mapping of a whole file, owned by reference count,
//! and [`MappedSlice`]: bytes borrowed out of one that keep it alive.
//!
//! Job: let a reader use file bytes in place. A mapped `SSTable` data block is parsed straight
//! out of the page cache — no buffer allocated, nothing copied, nothing put in the block cache
//! (the kernel's page cache already is one) — while the block it backs holds the mapping by
//! `Arc`, so a block handed out to a caller (a pinned value, an iterator's block) stays valid
//! after its table is closed.
//!
//! The rule that makes this safe is the one of mapped reads: **a mapped file is never
//! truncated or rewritten while it is mapped** (`SSTables` are immutable once written, their
//! size is checked against their footer at open, and they are deleted, never truncated; a
//! deleted file's pages live until the last mapping goes). A media error on a mapped page
//! cannot be returned as an error: the kernel raises `SIGBUS` instead. That is the price of
//! [`crate::TableReadMode::Mmap`], stated in its documentation.
//!
//! Thread-safety contract: `Mapping` and `MappedSlice` are `Send + Sync`; their bytes are never
//! written through any pointer, so any number of threads may read them at once.
//!
//! Invariants:
//! 1. A `Mapping`'s `base` is null exactly when `len == 0`; otherwise it maps file bytes
//!    `[0, len)` read-only until the `Mapping` drops (`munmap` there and nowhere else).
//! 2. Only this crate creates a `Mapping` (there is no public constructor), so every
//!    `&Mapping` any `RandomAccessFile` hands out is one of ours and keeps invariant 1.
//! 3. A `MappedSlice`'s pointer and length lie inside the mapping it holds (checked when it is
//!    made), so its bytes are valid for as long as the slice lives.

use crate::error::{Error, Result};
use std::fmt;
use std::ops::{Deref, Range};
use std::path::Path;
use std::sync::Arc;

/// A read-only memory mapping of a whole file (see the module documentation). Only the crate
/// creates mappings; users meet one as the answer of
/// [`RandomAccessFile::mapping`](super::RandomAccessFile::mapping).
pub struct Mapping {
    base: *const u8,
    len: usize,
}

// SAFETY: the mapping is read-only and never written through any pointer (invariant 1), so
// sharing or sending the pointer cannot race; it is unmapped only in `drop`, by the owner.
unsafe impl Send for Mapping {}
// SAFETY: as above: `&self` methods only read immutable memory.
unsafe impl Sync for Mapping {}

impl fmt::Debug for Mapping {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Mapping")
            .field("len", &self.len)
            .finish()
    }
}

impl Mapping {
    /// Maps the first `len` bytes of `file` read-only (`len` is the file's size: a mapping
    /// past the end would fault on access).
    #[cfg(target_os = "linux")]
    pub(crate) fn map(file: &std::fs::File, len: usize, path: &Path) -> Result<Mapping> {
        use std::os::fd::AsRawFd;
        if len == 0 {
            return Ok(Mapping {
                base: std::ptr::null(),
                len,
            });
        }
        // SAFETY: a new read-only shared mapping of `len` bytes of the file at an address of
        // the kernel's choosing; checked for MAP_FAILED below. The descriptor may close after
        // this (the mapping keeps the file referenced).
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(Error::io("mmap", path, std::io::Error::last_os_error()));
        }
        Ok(Mapping {
            base: base.cast::<u8>().cast_const(),
            len,
        })
    }

    /// Size of the mapping in bytes (the file's size when it was mapped).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mapped file was empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The mapped bytes (empty for an empty file).
    pub(crate) fn bytes(&self) -> &[u8] {
        if self.base.is_null() {
            return &[];
        }
        // SAFETY: `base` maps `len` readable bytes until drop (invariant 1), which cannot
        // happen while `&self` is borrowed; nothing writes them, and the file is never
        // truncated while mapped (module doc), so no page lies past the file's end (a media
        // error is the one fault left: `SIGBUS`, module doc).
        unsafe { std::slice::from_raw_parts(self.base, self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if self.base.is_null() {
            return;
        }
        // SAFETY: `base` is the `len`-byte mapping made by `map` (invariant 1), unmapped once,
        // here; every borrow of it (`bytes`, a `MappedSlice`) holds `self` alive, so none
        // outlives this.
        #[cfg(target_os = "linux")]
        unsafe {
            libc::munmap(self.base.cast_mut().cast(), self.len);
        }
    }
}

/// Bytes of a [`Mapping`], holding it alive: the zero-copy backing of a mapped block.
pub(crate) struct MappedSlice {
    mapping: Arc<Mapping>,
    start: *const u8,
    len: usize,
}

// SAFETY: the bytes are read-only mapped memory kept alive by `mapping` (invariant 3), which
// is itself `Send + Sync`.
unsafe impl Send for MappedSlice {}
// SAFETY: as above.
unsafe impl Sync for MappedSlice {}

impl MappedSlice {
    /// The bytes at `range` of `mapping`; `None` if the range is not inside it.
    pub(crate) fn new(mapping: &Arc<Mapping>, range: Range<usize>) -> Option<MappedSlice> {
        let bytes = mapping.bytes().get(range)?;
        Some(MappedSlice {
            mapping: Arc::clone(mapping),
            start: bytes.as_ptr(),
            len: bytes.len(),
        })
    }
}

impl Deref for MappedSlice {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `start..start + len` was checked to lie inside `mapping` when the slice was
        // made (invariant 3), and `self.mapping` keeps the mapping alive and unchanged for as
        // long as `&self` is borrowed.
        unsafe { std::slice::from_raw_parts(self.start, self.len) }
    }
}

impl fmt::Debug for MappedSlice {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("MappedSlice")
            .field("len", &self.len)
            .field("mapping", &self.mapping)
            .finish()
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_slice_keeps_its_mapping_and_stays_in_bounds() {
        let directory = std::env::temp_dir().join(format!("cairn-mapping-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&directory);
        std::fs::create_dir_all(&directory).unwrap();
        let path = directory.join("file");
        std::fs::write(&path, b"0123456789").unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let mapping = Arc::new(Mapping::map(&file, 10, &path).unwrap());
        assert_eq!(mapping.bytes(), b"0123456789");
        let slice = MappedSlice::new(&mapping, 2..5).unwrap();
        assert!(MappedSlice::new(&mapping, 8..11).is_none());
        // The slice holds the mapping: dropping every other owner (and the file) keeps it.
        drop(mapping);
        drop(file);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(&*slice, b"234");
        let empty_path = directory.join("empty");
        std::fs::write(&empty_path, b"").unwrap();
        let empty_file = std::fs::File::open(&empty_path).unwrap();
        let empty = Arc::new(Mapping::map(&empty_file, 0, &empty_path).unwrap());
        assert!(empty.is_empty());
        assert_eq!(&*MappedSlice::new(&empty, 0..0).unwrap(), b"");
        std::fs::remove_dir_all(&directory).unwrap();
    }
}
