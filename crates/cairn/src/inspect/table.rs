//! `dump-table`: one `SSTable`'s footer, properties, blocks and entries, every checksum
//! verified on the way.
//!
//! The table is first opened with the engine's own `Table::open` (footer, metadata handles,
//! properties and index validated exactly as the engine does), then walked block by block
//! with checksums on, so a flipped bit anywhere in the file is reported with its offset.
//! This is the one file of the inspection tools that reads `sstable` internals (footer,
//! block handles, raw blocks).
//!
//! Thread-safety contract: a pure function of the file's bytes; see the parent module.
//!
//! Invariants:
//! 1. Every block listed was read with its checksum verified; every entry listed came from
//!    a verified block, in file (internal-key) order.
//! 2. Any damage is an `Err` naming the file and byte offset.

use super::{split_internal_key, Entry};
use crate::error::{Error, Result};
use crate::fs::{FileSystem, RandomAccessFile, StdFs};
use crate::iter::InternalIterator;
use crate::sstable::block::{Block, BlockOrigin};
use crate::sstable::format::{read_block_contents, BlockHandle, Footer, FOOTER_BYTES};
use crate::sstable::properties::TableProperties;
use crate::sstable::Table;
use std::path::Path;
use std::sync::Arc;

/// Where one block lies in the table file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockSpan {
    /// Offset of the block's stored bytes.
    pub offset: u64,
    /// Stored (possibly compressed) size, without the 5-byte trailer.
    pub size_bytes: u64,
}

impl From<BlockHandle> for BlockSpan {
    fn from(handle: BlockHandle) -> Self {
        BlockSpan {
            offset: handle.offset,
            size_bytes: handle.size,
        }
    }
}

/// One data block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataBlock {
    /// Where it lies.
    pub span: BlockSpan,
    /// Whether it was stored compressed.
    pub compressed: bool,
    /// Entries it holds.
    pub entry_count: u64,
    /// Index of its first entry in [`TableDump::entries`].
    pub first_entry: usize,
}

/// The facts a table records about itself (its properties block).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableFacts {
    /// Table format version.
    pub format_version: u32,
    /// Entries (puts and deletes).
    pub entry_count: u64,
    /// Delete entries.
    pub delete_count: u64,
    /// Smallest sequence number of any entry.
    pub smallest_sequence: u64,
    /// Largest sequence number of any entry.
    pub largest_sequence: u64,
    /// Sum of the key lengths, 8-byte internal trailers included.
    pub raw_key_bytes: u64,
    /// Sum of the value lengths.
    pub raw_value_bytes: u64,
    /// Data blocks.
    pub data_block_count: u64,
}

impl From<&TableProperties> for TableFacts {
    fn from(properties: &TableProperties) -> Self {
        TableFacts {
            format_version: properties.format_version,
            entry_count: properties.entry_count,
            delete_count: properties.delete_count,
            smallest_sequence: properties.smallest_sequence,
            largest_sequence: properties.largest_sequence,
            raw_key_bytes: properties.raw_key_bytes,
            raw_value_bytes: properties.raw_value_bytes,
            data_block_count: properties.data_block_count,
        }
    }
}

/// Everything [`dump_table`] read.
#[derive(Debug, Clone)]
pub struct TableDump {
    /// File size.
    pub size_bytes: u64,
    /// The footer's index block.
    pub index: BlockSpan,
    /// The footer's filter block (`size_bytes == 0` when the table has no filter).
    pub filter: BlockSpan,
    /// The footer's properties block.
    pub properties_block: BlockSpan,
    /// The properties.
    pub facts: TableFacts,
    /// The data blocks, in file order.
    pub blocks: Vec<DataBlock>,
    /// Every entry, in file order.
    pub entries: Vec<Entry>,
}

/// Reads the table at `path`, verifying every block's checksum.
///
/// ```
/// # fn main() -> cairn::Result<()> {
/// # let dir = std::env::temp_dir().join(format!("cairn-dump-table-doc-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&dir);
/// # let mut options = cairn::Options::default();
/// # options.create_if_missing = true;
/// # let db = cairn::Db::open(&dir, options)?;
/// # db.put(b"k", b"v")?;
/// # db.flush()?;
/// # drop(db);
/// let table = &cairn::inspect::manifest::live_tables(&dir)?[0];
/// let dump = cairn::inspect::table::dump_table(&table.path)?;
/// assert_eq!(dump.entries[0].key, b"k");
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// ```
pub fn dump_table(path: &Path) -> Result<TableDump> {
    let file = StdFs.open_read(path)?;
    // The engine's own open: footer, handles, properties and index checked as at run time.
    let table = Table::open(Arc::clone(&file), 0, None, true)?;
    drop(table);
    let footer = read_footer(file.as_ref())?;
    let properties_bytes = read_block_contents(file.as_ref(), footer.properties, true)?;
    let properties = TableProperties::decode(&properties_bytes.data).map_err(|(at, reason)| {
        Error::corruption(
            path,
            footer.properties.offset,
            format!("{reason} (byte {at})"),
        )
    })?;
    if footer.filter != BlockHandle::default() {
        read_block_contents(file.as_ref(), footer.filter, true)?;
    }
    let mut dump = TableDump {
        size_bytes: file.size_bytes(),
        index: footer.index.into(),
        filter: footer.filter.into(),
        properties_block: footer.properties.into(),
        facts: TableFacts::from(&properties),
        blocks: Vec::new(),
        entries: Vec::new(),
    };
    for handle in index_handles(file.as_ref(), &footer)? {
        read_data_block(file.as_ref(), handle, &mut dump)?;
    }
    if dump.entries.len() as u64 != dump.facts.entry_count {
        return Err(Error::corruption(
            path,
            footer.properties.offset,
            format!(
                "the properties record {} entries, the data blocks hold {}",
                dump.facts.entry_count,
                dump.entries.len()
            ),
        ));
    }
    Ok(dump)
}

