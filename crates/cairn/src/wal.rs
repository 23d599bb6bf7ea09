//! Record logs: the write-ahead log (WAL) and the MANIFEST share this framing.
//!
//! A log is a sequence of checksummed, 8-byte-aligned records; the byte layout is in
//! docs/format.md, "Log record", and the constants below mirror it. Alignment lets the
//! concurrent WAL writer (`wal_writer`) publish a record with one atomic store of its 8-byte
//! header. The framing carries no version field of its own: docs/format.md, "Format versions",
//! says how the next change to it introduces one. On disk: never change the meaning of these
//! bytes without following docs/format.md, "Changing the format".
//!
//! Reading a log distinguishes two kinds of damage:
//! 1. A *torn tail*: the last record was only partly written when the process or machine
//!    died. Nothing valid follows it. It is expected after a crash; the reader stops there and
//!    reports the offset so the caller can ignore it.
//! 2. *Mid-file corruption*: a bad record followed by at least one valid record. Data that was
//!    acknowledged is damaged; the reader returns [`Error::Corruption`] with file and offset.
//!
//! The rule assumes what a file system gives us for appends: after a crash a file holds a
//! prefix of what was appended, possibly with a garbage tail. Zero-length records are never
//! written, so a zero-filled tail is always recognised as a tail.
//!
//! Thread-safety contract: a `LogWriter` is owned by one thread at a time (`&mut self`). It
//! writes the MANIFEST only (the `VersionSet` holds it under the `versions` lock); the live
//! WAL is written concurrently by `wal_writer`, which shares this module's record framing.

use crate::coding::{get_u32, masked_crc2};
use crate::error::{Error, Result};
use crate::fs::{FileSystem, WritableFile};
use std::path::{Path, PathBuf};

/// Bytes of a record header (`masked crc32c u32 | length u32`). On disk: never change.
pub const RECORD_HEADER_BYTES: usize = 8;

/// Largest payload a record may carry (bounded so a damaged length cannot ask for 4 GiB).
pub const RECORD_PAYLOAD_BYTES_MAX: usize = 1 << 30;

/// Records start at multiples of this many bytes. On disk: never change.
pub const RECORD_ALIGNMENT: usize = 8;

/// Bytes a record with `payload_bytes` of payload occupies, padding included.
pub fn record_bytes(payload_bytes: usize) -> usize {
    (RECORD_HEADER_BYTES + payload_bytes).next_multiple_of(RECORD_ALIGNMENT)
}

/// The 8-byte header of a record: `masked crc32c | length`, as one little-endian `u64`.
///
/// Panics if the payload is over [`RECORD_PAYLOAD_BYTES_MAX`]: callers refuse such records
/// at the door (`WriteBatch::validate`, `LogWriter::add_record`), and a header whose length
/// was truncated to 32 bits, or that the reader refuses, would turn an acknowledged write
/// into a torn tail at recovery — stopping is the only safe answer to that bug.
// The casts are exact: the assertion bounds the length by RECORD_PAYLOAD_BYTES_MAX (1 GiB).
#[allow(clippy::cast_possible_truncation)]
pub fn record_header(payload: &[u8]) -> u64 {
    assert!(
        payload.len() <= RECORD_PAYLOAD_BYTES_MAX,
        "log record of {} bytes passed the door checks",
        payload.len()
    );
    let length = (payload.len() as u32).to_le_bytes();
    let crc = masked_crc2(&length, payload);
    u64::from(crc) | (u64::from(payload.len() as u32) << 32)
}

/// Appends records to a log file.
pub struct LogWriter {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    header: Vec<u8>,
}

impl std::fmt::Debug for LogWriter {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("LogWriter")
            .field("path", &self.path)
            .field("size_bytes", &self.file.size_bytes())
            .finish()
    }
}

impl LogWriter {
    /// Starts a log on an empty file.
    pub fn new(file: Box<dyn WritableFile>, path: PathBuf) -> Self {
        LogWriter {
            file,
            path,
            header: Vec::with_capacity(RECORD_HEADER_BYTES),
        }
    }

