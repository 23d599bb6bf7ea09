//! [`Table`]: an open, immutable `SSTable`, with point lookups and a two-level iterator.
//!
//! Opening reads and checks the footer (magic, checksum, format version), then loads the index
//! block (fence pointers), the Bloom filter and the properties into memory for the table's
//! lifetime; these three blocks are always checksum-verified, and the index is validated entry by
//! entry (every handle decodes, lies before the metadata, and blocks do not overlap). Data blocks
//! are read on demand, verified when `verify_checksums` is set: an uncompressed block of a
//! mapped table in place (`Table::mapped_block_view` for point lookups, borrowed;
//! `Table::mapped_data_block` for pinned values and iterators, held by `Arc`; never cached),
//! any other through the optional shared [`BlockCache`].
//!
//! A point lookup (`get`, `get_batch`) writes no shared memory unless it must read a block
//! from the file: the index and the data block are searched through borrowed views
//! ([`BlockView`]: no `Arc` clone), a block of a mapped table is checked and parsed where it
//! lies (no allocation, no reference count, not even the path's), a cache hit takes no lock,
//! and the mapped-read counter is striped (Bloom negatives are not counted). Only
//! `get_pinned` and iterators, which hand out or keep a block past the call, wrap a mapped
//! block in its `Arc<Block>`.
//!
//! Thread-safety contract: `Table` is `Send + Sync`; `get` and `iter` may run from many threads
//! at once (file reads are positional or copies out of a read-only mapping, statistics are
//! striped relaxed counters). A [`TableIterator`] is owned by one thread and holds the table (`Arc<Table>`) and
//! its current blocks (`Arc<Block>`) alive.
//!
//! Invariants:
//! 1. Every error found in the file is an `Error::Corruption` naming the file path and the byte
//!    offset; no input bytes can make these functions panic.
//! 2. An open table's file size is the one its footer describes: the last metadata block ends
//!    exactly where the footer starts (checked at open).

use super::block::{Block, BlockIterator, BlockOrigin, BlockView, OriginRef};
use super::bloom::{bloom_hash, BloomFilter};
use super::cache::BlockCache;
use super::fences::Fences;
use super::format::{mapped_block_range, read_block_contents, BlockHandle, Footer, FOOTER_BYTES};
use super::properties::TableProperties;
use crate::error::{Error, Result};
use crate::fs::{MappedSlice, Mapping, RandomAccessFile};
use crate::iter::InternalIterator;
use crate::key::{compare_internal_keys, parse_internal_key, SequenceNumber, ValueKind};
use crate::sstable::pinned::PinnedValue;
use std::cmp::Ordering;
use std::fmt;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

mod iter;
pub use iter::TableIterator;

/// An open `SSTable`.
pub struct Table {
    file: Arc<dyn RandomAccessFile>,
    /// The file's memory mapping, if it is read through one: uncompressed data blocks are
    /// then parsed in place (no copy, never cached).
    mapping: Option<Arc<Mapping>>,
    path: Arc<Path>,
    file_number: u64,
    cache: Option<Arc<BlockCache>>,
    cache_id: u64,
    verify_checksums: bool,
    index: Arc<Block>,
    /// The index's fence keys condensed for point lookups (`None`: searched in the block).
    fences: Option<Fences>,
    filter: Option<BloomFilter>,
    properties: TableProperties,
    size_bytes: u64,
}

impl fmt::Debug for Table {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Table")
            .field("path", &self.path)
            .field("file_number", &self.file_number)
            .field("size_bytes", &self.size_bytes)
            .field("entry_count", &self.properties.entry_count)
            .field("cache_id", &self.cache_id)
            .finish()
    }
}

/// A point-lookup result: the newest visible version's sequence, kind and value (as `V`).
pub type TableFound<V> = Option<(SequenceNumber, ValueKind, V)>;

/// A point-lookup result with the value copied out.
pub type TableGet = TableFound<Vec<u8>>;

