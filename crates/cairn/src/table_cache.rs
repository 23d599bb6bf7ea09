//! Opening `SSTables` on demand, and iterating a whole level.
//!
//! An opened [`Table`] is kept in its `FileMeta` (a `OnceLock`), so after the first use a read
//! reaches it with one atomic load and no lock; the table closes when the last version listing
//! the file is dropped. Two threads racing to open the same file both open it and one copy
//! wins; that costs a duplicate open, never a wrong answer.
//!
//! Thread-safety contract: `TableCache` is `Send + Sync`; `LevelIterator` is owned by one thread.

use crate::error::{Error, Result};
use crate::filename;
use crate::fs::FileSystem;
use crate::iter::InternalIterator;
use crate::key::compare_internal_keys;
use crate::sstable::{BlockCache, Table, TableIterator};
use crate::version::FileMeta;
use std::cmp::Ordering;
use std::path::PathBuf;
use std::sync::Arc;

/// Opens tables of one database directory.
#[derive(Debug)]
pub struct TableCache {
    file_system: Arc<dyn FileSystem>,
    directory: PathBuf,
    block_cache: Option<Arc<BlockCache>>,
    verify_checksums: bool,
}

impl TableCache {
    /// A table opener for `directory`.
    pub fn new(
        file_system: Arc<dyn FileSystem>,
        directory: PathBuf,
        block_cache: Option<Arc<BlockCache>>,
        verify_checksums: bool,
    ) -> Self {
        TableCache {
            file_system,
            directory,
            block_cache,
            verify_checksums,
        }
    }

    /// The opened table for `meta`.
    pub fn table(&self, meta: &FileMeta) -> Result<Arc<Table>> {
        if let Some(table) = meta.table.get() {
            return Ok(Arc::clone(table));
        }
        let path = filename::table_path(&self.directory, meta.number);
        let file = self.file_system.open_read(&path)?;
        if file.size_bytes() != meta.size_bytes {
            return Err(Error::corruption(
                &path,
                0,
                format!(
                    "file is {} bytes, the MANIFEST says {}",
                    file.size_bytes(),
                    meta.size_bytes
                ),
            ));
        }
        let table = Arc::new(Table::open(
            file,
            meta.number,
            self.block_cache.clone(),
            self.verify_checksums,
        )?);
        let _ = meta.table.set(Arc::clone(&table));
        Ok(meta.table.get().cloned().unwrap_or(table))
    }

    /// The shared block cache, if any.
    pub fn block_cache(&self) -> Option<&Arc<BlockCache>> {
        self.block_cache.as_ref()
    }
}

/// Iterates the files of one level >= 1 (sorted, non-overlapping) as one sorted stream,
/// opening each table only when the cursor reaches it.
pub struct LevelIterator {
    files: Vec<Arc<FileMeta>>,
    tables: Arc<TableCache>,
    index: usize,
    current: Option<TableIterator>,
    error: Option<Error>,
    /// Whether blocks read go into the block cache (off for compaction and for scans that
    /// ask, so a one-time pass does not evict what reads keep hot).
    fill_cache: bool,
}

impl std::fmt::Debug for LevelIterator {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("LevelIterator")
            .field("files", &self.files.len())
            .field("index", &self.index)
            .finish()
    }
}

impl LevelIterator {
    /// Iterates `files`, which must be sorted and non-overlapping; `fill_cache` says whether
    /// the blocks it reads are added to the block cache.
    pub fn new(files: Vec<Arc<FileMeta>>, tables: Arc<TableCache>, fill_cache: bool) -> Self {
        LevelIterator {
            files,
            tables,
            index: 0,
            current: None,
            error: None,
            fill_cache,
        }
    }

    fn open(&mut self, index: usize) -> bool {
        self.index = index;
        self.current = None;
        let Some(meta) = self.files.get(index) else {
            return false;
        };
        match self.tables.table(meta) {
            Ok(table) => {
                self.current = Some(table.iter_with(self.fill_cache));
                true
            }
            Err(error) => {
                self.error = Some(error);
                false
            }
        }
    }

    fn current_valid(&self) -> bool {
        self.current
            .as_ref()
            .is_some_and(super::iter::InternalIterator::valid)
    }

    fn current_failed(&self) -> bool {
        self.current
            .as_ref()
            .is_some_and(|iterator| iterator.status().is_err())
    }

    fn skip_forward(&mut self) {
        while !self.current_valid() && self.error.is_none() && !self.current_failed() {
            if !self.open(self.index + 1) {
                return;
            }
            if let Some(iterator) = self.current.as_mut() {
                iterator.seek_to_first();
            }
        }
    }

    fn skip_backward(&mut self) {
        while !self.current_valid() && self.error.is_none() && !self.current_failed() {
            let Some(previous) = self.index.checked_sub(1) else {
                self.current = None;
                return;
            };
            if !self.open(previous) {
                return;
            }
            if let Some(iterator) = self.current.as_mut() {
                iterator.seek_to_last();
            }
        }
    }
}

impl InternalIterator for LevelIterator {
    fn valid(&self) -> bool {
        self.error.is_none() && self.current_valid()
    }

    fn seek_to_first(&mut self) {
        self.error = None;
        if self.open(0) {
            if let Some(iterator) = self.current.as_mut() {
                iterator.seek_to_first();
            }
            self.skip_forward();
        }
    }

    fn seek_to_last(&mut self) {
        self.error = None;
        let Some(last) = self.files.len().checked_sub(1) else {
            self.current = None;
            return;
        };
        if self.open(last) {
            if let Some(iterator) = self.current.as_mut() {
                iterator.seek_to_last();
            }
            self.skip_backward();
        }
    }

    fn seek(&mut self, target: &[u8]) {
        self.error = None;
        let index = self
            .files
            .partition_point(|file| compare_internal_keys(&file.largest, target) == Ordering::Less);
        if self.open(index) {
            if let Some(iterator) = self.current.as_mut() {
                iterator.seek(target);
            }
            self.skip_forward();
        }
    }

    fn next(&mut self) {
        debug_assert!(self.valid());
        if let Some(iterator) = self.current.as_mut() {
            iterator.next();
        }
        self.skip_forward();
    }

    fn prev(&mut self) {
        debug_assert!(self.valid());
        if let Some(iterator) = self.current.as_mut() {
            iterator.prev();
        }
        self.skip_backward();
    }

    fn key(&self) -> &[u8] {
        self.current
            .as_ref()
            .map_or(&[], super::iter::InternalIterator::key)
    }

    fn value(&self) -> &[u8] {
        self.current
            .as_ref()
            .map_or(&[], super::iter::InternalIterator::value)
    }

    fn status(&self) -> Result<()> {
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        match &self.current {
            Some(iterator) => iterator.status(),
            None => Ok(()),
        }
    }
}
