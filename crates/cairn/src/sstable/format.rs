//! Low-level `SSTable` framing: block handles, the per-block trailer, the footer, and
//! [`read_block`], which fetches one block from a file, checks its checksum and decompresses it.
//! The byte layouts are in docs/format.md ("Block trailer", "Block handle", "Footer"); the
//! constants below mirror their offsets and sizes.
//!
//! Thread-safety contract: everything here is either plain data (`Copy` handles, the footer) or a
//! free function over a shared `&dyn RandomAccessFile` (positional reads), so any number of
//! threads may read blocks from one file at once.
//!
//! Invariants:
//! 1. Every block on disk is followed by its trailer (kind byte, masked crc32c of the stored
//!    bytes and the kind byte); a [`BlockHandle`] covers only the stored bytes.
//! 2. A stored block is compressed (LZ4 or zstd) only if that saves at least 1/8 of its raw
//!    size.
//! 4. A table holds zstd blocks only if its format version is [`FORMAT_VERSION_ZSTD`]: a build
//!    that predates zstd refuses such a table by its version instead of failing block by
//!    block, and a table without zstd keeps version 1, byte for byte as before.
//! 3. Decoding never trusts a length from disk before bounds-checking it against the file size,
//!    so a corrupt handle or size prefix yields `Error::Corruption`, never a huge allocation or a
//!    panic.

use crate::coding::{self, Reader};
use crate::error::{Error, Result};
use crate::fs::RandomAccessFile;
use std::ops::Range;
use std::path::Path;

/// How data blocks are compressed on disk (the block's kind byte records which, so a table
/// written with one setting reads back under any other). `Options::compression` sets it for
/// every level; `LevelOptions::compression` overrides it per level.
///
/// ```
/// let mut options = cairn::Options::in_memory();
/// options.compression = cairn::Compression::Zstd;
/// let db = cairn::Db::open("/db", options)?;
/// db.put("k", "v".repeat(100))?;
/// db.flush()?;
/// assert_eq!(db.get("k")?, Some("v".repeat(100).into_bytes()));
/// # Ok::<(), cairn::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Compression {
    /// Stored as is.
    None,
    /// LZ4 block compression (kept only when it saves at least 1/8 of the block): fast,
    /// modest ratio.
    Lz4,
    /// Zstandard at level 3 (kept only when it saves at least 1/8 of the block): a better
    /// ratio than LZ4 for more CPU. Tables written with it have table format version 2, which
    /// builds that predate zstd refuse.
    Zstd,
}

/// The zstd compression level of [`Compression::Zstd`] (zstd's own default).
pub const ZSTD_LEVEL: i32 = 3;

/// Bytes of an encoded [`BlockHandle`].
pub const BLOCK_HANDLE_BYTES: usize = 16;

/// Bytes of the trailer after every block: compression kind (u8) + masked crc32c (u32).
pub const BLOCK_TRAILER_BYTES: usize = 5;

/// Bytes of the footer at the very end of every table file.
pub const FOOTER_BYTES: usize = 64;

/// Footer offset of the `format_version` u32 (after the three 16-byte handles).
pub const FOOTER_VERSION_OFFSET: usize = 3 * BLOCK_HANDLE_BYTES;

/// Footer offset of the magic u64.
pub const FOOTER_MAGIC_OFFSET: usize = FOOTER_VERSION_OFFSET + 4;

/// Footer offset of the masked crc32c u32, which covers footer bytes `0..FOOTER_CRC_OFFSET`.
pub const FOOTER_CRC_OFFSET: usize = FOOTER_MAGIC_OFFSET + 8;

/// The newest table format version this code writes and reads: version 2 tables may hold
/// zstd blocks and entries of kind `PutWithExpiry`. On disk: bump it (never reuse a number) for any change to
/// a byte of a table file; docs/format.md, "Changing the format", says what else that change
/// must do.
pub const FORMAT_VERSION: u32 = 2;