impl Table {
    /// Opens the table in `file`. Checks the footer and loads index, filter and properties.
    pub fn open(
        file: Arc<dyn RandomAccessFile>,
        file_number: u64,
        cache: Option<Arc<BlockCache>>,
        verify_checksums: bool,
    ) -> Result<Table> {
        let path: Arc<Path> = Arc::from(file.path());
        let size_bytes = file.size_bytes();
        let (footer, footer_offset) = read_footer(file.as_ref(), &path)?;
        check_metadata_handles(&footer, footer_offset, &path)?;
        let properties = read_properties(file.as_ref(), &footer, &path)?;
        let filter = read_filter(file.as_ref(), &footer, &path)?;
        let index = read_index(file.as_ref(), &footer, &path)?;
        check_index(&index, data_limit(&footer, footer_offset), &properties)?;
        let fences = usize::try_from(properties.data_block_count)
            .ok()
            .and_then(|count| Fences::new(&index, count));
        let cache_id = cache.as_ref().map_or(0, |cache| cache.new_id());
        Ok(Table {
            fences,
            mapping: file.mapping().cloned(),
            file,
            path,
            file_number,
            cache,
            cache_id,
            verify_checksums,
            index,
            filter,
            properties,
            size_bytes,
        })
    }

    /// The newest entry for `lookup_key`'s user key at or below its sequence number.
    ///
    /// `lookup_key` is an internal seek key: `(user key, snapshot, ValueKind::SEEK)`. Returns the
    /// first entry whose internal key is `>= lookup_key` if it has the same user key (it may be
    /// a delete: the caller decides what a tombstone means).
    pub fn get(&self, lookup_key: &[u8]) -> Result<TableGet> {
        self.get_with(lookup_key, true)
    }

    /// [`Self::get`], choosing whether a data block read from disk is added to the cache.
    ///
    /// Writes no shared memory unless the block must be read from the file: a mapped block is
    /// searched where it lies, a cached one under an epoch pin, both through a borrowed view.
    pub fn get_with(&self, lookup_key: &[u8], fill_cache: bool) -> Result<TableGet> {
        self.get_with_hash(lookup_key, None, fill_cache)
    }

    /// [`Self::get_with`] given the user key's [`bloom_hash`] (`None`: computed here), so a
    /// lookup that probes many tables hashes its key once.
    pub(crate) fn get_with_hash(
        &self,
        lookup_key: &[u8],
        hash: Option<u64>,
        fill_cache: bool,
    ) -> Result<TableGet> {
        let Some((user_key, handle)) = self.locate(lookup_key, hash)? else {
            return Ok(None);
        };
        self.with_data_block(handle, fill_cache, |view| {
            self.copy_found(view, handle, lookup_key, user_key)
        })
    }

    /// [`Self::get`] without copying the value: it comes back as the data block holding it
    /// and its range (one reference count on the block; a block read in place from a mapping
    /// is wrapped in its `Arc` first, one allocation).
    /// `hash` is the user key's [`bloom_hash`] (`None`: computed here), so a lookup that
    /// probes many tables hashes its key once.
    pub(crate) fn get_pinned(
        &self,
        lookup_key: &[u8],
        hash: Option<u64>,
    ) -> Result<TableFound<PinnedValue>> {
        let Some((user_key, handle)) = self.locate(lookup_key, hash)? else {
            return Ok(None);
        };
        let pin = |block: &Arc<Block>| -> Result<TableFound<PinnedValue>> {
            let Some((sequence, kind, range)) =
                self.find_in_view(block.view(), handle, lookup_key, user_key)?
            else {
                return Ok(None);
            };
            let value = PinnedValue::in_block(Arc::clone(block), range)
                .ok_or_else(|| self.value_outside_block(handle))?;
            Ok(Some((sequence, kind, value)))
        };
        if let Some(block) = self.mapped_data_block(handle)? {
            return pin(&block);
        }
        if let Some(cache) = &self.cache {
            if let Some(found) = cache.with_block(self.cache_id, handle.offset, &pin) {
                return found;
            }
        }
        pin(&self.load_data_block(handle, true)?)
    }

