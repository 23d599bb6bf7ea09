//! Sorted string tables (SSTables): the immutable on-disk runs of the LSM tree.
//!
//! One concept per file: [`block`] (prefix-compressed sorted blocks), [`bloom`] (blocked Bloom
//! filter), [`format`](mod@format) (block handles, block trailer, footer, checked block reads),
//! [`properties`] (table facts), [`builder`] (writing a table), [`cache`] (the shared block
//! cache) and [`reader`] (opening, point lookups and iteration).
//!
//! Thread-safety contract: a [`TableBuilder`] is owned by one thread; an open [`Table`] and the
//! [`BlockCache`] are `Send + Sync` and shared by `Arc`; iterators are owned by one thread and
//! keep what they read alive.
//!
//! Invariants: a table file is immutable once `TableBuilder::finish` returns; every on-disk
//! integer is fixed-width little-endian; every byte of the file is covered by a block checksum or
//! the footer checksum, so with `verify_checksums` any single-bit flip is reported as
//! `Error::Corruption` (naming the file and offset) instead of returning wrong data.
//!
//! # File layout (format version 1)
//!
//! Every integer is fixed-width little-endian. Offsets are byte offsets from the start of the
//! file; `N` is the file size.
//!
//! ```text
//! [data block 0][trailer] ... [data block n-1][trailer]   data blocks, internal-key order
//! [filter block][trailer]                                  absent when bloom_bits_per_key = 0
//! [properties block][trailer]
//! [index block][trailer]
//! [footer]                                                 last 64 bytes, N-64..N
//! ```
//!
//! ## Block trailer (5 bytes, after every block's stored bytes)
//!
//! ```text
//! +0  u8   compression kind: 0 = none, 1 = LZ4
//! +1  u32  masked crc32c of (stored bytes ++ kind byte)
//! ```
//!
//! `masked(c) = rotate_right(c, 15) + 0xa282ead8 (wrapping)`, where `c` is CRC-32C (Castagnoli).
//! A block handle's `size` counts the stored bytes only, not the trailer. An LZ4 block's stored
//! bytes are `raw_length u32 ++ LZ4 block-format data`; a block is stored compressed only if
//! that is at most `raw_length - raw_length / 8` bytes. Only data blocks are ever compressed.
//!
//! ## Block handle (16 bytes)
//!
//! ```text
//! +0  u64  offset of the block's first stored byte
//! +8  u64  size of the stored bytes (trailer excluded)
//! ```
//!
//! ## Data and index blocks (raw, i.e. after decompression)
//!
//! ```text
//! entry 0 .. entry e-1, each:
//!   +0   u32  shared      bytes shared with the previous entry's key (0 at a restart point)
//!   +4   u32  unshared    bytes of key that follow
//!   +8   u32  value_len
//!   +12  unshared bytes of key (key = previous_key[..shared] ++ these)
//!   ...  value_len bytes of value
//! restart_offset u32 * restart_count    offset of each restart entry; the first is 0
//! restart_count u32                     >= 1 (an empty block is exactly [0u32, 1u32])
//! ```
//!
//! Keys are internal keys (user key ++ u64 LE trailer `(sequence << 8) | kind`), strictly
//! increasing (user key ascending, trailer descending). Data blocks place a restart point every
//! `block_restart_interval` entries and are cut once their raw size reaches `block_size_bytes`.
//! The index block has a restart point at every entry; entry `i` holds key = the last internal
//! key of data block `i` (its fence pointer) and value = the 16-byte handle of data block `i`.
//!
//! ## Filter block (uncompressed)
//!
//! ```text
//! +0                 block_count * 64 bytes   512-bit filter blocks
//! +64*block_count    u32                      block_count (>= 1)
//! +64*block_count+4  u8                       k, probes per key (1..=30)
//! ```
//!
//! For a user key with `h = xxh3_64(user_key)` (seed 0): block `j = ((h >> 32) * block_count) >> 32`
//! (u64 arithmetic); `h1 = h as u32`,
//! `h2 = ((h * 0x9e3779b97f4a7c15) >> 32) as u32 | 1` (wrapping multiply);
//! probe `i` in `0..k` sets/tests bit `b = (h1 + i * h2) >> 23` (wrapping u32), which is bit
//! `b % 8` of byte `64 * j + b / 8`. `block_count = max(1, ceil(keys * bits_per_key / 512))`
//! over distinct consecutive user keys; `k = clamp(round(bits_per_key * ln 2), 1, 30)`.
//!
//! ## Properties block (uncompressed)
//!
//! ```text
//! +0   u32  format_version (1)
//! +4   u64  entry_count
//! +12  u64  delete_count
//! +20  u64  smallest_sequence      (0 for an empty table)
//! +28  u64  largest_sequence       (0 for an empty table)
//! +36  u64  raw_key_bytes          (sum of internal key lengths)
//! +44  u64  raw_value_bytes
//! +52  u64  data_block_count
//! +60  u32 length + bytes: smallest internal key (empty for an empty table)
//! ...  u32 length + bytes: largest internal key (empty for an empty table)
//! ```
//!
//! ## Footer (64 bytes at N-64)
//!
//! ```text
//! +0   16  index block handle
//! +16  16  filter block handle ({0, 0} = no filter)
//! +32  16  properties block handle
//! +48  u32 format_version (1)
//! +52  u64 magic 0x5453536e72696163 (bytes "cairnSST")
//! +60  u32 masked crc32c of footer bytes 0..60
//! ```
//!
//! Opening checks, in order: file size >= 64, magic, footer checksum, format version, that
//! every metadata handle ends before the footer, then the properties, filter and index blocks
//! (always checksum-verified), then every index entry (handles in order, non-overlapping, before
//! the first metadata block; fence keys strictly increasing; count = `data_block_count`; last
//! fence key = largest key).

pub mod block;
pub mod bloom;
pub mod builder;
pub mod cache;
pub mod format;
pub mod properties;
pub mod reader;

#[cfg(test)]
mod tests;

pub use block::{Block, BlockBuilder, BlockIterator, BlockOrigin};
pub use bloom::{BloomFilter, BloomFilterBuilder};
pub use builder::{TableBuilder, TableOptions};
pub use cache::BlockCache;
pub use format::{read_block, BlockHandle, Footer};
pub use properties::TableProperties;
pub use reader::{Table, TableGet, TableIterator};
