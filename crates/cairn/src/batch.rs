//! `WriteBatch`: a group of puts and deletes applied atomically, and its encoding.
//!
//! The encoded form is also the WAL record payload, so a batch is logged as one record and
//! recovered all-or-nothing. Its bytes are laid out in docs/format.md, "WAL record payload";
//! [`BATCH_HEADER_BYTES`] mirrors the header there, and entry kinds are
//! [`ValueKind`] values (on disk: never change). The layout has no
//! version field of its own (docs/format.md, "Format versions").
//!
//! Thread-safety contract: a `WriteBatch` is a plain value (`Send + Sync`, mutated through
//! `&mut self`); a `DecodedBatch` borrows immutable bytes.
//!
//! Invariants: 1. `count` equals the number of entries. 2. Entry `i` gets sequence
//! `first_sequence + i`. 3. Keys and values respect the limits in `key`. 4. A batch the
//! database accepts encodes to at most [`BATCH_BYTES_MAX`] bytes (the WAL's record payload
//! limit): anything larger could be logged and acknowledged but not replayed.

use crate::coding::{put_length_prefixed, put_u32, put_u64, Reader};
use crate::error::{Error, Result};
use crate::key::{check_key, check_value, SequenceNumber, ValueKind};
use crate::wal::RECORD_PAYLOAD_BYTES_MAX;

/// Bytes before the first entry: `first_sequence u64 | count u32`. On disk: never change.
pub const BATCH_HEADER_BYTES: usize = 12;

/// Most entries one batch may hold (bounds the sequence numbers one write reserves).
pub const BATCH_ENTRIES_MAX: usize = 1 << 20;

/// Largest encoded batch, header included: the encoding is the WAL record payload, and the
/// record's own framing (header, padding) lies outside the payload limit.
pub const BATCH_BYTES_MAX: usize = RECORD_PAYLOAD_BYTES_MAX;

/// Refuses an encoded batch of `bytes` over `limit` (a record the WAL reader would refuse).
pub fn check_batch_bytes(bytes: usize, limit: usize) -> Result<()> {
    if bytes > limit {
        return Err(Error::InvalidArgument(format!(
            "batch of {bytes} encoded bytes exceeds the WAL record limit of {limit} bytes"
        )));
    }
    Ok(())
}

/// The payload of a void record of exactly `payload_bytes` bytes (>= the header) for
/// `sequence`: a header with count 0, then zero filler.
pub fn void_record(sequence: SequenceNumber, payload_bytes: usize) -> Vec<u8> {
    let mut payload = Vec::with_capacity(payload_bytes.max(BATCH_HEADER_BYTES));
    put_u64(&mut payload, sequence);
    put_u32(&mut payload, 0);
    payload.resize(payload_bytes.max(BATCH_HEADER_BYTES), 0);
    payload
}

/// An ordered group of writes applied atomically: a reader at any snapshot sees all of it
/// or none, and it is logged as one WAL record.
///
/// ```
/// let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
/// let mut batch = cairn::WriteBatch::new();
/// batch.put("from", "0").put("to", "100");
/// assert_eq!(batch.len(), 2);
/// db.write(&cairn::WriteOptions::default(), batch)?;
/// # Ok::<(), cairn::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct WriteBatch {
    representation: Vec<u8>,
    count: u32,
}