    /// Point lookups of several keys at once (`multi_get`): one answer per key, as
    /// [`Self::get_with`] would give. Consecutive keys whose fence pointers land in the same
    /// data block share one block read (one cache lookup or one file read); callers sort the
    /// keys in internal-key order so that keys of one block are consecutive.
    pub fn get_batch(&self, lookup_keys: &[&[u8]], fill_cache: bool) -> Result<Vec<TableGet>> {
        let mut answers: Vec<TableGet> = Vec::with_capacity(lookup_keys.len());
        answers.resize_with(lookup_keys.len(), || None);
        // The keys located in `current`'s block, not yet answered: (answer index, lookup key,
        // user key). Keys ruled out by the filter or the fences in between keep the group
        // open, so a block is read once for all its keys however many absent ones interleave.
        let mut group: Vec<(usize, &[u8], &[u8])> = Vec::new();
        let mut current: Option<BlockHandle> = None;
        for (index, lookup_key) in lookup_keys.iter().enumerate() {
            let Some((user_key, handle)) = self.locate(lookup_key, None)? else {
                continue;
            };
            if current != Some(handle) {
                self.answer_group(current, &mut group, fill_cache, &mut answers)?;
                current = Some(handle);
            }
            group.push((index, lookup_key, user_key));
        }
        self.answer_group(current, &mut group, fill_cache, &mut answers)?;
        Ok(answers)
    }

    /// Answers every key of `group` (all located in the block at `handle`) with one block
    /// read, into their places in `answers`, and empties `group`.
    fn answer_group(
        &self,
        handle: Option<BlockHandle>,
        group: &mut Vec<(usize, &[u8], &[u8])>,
        fill_cache: bool,
        answers: &mut [TableGet],
    ) -> Result<()> {
        let Some(handle) = handle else {
            debug_assert!(group.is_empty(), "located keys always have a block");
            return Ok(());
        };
        self.with_data_block(handle, fill_cache, |view| {
            for &(index, lookup_key, user_key) in group.iter() {
                let found = self.copy_found(view, handle, lookup_key, user_key)?;
                let Some(answer) = answers.get_mut(index) else {
                    return Err(Error::Internal(format!(
                        "multi-get answer {index} of {} is out of range",
                        answers.len()
                    )));
                };
                *answer = found;
            }
            Ok(())
        })?;
        group.clear();
        Ok(())
    }