    /// Appends one record (buffered; call `flush` or `sync` to push it out).
    pub fn add_record(&mut self, payload: &[u8]) -> Result<()> {
        if payload.is_empty() || payload.len() > RECORD_PAYLOAD_BYTES_MAX {
            return Err(Error::InvalidArgument(format!(
                "log record of {} bytes is outside 1..={RECORD_PAYLOAD_BYTES_MAX}",
                payload.len()
            )));
        }
        self.header.clear();
        self.header
            .extend_from_slice(&record_header(payload).to_le_bytes());
        self.file.append(&self.header)?;
        self.file.append(payload)?;
        let padding = record_bytes(payload.len()) - RECORD_HEADER_BYTES - payload.len();
        // `padding < RECORD_ALIGNMENT` by `record_bytes`; the fallback never runs.
        let zeros = [0u8; RECORD_ALIGNMENT];
        self.file.append(zeros.get(..padding).unwrap_or_default())
    }

    #[cfg(any(test, feature = "testing"))]
    /// Hands appended records to the operating system (survives a process crash).
    pub fn flush(&mut self) -> Result<()> {
        self.file.flush()
    }

    /// Makes appended records durable (survives power loss).
    pub fn sync(&mut self) -> Result<()> {
        self.file.sync()
    }

    /// Bytes written so far.
    pub fn size_bytes(&self) -> u64 {
        self.file.size_bytes()
    }

    #[cfg(any(test, feature = "testing"))]
    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// What reading a whole log found.
#[derive(Debug)]
pub struct LogContents {
    /// The file's bytes.
    bytes: Vec<u8>,
    /// `(offset of payload, payload length)` of every valid record, in file order.
    records: Vec<(usize, usize)>,
    /// Offset of a torn tail that was ignored, if any.
    pub torn_tail_offset: Option<u64>,
}

impl LogContents {
    /// The valid records' payloads with the file offset of each record header.
    pub fn records(&self) -> impl Iterator<Item = (u64, &[u8])> {
        self.records.iter().filter_map(|&(start, length)| {
            let payload = self.bytes.get(start..start + length)?;
            Some(((start - RECORD_HEADER_BYTES) as u64, payload))
        })
    }

