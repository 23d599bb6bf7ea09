//! Sorted blocks of internal-key entries with prefix compression and restart points: the unit
//! of I/O, caching and checksumming inside a table (data blocks and the index block).
//!
//! The byte layout (entries, restart array, restart count) is in docs/format.md, "Data and
//! index blocks"; it is not repeated here.
//!
//! Every `restart_interval`-th entry (starting with the first) is a restart point: it stores its
//! whole key (`shared == 0`), and its offset is listed in the restart array, so a seek can
//! binary-search the restart points and then scan at most `restart_interval` entries.
//!
//! Thread-safety contract: [`BlockBuilder`] is owned by one table builder. A [`Block`] is
//! immutable after construction and shared (`Arc`) between the block cache and any number of
//! iterators on any threads. Its bytes are its own buffer, or (an uncompressed block of a
//! mapped table) a slice of the table's memory mapping that the block holds alive. A
//! [`BlockView`] borrows a block's bytes, layout and origin without any reference count: it is
//! made from a `Block`, or straight from a table's mapping for the length of one point lookup
//! (a mapped point read then allocates nothing and writes no shared memory). A
//! [`BlockIterator`] is owned by one thread; it reads through any [`BlockSource`]: an
//! `Arc<Block>` (iterators that outlive a lookup), or a view (point lookups).
//!
//! Invariants:
//! 1. Keys are internal keys in strictly increasing [`compare_internal_keys`] order (debug-asserted
//!    by the builder).
//! 2. [`Block::new`] checks the restart array: count >= 1, the array fits in the block, the first
//!    restart is 0, offsets strictly increase and lie inside the entry area. Entries themselves
//!    are checked lazily by the iterator: any malformed entry (lengths out of bounds, `shared`
//!    longer than the previous key, `shared != 0` at a restart point, a key that is not a valid
//!    internal key) makes the iterator invalid with a corruption error in `status()` — never a
//!    panic.

// Lengths written as `u32` are a key's or a value's (bounded by `KEY_BYTES_MAX` and
// `VALUE_BYTES_MAX` when the write was accepted) or offsets inside one block, which is cut
// once it passes the block size, so it stays far below 4 GiB.
#![allow(clippy::cast_possible_truncation)]

use crate::coding::{self, Reader};
use crate::error::{Error, Result};
use crate::fs::MappedSlice;
use crate::iter::InternalIterator;
use crate::key::{compare_internal_keys, parse_internal_key};
use std::cmp::Ordering;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// The most entries a builder places after one restart point (`Options::block_restart_interval`
/// is at most this); a block read with more between two restarts is corrupt.
pub const BLOCK_RESTART_INTERVAL_MAX: usize = 1024;

/// Builds one block. Reused across blocks via [`BlockBuilder::finish`], which resets it.
#[derive(Debug, Clone)]
pub struct BlockBuilder {
    buffer: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    counter: usize,
    entry_count: usize,
    last_key: Vec<u8>,
}

impl BlockBuilder {
    /// A builder placing a restart point every `restart_interval` entries (at least 1).
    pub fn new(restart_interval: usize) -> Self {
        BlockBuilder {
            buffer: Vec::new(),
            restarts: vec![0],
            restart_interval: restart_interval.max(1),
            counter: 0,
            entry_count: 0,
            last_key: Vec::new(),
        }
    }