    /// The user key of `lookup_key` and the handle of the one data block that may hold it;
    /// `None` if the Bloom filter or the fence pointers rule the table out.
    fn locate<'k>(
        &self,
        lookup_key: &'k [u8],
        hash: Option<u64>,
    ) -> Result<Option<(&'k [u8], BlockHandle)>> {
        let user_key = self.lookup_user_key(lookup_key)?;
        debug_assert!(hash.is_none_or(|hash| hash == bloom_hash(user_key)));
        if !self.filter_allows(user_key, hash) {
            return Ok(None);
        }
        Ok(self
            .index_lookup(lookup_key)?
            .map(|handle| (user_key, handle)))
    }

    /// The user key of an internal seek key, or an error if it is not one.
    fn lookup_user_key<'k>(&self, lookup_key: &'k [u8]) -> Result<&'k [u8]> {
        match parse_internal_key(lookup_key) {
            Some(lookup) => Ok(lookup.user_key),
            None => Err(Error::InvalidArgument(format!(
                "lookup key of {} bytes is not an internal key",
                lookup_key.len()
            ))),
        }
    }

    /// Starts loading the filter line a lookup of a key with [`bloom_hash`] `hash` will probe,
    /// so that a lookup probing several tables overlaps their filter misses instead of paying
    /// them one after another (a hint; nothing if the table has no filter).
    pub(crate) fn prefetch_filter(&self, hash: u64) {
        if let Some(filter) = &self.filter {
            filter.prefetch(hash);
        }
    }

    /// False if the Bloom filter proves `user_key` (whose [`bloom_hash`] is `hash`, if given)
    /// absent. Not counted: a Bloom negative is the commonest step of a lookup, and even a
    /// striped counter's atomic add was a measurable share of a lookup probing many runs.
    fn filter_allows(&self, user_key: &[u8], hash: Option<u64>) -> bool {
        self.filter.as_ref().is_none_or(|filter| {
            filter.may_contain_hash(hash.unwrap_or_else(|| bloom_hash(user_key)))
        })
    }

    /// The handle of the one data block that may hold `lookup_key` (fence-pointer search).
    fn index_lookup(&self, lookup_key: &[u8]) -> Result<Option<BlockHandle>> {
        if let Some(fences) = &self.fences {
            // Every entry decoded when the fences were built (fences invariant 1), and the
            // block is immutable, so the entry found decodes.
            return match fences.seek(&self.index, lookup_key) {
                Some(position) => match self.index.restart_entry(position) {
                    Some((_, value)) => self.decode_index_value(value).map(Some),
                    None => Err(Error::corruption(
                        self.path.as_ref(),
                        self.index.origin().offset,
                        "index entry does not decode",
                    )),
                },
                None => Ok(None),
            };
        }
        let mut index = self.index.iter_ref();
        index.seek(lookup_key);
        if !index.valid() {
            index.status()?;
            return Ok(None);
        }
        self.decode_index_value(index.value()).map(Some)
    }

    /// The first entry of `view` at or after `lookup_key`, if it is a version of `user_key`,
    /// with its value's range in the block.
    fn find_in_view(
        &self,
        view: BlockView<'_>,
        handle: BlockHandle,
        lookup_key: &[u8],
        user_key: &[u8],
    ) -> Result<TableFound<Range<usize>>> {
        let mut iter = BlockIterator::new(view);
        iter.seek(lookup_key);
        if !iter.valid() {
            iter.status()?;
            return Err(Error::corruption(
                self.path.as_ref(),
                handle.offset,
                "data block ends before the key recorded in its index entry",
            ));
        }
        match parse_internal_key(iter.key()) {
            Some(found) if found.user_key == user_key => {
                Ok(Some((found.sequence, found.kind, iter.value_range())))
            }
            _ => Ok(None),
        }
    }

    /// [`Self::find_in_view`] with the value copied out.
    fn copy_found(
        &self,
        view: BlockView<'_>,
        handle: BlockHandle,
        lookup_key: &[u8],
        user_key: &[u8],
    ) -> Result<TableGet> {
        #[cfg(test)]
        test_hooks::inside_read();
        let Some((sequence, kind, range)) =
            self.find_in_view(view, handle, lookup_key, user_key)?
        else {
            return Ok(None);
        };
        let value = view
            .bytes(range)
            .ok_or_else(|| self.value_outside_block(handle))?;
        Ok(Some((sequence, kind, value.to_vec())))
    }

    /// The corruption of a value range that does not lie inside its data block.
    fn value_outside_block(&self, handle: BlockHandle) -> Error {
        Error::corruption(
            self.path.as_ref(),
            handle.offset,
            "a value lies outside its data block",
        )
    }

    #[cfg(any(test, feature = "testing"))]
    /// A two-level iterator over the whole table that fills the cache.
    pub fn iter(self: &Arc<Self>) -> TableIterator {
        self.iter_with(true)
    }

    /// A two-level iterator; `fill_cache: false` suits one-time scans such as compaction.
    pub fn iter_with(self: &Arc<Self>, fill_cache: bool) -> TableIterator {
        TableIterator {
            table: Arc::clone(self),
            index: self.index.iter(),
            data: None,
            data_handle: None,
            error: None,
            fill_cache,
        }
    }

    /// The table's properties.
    pub fn properties(&self) -> &TableProperties {
        &self.properties
    }

    #[cfg(any(test, feature = "testing"))]
    /// The smallest internal key (empty for an empty table).
    pub fn smallest_key(&self) -> &[u8] {
        &self.properties.smallest_key
    }

    #[cfg(any(test, feature = "testing"))]
    /// The largest internal key (empty for an empty table).
    pub fn largest_key(&self) -> &[u8] {
        &self.properties.largest_key
    }

    #[cfg(any(test, feature = "testing"))]
    /// The file number the table was opened as.
    pub fn file_number(&self) -> u64 {
        self.file_number
    }

    #[cfg(any(test, feature = "testing"))]
    /// Size of the table file.
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    /// The largest sequence number of any entry in the table (from its properties block).
    pub fn largest_sequence(&self) -> SequenceNumber {
        self.properties.largest_sequence
    }

    /// False only if the Bloom filter proves `user_key` absent (always true without a filter).
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        match &self.filter {
            Some(filter) => filter.may_contain(user_key),
            None => true,
        }
    }

    #[cfg(any(test, feature = "testing"))]
    /// Bytes of the in-memory index and filter.
    pub fn memory_bytes(&self) -> usize {
        self.index.size_bytes()
            + self.fences.as_ref().map_or(0, Fences::size_bytes)
            + self.filter.as_ref().map_or(0, BloomFilter::size_bytes)
    }

    fn decode_index_value(&self, value: &[u8]) -> Result<BlockHandle> {
        BlockHandle::decode(value).ok_or_else(|| {
            Error::corruption(
                self.path.as_ref(),
                self.index.origin().offset,
                "index entry value is not a block handle",
            )
        })
    }

    /// The data block at `handle`, from the cache or the file.
    fn read_data_block(&self, handle: BlockHandle, fill_cache: bool) -> Result<Arc<Block>> {
        if let Some(block) = self.mapped_data_block(handle)? {
            return Ok(block);
        }
        if let Some(cache) = &self.cache {
            if let Some(block) = cache.get(self.cache_id, handle.offset) {
                return Ok(block);
            }
        }
        self.load_data_block(handle, fill_cache)
    }

    /// Runs `read` on the data block at `handle`, borrowed: in place from the table's mapping,
    /// from the block cache under an epoch pin, or (a miss) read from the file and cached if
    /// `fill_cache`. Only the last takes a reference count or allocates.
    fn with_data_block<R>(
        &self,
        handle: BlockHandle,
        fill_cache: bool,
        mut read: impl FnMut(BlockView<'_>) -> Result<R>,
    ) -> Result<R> {
        if let Some(view) = self.mapped_block_view(handle)? {
            return read(view);
        }
        if let Some(cache) = &self.cache {
            if let Some(answer) =
                cache.with_block(self.cache_id, handle.offset, |block| read(block.view()))
            {
                return answer;
            }
        }
        read(self.load_data_block(handle, fill_cache)?.view())
    }

    /// The uncompressed data block at `handle` of a mapped table, checked (bounds, checksum
    /// when verifying, restart array) and borrowed in place for as long as `self` is: no
    /// allocation, no reference count. `None` as for [`Self::mapped_data_block`].
    fn mapped_block_view(&self, handle: BlockHandle) -> Result<Option<BlockView<'_>>> {
        let Some((mapping, range)) = self.mapped_block_range(handle)? else {
            return Ok(None);
        };
        let Some(data) = mapping.bytes().get(range) else {
            return Err(self.checked_block_outside(handle));
        };
        let origin = OriginRef {
            file: &self.path,
            offset: handle.offset,
            compressed: false,
        };
        let view = BlockView::parse(data, origin)?;
        if let Some(cache) = &self.cache {
            cache.note_mapped_read();
        }
        Ok(Some(view))
    }

    /// The table's mapping and the byte range in it of the uncompressed data block at
    /// `handle`, checked against the mapping (bounds, and the checksum when verifying);
    /// `None` if the table is not mapped or the block is stored compressed.
    fn mapped_block_range(
        &self,
        handle: BlockHandle,
    ) -> Result<Option<(&Arc<Mapping>, Range<usize>)>> {
        let Some(mapping) = &self.mapping else {
            return Ok(None);
        };
        let range = mapped_block_range(mapping.bytes(), handle, self.verify_checksums, &self.path)?;
        Ok(range.map(|range| (mapping, range)))
    }

    /// The internal error of a block range checked against a mapping yet outside it.
    fn checked_block_outside(&self, handle: BlockHandle) -> Error {
        Error::Internal(format!(
            "checked block {handle:?} is outside the mapping of {}",
            self.path.display()
        ))
    }

    /// The data block at `handle` parsed in place from the table's mapping; `None` if the
    /// table is not mapped or the block is stored compressed (it is then read, decompressed
    /// and cached as from an unmapped table). Mapped blocks skip the block cache: the page
    /// cache already holds their bytes, and caching would cost a lock and an eviction per
    /// read to save nothing.
    fn mapped_data_block(&self, handle: BlockHandle) -> Result<Option<Arc<Block>>> {
        let Some((mapping, range)) = self.mapped_block_range(handle)? else {
            return Ok(None);
        };
        let Some(slice) = MappedSlice::new(mapping, range) else {
            return Err(self.checked_block_outside(handle));
        };
        let origin = BlockOrigin {
            file: Arc::clone(&self.path),
            offset: handle.offset,
            compressed: false,
        };
        let block = Block::mapped(slice, origin)?;
        if let Some(cache) = &self.cache {
            cache.note_mapped_read();
        }
        Ok(Some(Arc::new(block)))
    }

    /// The data block at `handle`, read from the file (and cached if `fill_cache`).
    fn load_data_block(&self, handle: BlockHandle, fill_cache: bool) -> Result<Arc<Block>> {
        let contents = read_block_contents(self.file.as_ref(), handle, self.verify_checksums)?;
        let block = Arc::new(Block::new(
            contents.data,
            BlockOrigin {
                file: Arc::clone(&self.path),
                offset: handle.offset,
                compressed: contents.compressed,
            },
        )?);
        if fill_cache {
            if let Some(cache) = &self.cache {
                cache.insert(self.cache_id, handle.offset, Arc::clone(&block));
            }
        }
        Ok(block)
    }
}

