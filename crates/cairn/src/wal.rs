//! Record logs: the write-ahead log (WAL) and the MANIFEST share this framing.
//!
//! A log is a sequence of checksummed, 8-byte-aligned records; the byte layout is in
//! docs/format.md, "Log record", and the constants below mirror it. Alignment lets the
//! concurrent WAL writer (`wal_writer`) publish a record with one atomic store of its 8-byte
//! header. On disk: never change the meaning of these bytes without following
//! docs/format.md, "Changing the format".
//!
//! A version-2 WAL starts with a header record ([`WAL_HEADER_MAGIC`], version) and carries
//! *sync markers* ([`WAL_SYNC_MARKER_MAGIC`], `durable_bytes`): after an fdatasync of a live
//! log, the next bytes written name the length that sync made durable. Neither can be taken
//! for a write batch, whose first field is a sequence number below 2^56. A WAL without a
//! header is version 1 (no markers), read exactly as before markers existed.
//!
//! Reading a log distinguishes kinds of damage:
//! 1. A *torn tail*: the last record was only partly written when the process or machine
//!    died. Nothing valid follows it. It is expected after a crash; the reader stops there and
//!    reports the offset so the caller can ignore it.
//! 2. *Mid-file corruption*: a bad record followed by at least one valid record, in a log
//!    that cannot say which bytes were synced (the MANIFEST, synced after every record, and a
//!    version-1 WAL). Data that was acknowledged is damaged; the reader returns
//!    [`Error::Corruption`] with file and offset.
//! 3. In a version-2 WAL, a bad record before the largest `durable_bytes` any valid sync
//!    marker names (before or after the damage) is damage to synced bytes: corruption. One at
//!    or past it, followed by valid records, is a *lost unsynced tail*: a power loss wrote
//!    back unsynced pages out of order. Under [`WalRecovery::PointInTime`] the reader keeps
//!    the records before it and reports what it dropped ([`LostTail`]); under
//!    [`WalRecovery::Strict`] it is corruption.
//!
//! The rule assumes what a file system gives us for appends: after a crash a file holds its
//! synced bytes, and of the rest a prefix (or, writing back pages in any order, any subset of
//! pages), possibly with a garbage tail. Zero-length records are never written, so a
//! zero-filled tail or hole is never taken for a record.
//!
//! Thread-safety contract: a `LogWriter` is owned by one thread at a time (`&mut self`). It
//! writes the MANIFEST only (the `VersionSet` holds it under the `versions` lock); the live
//! WAL is written concurrently by `wal_writer`, which shares this module's record framing.
//! Reading is a pure function of the bytes.
//!
//! Invariants (checked by the parsers on every read):
//! 1. Valid records are returned in file order, each starting where the previous one ends.
//! 2. A sync marker names a length at or before its own offset (it is written after the sync
//!    it reports); one naming a later offset is corruption.
//! 3. A lost unsynced tail starts at or past every `durable_bytes` named in the file.

use crate::coding::{get_u32, masked_crc2};
use crate::error::{Error, Result};
use crate::fs::{FileSystem, WritableFile};
use std::path::{Path, PathBuf};

/// How recovery treats a bad WAL record followed by valid ones in the WAL's *unsynced* part
/// (bytes past the last length a sync marker names). After a power loss a disk may write back
/// unsynced pages in any order, leaving exactly that. Damage to synced bytes is always
/// `Error::Corruption`, and so is any such damage in a version-1 WAL (no sync markers), in
/// both modes.
///
/// ```
/// let mut options = cairn::Options::in_memory();
/// options.wal_recovery = cairn::WalRecovery::Strict;
/// cairn::Db::open("/db", options)?;
/// # Ok::<(), cairn::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WalRecovery {
    /// Recover the writes before the first bad record and drop the rest of the log and every
    /// newer WAL, as for a torn tail; report what was dropped on stderr. Every synced write is
    /// kept. `RocksDB` calls this point-in-time recovery.
    #[default]
    PointInTime,
    /// Refuse to open (`Error::Corruption`): for users who would rather inspect a damaged log
    /// than lose unsynced writes that reached the disk after the hole.
    Strict,
}

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