    /// Appends an entry. Precondition: `key` sorts strictly after the previous key of this block,
    /// and the block stays below 4 GiB (the table builder enforces key and value limits).
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        debug_assert!(
            self.entry_count == 0 || compare_internal_keys(&self.last_key, key) == Ordering::Less,
            "block keys must strictly increase"
        );
        let mut shared = 0;
        if self.counter < self.restart_interval {
            shared = self
                .last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count();
        } else {
            self.restarts.push(self.buffer.len() as u32);
            self.counter = 0;
        }
        let unshared = key.get(shared..).unwrap_or_default();
        coding::put_u32(&mut self.buffer, shared as u32);
        coding::put_u32(&mut self.buffer, unshared.len() as u32);
        coding::put_u32(&mut self.buffer, value.len() as u32);
        self.buffer.extend_from_slice(unshared);
        self.buffer.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(unshared);
        self.counter += 1;
        self.entry_count += 1;
    }

    /// Size of the block if finished now.
    pub fn size_estimate(&self) -> usize {
        self.buffer.len() + self.restarts.len() * 4 + 4
    }

    /// Entries added since the last reset.
    pub fn entry_count(&self) -> usize {
        self.entry_count
    }

    /// True if no entry was added since the last reset.
    pub fn is_empty(&self) -> bool {
        self.entry_count == 0
    }

    #[cfg(any(test, feature = "testing"))]
    /// The last key added (empty if none).
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Returns the finished block bytes and resets the builder for the next block.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut block = std::mem::take(&mut self.buffer);
        block.reserve_exact(self.restarts.len() * 4 + 4);
        for &restart in &self.restarts {
            coding::put_u32(&mut block, restart);
        }
        coding::put_u32(&mut block, self.restarts.len() as u32);
        self.restarts.clear();
        self.restarts.push(0);
        self.counter = 0;
        self.entry_count = 0;
        self.last_key.clear();
        block
    }
}

/// Where a block came from, for corruption messages.
#[derive(Debug, Clone)]
pub struct BlockOrigin {
    /// The table file.
    pub file: Arc<Path>,
    /// Offset of the block's stored bytes in the file.
    pub offset: u64,
    /// True if the block was stored compressed (in-block offsets then do not map to file
    /// offsets, and errors report the block's own offset).
    pub compressed: bool,
}

impl BlockOrigin {
    /// An origin for a block that did not come from a file (tests, in-memory use).
    pub fn detached() -> Self {
        BlockOrigin {
            file: Arc::from(Path::new("<memory>")),
            offset: 0,
            compressed: false,
        }
    }

    /// The same origin, borrowed (what a [`BlockView`] carries).
    pub fn borrowed(&self) -> OriginRef<'_> {
        OriginRef {
            file: &self.file,
            offset: self.offset,
            compressed: self.compressed,
        }
    }
}

/// A [`BlockOrigin`] borrowed for the length of one read: the file's path is not reference
/// counted, so a point lookup that names its origin writes no shared memory.
#[derive(Debug, Clone, Copy)]
pub struct OriginRef<'a> {
    /// The table file.
    pub file: &'a Path,
    /// Offset of the block's stored bytes in the file.
    pub offset: u64,
    /// True if the block was stored compressed (see [`BlockOrigin::compressed`]).
    pub compressed: bool,
}

impl OriginRef<'_> {
    /// A corruption error at `in_block` bytes into the (raw) block.
    fn corruption(&self, in_block: usize, reason: &str) -> Error {
        let offset = if self.compressed {
            self.offset
        } else {
            self.offset.saturating_add(in_block as u64)
        };
        Error::corruption(
            self.file,
            offset,
            format!(
                "{reason} (byte {in_block} of the {}block at offset {})",
                if self.compressed { "decompressed " } else { "" },
                self.offset
            ),
        )
    }
}

/// Where a block's bytes live: its own buffer (read with a copy, or decompressed), or in place
/// in a table's memory mapping (an uncompressed block of a mapped table: no copy, no cache).
enum BlockBytes {
    Owned(Vec<u8>),
    Mapped(MappedSlice),
}

impl BlockBytes {
    #[inline]
    fn as_slice(&self) -> &[u8] {
        match self {
            BlockBytes::Owned(bytes) => bytes,
            BlockBytes::Mapped(slice) => slice,
        }
    }
}

/// An immutable, validated block that owns (or holds alive) its bytes: what the block cache
/// shares and what iterators that outlive a lookup hold by `Arc`. Every read goes through
/// its [`BlockView`].
pub struct Block {
    data: BlockBytes,
    /// Offset of the restart array = end of the entries.
    data_end: usize,
    restart_count: usize,
    origin: BlockOrigin,
}

