//! Opening `SSTables` on demand, and iterating a whole level.
//!
//! An opened [`Table`] is kept in its `FileMeta` (a `OnceLock`), so after the first use a read
//! reaches it with one atomic load and no lock; the table closes when the last version listing
//! the file is dropped. Two threads racing to open the same file both open it and one copy
//! wins; that costs a duplicate open, never a wrong answer.
//!
//! A point lookup borrows the table from its `FileMeta` ([`TableCache::table_ref`]): the
//! caller's super version keeps the `FileMeta` alive, so the lookup takes no reference count
//! and writes no shared memory to reach the table. Tables are opened with `pread` or through a
//! memory mapping ([`TableReadMode`]); a mapped table is safe because table files are never
//! truncated or rewritten (see `fs::mapped_read`), and its size is checked against the
//! MANIFEST here and against its footer by `Table::open`.
//!
//! A [`LevelIterator`] tells a merge, before any seek, where a seek to a user key could land
//! (`InternalIterator::seek_bound`) from the run's file ranges, the covering table's Bloom
//! filter and its largest sequence, so the merge reads a data block of this run only when the
//! run may hold the smallest key.
//!
//! Thread-safety contract: `TableCache` is `Send + Sync`; `LevelIterator` is owned by one thread.
//!
//! Invariants:
//! 1. A table is opened from a file whose size equals the MANIFEST's `size_bytes`.
//! 2. Once `meta.table` is set, every later call returns that same table.
//! 3. A table is opened only if its properties' key and sequence bounds equal the MANIFEST's.

use crate::error::{Error, Result};
use crate::filename;
use crate::fs::FileSystem;
use crate::iter::{InternalIterator, SeekBound};
use crate::key::compare_internal_keys;
use crate::lookup_pool::LookupPool;
use crate::options::TableReadMode;
use crate::sstable::{BlockCache, Table, TableIterator};
use crate::version::{FileMeta, Version};
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
    read_mode: TableReadMode,
    lookup_pool: Option<LookupPool>,
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
            read_mode: TableReadMode::Pread,
            lookup_pool: None,
        }
    }

    /// The same opener with a pool of `threads` threads for parallel run probes (none for 0).
    pub fn with_lookup_threads(mut self, threads: usize) -> Result<Self> {
        if threads > 0 {
            let pool = LookupPool::new(threads)
                .map_err(|error| Error::io("spawn", &self.directory, error))?;
            self.lookup_pool = Some(pool);
        }
        Ok(self)
    }

    /// The pool for parallel run probes, if `lookup_threads` asked for one.
    pub fn lookup_pool(&self) -> Option<&LookupPool> {
        self.lookup_pool.as_ref()
    }

    /// The same opener, reading tables as `read_mode` says.
    #[must_use]
    pub fn with_read_mode(mut self, read_mode: TableReadMode) -> Self {
        self.read_mode = read_mode;
        self
    }

    /// The opened table for `meta`, shared (for iterators that outlive the caller's borrow).
    pub fn table(&self, meta: &FileMeta) -> Result<Arc<Table>> {
        self.table_ref(meta)?;
        meta.table.get().cloned().ok_or_else(|| {
            Error::InvalidArgument(format!("table {} was not kept after open", meta.number))
        })
    }

    /// The opened table for `meta`, borrowed from it: no reference count is taken, so a
    /// point lookup reaches an open table with one atomic load and no shared write.
    pub fn table_ref<'a>(&self, meta: &'a FileMeta) -> Result<&'a Table> {
        if let Some(table) = meta.table.get() {
            return Ok(table);
        }
        let table = self.open(meta)?;
        // A racing opener may have won; either copy is the same immutable table.
        Ok(meta.table.get_or_init(|| table))
    }

    /// Opens the table file of `meta` (invariant 1).
    fn open(&self, meta: &FileMeta) -> Result<Arc<Table>> {
        let path = filename::table_path(&self.directory, meta.number);
        let file = match self.read_mode {
            TableReadMode::Pread => self.file_system.open_read(&path)?,
            // A table that cannot be mapped (address space or `vm.max_map_count` exhausted)
            // is read with copies instead: slower, never unavailable. Errors the copying
            // open also hits (a missing file) are reported from it.
            TableReadMode::Mmap => match self.file_system.open_read_mapped(&path) {
                Ok(file) => file,
                Err(_) => self.file_system.open_read(&path)?,
            },
        };
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
        let table = Table::open(
            file,
            meta.number,
            self.block_cache.clone(),
            self.verify_checksums,
        )?;
        check_bounds(&table, meta, &path)?;
        Ok(Arc::new(table))
    }

    /// The shared block cache, if any.
    pub fn block_cache(&self) -> Option<&Arc<BlockCache>> {
        self.block_cache.as_ref()
    }
}