/// WAL format version this build writes (in the header record). Version 1 is a WAL without
/// a header; version 3 has the framing of version 2 and batches that may hold entries of kind
/// `PutWithExpiry`. On disk: never reuse a number.
pub const WAL_FORMAT_VERSION: u32 = 3;

/// The oldest WAL version with a header record (read by the version-2 rules).
pub const WAL_FORMAT_VERSION_HEADER: u32 = 2;

/// First 8 bytes of a WAL header record's payload (`magic | version u32`). On disk: never
/// change.
pub const WAL_HEADER_MAGIC: [u8; 8] = *b"cairnWAL";

/// First 8 bytes of a sync marker's payload (`magic | durable_bytes u64`). On disk: never
/// change.
pub const WAL_SYNC_MARKER_MAGIC: [u8; 8] = *b"cairnSYN";

/// Payload bytes of a WAL header record.
pub const WAL_HEADER_PAYLOAD_BYTES: usize = 12;

/// Payload bytes of a sync marker record.
pub const WAL_SYNC_MARKER_PAYLOAD_BYTES: usize = 16;

/// A whole record (header, payload, zero padding) as bytes, for writers that append framed
/// records to a file themselves.
pub fn encode_record(payload: &[u8]) -> Vec<u8> {
    let mut record = Vec::with_capacity(record_bytes(payload.len()));
    record.extend_from_slice(&record_header(payload).to_le_bytes());
    record.extend_from_slice(payload);
    record.resize(record_bytes(payload.len()), 0);
    record
}

/// The header record every version-2 WAL starts with.
pub fn wal_header_record() -> Vec<u8> {
    let mut payload = [0u8; WAL_HEADER_PAYLOAD_BYTES];
    payload[..8].copy_from_slice(&WAL_HEADER_MAGIC);
    payload[8..].copy_from_slice(&WAL_FORMAT_VERSION.to_le_bytes());
    encode_record(&payload)
}

/// The sync marker record saying the first `durable_bytes` bytes of the WAL are synced.
pub fn sync_marker_record(durable_bytes: u64) -> Vec<u8> {
    let mut payload = [0u8; WAL_SYNC_MARKER_PAYLOAD_BYTES];
    payload[..8].copy_from_slice(&WAL_SYNC_MARKER_MAGIC);
    payload[8..].copy_from_slice(&durable_bytes.to_le_bytes());
    encode_record(&payload)
}

/// What a WAL record's payload is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WalPayload {
    /// A header naming this WAL format version.
    Header(u32),
    /// A sync marker naming the bytes made durable.
    SyncMarker(u64),
    /// A write batch (anything else; the batch decoder judges it).
    Batch,
}

fn classify(payload: &[u8]) -> WalPayload {
    let tail = |start: usize| payload.get(start..).unwrap_or_default();
    match (payload.len(), payload.get(..8)) {
        (WAL_HEADER_PAYLOAD_BYTES, Some(magic)) if magic == WAL_HEADER_MAGIC => {
            WalPayload::Header(get_u32(tail(8), 0).unwrap_or(0))
        }
        (WAL_SYNC_MARKER_PAYLOAD_BYTES, Some(magic)) if magic == WAL_SYNC_MARKER_MAGIC => {
            WalPayload::SyncMarker(crate::coding::get_u64(tail(8), 0).unwrap_or(u64::MAX))
        }
        _ => WalPayload::Batch,
    }
}

/// A lost unsynced tail that a version-2 WAL read under [`WalRecovery::PointInTime`] dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostTail {
    /// Offset of the first bad record: the recovered prefix ends here.
    pub offset: u64,
    /// Offset of the first valid record after it.
    pub resumes_at: u64,
    /// The largest length a valid sync marker says was durable (at most `offset`).
    pub durable_bytes: u64,
    /// Valid write-batch records after the damage, dropped with it.
    pub dropped_records: usize,
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
    /// A version-2 WAL's lost unsynced tail, dropped (see the module doc, item 3).
    pub lost_unsynced_tail: Option<LostTail>,
    /// The WAL format version read (1 for a MANIFEST or a WAL without a header). Only the
    /// format tests look at it: recovery treats both versions through `lost_unsynced_tail`.
    #[cfg(any(test, feature = "testing"))]
    pub wal_version: u32,
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

    /// Length of the log read, in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.bytes.len() as u64
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
        lost_unsynced_tail: None,
        #[cfg(any(test, feature = "testing"))]
        wal_version: 1,
    })
}