/// The oldest table format version this code reads. A table without expiring entries or
/// zstd blocks is still written as this version, byte for byte as before, so older builds
/// keep reading it.
pub const FORMAT_VERSION_OLDEST: u32 = 1;

/// The table format version of tables that may hold zstd blocks (kind [`KIND_ZSTD`]): the
/// same version 2 that expiring entries introduced (invariant 4).
pub const FORMAT_VERSION_ZSTD: u32 = FORMAT_VERSION;

/// The format version of a table written with `compression`.
pub fn format_version_for(compression: Compression) -> u32 {
    match compression {
        Compression::Zstd => FORMAT_VERSION_ZSTD,
        Compression::None | Compression::Lz4 => FORMAT_VERSION_OLDEST,
    }
}

/// Magic number at footer bytes 52..60; its little-endian bytes spell `cairnSST`.
/// On disk: never change.
pub const TABLE_MAGIC: u64 = u64::from_le_bytes(*b"cairnSST");

/// Compression kind byte: stored as is. On disk: never change.
pub const KIND_NONE: u8 = 0;

/// Compression kind byte: LZ4 block format with a u32 LE uncompressed-size prefix.
/// On disk: never change.
pub const KIND_LZ4: u8 = 1;

/// Compression kind byte: a zstd frame with a u32 LE uncompressed-size prefix (tables of
/// format version [`FORMAT_VERSION_ZSTD`] only). On disk: never change.
pub const KIND_ZSTD: u8 = 2;

/// The position of a block's stored bytes in a table file (excluding the block trailer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BlockHandle {
    /// Byte offset of the block's first stored byte.
    pub offset: u64,
    /// Number of stored bytes (after compression, without the 5-byte trailer).
    pub size: u64,
}

impl BlockHandle {
    /// Appends the 16-byte encoding: `offset u64 LE, size u64 LE`.
    pub fn encode_to(&self, buffer: &mut Vec<u8>) {
        coding::put_u64(buffer, self.offset);
        coding::put_u64(buffer, self.size);
    }

    /// The 16-byte encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut buffer = Vec::with_capacity(BLOCK_HANDLE_BYTES);
        self.encode_to(&mut buffer);
        buffer
    }

    /// Decodes a handle from exactly 16 bytes; `None` on any other length.
    pub fn decode(bytes: &[u8]) -> Option<BlockHandle> {
        if bytes.len() != BLOCK_HANDLE_BYTES {
            return None;
        }
        let mut reader = Reader::new(bytes);
        Some(BlockHandle {
            offset: reader.u64()?,
            size: reader.u64()?,
        })
    }

    /// Offset of the first byte after this block's trailer; `None` on overflow.
    pub fn end_with_trailer(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(BLOCK_TRAILER_BYTES as u64)
    }
}

/// The fixed-size record at the end of every table file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    /// The index block (fence pointers).
    pub index: BlockHandle,
    /// The Bloom filter block; `{0, 0}` when the table has no filter.
    pub filter: BlockHandle,
    /// The properties block.
    pub properties: BlockHandle,
    /// Table format version ([`FORMAT_VERSION`]).
    pub format_version: u32,
}

impl Footer {
    /// The 64-byte encoding: three handles, version, magic, masked crc32c of bytes 0..60.
    pub fn encode(&self) -> Vec<u8> {
        let mut buffer = Vec::with_capacity(FOOTER_BYTES);
        self.index.encode_to(&mut buffer);
        self.filter.encode_to(&mut buffer);
        self.properties.encode_to(&mut buffer);
        coding::put_u32(&mut buffer, self.format_version);
        coding::put_u64(&mut buffer, TABLE_MAGIC);
        let crc = coding::masked_crc(&buffer);
        coding::put_u32(&mut buffer, crc);
        debug_assert_eq!(buffer.len(), FOOTER_BYTES);
        buffer
    }

