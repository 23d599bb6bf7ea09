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
//! header is version 1 (no markers), read exactly as before markers existed. From version 4
//! the header also carries a random *nonce*, and every marker repeats it: past damage the
//! reader looks for markers among bytes that may be a torn record's payload (a user's value),
//! and a value cannot forge a marker whose nonce it never saw.
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
//! 4. In a version-4 WAL only a marker carrying the header's nonce counts: one with another
//!    nonce, or of the version-2 shape, is corruption in the records read in order and
//!    bytes of a damaged record past damage.

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
/// `PutWithExpiry`; version 4 adds the nonce to the header and to every sync marker. On disk:
/// never reuse a number.
pub const WAL_FORMAT_VERSION: u32 = 4;

/// The oldest WAL version with a header record (read by the version-2 rules).
pub const WAL_FORMAT_VERSION_HEADER: u32 = 2;

/// The oldest WAL version whose header and sync markers carry a nonce.
pub const WAL_FORMAT_VERSION_NONCE: u32 = 4;

/// First 8 bytes of a WAL header record's payload (`magic | version u32`, then from version
/// 4 `nonce u64`). On disk: never change.
pub const WAL_HEADER_MAGIC: [u8; 8] = *b"cairnWAL";

/// First 8 bytes of a sync marker's payload (`magic | durable_bytes u64` in versions 2 and
/// 3, `magic | nonce u64 | durable_bytes u64` from version 4). On disk: never change.
pub const WAL_SYNC_MARKER_MAGIC: [u8; 8] = *b"cairnSYN";

/// Payload bytes of a WAL header record (version 4 and later).
pub const WAL_HEADER_PAYLOAD_BYTES: usize = 20;

/// Payload bytes of a version-2 or version-3 WAL header record (no nonce).
pub const WAL_HEADER_V2_PAYLOAD_BYTES: usize = 12;

/// Payload bytes of a sync marker record (version 4 and later).
pub const WAL_SYNC_MARKER_PAYLOAD_BYTES: usize = 24;

/// Payload bytes of a version-2 or version-3 sync marker record (no nonce).
pub const WAL_SYNC_MARKER_V2_PAYLOAD_BYTES: usize = 16;

/// A fresh nonce for a new WAL: random (the standard library's per-process random keys,
/// stirred with the clock and the log's number), so no value written to the log can carry
/// it except by chance (2^-64).
pub(crate) fn new_wal_nonce(log_number: u64) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(log_number);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    hasher.write_u128(nanos);
    hasher.finish()
}

/// A whole record (header, payload, zero padding) as bytes, for writers that append framed
/// records to a file themselves.
pub fn encode_record(payload: &[u8]) -> Vec<u8> {
    let mut record = Vec::with_capacity(record_bytes(payload.len()));
    record.extend_from_slice(&record_header(payload).to_le_bytes());
    record.extend_from_slice(payload);
    record.resize(record_bytes(payload.len()), 0);
    record
}

/// The header record a WAL of today's version starts with, carrying its `nonce`.
pub fn wal_header_record(nonce: u64) -> Vec<u8> {
    let mut payload = [0u8; WAL_HEADER_PAYLOAD_BYTES];
    payload[..8].copy_from_slice(&WAL_HEADER_MAGIC);
    payload[8..12].copy_from_slice(&WAL_FORMAT_VERSION.to_le_bytes());
    payload[12..].copy_from_slice(&nonce.to_le_bytes());
    encode_record(&payload)
}

/// The sync marker record of the WAL whose header carries `nonce`, saying its first
/// `durable_bytes` bytes are synced.
pub fn sync_marker_record(nonce: u64, durable_bytes: u64) -> Vec<u8> {
    let mut payload = [0u8; WAL_SYNC_MARKER_PAYLOAD_BYTES];
    payload[..8].copy_from_slice(&WAL_SYNC_MARKER_MAGIC);
    payload[8..16].copy_from_slice(&nonce.to_le_bytes());
    payload[16..].copy_from_slice(&durable_bytes.to_le_bytes());
    encode_record(&payload)
}

/// A version-2 (and version-3) sync marker record, without a nonce: old WALs only (tests).
#[cfg(any(test, feature = "testing"))]
pub fn sync_marker_record_v2(durable_bytes: u64) -> Vec<u8> {
    let mut payload = [0u8; WAL_SYNC_MARKER_V2_PAYLOAD_BYTES];
    payload[..8].copy_from_slice(&WAL_SYNC_MARKER_MAGIC);
    payload[8..].copy_from_slice(&durable_bytes.to_le_bytes());
    encode_record(&payload)
}

/// What a WAL record's payload is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WalPayload {
    /// A header naming this WAL format version and, from version 4, its nonce.
    Header(u32, Option<u64>),
    /// A sync marker of this WAL naming the bytes made durable.
    SyncMarker(u64),
    /// Shaped like a sync marker but not one of this WAL's (invariant 4).
    ForeignMarker,
    /// A write batch (anything else; the batch decoder judges it).
    Batch,
}