impl Default for WriteBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        WriteBatch {
            representation: vec![0u8; BATCH_HEADER_BYTES],
            count: 0,
        }
    }

    /// An empty batch with room for `entry_bytes` bytes of entries (see
    /// [`WriteBatch::put_bytes`]) before it reallocates.
    pub fn with_capacity(entry_bytes: usize) -> Self {
        let mut representation = Vec::with_capacity(BATCH_HEADER_BYTES.saturating_add(entry_bytes));
        representation.resize(BATCH_HEADER_BYTES, 0);
        WriteBatch {
            representation,
            count: 0,
        }
    }

    /// Bytes a put of `key` and `value` adds to a batch: a kind byte and two
    /// length-prefixed strings.
    pub fn put_bytes(key: &[u8], value: &[u8]) -> usize {
        (1 + 4 + 4usize)
            .saturating_add(key.len())
            .saturating_add(value.len())
    }

    /// Bytes a delete of `key` adds to a batch: a kind byte and a length-prefixed string.
    pub fn delete_bytes(key: &[u8]) -> usize {
        (1 + 4usize).saturating_add(key.len())
    }

    /// A batch of one put, sized exactly (growing from empty reallocated about four times).
    pub(crate) fn single_put(key: &[u8], value: &[u8]) -> Self {
        let mut batch = WriteBatch::with_capacity(WriteBatch::put_bytes(key, value));
        batch.put(key, value);
        batch
    }

    /// A batch of one delete, sized exactly.
    pub(crate) fn single_delete(key: &[u8]) -> Self {
        let mut batch = WriteBatch::with_capacity(WriteBatch::delete_bytes(key));
        batch.delete(key);
        batch
    }

    /// Adds a put.
    ///
    /// ```
    /// let db = cairn::Db::open("/db", cairn::Options::in_memory())?;
    /// let mut batch = cairn::WriteBatch::new();
    /// batch.put("apple", "red").put("pear", "green").delete("plum");
    /// db.write(&cairn::WriteOptions::default(), batch)?;
    /// assert_eq!(db.get("pear")?.as_deref(), Some(&b"green"[..]));
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Self {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.representation.push(ValueKind::Put as u8);
        put_length_prefixed(&mut self.representation, key);
        put_length_prefixed(&mut self.representation, value);
        self.count += 1;
        self
    }

    /// Adds a put of `value` that reads as absent from `expiry` on (a time at or before the
    /// write's makes it absent at once). Expired values are dropped by compaction.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// # let dir = std::env::temp_dir().join(format!("cairn-doc-batch-expiry-{}", std::process::id()));
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// let db = cairn::Db::open(&dir, cairn::Options::default())?;
    /// let mut batch = cairn::WriteBatch::new();
    /// batch.put_with_expiry(b"session", b"token", SystemTime::now() + Duration::from_secs(60));
    /// batch.put_with_expiry(b"gone", b"x", SystemTime::UNIX_EPOCH);
    /// db.write(&cairn::WriteOptions::default(), batch)?;
    /// assert_eq!(db.get(b"session")?, Some(b"token".to_vec()));
    /// assert_eq!(db.get(b"gone")?, None);
    /// # drop(db);
    /// # let _ = std::fs::remove_dir_all(&dir);
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn put_with_expiry(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        expiry: std::time::SystemTime,
    ) -> &mut Self {
        let (key, value) = (key.as_ref(), value.as_ref());
        let millis = crate::expiry::to_millis(expiry);
        self.representation.push(ValueKind::PutWithExpiry as u8);
        put_length_prefixed(&mut self.representation, key);
        put_u32(
            &mut self.representation,
            u32::try_from(value.len().saturating_add(crate::expiry::EXPIRY_BYTES))
                .unwrap_or(u32::MAX),
        );
        self.representation.extend_from_slice(&millis.to_le_bytes());
        self.representation.extend_from_slice(value);
        self.count += 1;
        self
    }

    /// Adds a delete (a tombstone; deleting an absent key is allowed).
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Self {
        let key = key.as_ref();
        self.representation.push(ValueKind::Delete as u8);
        put_length_prefixed(&mut self.representation, key);
        self.count += 1;
        self
    }

    /// Number of writes in the batch.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True if the batch holds no writes.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Encoded size in bytes.
    pub fn size_bytes(&self) -> usize {
        self.representation.len()
    }

    /// Removes every write.
    pub fn clear(&mut self) {
        self.representation.truncate(BATCH_HEADER_BYTES);
        self.count = 0;
    }

    /// Checks the entry count, the total size and every key and value against the limits.
    pub fn validate(&self) -> Result<()> {
        if self.len() > BATCH_ENTRIES_MAX {
            return Err(Error::InvalidArgument(format!(
                "batch of {} entries exceeds the limit of {BATCH_ENTRIES_MAX}",
                self.len()
            )));
        }
        check_batch_bytes(self.size_bytes(), BATCH_BYTES_MAX)?;
        for entry in self.iter() {
            let (kind, key, value) = entry.map_err(Error::InvalidArgument)?;
            check_key(key)?;
            // An expiring value is checked without its expiry prefix: the limit is the user's.
            let user_value = match kind {
                ValueKind::PutWithExpiry => {
                    value.get(crate::expiry::EXPIRY_BYTES..).unwrap_or_default()
                }
                _ => value,
            };
            check_value(user_value)?;
        }
        Ok(())
    }

    /// Stamps the batch with its first sequence number and returns the encoded record.
    pub(crate) fn encode(&mut self, first_sequence: SequenceNumber) -> &[u8] {
        // Written in place: this runs once per write, and a temporary header `Vec` was a heap
        // allocation on every put.
        debug_assert!(self.representation.len() >= BATCH_HEADER_BYTES);
        if let Some(header) = self.representation.get_mut(..BATCH_HEADER_BYTES) {
            let (sequence_bytes, count_bytes) = header.split_at_mut(8);
            sequence_bytes.copy_from_slice(&first_sequence.to_le_bytes());
            count_bytes.copy_from_slice(&self.count.to_le_bytes());
        }
        &self.representation
    }

    /// Iterates the entries as `(kind, key, value)`; value is empty for deletes.
    pub(crate) fn iter(&self) -> BatchEntries<'_> {
        // The representation always starts with the header (`new` writes it), so the
        // fallback never runs; it keeps this path free of a panicking slice.
        let entries = self
            .representation
            .get(BATCH_HEADER_BYTES..)
            .unwrap_or_default();
        BatchEntries::new(entries, self.count)
    }
}