impl fmt::Debug for Block {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Block")
            .field("size_bytes", &self.data.as_slice().len())
            .field("restart_count", &self.restart_count)
            .field("origin", &self.origin)
            .finish()
    }
}

impl Block {
    /// Validates the restart array of `data` (see invariant 2) and wraps it.
    pub fn new(data: Vec<u8>, origin: BlockOrigin) -> Result<Block> {
        Block::from_bytes(BlockBytes::Owned(data), origin)
    }

    /// A block read in place from a table's mapping (see [`crate::fs::Mapping`]): the same
    /// checks as [`Block::new`], no copy.
    pub(crate) fn mapped(data: MappedSlice, origin: BlockOrigin) -> Result<Block> {
        Block::from_bytes(BlockBytes::Mapped(data), origin)
    }

    fn from_bytes(bytes: BlockBytes, origin: BlockOrigin) -> Result<Block> {
        let view = BlockView::parse(bytes.as_slice(), origin.borrowed())?;
        let (data_end, restart_count) = (view.data_end, view.restart_count);
        Ok(Block {
            data: bytes,
            data_end,
            restart_count,
            origin,
        })
    }

    /// The block's bytes and layout, borrowed: what every read of the block goes through.
    #[inline]
    pub fn view(&self) -> BlockView<'_> {
        BlockView {
            data: self.data.as_slice(),
            data_end: self.data_end,
            restart_count: self.restart_count,
            origin: self.origin.borrowed(),
        }
    }

    /// Bytes held (the raw block including its restart array).
    pub fn size_bytes(&self) -> usize {
        self.data.as_slice().len()
    }

    /// Where the block came from.
    pub fn origin(&self) -> &BlockOrigin {
        &self.origin
    }

    /// The raw bytes `range` of the block (`None` if out of bounds): a value's bytes, by the
    /// range its iterator reported ([`BlockIterator::value_range`]).
    pub fn bytes(&self, range: std::ops::Range<usize>) -> Option<&[u8]> {
        self.data.as_slice().get(range)
    }

    /// An unpositioned iterator over the block.
    pub fn iter(self: &Arc<Self>) -> BlockIterator {
        BlockIterator::new(Arc::clone(self))
    }

    /// An unpositioned iterator borrowing the block (no reference count taken).
    pub fn iter_ref(&self) -> BlockIterator<BlockView<'_>> {
        BlockIterator::new(self.view())
    }

    /// Number of restart points.
    pub fn restart_count(&self) -> usize {
        self.restart_count
    }

    /// The full key and the value of the entry at restart point `index` (see
    /// [`BlockView::restart_entry`]).
    pub fn restart_entry(&self, index: usize) -> Option<(&[u8], &[u8])> {
        self.view().restart_entry(index)
    }
}

/// A validated block borrowed from wherever its bytes live — a [`Block`], or a table's
/// mapping for the length of one point lookup — with its layout and origin: a `Copy` handle
/// whose reads take no reference count and write nothing shared.
#[derive(Debug, Clone, Copy)]
pub struct BlockView<'a> {
    data: &'a [u8],
    /// Offset of the restart array = end of the entries.
    data_end: usize,
    restart_count: usize,
    origin: OriginRef<'a>,
}