    /// Number of valid records.
    pub fn record_count(&self) -> usize {
        self.records.len()
    }
}

/// Checks for a valid record at `offset` whose payload is at most `payload_max` bytes;
/// returns its payload length.
fn valid_record_at(bytes: &[u8], offset: usize, payload_max: usize) -> Option<usize> {
    let stored_crc = get_u32(bytes, offset)?;
    let length = get_u32(bytes, offset + 4)? as usize;
    if length == 0 || length > payload_max {
        return None;
    }
    let payload_start = offset + RECORD_HEADER_BYTES;
    let payload = bytes.get(payload_start..payload_start.checked_add(length)?)?;
    let length_bytes = bytes.get(offset + 4..offset + 8)?;
    if masked_crc2(length_bytes, payload) != stored_crc {
        return None;
    }
    // Padding is outside the checksum, so it must be present and zero to count as written.
    let padding_start = payload_start + length;
    let padding = bytes.get(padding_start..offset.checked_add(record_bytes(length))?)?;
    padding.iter().all(|&byte| byte == 0).then_some(length)
}

/// Reads every record of the log at `path` (see the module doc for the damage rules).
pub fn read_log(file_system: &dyn FileSystem, path: &Path) -> Result<LogContents> {
    read_log_limited(file_system, path, RECORD_PAYLOAD_BYTES_MAX)
}

/// [`read_log`] with a lower payload limit (the one the writer enforced; see
/// `Options::wal_record_payload_bytes_max`).
pub fn read_log_limited(
    file_system: &dyn FileSystem,
    path: &Path,
    payload_max: usize,
) -> Result<LogContents> {
    let bytes = file_system.read_all(path)?;
    parse_log_limited(bytes, path, payload_max)
}

/// Parses log bytes read from `path` (tests and fuzz targets; the engine reads through
/// [`read_log`] and [`read_log_limited`]).
#[cfg(any(test, feature = "testing"))]
pub fn parse_log(bytes: Vec<u8>, path: &Path) -> Result<LogContents> {
    parse_log_limited(bytes, path, RECORD_PAYLOAD_BYTES_MAX)
}

/// [`parse_log`] with a lower payload limit.
pub fn parse_log_limited(bytes: Vec<u8>, path: &Path, payload_max: usize) -> Result<LogContents> {
    let payload_max = payload_max.min(RECORD_PAYLOAD_BYTES_MAX);
    let mut records = Vec::new();
    let mut offset = 0usize;
    let mut torn_tail_offset = None;
    while offset < bytes.len() {
        match valid_record_at(&bytes, offset, payload_max) {
            Some(length) => {
                records.push((offset + RECORD_HEADER_BYTES, length));
                offset += record_bytes(length);
            }
            None => {
                // Is anything valid after the damage? Then it is not a tail. Scanning every
                // byte offset is slow only on a damaged file, and only once, at recovery.
                let resumes = (offset + RECORD_ALIGNMENT..bytes.len())
                    .step_by(RECORD_ALIGNMENT)
                    .find(|&candidate| valid_record_at(&bytes, candidate, payload_max).is_some());
                if let Some(next_valid) = resumes {
                    return Err(Error::corruption(
                        path,
                        offset as u64,
                        format!("bad log record followed by a valid record at offset {next_valid}"),
                    ));
                }
                torn_tail_offset = Some(offset as u64);
                break;
            }
        }
    }
    Ok(LogContents {
        bytes,
        records,
        torn_tail_offset,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::MemFs;

    fn write_log(fs: &MemFs, path: &Path, payloads: &[&[u8]]) {
        let mut writer = LogWriter::new(fs.create(path).unwrap(), path.to_path_buf());
        for payload in payloads {
            writer.add_record(payload).unwrap();
        }
        writer.sync().unwrap();
    }

    #[test]
    fn round_trip_and_torn_tail() {
        let fs = MemFs::new();
        let path = Path::new("/log");
        write_log(&fs, path, &[b"one", b"two", &[7u8; 1000]]);
        let contents = read_log(&fs, path).unwrap();
        let payloads: Vec<_> = contents.records().map(|(_, p)| p.to_vec()).collect();
        assert_eq!(
            payloads,
            vec![b"one".to_vec(), b"two".to_vec(), vec![7u8; 1000]]
        );
        assert_eq!(contents.torn_tail_offset, None);

        let full = fs.file_contents(path).unwrap();
        // Every truncation is a torn tail that keeps exactly the complete records.
        for cut in 0..full.len() {
            let contents = parse_log(full[..cut].to_vec(), path).unwrap();
            let expected = [16usize, 32, 1040]
                .iter()
                .filter(|&&end| end <= cut)
                .count();
            assert_eq!(contents.record_count(), expected, "cut {cut}");
        }
        // Garbage or zeros appended after the last record are a tail too.
        let mut zeros = full.clone();
        zeros.extend_from_slice(&[0u8; 100]);
        assert_eq!(parse_log(zeros, path).unwrap().record_count(), 3);
    }

    #[test]
    fn damage_before_a_valid_record_is_corruption() {
        let fs = MemFs::new();
        let path = Path::new("/log");
        write_log(&fs, path, &[b"one", b"two", b"three"]);
        let full = fs.file_contents(path).unwrap();
        for position in (0..32).filter(|position| !(11..16).contains(position)) {
            let mut damaged = full.clone();
            damaged[position] ^= 0x10;
            match parse_log(damaged, path) {
                Err(Error::Corruption { offset, .. }) => assert!(offset <= position as u64),
                other => panic!("flip at {position}: expected corruption, got {other:?}"),
            }
        }
        // Damage in the last record is indistinguishable from a torn write: a tail.
        let mut damaged = full.clone();
        let last = damaged.len() - 4;
        damaged[last] ^= 1;
        let contents = parse_log(damaged, path).unwrap();
        assert_eq!(contents.record_count(), 2);
        assert_eq!(contents.torn_tail_offset, Some(32));
    }
}