/// Reads the WAL at `path` (see the module doc for the damage rules). `expect_header`: the
/// database writes version-2 WALs (its MANIFEST is version 2 or later), so a WAL whose first
/// record is damaged is read as version 2, with its header lost in the unsynced tail.
pub fn read_wal(
    file_system: &dyn FileSystem,
    path: &Path,
    payload_max: usize,
    expect_header: bool,
    recovery: WalRecovery,
) -> Result<LogContents> {
    let bytes = file_system.read_all(path)?;
    parse_wal(bytes, path, payload_max, expect_header, recovery)
}

/// Parses WAL bytes read from `path`: [`read_wal`] without the read. The returned records
/// are write batches only (headers and sync markers are consumed here).
pub fn parse_wal(
    bytes: Vec<u8>,
    path: &Path,
    payload_max: usize,
    expect_header: bool,
    recovery: WalRecovery,
) -> Result<LogContents> {
    let payload_max = payload_max.min(RECORD_PAYLOAD_BYTES_MAX);
    let first = valid_record_at(&bytes, 0, payload_max)
        .and_then(|length| bytes.get(RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + length))
        .map(classify);
    let header_version = match first {
        Some(WalPayload::Header(version))
            if (WAL_FORMAT_VERSION_HEADER..=WAL_FORMAT_VERSION).contains(&version) =>
        {
            version
        }
        Some(WalPayload::Header(version)) => {
            return Err(Error::corruption(
                path,
                0,
                format!(
                    "WAL format version {version}; this build reads versions 1 to \
                     {WAL_FORMAT_VERSION}"
                ),
            ))
        }
        // A damaged first record of a WAL known to have a header: this build's version.
        None if expect_header && !bytes.is_empty() => WAL_FORMAT_VERSION,
        // A valid first record that is not a header: version 1, read by the old rules.
        _ => return parse_log_limited(bytes, path, payload_max),
    };
    let contents = parse_headed_wal(bytes, path, payload_max, recovery)?;
    #[cfg(any(test, feature = "testing"))]
    let contents = LogContents {
        wal_version: header_version,
        ..contents
    };
    let _ = header_version;
    Ok(contents)
}

/// [`parse_wal`] of a WAL with a header (version 2 or later: they share these rules).
fn parse_headed_wal(
    bytes: Vec<u8>,
    path: &Path,
    payload_max: usize,
    recovery: WalRecovery,
) -> Result<LogContents> {
    let scan = scan_records(&bytes, 0, payload_max, path)?;
    let Some(bad) = scan.first_bad else {
        return Ok(scan.into_contents(bytes, None, None));
    };
    let after = scan_records(&bytes, bad + RECORD_ALIGNMENT, payload_max, path)?;
    let durable_bytes = scan.durable_bytes.max(after.durable_bytes);
    if (bad as u64) < durable_bytes {
        return Err(Error::corruption(
            path,
            bad as u64,
            format!(
                "bad WAL record in synced bytes: a sync marker says the first {durable_bytes} \
                 bytes were made durable"
            ),
        ));
    }
    let Some(resumes_at) = after.first_valid else {
        return Ok(scan.into_contents(bytes, Some(bad as u64), None));
    };
    if recovery == WalRecovery::Strict {
        return Err(Error::corruption(
            path,
            bad as u64,
            format!(
                "bad log record followed by a valid record at offset {resumes_at}, in the \
                 unsynced tail (WalRecovery::Strict refuses to drop it)"
            ),
        ));
    }
    let lost = LostTail {
        offset: bad as u64,
        resumes_at: resumes_at as u64,
        durable_bytes,
        dropped_records: after.records.len(),
    };
    Ok(scan.into_contents(bytes, None, Some(lost)))
}