impl<'a> BlockView<'a> {
    /// Validates the restart array of `data` (see invariant 2) and borrows it.
    pub fn parse(data: &'a [u8], origin: OriginRef<'a>) -> Result<BlockView<'a>> {
        let length = data.len();
        let Some(count_offset) = length.checked_sub(4) else {
            return Err(origin.corruption(0, &format!("block of {length} bytes is too short")));
        };
        let restart_count = coding::get_u32(data, count_offset).unwrap_or(0) as usize;
        if restart_count == 0 {
            return Err(origin.corruption(count_offset, "block has no restart points"));
        }
        let data_end = restart_count
            .checked_mul(4)
            .and_then(|bytes| count_offset.checked_sub(bytes))
            .ok_or_else(|| {
                origin.corruption(
                    count_offset,
                    &format!("restart count {restart_count} does not fit in a {length}-byte block"),
                )
            })?;
        let mut previous = None;
        for index in 0..restart_count {
            let at = data_end + index * 4;
            let restart = coding::get_u32(data, at).unwrap_or(u32::MAX) as usize;
            let ok = match previous {
                None => restart == 0 && (data_end > 0 || restart_count == 1),
                Some(previous) => restart > previous && restart < data_end,
            };
            if !ok {
                return Err(origin.corruption(
                    at,
                    &format!("restart point {index} at {restart} is out of order or out of bounds"),
                ));
            }
            previous = Some(restart);
        }
        Ok(BlockView {
            data,
            data_end,
            restart_count,
            origin,
        })
    }

    /// The raw bytes `range` of the block (`None` if out of bounds), for as long as the
    /// block's bytes live (not just this view).
    pub fn bytes(&self, range: std::ops::Range<usize>) -> Option<&'a [u8]> {
        self.data.get(range)
    }

    fn restart_point(&self, index: usize) -> usize {
        coding::get_u32(self.data, self.data_end + index * 4)
            .map_or(self.data_end, |offset| offset as usize)
    }

    /// The entries area.
    fn entries(&self) -> &'a [u8] {
        self.data.get(..self.data_end).unwrap_or_default()
    }

    /// Decodes the entry header at `offset`, bounds-checking every length.
    fn decode_entry(&self, offset: usize) -> Option<RawEntry> {
        let mut reader = Reader::new(self.entries().get(offset..)?);
        let shared = reader.u32()? as usize;
        let unshared = reader.u32()? as usize;
        let value_length = reader.u32()? as usize;
        let key_start = offset + reader.position();
        reader.bytes(unshared)?;
        let value_start = offset + reader.position();
        reader.bytes(value_length)?;
        Some(RawEntry {
            shared,
            key_delta: (key_start, value_start),
            value: (value_start, offset + reader.position()),
        })
    }

    /// The full key and the value of the entry at restart point `index` (`None` if the
    /// entry is malformed): with a restart point at every entry (the index block), entry
    /// `index` read without a scan.
    pub fn restart_entry(&self, index: usize) -> Option<(&'a [u8], &'a [u8])> {
        let entry = self.decode_entry(self.restart_point(index))?;
        let key = self.data.get(entry.key_delta.0..entry.key_delta.1)?;
        let value = self.data.get(entry.value.0..entry.value.1)?;
        (entry.shared == 0 && parse_internal_key(key).is_some()).then_some((key, value))
    }

    /// The full key stored at restart point `index`.
    fn restart_key(&self, index: usize) -> Option<&'a [u8]> {
        self.restart_entry(index).map(|(key, _)| key)
    }
}

/// What a [`BlockIterator`] reads through: something that lends a [`BlockView`] — an
/// `Arc<Block>` (iterators that outlive a lookup), a `&Block`, or a `BlockView` itself (point
/// lookups, which must not write a shared reference count).
pub trait BlockSource {
    /// The block, borrowed.
    fn view(&self) -> BlockView<'_>;
}

impl BlockSource for Arc<Block> {
    #[inline]
    fn view(&self) -> BlockView<'_> {
        Block::view(self)
    }
}

impl BlockSource for &Block {
    #[inline]
    fn view(&self) -> BlockView<'_> {
        Block::view(self)
    }
}

impl BlockSource for BlockView<'_> {
    #[inline]
    fn view(&self) -> BlockView<'_> {
        *self
    }
}

/// A decoded entry header: byte ranges inside the block (already bounds-checked).
#[derive(Debug, Clone, Copy)]
struct RawEntry {
    /// Bytes shared with the previous key.
    shared: usize,
    /// The unshared key bytes.
    key_delta: (usize, usize),
    /// The value; its end is the next entry's offset.
    value: (usize, usize),
}