/// A decoded WAL record: a batch with its sequence numbers.
#[derive(Debug)]
pub struct DecodedBatch<'a> {
    /// Sequence number of the first entry.
    pub first_sequence: SequenceNumber,
    /// Number of entries.
    pub count: u32,
    entries: &'a [u8],
}

impl<'a> DecodedBatch<'a> {
    /// Parses a record payload; `Err(reason)` if it is malformed.
    pub fn decode(payload: &'a [u8]) -> std::result::Result<Self, String> {
        let mut reader = Reader::new(payload);
        let first_sequence = reader.u64().ok_or("batch header truncated")?;
        let count = reader.u32().ok_or("batch header truncated")?;
        // Read from disk: a sequence past the largest one a key can carry would wrap or be
        // cut short further on.
        let last = first_sequence.checked_add(u64::from(count.max(1)) - 1);
        if first_sequence == 0 || last.is_none_or(|last| last > crate::key::SEQUENCE_MAX) {
            return Err(format!(
                "batch sequences {first_sequence}.. ({count} entries) outside 1..={}",
                crate::key::SEQUENCE_MAX
            ));
        }
        let entries = payload
            .get(BATCH_HEADER_BYTES..)
            .ok_or("batch header truncated")?;
        if count == 0 {
            // A void record: a read-modify-write that lost its race consumed one sequence
            // number and logged nothing (its payload is filler of the reserved size).
            return Ok(DecodedBatch {
                first_sequence,
                count,
                entries: &[],
            });
        }
        let decoded = DecodedBatch {
            first_sequence,
            count,
            entries,
        };
        // Validate fully up front so that applying a batch can never stop half way.
        let mut seen = 0u32;
        for entry in decoded.iter() {
            entry?;
            seen += 1;
        }
        if seen != count {
            return Err(format!("batch declares {count} entries, holds {seen}"));
        }
        Ok(decoded)
    }

    /// Sequence number of the last entry (a void record consumes one sequence).
    pub fn last_sequence(&self) -> SequenceNumber {
        self.first_sequence + u64::from(self.count.max(1)) - 1
    }

    #[cfg(any(test, feature = "testing"))]
    /// True for a void record (see `decode`).
    pub fn is_void(&self) -> bool {
        self.count == 0
    }

    /// Iterates the entries as `(kind, key, value)`.
    pub fn iter(&self) -> BatchEntries<'a> {
        BatchEntries::new(self.entries, self.count)
    }
}

/// Iterator over encoded batch entries.
#[derive(Debug)]
pub struct BatchEntries<'a> {
    reader: Reader<'a>,
    remaining: u32,
    failed: bool,
}