/// Open step 1: reads and decodes the footer; returns it with its file offset.
fn read_footer(file: &dyn RandomAccessFile, path: &Arc<Path>) -> Result<(Footer, u64)> {
    let size_bytes = file.size_bytes();
    let footer_offset = size_bytes.checked_sub(FOOTER_BYTES as u64).ok_or_else(|| {
        Error::corruption(
            path.as_ref(),
            0,
            format!(
                "file of {size_bytes} bytes is shorter than a table footer ({FOOTER_BYTES} bytes)"
            ),
        )
    })?;
    let mut footer_bytes = [0u8; FOOTER_BYTES];
    file.read_exact_at(footer_offset, &mut footer_bytes)?;
    let footer = Footer::decode(&footer_bytes, path, footer_offset)?;
    Ok((footer, footer_offset))
}

/// Open step 2: every metadata block (with its trailer) must end before the footer, and the
/// last one exactly at it (the builder writes the footer right after the metadata): the file's
/// size is the one its footer describes, so a table cut short or grown is refused at open, and
/// a mapped read never reaches past what was written.
fn check_metadata_handles(footer: &Footer, footer_offset: u64, path: &Arc<Path>) -> Result<()> {
    let metadata_end = [footer.index, footer.filter, footer.properties]
        .iter()
        .filter_map(BlockHandle::end_with_trailer)
        .max()
        .unwrap_or(0);
    if metadata_end != footer_offset {
        return Err(Error::corruption(
            path.as_ref(),
            footer_offset,
            format!(
                "file of {} bytes does not match its footer (metadata ends at {metadata_end})",
                footer_offset + FOOTER_BYTES as u64
            ),
        ));
    }
    for (name, handle) in [
        ("index", footer.index),
        ("filter", footer.filter),
        ("properties", footer.properties),
    ] {
        if !matches!(handle.end_with_trailer(), Some(end) if end <= footer_offset) {
            return Err(Error::corruption(
                path.as_ref(),
                footer_offset,
                format!("{name} block handle {handle:?} points past the footer"),
            ));
        }
    }
    Ok(())
}