/// Invariant 3: the table's own key and sequence bounds (its properties block) are the
/// MANIFEST's. Reads trust the table's largest sequence to rank a run before reading it, so
/// a table whose properties disagree with its entries must not be read.
fn check_bounds(table: &Table, meta: &FileMeta, path: &std::path::Path) -> Result<()> {
    let properties = table.properties();
    let agree = properties.smallest_key == meta.smallest
        && properties.largest_key == meta.largest
        && properties.smallest_sequence == meta.smallest_sequence
        && properties.largest_sequence == meta.largest_sequence;
    if agree {
        return Ok(());
    }
    Err(Error::corruption(
        path,
        0,
        format!(
            "table bounds (sequences {}..={}) differ from the MANIFEST's (sequences {}..={}), \
             or its smallest or largest key does",
            properties.smallest_sequence,
            properties.largest_sequence,
            meta.smallest_sequence,
            meta.largest_sequence
        ),
    ))
}

/// What every run iterator of one scan shares: the version whose runs they walk and the table
/// opener. One per scan, so each of its run iterators clones an `Arc` no other thread
/// touches, instead of the version's and the opener's, whose counts every reading core
/// writes.
#[derive(Debug)]
pub struct ScanSource {
    version: Arc<Version>,
    tables: Arc<TableCache>,
}

impl ScanSource {
    /// The source for run iterators over `version`.
    pub fn new(version: Arc<Version>, tables: Arc<TableCache>) -> Arc<Self> {
        Arc::new(ScanSource { version, tables })
    }
}

/// The files a [`LevelIterator`] walks: its own list, or a range of one level of a scan's
/// version (one reference count on the scan's own source, none per file).
enum LevelFiles {
    Owned {
        files: Vec<Arc<FileMeta>>,
        tables: Arc<TableCache>,
    },
    Shared {
        source: Arc<ScanSource>,
        level: usize,
        range: std::ops::Range<usize>,
    },
}

impl LevelFiles {
    fn files(&self) -> &[Arc<FileMeta>] {
        match self {
            LevelFiles::Owned { files, .. } => files,
            LevelFiles::Shared {
                source,
                level,
                range,
            } => source
                .version
                .files(*level)
                .get(range.clone())
                .unwrap_or(&[]),
        }
    }

    fn tables(&self) -> &TableCache {
        match self {
            LevelFiles::Owned { tables, .. } => tables,
            LevelFiles::Shared { source, .. } => &source.tables,
        }
    }
}

/// Iterates the files of one sorted run (sorted, non-overlapping) as one sorted stream,
/// opening each table only when the cursor reaches it: creating one opens nothing and takes
/// at most one reference count, so a short scan pays only for the tables it reaches.
pub struct LevelIterator {
    files: LevelFiles,
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
            .field("files", &self.files.files().len())
            .field("index", &self.index)
            .finish()
    }
}