/// What one pass over a version-2 WAL's records found.
struct Scan {
    /// `(payload offset, length)` of the write-batch records.
    records: Vec<(usize, usize)>,
    /// Offset of the first valid record.
    first_valid: Option<usize>,
    /// Offset of the first bad record (the pass from offset 0 stops there).
    first_bad: Option<usize>,
    /// The largest `durable_bytes` of a valid sync marker.
    durable_bytes: u64,
}

impl Scan {
    fn into_contents(
        self,
        bytes: Vec<u8>,
        torn_tail_offset: Option<u64>,
        lost_unsynced_tail: Option<LostTail>,
    ) -> LogContents {
        if cfg!(feature = "invariants") {
            // Invariants 1 and 3.
            assert!(
                self.records
                    .windows(2)
                    .all(|pair| matches!(pair, [a, b] if a.0 < b.0)),
                "WAL records out of file order"
            );
            if let Some(lost) = &lost_unsynced_tail {
                assert!(lost.offset >= lost.durable_bytes && lost.resumes_at > lost.offset);
            }
        }
        LogContents {
            bytes,
            records: self.records,
            torn_tail_offset,
            lost_unsynced_tail,
            #[cfg(any(test, feature = "testing"))]
            wal_version: WAL_FORMAT_VERSION,
        }
    }
}

