//! [`TableBuilder`]: writes one `SSTable` from entries supplied in increasing internal-key order.
//!
//! Data blocks are cut once their size estimate reaches `block_size_bytes`; each finished data
//! block adds one index entry (key = the block's last internal key, value = its encoded
//! [`BlockHandle`]), i.e. one fence pointer. User keys go into a blocked Bloom filter (consecutive
//! duplicates are added once). `finish` writes the filter, properties and index blocks, then the
//! footer, and syncs the file; docs/format.md, "`SSTable`", is the byte layout.
//!
//! Thread-safety contract: a builder is owned by one thread (`&mut self` throughout); it owns its
//! `WritableFile`.
//!
//! Invariants:
//! 1. Keys passed to `add` strictly increase in internal-key order (debug-asserted; violated in a
//!    release build, `add` returns `InvalidArgument` and writes nothing).
//! 2. After an I/O error the builder is dead: every later call returns that error.
//! 3. Every block is checked after building in debug builds (it parses back to exactly the
//!    entries added).
//! 4. Nothing is durable until `finish` returns `Ok` (it syncs the file); the caller still has to
//!    sync the directory before publishing the file's name.

use super::block::BlockBuilder;
use super::bloom::BloomFilterBuilder;
use super::format::{encode_block, format_version_for, BlockHandle, Footer, FORMAT_VERSION};
use super::properties::TableProperties;
use crate::error::{Error, Result};
use crate::fs::WritableFile;
use crate::key::{self, compare_internal_keys, parse_internal_key, ValueKind};
use crate::sstable::Compression;
use std::cmp::Ordering;
use std::path::PathBuf;

/// Per-table build options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableOptions {
    /// Target raw size of a data block (a block is cut once it reaches this size).
    pub block_size_bytes: usize,
    /// Entries between restart points in data blocks.
    pub block_restart_interval: usize,
    /// Bloom filter bits per user key; 0 writes no filter.
    pub bloom_bits_per_key: usize,
    /// Compression of data blocks (metadata blocks are never compressed).
    pub compression: Compression,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            block_size_bytes: 4096,
            block_restart_interval: 16,
            bloom_bits_per_key: 10,
            compression: Compression::None,
        }
    }
}

impl From<&crate::Options> for TableOptions {
    fn from(options: &crate::Options) -> Self {
        TableOptions {
            block_size_bytes: options.block_size_bytes,
            block_restart_interval: options.block_restart_interval,
            bloom_bits_per_key: options.bloom_bits_per_key,
            compression: options.compression,
        }
    }
}

/// Writes one table file.
#[derive(Debug)]
pub struct TableBuilder {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    options: TableOptions,
    /// Bytes written so far (the offset of the next block).
    offset: u64,
    data_block: BlockBuilder,
    index_block: BlockBuilder,
    filter: Option<BloomFilterBuilder>,
    last_key: Vec<u8>,
    properties: TableProperties,
    error: Option<Error>,
}

impl TableBuilder {
    /// A builder writing to `file` (created at `path`, which is used in error messages).
    pub fn new(file: Box<dyn WritableFile>, path: PathBuf, options: TableOptions) -> Self {
        let offset = file.size_bytes();
        TableBuilder {
            file,
            path,
            offset,
            data_block: BlockBuilder::new(options.block_restart_interval),
            // Restart interval 1: every fence pointer is a full key, so index seeks are a pure
            // binary search.
            index_block: BlockBuilder::new(1),
            filter: (options.bloom_bits_per_key > 0)
                .then(|| BloomFilterBuilder::new(options.bloom_bits_per_key)),
            options,
            last_key: Vec::new(),
            properties: TableProperties {
                format_version: format_version_for(options.compression),
                smallest_sequence: u64::MAX,
                ..TableProperties::default()
            },
            error: None,
        }
    }