    /// Decodes and checks a footer read from `file` at `offset` (used in error messages).
    /// Checks, in order: length, magic, checksum, format version (a version other than
    /// [`FORMAT_VERSION_OLDEST`]..=[`FORMAT_VERSION`] is refused as too old or too new, never
    /// guessed at).
    pub fn decode(bytes: &[u8], file: &std::path::Path, offset: u64) -> Result<Footer> {
        let corrupt =
            |at: usize, reason: String| Error::corruption(file, offset + at as u64, reason);
        if bytes.len() != FOOTER_BYTES {
            return Err(corrupt(
                0,
                format!("footer is {} bytes, expected {FOOTER_BYTES}", bytes.len()),
            ));
        }
        let magic = coding::get_u64(bytes, FOOTER_MAGIC_OFFSET).unwrap_or(0);
        if magic != TABLE_MAGIC {
            return Err(corrupt(
                FOOTER_MAGIC_OFFSET,
                format!("bad table magic {magic:#018x} (not a cairn table)"),
            ));
        }
        let stored_crc = coding::get_u32(bytes, FOOTER_CRC_OFFSET).unwrap_or(0);
        let actual_crc = coding::masked_crc(bytes.get(..FOOTER_CRC_OFFSET).unwrap_or_default());
        if stored_crc != actual_crc {
            return Err(corrupt(
                FOOTER_CRC_OFFSET,
                format!("footer checksum mismatch (stored {stored_crc:#010x}, computed {actual_crc:#010x})"),
            ));
        }
        let mut reader = Reader::new(bytes);
        let handle = |reader: &mut Reader<'_>| -> Option<BlockHandle> {
            BlockHandle::decode(reader.bytes(BLOCK_HANDLE_BYTES)?)
        };
        let (Some(index), Some(filter), Some(properties), Some(format_version)) = (
            handle(&mut reader),
            handle(&mut reader),
            handle(&mut reader),
            reader.u32(),
        ) else {
            return Err(corrupt(0, "footer truncated".to_string()));
        };
        if !(FORMAT_VERSION_OLDEST..=FORMAT_VERSION).contains(&format_version) {
            let age = if format_version < FORMAT_VERSION_OLDEST {
                "is too old"
            } else {
                "is newer than this build"
            };
            return Err(corrupt(
                FOOTER_VERSION_OFFSET,
                format!(
                    "table format version {format_version} {age}; this build reads versions \
                     {FORMAT_VERSION_OLDEST} to {FORMAT_VERSION}"
                ),
            ));
        }
        Ok(Footer {
            index,
            filter,
            properties,
            format_version,
        })
    }
}

/// A block prepared for writing: the stored bytes plus the trailer (kind byte and crc).
#[derive(Debug)]
pub struct EncodedBlock {
    /// Stored bytes followed by the 5-byte trailer.
    pub bytes: Vec<u8>,
    /// Length of the stored part (what a [`BlockHandle`] records as `size`).
    pub stored_size: u64,
}

/// Frames `raw` for writing: compresses it when asked and worthwhile (saves at least 1/8), then
/// appends the kind byte and the masked crc32c of stored bytes + kind byte.
pub fn encode_block(raw: &[u8], compression: Compression) -> EncodedBlock {
    let mut kind = KIND_NONE;
    let mut bytes = Vec::new();
    let compressed = match compression {
        _ if raw.is_empty() => None,
        Compression::None => None,
        Compression::Lz4 => Some((KIND_LZ4, lz4_flex::block::compress_prepend_size(raw))),
        Compression::Zstd => zstd_compress(raw).map(|compressed| (KIND_ZSTD, compressed)),
    };
    if let Some((compressed_kind, compressed)) = compressed {
        if compressed.len() <= raw.len() - raw.len() / 8 {
            kind = compressed_kind;
            bytes = compressed;
        }
    }
    if kind == KIND_NONE {
        bytes.reserve_exact(raw.len() + BLOCK_TRAILER_BYTES);
        bytes.extend_from_slice(raw);
    }
    let stored_size = bytes.len() as u64;
    let crc = coding::masked_crc2(&bytes, &[kind]);
    bytes.push(kind);
    coding::put_u32(&mut bytes, crc);
    EncodedBlock { bytes, stored_size }
}