/// Walks records from `start`. From offset 0 it stops at the first bad record; from anywhere
/// else (past a bad record) it steps over bad bytes one alignment unit at a time and collects
/// every valid record after them; a header there counts as bad bytes (only offset 0 holds
/// one). A sync marker there is still believed: a tear in bytes a marker calls synced is
/// reported as corruption, even if the marker lies inside the torn record's payload.
fn scan_records(bytes: &[u8], start: usize, payload_max: usize, path: &Path) -> Result<Scan> {
    let mut scan = Scan {
        records: Vec::new(),
        first_valid: None,
        first_bad: None,
        durable_bytes: 0,
    };
    let mut offset = start;
    while offset < bytes.len() {
        let Some(length) = valid_record_at(bytes, offset, payload_max) else {
            if start == 0 {
                scan.first_bad = Some(offset);
                break;
            }
            offset += RECORD_ALIGNMENT;
            continue;
        };
        let payload_start = offset + RECORD_HEADER_BYTES;
        let payload = bytes
            .get(payload_start..payload_start + length)
            .unwrap_or_default();
        let kind = classify(payload);
        if start != 0 && matches!(kind, WalPayload::Header(_)) {
            // Past damage a header is not one of this WAL's records (a real one sits only at
            // offset 0): it is bytes of the damaged record's payload, a user's value perhaps.
            offset += RECORD_ALIGNMENT;
            continue;
        }
        scan.first_valid.get_or_insert(offset);
        match kind {
            WalPayload::Header(_) if offset == 0 => {}
            WalPayload::Header(_) => {
                return Err(Error::corruption(
                    path,
                    offset as u64,
                    "WAL header record past the start of the WAL",
                ))
            }
            // Invariant 2: a marker is written after the sync it reports.
            WalPayload::SyncMarker(durable) if durable > offset as u64 => {
                return Err(Error::corruption(
                    path,
                    offset as u64,
                    format!("sync marker names {durable} durable bytes, past itself"),
                ))
            }
            WalPayload::SyncMarker(durable) => scan.durable_bytes = scan.durable_bytes.max(durable),
            WalPayload::Batch => scan.records.push((payload_start, length)),
        }
        offset += record_bytes(length);
    }
    Ok(scan)
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

    /// Bug (found in review): past a damaged record, the rescan took a header record inside
    /// the damaged record's payload (a user's value may hold any bytes, a WAL's among them)
    /// for a header past the start of the WAL and reported corruption, so a torn last write
    /// of such a value made the database fail to open instead of losing that write alone.
    #[test]
    fn a_header_inside_a_torn_record_is_part_of_the_tear() {
        let (mut bytes, _) = v2_wal();
        let torn_at = bytes.len();
        let mut payload = 4u64.to_le_bytes().to_vec();
        payload.extend_from_slice(&[1, 0, 0, 0, 9, 9, 9, 9]);
        payload.extend(wal_header_record());
        payload.extend(vec![7u8; 64]);
        let record = encode_record(&payload);
        // Torn after the embedded header: the record's checksum fails, the header's holds.
        bytes.extend(&record[..record.len() - 32]);
        let contents = read(bytes, false, WalRecovery::PointInTime).unwrap();
        assert_eq!(contents.record_count(), 3, "batches A, B and C");
        let lost = contents.lost_unsynced_tail.map(|lost| lost.offset);
        let torn = contents.torn_tail_offset;
        assert_eq!(lost.or(torn), Some(torn_at as u64));
    }

    /// A version-2 WAL: header, batch A, marker (A synced), batch B, batch C. Returns the
    /// bytes and each record's offset.
    fn v2_wal() -> (Vec<u8>, Vec<usize>) {
        let batch = |sequence: u64| {
            let mut payload = sequence.to_le_bytes().to_vec();
            payload.extend_from_slice(&[1, 0, 0, 0, 9, 9, 9, 9]);
            encode_record(&payload)
        };
        let mut bytes = wal_header_record();
        let mut offsets = vec![0];
        offsets.push(bytes.len());
        bytes.extend(batch(1));
        offsets.push(bytes.len());
        bytes.extend(sync_marker_record(bytes.len() as u64));
        for sequence in [2, 3] {
            offsets.push(bytes.len());
            bytes.extend(batch(sequence));
        }
        (bytes, offsets)
    }

    fn read(bytes: Vec<u8>, expect_header: bool, recovery: WalRecovery) -> Result<LogContents> {
        parse_wal(bytes, Path::new("/w.log"), 1 << 20, expect_header, recovery)
    }

    #[test]
    fn wal_holes_are_corruption_in_synced_bytes_and_a_lost_tail_after_them() {
        let (pristine, offsets) = v2_wal();
        let contents = read(pristine.clone(), false, WalRecovery::Strict).unwrap();
        assert_eq!(
            (contents.wal_version, contents.record_count()),
            (WAL_FORMAT_VERSION, 3)
        );
        // A hole in batch B (unsynced) followed by C: a lost tail, or corruption if strict.
        let mut holed = pristine.clone();
        holed[offsets[3]..offsets[3] + 8].fill(0);
        let contents = read(holed.clone(), false, WalRecovery::PointInTime).unwrap();
        assert_eq!(contents.record_count(), 1);
        let lost = contents.lost_unsynced_tail.unwrap();
        assert_eq!(
            (lost.offset, lost.resumes_at),
            (offsets[3] as u64, offsets[4] as u64)
        );
        assert_eq!(
            (lost.durable_bytes, lost.dropped_records),
            (offsets[2] as u64, 1)
        );
        assert!(read(holed, false, WalRecovery::Strict)
            .unwrap_err()
            .is_corruption());
        // A hole in the header or batch A, which the marker says were synced: corruption,
        // also when the header is gone and only the MANIFEST says the WAL is version 2.
        for (record, expect_header) in [(0, true), (1, false)] {
            let mut damaged = pristine.clone();
            damaged[offsets[record]..offsets[record] + 8].fill(0);
            match read(damaged, expect_header, WalRecovery::PointInTime) {
                Err(Error::Corruption { offset, .. }) => assert_eq!(offset, offsets[record] as u64),
                other => panic!("record {record}: {other:?}"),
            }
        }
        // Without the MANIFEST's word, a WAL without a header is version 1: a hole is
        // corruption, as before sync markers existed.
        let mut headless = pristine.clone();
        headless[..8].fill(0);
        assert!(read(headless, false, WalRecovery::PointInTime).is_err());
        // A marker claiming bytes past itself is corruption (invariant 2).
        let (mut bytes, _) = v2_wal();
        bytes.extend(sync_marker_record(1 << 20));
        assert!(read(bytes, false, WalRecovery::PointInTime)
            .unwrap_err()
            .is_corruption());
    }
}