impl LevelIterator {
    /// Iterates `files`, which must be sorted and non-overlapping; `fill_cache` says whether
    /// the blocks it reads are added to the block cache.
    pub fn new(files: Vec<Arc<FileMeta>>, tables: Arc<TableCache>, fill_cache: bool) -> Self {
        LevelIterator {
            files: LevelFiles::Owned { files, tables },
            index: 0,
            current: None,
            error: None,
            fill_cache,
        }
    }

    /// Iterates files `range` of `level` of the source's version, which must form (part of)
    /// one run.
    pub fn over_version(
        source: Arc<ScanSource>,
        level: usize,
        range: std::ops::Range<usize>,
        fill_cache: bool,
    ) -> Self {
        LevelIterator {
            files: LevelFiles::Shared {
                source,
                level,
                range,
            },
            index: 0,
            current: None,
            error: None,
            fill_cache,
        }
    }

    fn open(&mut self, index: usize) -> bool {
        self.index = index;
        self.current = None;
        let Some(meta) = self.files.files().get(index) else {
            return false;
        };
        match self.files.tables().table(meta) {
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
        let Some(last) = self.files.files().len().checked_sub(1) else {
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
            .files()
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

    fn seek_bound(&self, user_key: &[u8]) -> SeekBound {
        // The one file of the run a seek to `user_key` would land in (invariant 2 of
        // `version`: no user key spans two files of a run).
        let files = self.files.files();
        let index = files.partition_point(|file| file.largest_user_key() < user_key);
        let Some(file) = files.get(index) else {
            return SeekBound::LaterUserKey;
        };
        if file.smallest_user_key() > user_key {
            return SeekBound::LaterUserKey;
        }
        match self.files.tables().table_ref(file) {
            Ok(table) if !table.may_contain(user_key) => SeekBound::LaterUserKey,
            // The table's own record, not the MANIFEST's: the bound is about its entries.
            Ok(table) => SeekBound::AtMostSequence(table.largest_sequence()),
            // The seek itself will meet and report the error.
            Err(_) => SeekBound::Unknown,
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::MemFs;
    use crate::key::{internal_key, ValueKind};
    use crate::sstable::{TableBuilder, TableOptions};

    /// A table's own bounds (its properties block) must be the MANIFEST's: a merge trusts the
    /// table's largest sequence to rank a run before reading it, so a table claiming an older
    /// sequence than it holds would let a scan return a stale version that `get` does not.
    #[test]
    fn a_table_whose_bounds_differ_from_the_manifest_is_corruption() {
        let file_system: Arc<dyn FileSystem> = Arc::new(MemFs::new());
        let directory = PathBuf::from("/db");
        file_system.create_dir_all(&directory).unwrap();
        let path = filename::table_path(&directory, 5);
        let file = file_system.create(&path).unwrap();
        let mut builder = TableBuilder::new(file, path, TableOptions::default());
        builder
            .add(&internal_key(b"a", 3, ValueKind::Put), b"1")
            .unwrap();
        builder
            .add(&internal_key(b"b", 4, ValueKind::Put), b"2")
            .unwrap();
        let (properties, size_bytes) = builder.finish_with_size().unwrap();
        let meta = || {
            FileMeta::new(
                5,
                size_bytes,
                properties.smallest_key.clone(),
                properties.largest_key.clone(),
                3,
                4,
            )
        };
        let cache = TableCache::new(file_system, directory, None, true);
        assert!(cache.table(&meta()).is_ok());
        let mut variants = [meta(), meta(), meta(), meta()];
        variants[0].smallest = internal_key(b"0", 3, ValueKind::Put);
        variants[1].largest = internal_key(b"c", 4, ValueKind::Put);
        variants[2].smallest_sequence = 2;
        variants[3].largest_sequence = 9;
        for (number, variant) in variants.iter().enumerate() {
            let error = cache.table(variant).err();
            assert!(
                error.as_ref().is_some_and(Error::is_corruption),
                "variant {number}: {error:?}"
            );
        }
    }
}