/// The largest raw block a builder writes: a block is closed once it reaches
/// `block_size_bytes` (at most 64 MiB), so it holds at most that much before its last entry,
/// one entry (the longest key, the longest value with its expiry prefix, their trailer and
/// length headers) and its restart array (at most one offset per entry of at least 8 bytes,
/// bounded by the same size again).
pub(crate) const BLOCK_RAW_BYTES_MAX: usize = 2 * (64 << 20)
    + crate::key::KEY_BYTES_MAX
    + crate::key::VALUE_BYTES_MAX
    + crate::expiry::EXPIRY_BYTES
    + 64;

/// `raw_length u32 ++ zstd frame`, or `None` if zstd fails (the block is then stored as is)
/// or the block is too large for the prefix.
fn zstd_compress(raw: &[u8]) -> Option<Vec<u8>> {
    let raw_length = u32::try_from(raw.len()).ok()?;
    let mut bytes = Vec::with_capacity(4 + zstd::zstd_safe::compress_bound(raw.len()));
    coding::put_u32(&mut bytes, raw_length);
    let frame = zstd::bulk::compress(raw, ZSTD_LEVEL).ok()?;
    bytes.extend_from_slice(&frame);
    Some(bytes)
}

/// Decompresses a stored zstd block (`raw_length u32 ++ zstd frame`), checking the length.
fn zstd_decompress(stored: &[u8], corrupt: &dyn Fn(String) -> Error) -> Result<Vec<u8>> {
    let declared = coding::get_u32(stored, 0)
        .ok_or_else(|| corrupt("zstd block shorter than its size prefix".into()))?;
    let declared = declared as usize;
    let frame = stored.get(4..).unwrap_or_default();
    // Bounds the allocation below by the largest block a builder writes. Not by a ratio to
    // the stored size: zstd stores a run of one byte in a few bytes per 128 KiB, so a block
    // of zeros shrinks far more than a thousandfold. The frame's own content size, when it
    // records one (ours always do), must agree.
    if declared > BLOCK_RAW_BYTES_MAX {
        return Err(corrupt(format!(
            "zstd block claims {declared} raw bytes, more than a block can hold ({BLOCK_RAW_BYTES_MAX})"
        )));
    }
    if let Ok(Some(content)) = zstd::zstd_safe::get_frame_content_size(frame) {
        if content != declared as u64 {
            return Err(corrupt(format!(
                "zstd block claims {declared} raw bytes, its frame {content}"
            )));
        }
    }
    let data = zstd::bulk::decompress(frame, declared)
        .map_err(|error| corrupt(format!("zstd decompression failed: {error}")))?;
    if data.len() != declared {
        return Err(corrupt(format!(
            "zstd block decompressed to {} bytes, expected {declared}",
            data.len()
        )));
    }
    Ok(data)
}

/// The decoded contents of one block read from disk.
#[derive(Debug)]
pub struct BlockContents {
    /// The raw (uncompressed) block bytes.
    pub data: Vec<u8>,
    /// True if the block was stored compressed (in-block offsets then do not map to file
    /// offsets).
    pub compressed: bool,
}

#[cfg(any(test, feature = "testing"))]
/// Reads the block at `handle`, verifies its checksum when `verify` is set, and decompresses it.
pub fn read_block(
    file: &dyn RandomAccessFile,
    handle: BlockHandle,
    verify: bool,
) -> Result<Vec<u8>> {
    read_block_contents(file, handle, verify).map(|contents| contents.data)
}