/// Open step 3: the properties block, always checksum-verified, whose format version must
/// match the footer's.
fn read_properties(
    file: &dyn RandomAccessFile,
    footer: &Footer,
    path: &Arc<Path>,
) -> Result<TableProperties> {
    let corrupt = |offset: u64, reason: String| Error::corruption(path.as_ref(), offset, reason);
    let contents = read_block_contents(file, footer.properties, true)?;
    let properties = TableProperties::decode(&contents.data).map_err(|(at, reason)| {
        corrupt(
            footer.properties.offset + at as u64,
            format!("properties block: {reason}"),
        )
    })?;
    if properties.format_version != footer.format_version {
        return Err(corrupt(
            footer.properties.offset,
            format!(
                "properties format version {} differs from the footer's {}",
                properties.format_version, footer.format_version
            ),
        ));
    }
    Ok(properties)
}

/// Open step 4: the Bloom filter, if the table has one (a `{0, 0}` handle means none).
fn read_filter(
    file: &dyn RandomAccessFile,
    footer: &Footer,
    path: &Arc<Path>,
) -> Result<Option<BloomFilter>> {
    if footer.filter == BlockHandle::default() {
        return Ok(None);
    }
    let contents = read_block_contents(file, footer.filter, true)?;
    let filter = BloomFilter::decode(contents.data).map_err(|reason| {
        Error::corruption(
            path.as_ref(),
            footer.filter.offset,
            format!("filter block: {reason}"),
        )
    })?;
    Ok(Some(filter))
}