/// A cursor over one block, reading it through `B` (an `Arc<Block>` that holds it alive, or a
/// borrowed `&Block` or [`BlockView`]).
pub struct BlockIterator<B: BlockSource = Arc<Block>> {
    block: B,
    /// Offset of the current entry; `data_end` when not positioned.
    current: usize,
    /// Offset of the entry after the current one.
    next_offset: usize,
    /// Index of the restart point at or before `current`.
    restart_index: usize,
    /// Entries between the restart point at `restart_index` and the current entry.
    since_restart: usize,
    key: Vec<u8>,
    value: (usize, usize),
    error: Option<Error>,
}

impl<B: BlockSource> fmt::Debug for BlockIterator<B> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("BlockIterator")
            .field("block", &self.block.view())
            .field("current", &self.current)
            .field("error", &self.error)
            .finish()
    }
}

impl<B: BlockSource> BlockIterator<B> {
    /// An unpositioned iterator over `block`.
    pub fn new(block: B) -> Self {
        let view = block.view();
        let (data_end, restart_count) = (view.data_end, view.restart_count);
        BlockIterator {
            block,
            current: data_end,
            next_offset: data_end,
            restart_index: restart_count,
            since_restart: 0,
            key: Vec::new(),
            value: (0, 0),
            error: None,
        }
    }

    /// The byte range of the current value inside the block (see [`Block::bytes`]).
    pub fn value_range(&self) -> std::ops::Range<usize> {
        self.value.0..self.value.1
    }

    fn mark_end(&mut self) {
        self.current = self.block.view().data_end;
        self.next_offset = self.block.view().data_end;
        self.restart_index = self.block.view().restart_count;
        self.key.clear();
        self.value = (0, 0);
    }

    fn fail(&mut self, at: usize, reason: &str) {
        if self.error.is_none() {
            self.error = Some(self.block.view().origin.corruption(at, reason));
        }
        self.mark_end();
    }

    fn seek_to_restart(&mut self, index: usize) {
        self.key.clear();
        self.restart_index = index;
        self.since_restart = 0;
        self.next_offset = self.block.view().restart_point(index);
        self.current = self.next_offset;
    }

    /// Positions at the entry of restart point `index`, found by other means than this
    /// iterator's binary search (a table's fence pointers); past the end when `index` is
    /// `None` or out of range. Same result as a `seek` to that entry's key.
    pub fn seek_to_restart_entry(&mut self, index: Option<usize>) {
        self.error = None;
        match index {
            Some(index) if index < self.block.view().restart_count => {
                self.seek_to_restart(index);
                self.parse_next();
            }
            _ => self.mark_end(),
        }
    }

    /// Advances `restart_index` to the last restart point at or before the entry spanning
    /// `current..end`, and checks the restart array against the entries: no restart point
    /// falls inside an entry (a seek would start decoding there), and at most
    /// [`BLOCK_RESTART_INTERVAL_MAX`] entries follow one (so `prev` stays linear).
    fn step_restarts(&mut self, current: usize, end: usize) -> std::result::Result<(), String> {
        let view = self.block.view();
        let mut stepped = false;
        while self.restart_index + 1 < view.restart_count
            && view.restart_point(self.restart_index + 1) <= current
        {
            self.restart_index += 1;
            stepped = true;
        }
        if stepped || view.restart_point(self.restart_index) == current {
            self.since_restart = 0;
        } else {
            self.since_restart += 1;
        }
        if self.since_restart >= BLOCK_RESTART_INTERVAL_MAX {
            return Err(format!(
                "more than {BLOCK_RESTART_INTERVAL_MAX} block entries follow one restart point"
            ));
        }
        if self.restart_index + 1 < view.restart_count
            && view.restart_point(self.restart_index + 1) < end
        {
            return Err("a restart point falls inside a block entry".to_string());
        }
        Ok(())
    }