    /// Appends an entry. Precondition: `internal_key` sorts strictly after the previous one.
    pub fn add(&mut self, internal_key: &[u8], value: &[u8]) -> Result<()> {
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        let Some(parsed) = parse_internal_key(internal_key) else {
            return Err(Error::InvalidArgument(format!(
                "table {}: malformed internal key of {} bytes",
                self.path.display(),
                internal_key.len()
            )));
        };
        key::check_key(parsed.user_key)?;
        crate::expiry::check_stored_value(value)?;
        let in_order = self.properties.entry_count == 0
            || compare_internal_keys(&self.last_key, internal_key) == Ordering::Less;
        debug_assert!(in_order, "table keys must strictly increase");
        if !in_order {
            return Err(Error::InvalidArgument(format!(
                "table {}: keys added out of order",
                self.path.display()
            )));
        }
        if let Some(filter) = &mut self.filter {
            let new_user_key = self.properties.entry_count == 0
                || key::user_key(&self.last_key) != parsed.user_key;
            if new_user_key {
                filter.add_key(parsed.user_key);
            }
        }
        let properties = &mut self.properties;
        if properties.entry_count == 0 {
            properties.smallest_key = internal_key.to_vec();
        }
        properties.entry_count += 1;
        if parsed.kind == ValueKind::Delete {
            properties.delete_count += 1;
        }
        if parsed.kind == ValueKind::PutWithExpiry {
            // Only a table holding the newer kind carries the newer version.
            properties.format_version = FORMAT_VERSION;
        }
        properties.smallest_sequence = properties.smallest_sequence.min(parsed.sequence);
        properties.largest_sequence = properties.largest_sequence.max(parsed.sequence);
        properties.raw_key_bytes += internal_key.len() as u64;
        properties.raw_value_bytes += value.len() as u64;
        self.last_key.clear();
        self.last_key.extend_from_slice(internal_key);

        self.data_block.add(internal_key, value);
        if self.data_block.size_estimate() >= self.options.block_size_bytes {
            self.flush_data_block()?;
        }
        Ok(())
    }

    /// Bytes written to the file so far (grows block by block; compaction uses it to cut files).
    pub fn file_size(&self) -> u64 {
        self.offset
    }

    #[cfg(any(test, feature = "testing"))]
    /// Entries added so far.
    pub fn entry_count(&self) -> u64 {
        self.properties.entry_count
    }

    /// Writes the pending data block and its index entry.
    fn flush_data_block(&mut self) -> Result<()> {
        if self.data_block.is_empty() {
            return Ok(());
        }
        let entries = self.data_block.entry_count();
        let raw = self.data_block.finish();
        debug_assert!(
            block_parses(&raw, entries),
            "data block does not parse back"
        );
        let handle = self.write_block(&raw, self.options.compression)?;
        self.index_block.add(&self.last_key, &handle.encode());
        self.properties.data_block_count += 1;
        Ok(())
    }

    /// Frames and appends one block; returns its handle.
    fn write_block(&mut self, raw: &[u8], compression: Compression) -> Result<BlockHandle> {
        let encoded = encode_block(raw, compression);
        let handle = BlockHandle {
            offset: self.offset,
            size: encoded.stored_size,
        };
        self.append(&encoded.bytes)?;
        Ok(handle)
    }

    fn append(&mut self, bytes: &[u8]) -> Result<()> {
        if let Err(error) = self.file.append(bytes) {
            self.error = Some(error.clone());
            return Err(error);
        }
        self.offset += bytes.len() as u64;
        Ok(())
    }

    #[cfg(any(test, feature = "testing"))]
    /// Writes the remaining data, filter, properties, index and footer, then syncs the file.
    /// Returns the table's properties.
    pub fn finish(self) -> Result<TableProperties> {
        self.finish_with_size().map(|(properties, _)| properties)
    }

    /// Like [`TableBuilder::finish`], also returning the final file size in bytes.
    pub fn finish_with_size(mut self) -> Result<(TableProperties, u64)> {
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        self.flush_data_block()?;
        if self.properties.entry_count == 0 {
            self.properties.smallest_sequence = 0;
        } else {
            self.properties.largest_key.clone_from(&self.last_key);
        }

        let filter_handle = match self.filter.take() {
            Some(filter) => {
                let bytes = filter.finish();
                debug_assert!(super::bloom::BloomFilter::decode(bytes.clone()).is_ok());
                self.write_block(&bytes, Compression::None)?
            }
            None => BlockHandle::default(),
        };

        let properties_bytes = self.properties.encode();
        debug_assert_eq!(
            TableProperties::decode(&properties_bytes).as_ref().ok(),
            Some(&self.properties)
        );
        let properties_handle = self.write_block(&properties_bytes, Compression::None)?;

        let index_entries = self.index_block.entry_count();
        let index = self.index_block.finish();
        debug_assert!(
            block_parses(&index, index_entries),
            "index block does not parse back"
        );
        let index_handle = self.write_block(&index, Compression::None)?;

        let footer = Footer {
            index: index_handle,
            filter: filter_handle,
            properties: properties_handle,
            format_version: self.properties.format_version,
        };
        self.append(&footer.encode())?;
        self.file.sync()?;
        Ok((self.properties, self.offset))
    }
}

/// Debug check: `raw` is a valid block holding exactly `entries` entries.
fn block_parses(raw: &[u8], entries: usize) -> bool {
    use super::block::{Block, BlockOrigin};
    use crate::iter::InternalIterator;
    let Ok(block) = Block::new(raw.to_vec(), BlockOrigin::detached()) else {
        return false;
    };
    let mut iter = std::sync::Arc::new(block).iter();
    let mut count = 0;
    iter.seek_to_first();
    while iter.valid() {
        count += 1;
        iter.next();
    }
    iter.status().is_ok() && count == entries
}