/// Open step 5: the index block, always checksum-verified (its entries are checked by
/// [`check_index`]).
fn read_index(
    file: &dyn RandomAccessFile,
    footer: &Footer,
    path: &Arc<Path>,
) -> Result<Arc<Block>> {
    let contents = read_block_contents(file, footer.index, true)?;
    let index = Block::new(
        contents.data,
        BlockOrigin {
            file: Arc::clone(path),
            offset: footer.index.offset,
            compressed: contents.compressed,
        },
    )?;
    Ok(Arc::new(index))
}

/// Where data blocks must end: the first metadata block (or the footer if there is none).
fn data_limit(footer: &Footer, footer_offset: u64) -> u64 {
    [footer.index, footer.filter, footer.properties]
        .iter()
        .filter(|handle| **handle != BlockHandle::default())
        .map(|handle| handle.offset)
        .min()
        .unwrap_or(footer_offset)
}

/// Validates every index entry against the properties: handles decode, data blocks are in
/// order, do not overlap and end before the metadata; fence keys strictly increase; the count
/// matches and the last fence key is the table's largest key.
fn check_index(index: &Arc<Block>, data_limit: u64, properties: &TableProperties) -> Result<()> {
    let origin = index.origin();
    let corrupt = |reason: String| Error::corruption(origin.file.as_ref(), origin.offset, reason);
    let mut iter = index.iter();
    let mut count = 0u64;
    let mut next_free = 0u64;
    let mut previous_key: Vec<u8> = Vec::new();
    iter.seek_to_first();
    while iter.valid() {
        let handle = BlockHandle::decode(iter.value())
            .ok_or_else(|| corrupt(format!("index entry {count} is not a block handle")))?;
        let end = handle.end_with_trailer().unwrap_or(u64::MAX);
        if handle.offset < next_free || end > data_limit {
            return Err(corrupt(format!(
                "index entry {count} points at {handle:?}, outside {next_free}..{data_limit}"
            )));
        }
        if count > 0 && compare_internal_keys(&previous_key, iter.key()) != Ordering::Less {
            return Err(corrupt(format!("index entry {count} is out of order")));
        }
        next_free = end;
        previous_key.clear();
        previous_key.extend_from_slice(iter.key());
        count += 1;
        iter.next();
    }
    iter.status()?;
    if count != properties.data_block_count {
        return Err(corrupt(format!(
            "index holds {count} entries but the properties record {} data blocks",
            properties.data_block_count
        )));
    }
    if previous_key != properties.largest_key {
        return Err(corrupt(
            "last index key differs from the table's largest key".to_string(),
        ));
    }
    Ok(())
}

#[cfg(test)]
impl Table {
    /// The strong counts of the table's mapping (0 if unmapped) and path: a point lookup that
    /// writes no shared memory leaves both as they were, even while it reads.
    pub(super) fn shared_counts(&self) -> (usize, usize) {
        let mapping = self.mapping.as_ref().map_or(0, Arc::strong_count);
        (mapping, Arc::strong_count(&self.path))
    }
}

/// Tests: a hook run by `get` and `get_batch` from inside their block read (this thread
/// only), to observe what a lookup holds while it reads.
#[cfg(test)]
pub(super) mod test_hooks {
    use std::cell::RefCell;

    thread_local! {
        static INSIDE_READ: RefCell<Option<Box<dyn Fn()>>> = RefCell::new(None);
    }

    /// Runs `f` with `hook` called inside every point-lookup block read of this thread.
    pub(in crate::sstable) fn with_inside_read<R>(hook: Box<dyn Fn()>, f: impl FnOnce() -> R) -> R {
        INSIDE_READ.with(|slot| *slot.borrow_mut() = Some(hook));
        let result = f();
        INSIDE_READ.with(|slot| *slot.borrow_mut() = None);
        result
    }

    pub(super) fn inside_read() {
        INSIDE_READ.with(|slot| {
            if let Some(hook) = slot.borrow().as_ref() {
                hook();
            }
        });
    }
}