fn read_footer(file: &dyn RandomAccessFile) -> Result<Footer> {
    let size = file.size_bytes();
    let offset = size.checked_sub(FOOTER_BYTES as u64).ok_or_else(|| {
        Error::corruption(
            file.path(),
            0,
            format!("file of {size} bytes has no footer"),
        )
    })?;
    let mut bytes = [0u8; FOOTER_BYTES];
    file.read_exact_at(offset, &mut bytes)?;
    Footer::decode(&bytes, file.path(), offset)
}

/// The verified block at `handle`, and whether it was stored compressed.
fn block_at(file: &dyn RandomAccessFile, handle: BlockHandle) -> Result<(Arc<Block>, bool)> {
    let contents = read_block_contents(file, handle, true)?;
    let compressed = contents.compressed;
    let block = Block::new(
        contents.data,
        BlockOrigin {
            file: Arc::from(file.path()),
            offset: handle.offset,
            compressed: contents.compressed,
        },
    )?;
    Ok((Arc::new(block), compressed))
}

/// The data block handles the index lists, in order.
fn index_handles(file: &dyn RandomAccessFile, footer: &Footer) -> Result<Vec<BlockHandle>> {
    let (index, _) = block_at(file, footer.index)?;
    let mut iter = index.iter();
    let mut handles = Vec::new();
    iter.seek_to_first();
    while iter.valid() {
        let handle = BlockHandle::decode(iter.value()).ok_or_else(|| {
            Error::corruption(
                file.path(),
                footer.index.offset,
                format!("index entry {} is not a block handle", handles.len()),
            )
        })?;
        handles.push(handle);
        iter.next();
    }
    iter.status()?;
    Ok(handles)
}

fn read_data_block(
    file: &dyn RandomAccessFile,
    handle: BlockHandle,
    dump: &mut TableDump,
) -> Result<()> {
    let (block, compressed) = block_at(file, handle)?;
    let first_entry = dump.entries.len();
    let mut iter = block.iter();
    iter.seek_to_first();
    while iter.valid() {
        let (key, sequence, kind) = split_internal_key(iter.key()).ok_or_else(|| {
            Error::corruption(
                file.path(),
                handle.offset,
                "entry key is not an internal key",
            )
        })?;
        if let Some(previous) = dump.entries.last() {
            // Invariant 1: internal-key order (user key ascending, then newest first).
            let ordered = (
                previous.key.as_slice(),
                std::cmp::Reverse(previous.sequence),
            ) < (key.as_slice(), std::cmp::Reverse(sequence));
            if !ordered {
                return Err(Error::corruption(
                    file.path(),
                    handle.offset,
                    "entries out of internal-key order",
                ));
            }
        }
        dump.entries.push(Entry {
            key,
            sequence,
            kind,
            value: iter.value().to_vec(),
        });
        iter.next();
    }
    iter.status()?;
    dump.blocks.push(DataBlock {
        span: handle.into(),
        compressed,
        entry_count: (dump.entries.len() - first_entry) as u64,
        first_entry,
    });
    Ok(())
}

/// The data block spans of the table at `path` with the last user key of each, for
/// [`super::sizes`]: reads the footer and the index only.
pub(crate) fn block_fences(path: &Path) -> Result<Vec<(Vec<u8>, BlockSpan)>> {
    let file = StdFs.open_read(path)?;
    let footer = read_footer(file.as_ref())?;
    let (index, _) = block_at(file.as_ref(), footer.index)?;
    let mut iter = index.iter();
    let mut fences = Vec::new();
    // Data blocks lie in order, apart, before the index: a handle that says otherwise
    // (bytes a checksum cannot vouch for) is refused, so their sizes sum within the file.
    let mut next_free = 0u64;
    iter.seek_to_first();
    while iter.valid() {
        let handle = BlockHandle::decode(iter.value())
            .filter(|handle| handle.offset >= next_free)
            .filter(|handle| {
                handle
                    .end_with_trailer()
                    .is_some_and(|end| end <= footer.index.offset)
            });
        let Some(handle) = handle else {
            return Err(Error::corruption(
                path,
                footer.index.offset,
                "index entry is not the handle of a data block",
            ));
        };
        next_free = handle.end_with_trailer().unwrap_or(u64::MAX);
        let key = split_internal_key(iter.key()).map_or_else(|| iter.key().to_vec(), |k| k.0);
        fences.push((key, handle.into()));
        iter.next();
    }
    iter.status()?;
    Ok(fences)
}