impl<'a> BatchEntries<'a> {
    fn new(entries: &'a [u8], count: u32) -> Self {
        BatchEntries {
            reader: Reader::new(entries),
            remaining: count,
            failed: false,
        }
    }
}

impl<'a> Iterator for BatchEntries<'a> {
    type Item = std::result::Result<(ValueKind, &'a [u8], &'a [u8]), String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if self.remaining == 0 {
            if !self.reader.is_empty() {
                self.failed = true;
                return Some(Err("trailing bytes after batch entries".into()));
            }
            return None;
        }
        self.remaining -= 1;
        let mut parse = || -> std::result::Result<_, String> {
            let tag = self.reader.u8().ok_or("entry truncated")?;
            let kind = ValueKind::from_u8(tag).ok_or_else(|| format!("unknown kind {tag}"))?;
            let key = self.reader.length_prefixed().ok_or("key truncated")?;
            let value = match kind {
                ValueKind::Put => self.reader.length_prefixed().ok_or("value truncated")?,
                ValueKind::PutWithExpiry => {
                    let stored = self.reader.length_prefixed().ok_or("value truncated")?;
                    if stored.len() < crate::expiry::EXPIRY_BYTES {
                        return Err("expiring value shorter than its expiry".into());
                    }
                    stored
                }
                ValueKind::Delete => &[],
            };
            Ok((kind, key, value))
        };
        let result = parse();
        if result.is_err() {
            self.failed = true;
        }
        Some(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sized_batches_hold_their_entry_without_growing() {
        let key = [7u8; 16];
        let value = [9u8; 100];
        let mut put = WriteBatch::with_capacity(WriteBatch::put_bytes(&key, &value));
        let capacity = put.representation.capacity();
        put.put(&key, &value);
        assert_eq!(
            put.size_bytes(),
            BATCH_HEADER_BYTES + WriteBatch::put_bytes(&key, &value)
        );
        assert_eq!(put.representation.capacity(), capacity);
        let single = WriteBatch::single_put(&key, &value);
        assert_eq!(single.representation, put.representation);
        assert_eq!(single.representation.capacity(), single.size_bytes());
        let delete = WriteBatch::single_delete(&key);
        assert_eq!(
            delete.size_bytes(),
            BATCH_HEADER_BYTES + WriteBatch::delete_bytes(&key)
        );
        assert_eq!(delete.representation.capacity(), delete.size_bytes());
        // The in-place header matches what decoding expects.
        let last = crate::key::SEQUENCE_MAX;
        let encoded = put.encode(last).to_vec();
        let decoded = DecodedBatch::decode(&encoded).unwrap();
        assert_eq!((decoded.first_sequence, decoded.count), (last, 1));
        // Sequences no key can carry (read from a damaged or crafted log) are refused.
        for first in [0, last + 1, u64::MAX] {
            let mut put = WriteBatch::new();
            put.put(b"k", b"v");
            assert!(DecodedBatch::decode(put.encode(first)).is_err(), "{first}");
        }
        assert!(WriteBatch::with_capacity(0).is_empty());
    }

    #[test]
    fn encode_decode_round_trip() {
        let mut batch = WriteBatch::new();
        batch.put(b"a", b"1").delete(b"b").put(b"", b"");
        let encoded = batch.encode(42).to_vec();
        let decoded = DecodedBatch::decode(&encoded).unwrap();
        assert_eq!(decoded.first_sequence, 42);
        assert_eq!(decoded.last_sequence(), 44);
        let entries: Vec<_> = decoded.iter().map(|entry| entry.unwrap()).collect();
        assert_eq!(
            entries,
            vec![
                (ValueKind::Put, &b"a"[..], &b"1"[..]),
                (ValueKind::Delete, &b"b"[..], &b""[..]),
                (ValueKind::Put, &b""[..], &b""[..]),
            ]
        );
        for cut in 0..encoded.len() {
            assert!(DecodedBatch::decode(&encoded[..cut]).is_err(), "cut {cut}");
        }
        let void = void_record(9, 40);
        let decoded = DecodedBatch::decode(&void).unwrap();
        assert!(decoded.is_void());
        assert_eq!(decoded.last_sequence(), 9);
        assert_eq!(decoded.iter().count(), 0);
    }
}
