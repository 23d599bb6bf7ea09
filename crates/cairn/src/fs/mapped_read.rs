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
//! 1. `mapping` maps file bytes `[0, size_bytes)` read-only for the file's whole life (the
//!    mapping itself is [`Mapping`]; blocks borrowed from it hold it past the file's drop).
//! 2. Every read lies in `[0, size_bytes)` (checked before the copy).

use super::mapping::Mapping;
use super::RandomAccessFile;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// See the module documentation.
#[derive(Debug)]
pub struct MappedRandomAccessFile {
    path: PathBuf,
    mapping: Arc<Mapping>,
    size_bytes: u64,
}

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
        Ok(MappedRandomAccessFile {
            path: path.to_path_buf(),
            mapping: Arc::new(Mapping::map(&file, length, path)?),
            size_bytes,
        })
    }
}

impl RandomAccessFile for MappedRandomAccessFile {
    fn read_exact_at(&self, offset: u64, buffer: &mut [u8]) -> Result<()> {
        super::copy_at(self.mapping.bytes(), offset, buffer, &self.path)
    }

    fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn mapping(&self) -> Option<&Arc<Mapping>> {
        Some(&self.mapping)
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