/// Like [`read_block`], also reporting whether the block was compressed.
pub fn read_block_contents(
    file: &dyn RandomAccessFile,
    handle: BlockHandle,
    verify: bool,
) -> Result<BlockContents> {
    let path = file.path();
    let corrupt = |reason: String| Error::corruption(path, handle.offset, reason);
    let end = handle
        .end_with_trailer()
        .ok_or_else(|| corrupt(format!("block handle {handle:?} overflows")))?;
    if end > file.size_bytes() {
        return Err(corrupt(format!(
            "block handle {handle:?} extends past the end of the file ({} bytes)",
            file.size_bytes()
        )));
    }
    let stored_size = usize::try_from(handle.size)
        .map_err(|_| corrupt(format!("block of {} bytes is too large", handle.size)))?;
    let mut buffer = vec![0u8; stored_size + BLOCK_TRAILER_BYTES];
    file.read_exact_at(handle.offset, &mut buffer)?;
    let kind = buffer.get(stored_size).copied().unwrap_or(u8::MAX);
    if verify {
        verify_block_crc(&buffer, stored_size, &corrupt)?;
    }
    buffer.truncate(stored_size);
    match kind {
        KIND_NONE => Ok(BlockContents {
            data: buffer,
            compressed: false,
        }),
        KIND_LZ4 => {
            let declared = coding::get_u32(&buffer, 0)
                .ok_or_else(|| corrupt("compressed block shorter than its size prefix".into()))?;
            let declared = declared as usize;
            // LZ4 cannot expand data by more than ~255x; a larger claim is corruption, and
            // refusing it bounds the allocation below.
            if declared > stored_size.saturating_mul(256).saturating_add(1024) {
                return Err(corrupt(format!(
                    "compressed block claims {declared} raw bytes from {stored_size} stored bytes"
                )));
            }
            let input = buffer.get(4..).unwrap_or_default();
            let data = lz4_flex::block::decompress(input, declared)
                .map_err(|error| corrupt(format!("lz4 decompression failed: {error}")))?;
            if data.len() != declared {
                return Err(corrupt(format!(
                    "lz4 block decompressed to {} bytes, expected {declared}",
                    data.len()
                )));
            }
            Ok(BlockContents {
                data,
                compressed: true,
            })
        }
        KIND_ZSTD => Ok(BlockContents {
            data: zstd_decompress(&buffer, &corrupt)?,
            compressed: true,
        }),
        other => Err(corrupt(format!("unknown block compression kind {other}"))),
    }
}

/// Checks the trailer checksum of `block` (stored bytes then trailer) against its bytes and
/// kind.
fn verify_block_crc(
    block: &[u8],
    stored_size: usize,
    corrupt: &impl Fn(String) -> Error,
) -> Result<()> {
    let stored_crc = coding::get_u32(block, stored_size + 1).unwrap_or(0);
    let actual_crc = coding::masked_crc(block.get(..=stored_size).unwrap_or_default());
    if stored_crc != actual_crc {
        return Err(corrupt(format!(
            "block checksum mismatch (stored {stored_crc:#010x}, computed {actual_crc:#010x})"
        )));
    }
    Ok(())
}