/// Which sync markers a WAL's reader believes (invariant 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Markers {
    /// Versions 2 and 3: markers without a nonce.
    Unsigned,
    /// Version 4 and later: markers carrying this nonce, the header's.
    Signed(u64),
    /// A WAL whose header is damaged, its version and nonce lost with it: every marker of
    /// either shape is believed, whatever its nonce. Disbelieving them could drop synced
    /// records as an unsynced tail; believing a forged one can only refuse the open.
    Any,
}

/// What `payload` is in a WAL whose markers are `markers`.
fn classify(payload: &[u8], markers: Markers) -> WalPayload {
    let field = |start: usize| crate::coding::get_u64(payload, start);
    match payload.get(..8) {
        Some(magic) if magic == WAL_HEADER_MAGIC => {
            let version = get_u32(payload, 8).unwrap_or(0);
            match payload.len() {
                WAL_HEADER_V2_PAYLOAD_BYTES => WalPayload::Header(version, None),
                WAL_HEADER_PAYLOAD_BYTES => WalPayload::Header(version, field(12)),
                _ => WalPayload::Batch,
            }
        }
        Some(magic) if magic == WAL_SYNC_MARKER_MAGIC => {
            let signed = payload.len() == WAL_SYNC_MARKER_PAYLOAD_BYTES;
            let unsigned = payload.len() == WAL_SYNC_MARKER_V2_PAYLOAD_BYTES;
            let durable = match markers {
                Markers::Unsigned | Markers::Any if unsigned => field(8),
                Markers::Signed(nonce) if signed && field(8) == Some(nonce) => field(16),
                Markers::Any if signed => field(16),
                _ => return WalPayload::ForeignMarker,
            };
            WalPayload::SyncMarker(durable.unwrap_or(u64::MAX))
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
        .map(|payload| classify(payload, Markers::Unsigned));
    let (header_version, markers) = match first {
        Some(WalPayload::Header(version, nonce)) => {
            (version, header_markers(path, version, nonce)?)
        }
        // A damaged first record of a WAL known to have a header: this build's version, its
        // nonce lost with the header.
        None if expect_header && !bytes.is_empty() => (WAL_FORMAT_VERSION, Markers::Any),
        // A valid first record that is not a header: version 1, read by the old rules.
        _ => return parse_log_limited(bytes, path, payload_max),
    };
    let contents = parse_headed_wal(bytes, path, payload_max, markers, recovery)?;
    #[cfg(any(test, feature = "testing"))]
    let contents = LogContents {
        wal_version: header_version,
        ..contents
    };
    let _ = header_version;
    Ok(contents)
}

/// The markers of a WAL whose header names `version` and `nonce` (invariant 4): a header
/// carries a nonce from version 4 on, never before. Corruption for a version this build does
/// not read or a header of the wrong shape for its version.
fn header_markers(path: &Path, version: u32, nonce: Option<u64>) -> Result<Markers> {
    if !(WAL_FORMAT_VERSION_HEADER..=WAL_FORMAT_VERSION).contains(&version) {
        return Err(Error::corruption(
            path,
            0,
            format!(
                "WAL format version {version}; this build reads versions 1 to {WAL_FORMAT_VERSION}"
            ),
        ));
    }
    match (version >= WAL_FORMAT_VERSION_NONCE, nonce) {
        (false, None) => Ok(Markers::Unsigned),
        (true, Some(nonce)) => Ok(Markers::Signed(nonce)),
        _ => Err(Error::corruption(
            path,
            0,
            format!("WAL header of version {version} with the wrong length"),
        )),
    }
}

/// [`parse_wal`] of a WAL with a header (version 2 or later: they share these rules), whose
/// sync markers are `markers`.
fn parse_headed_wal(
    bytes: Vec<u8>,
    path: &Path,
    payload_max: usize,
    markers: Markers,
    recovery: WalRecovery,
) -> Result<LogContents> {
    let scan = scan_records(&bytes, 0, payload_max, markers, path)?;
    let Some(bad) = scan.first_bad else {
        return Ok(scan.into_contents(bytes, None, None));
    };
    let after = scan_records(&bytes, bad + RECORD_ALIGNMENT, payload_max, markers, path)?;
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
/// every valid record after them. There a header counts as bad bytes (only offset 0 holds
/// one), and so does a marker of another WAL (invariant 4): both can only be bytes of the
/// damaged record's payload, a user's value perhaps. A marker of this WAL is believed
/// wherever it lies: a tear in bytes it calls synced is corruption.
fn scan_records(
    bytes: &[u8],
    start: usize,
    payload_max: usize,
    markers: Markers,
    path: &Path,
) -> Result<Scan> {
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
        let kind = classify(payload, markers);
        let foreign = matches!(kind, WalPayload::Header(..) | WalPayload::ForeignMarker);
        if start != 0 && foreign {
            offset += RECORD_ALIGNMENT;
            continue;
        }
        scan.first_valid.get_or_insert(offset);
        match kind {
            WalPayload::Header(..) if offset == 0 => {}
            WalPayload::Header(..) => {
                return Err(Error::corruption(
                    path,
                    offset as u64,
                    "WAL header record past the start of the WAL",
                ))
            }
            WalPayload::ForeignMarker => {
                return Err(Error::corruption(
                    path,
                    offset as u64,
                    "sync marker of another WAL (its nonce or shape is not this WAL's)",
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
mod tests;