    /// Decodes the entry at `next_offset`; false at the end of the block or on corruption.
    fn parse_next(&mut self) -> bool {
        self.current = self.next_offset;
        if self.current >= self.block.view().data_end {
            self.mark_end();
            return false;
        }
        let current = self.current;
        let Some(entry) = self.block.view().decode_entry(current) else {
            self.fail(
                current,
                "block entry lengths run past the end of the entries",
            );
            return false;
        };
        if let Err(reason) = self.step_restarts(current, entry.value.1) {
            self.fail(current, &reason);
            return false;
        }
        if entry.shared > self.key.len()
            || (entry.shared != 0 && self.block.view().restart_point(self.restart_index) == current)
        {
            let reason = format!(
                "block entry shares {} bytes with a {}-byte key",
                entry.shared,
                self.key.len()
            );
            self.fail(current, &reason);
            return false;
        }
        self.key.truncate(entry.shared);
        let delta = self
            .block
            .view()
            .data
            .get(entry.key_delta.0..entry.key_delta.1)
            .unwrap_or_default();
        self.key.extend_from_slice(delta);
        if let Err(reason) = check_entry_lengths(&self.key, entry.value) {
            self.fail(current, reason);
            return false;
        }
        self.value = entry.value;
        self.next_offset = entry.value.1;
        true
    }
}

/// Refuses a decoded entry no builder writes: an invalid internal key, a key over
/// `KEY_BYTES_MAX`, or a value over the stored limit (a compaction would fail writing it).
fn check_entry_lengths(key: &[u8], value: (usize, usize)) -> std::result::Result<(), &'static str> {
    if parse_internal_key(key).is_none() {
        return Err("block entry key is not a valid internal key");
    }
    if key.len() > crate::key::KEY_BYTES_MAX + 8 {
        return Err("block entry key is longer than the largest key");
    }
    if value.1.saturating_sub(value.0) > crate::expiry::STORED_VALUE_BYTES_MAX {
        return Err("block entry value is longer than the largest value");
    }
    Ok(())
}

impl<B: BlockSource + Send> InternalIterator for BlockIterator<B> {
    fn valid(&self) -> bool {
        self.error.is_none() && self.current < self.block.view().data_end
    }

    fn seek_to_first(&mut self) {
        self.error = None;
        self.seek_to_restart(0);
        self.parse_next();
    }

    fn seek_to_last(&mut self) {
        self.error = None;
        self.seek_to_restart(self.block.view().restart_count - 1);
        while self.parse_next() && self.next_offset < self.block.view().data_end {}
    }

    fn seek(&mut self, target: &[u8]) {
        self.error = None;
        // Binary search for the last restart point whose key is < target.
        let mut left = 0;
        let mut right = self.block.view().restart_count - 1;
        while left < right {
            let mid = (left + right).div_ceil(2);
            let Some(key) = self.block.view().restart_key(mid) else {
                let at = self.block.view().restart_point(mid);
                self.fail(at, "restart point does not start a valid full-key entry");
                return;
            };
            if compare_internal_keys(key, target) == Ordering::Less {
                left = mid;
            } else {
                right = mid - 1;
            }
        }
        self.seek_to_restart(left);
        while self.parse_next() {
            if compare_internal_keys(&self.key, target) != Ordering::Less {
                return;
            }
        }
    }

    fn next(&mut self) {
        debug_assert!(self.valid(), "next on an invalid block iterator");
        self.parse_next();
    }

    fn prev(&mut self) {
        debug_assert!(self.valid(), "prev on an invalid block iterator");
        let original = self.current;
        while self.block.view().restart_point(self.restart_index) >= original {
            if self.restart_index == 0 {
                self.mark_end();
                return;
            }
            self.restart_index -= 1;
        }
        self.seek_to_restart(self.restart_index);
        while self.parse_next() && self.next_offset < original {}
    }

    fn key(&self) -> &[u8] {
        &self.key
    }

    fn value(&self) -> &[u8] {
        self.block
            .view()
            .data
            .get(self.value.0..self.value.1)
            .unwrap_or_default()
    }

    fn status(&self) -> Result<()> {
        match &self.error {
            Some(error) => Err(error.clone()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