/// The uncompressed block at `handle` of a mapped table, checked as [`read_block_contents`]
/// checks a block it reads (bounds, and the checksum when `verify` is set): its bytes' range
/// in `file_bytes`, to be used in place. `None` if the block is stored compressed: it must be
/// read and decompressed instead.
pub fn mapped_block_range(
    file_bytes: &[u8],
    handle: BlockHandle,
    verify: bool,
    path: &Path,
) -> Result<Option<Range<usize>>> {
    let corrupt = |reason: String| Error::corruption(path, handle.offset, reason);
    let past_end = || {
        corrupt(format!(
            "block handle {handle:?} extends past the end of the file ({} bytes)",
            file_bytes.len()
        ))
    };
    let start = usize::try_from(handle.offset).map_err(|_| past_end())?;
    let stored_size = usize::try_from(handle.size).map_err(|_| past_end())?;
    let end = stored_size
        .checked_add(BLOCK_TRAILER_BYTES)
        .and_then(|length| start.checked_add(length))
        .ok_or_else(past_end)?;
    let block = file_bytes.get(start..end).ok_or_else(past_end)?;
    if block.get(stored_size).copied() != Some(KIND_NONE) {
        return Ok(None);
    }
    if verify {
        verify_block_crc(block, stored_size, &corrupt)?;
    }
    Ok(Some(start..start + stored_size))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{FileSystem, MemFs};
    use std::path::Path;

    #[test]
    fn handle_and_footer_round_trip() {
        let handle = BlockHandle {
            offset: 0x0102_0304_0506_0708,
            size: 77,
        };
        assert_eq!(BlockHandle::decode(&handle.encode()), Some(handle));
        assert_eq!(BlockHandle::decode(&handle.encode()[..15]), None);
        let footer = Footer {
            index: handle,
            filter: BlockHandle::default(),
            properties: BlockHandle { offset: 9, size: 3 },
            format_version: FORMAT_VERSION,
        };
        let bytes = footer.encode();
        assert_eq!(bytes.len(), FOOTER_BYTES);
        assert_eq!(&bytes[52..60], b"cairnSST");
        assert_eq!(Footer::decode(&bytes, Path::new("t"), 0).unwrap(), footer);
        for bit in 0..FOOTER_BYTES * 8 {
            let mut bad = bytes.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            let error = Footer::decode(&bad, Path::new("t"), 100).unwrap_err();
            assert!(error.is_corruption(), "{error}");
        }
    }

    #[test]
    fn block_framing_round_trip_and_corruption() {
        let fs = MemFs::new();
        let path = Path::new("/blocks");
        let mut file = fs.create(path).unwrap();
        let raw_plain: Vec<u8> = (0..1000u32).map(|i| (i * 7919 % 251) as u8).collect();
        let raw_compressible = vec![b'x'; 4000];
        let mut handles = Vec::new();
        let mut offset = 0;
        for (raw, compression) in [
            (&raw_plain, Compression::None),
            (&raw_compressible, Compression::Lz4),
            (&Vec::new(), Compression::Lz4),
        ] {
            let encoded = encode_block(raw, compression);
            file.append(&encoded.bytes).unwrap();
            handles.push(BlockHandle {
                offset,
                size: encoded.stored_size,
            });
            offset += encoded.bytes.len() as u64;
        }
        let reader = fs.open_read(path).unwrap();
        let contents = read_block_contents(reader.as_ref(), handles[1], true).unwrap();
        assert!(contents.compressed);
        assert_eq!(contents.data, raw_compressible);
        assert_eq!(
            read_block(reader.as_ref(), handles[0], true).unwrap(),
            raw_plain
        );
        assert!(read_block(reader.as_ref(), handles[2], true)
            .unwrap()
            .is_empty());
        let past_end = BlockHandle {
            offset: offset - 2,
            size: 10,
        };
        assert!(read_block(reader.as_ref(), past_end, true)
            .unwrap_err()
            .is_corruption());
        let huge = BlockHandle {
            offset: u64::MAX - 1,
            size: 10,
        };
        assert!(read_block(reader.as_ref(), huge, false)
            .unwrap_err()
            .is_corruption());

        // Every bit flip in the compressed block is caught by the checksum; without
        // verification it must still never panic.
        let original = fs.file_contents(path).unwrap();
        let start = handles[1].offset as usize;
        let end = handles[1].end_with_trailer().unwrap() as usize;
        for bit in start * 8..end * 8 {
            let mut bytes = original.clone();
            bytes[bit / 8] ^= 1 << (bit % 8);
            fs.set_file_contents(path, bytes);
            let reader = fs.open_read(path).unwrap();
            let error = read_block(reader.as_ref(), handles[1], true).unwrap_err();
            assert!(error.is_corruption());
            let _ = read_block(reader.as_ref(), handles[1], false);
        }
    }
}
