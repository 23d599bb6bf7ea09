//! How Redis data maps onto the engine's ordered byte keyspace: key prefixes and the value
//! envelope.
//!
//! Engine keys:
//! - `m` + user key: the key's record, an envelope (below). Every Redis key has exactly one,
//!   so `SCAN`, `KEYS`, `DBSIZE` and `RANGE` walk the `m` range.
//! - `h` + user-key length (u32, big-endian) + user key + field: one hash field's raw value.
//!   The length prefix keeps one hash's fields contiguous and apart from every other hash
//!   whose key merely starts with the same bytes, so `HGETALL` is one range scan.
//!
//! Envelope (the value under an `m` key): one tag byte, whose low bits are the type (1 string,
//! 2 hash) and whose bit 0x80 says an expiry follows; then, if so, the expiry as milliseconds
//! since the Unix epoch (u64, big-endian); then the payload: a string's bytes, or a hash's
//! field count (u64, big-endian). This is the form the commands and the in-memory stores
//! see. The LSM store (`store::DbStore`) keeps a string's expiry in the engine instead
//! (`cairn::Db::put_with_expiry`): it stores the envelope without the expiry
//! ([`split_string_expiry`]) and puts it back on reads ([`join_expiry`]), so the engine hides
//! an expired string at once and compaction drops it. A hash's expiry stays in its envelope:
//! its fields are separate engine keys that must be deleted with it, which the server's own
//! expiry path (`commands::load`, the sampler) does.
//!
//! Thread-safety contract: pure functions.
//!
//! Invariants:
//! 1. `decode(encode(kind, expiry, payload))` gives back exactly `kind`, `expiry`, `payload`.
//! 2. A user key maps to an engine key one byte longer (`m`); a hash field to one
//!    `5 + key + field` bytes long: the engine's 64 KiB key limit applies to those lengths.

/// The tag bit saying an expiry follows.
const HAS_EXPIRY: u8 = 0x80;
/// Prefix of key records.
pub const META: u8 = b'm';
/// Prefix of hash fields.
pub const FIELD: u8 = b'h';
/// Largest engine key.
pub const MAX_ENGINE_KEY: usize = 64 * 1024;
/// Largest envelope (the engine's value limit).
pub const MAX_ENGINE_VALUE: usize = 256 * 1024 * 1024;
/// Bytes of the envelope header with an expiry.
pub const ENVELOPE_HEADER_MAX: usize = 9;

/// The Redis type of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A string (also counters).
    String,
    /// A hash.
    Hash,
}

impl Kind {
    /// The name `TYPE` replies.
    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Hash => "hash",
        }
    }

    fn tag(self) -> u8 {
        match self {
            Kind::String => 1,
            Kind::Hash => 2,
        }
    }
}

/// A decoded key record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The type.
    pub kind: Kind,
    /// Expiry in Unix milliseconds, if any.
    pub expires_at: Option<u64>,
    /// The string's bytes or the hash's encoded field count.
    pub payload: Vec<u8>,
}

impl Record {
    /// A string record.
    pub fn string(payload: Vec<u8>, expires_at: Option<u64>) -> Record {
        Record {
            kind: Kind::String,
            expires_at,
            payload,
        }
    }

    /// A hash record holding `fields` fields.
    pub fn hash(fields: u64, expires_at: Option<u64>) -> Record {
        Record {
            kind: Kind::Hash,
            expires_at,
            payload: fields.to_be_bytes().to_vec(),
        }
    }

    /// Whether the record is expired at `now_ms`.
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expires_at.is_some_and(|at| at <= now_ms)
    }

    /// A hash's field count (0 for anything malformed).
    pub fn field_count(&self) -> u64 {
        self.payload
            .get(..8)
            .and_then(|bytes| bytes.try_into().ok())
            .map_or(0, u64::from_be_bytes)
    }

    /// The envelope bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(ENVELOPE_HEADER_MAX + self.payload.len());
        match self.expires_at {
            Some(at) => {
                out.push(self.kind.tag() | HAS_EXPIRY);
                out.extend_from_slice(&at.to_be_bytes());
            }
            None => out.push(self.kind.tag()),
        }
        out.extend_from_slice(&self.payload);
        #[cfg(feature = "invariants")]
        assert_eq!(
            Record::decode(&out).as_ref(),
            Some(self),
            "invariant 1: an envelope decodes to the record it encodes"
        );
        out
    }

    /// Like [`Record::decode`], reusing `bytes` for the payload instead of copying it.
    pub fn decode_owned(mut bytes: Vec<u8>) -> Option<Record> {
        let &tag = bytes.first()?;
        let kind = match tag & !HAS_EXPIRY {
            1 => Kind::String,
            2 => Kind::Hash,
            _ => return None,
        };
        let (expires_at, header) = if tag & HAS_EXPIRY != 0 {
            let at = bytes.get(1..ENVELOPE_HEADER_MAX)?;
            (
                Some(u64::from_be_bytes(at.try_into().ok()?)),
                ENVELOPE_HEADER_MAX,
            )
        } else {
            (None, 1)
        };
        bytes.drain(..header);
        Some(Record {
            kind,
            expires_at,
            payload: bytes,
        })
    }

    /// Parses envelope bytes; `None` if they are not an envelope.
    pub fn decode(bytes: &[u8]) -> Option<Record> {
        let (&tag, rest) = bytes.split_first()?;
        let kind = match tag & !HAS_EXPIRY {
            1 => Kind::String,
            2 => Kind::Hash,
            _ => return None,
        };
        let (expires_at, payload) = if tag & HAS_EXPIRY != 0 {
            let (at, payload) = rest.split_at_checked(8)?;
            (Some(u64::from_be_bytes(at.try_into().ok()?)), payload)
        } else {
            (None, rest)
        };
        Some(Record {
            kind,
            expires_at,
            payload: payload.to_vec(),
        })
    }
}

/// A string envelope with an expiry, split into the envelope without it and the expiry in
/// Unix milliseconds; `None` for anything else (no expiry, a hash, not an envelope).
pub fn split_string_expiry(envelope: &[u8]) -> Option<(Vec<u8>, u64)> {
    let (&tag, rest) = envelope.split_first()?;
    if tag != Kind::String.tag() | HAS_EXPIRY {
        return None;
    }
    let (at, payload) = rest.split_at_checked(8)?;
    let at = u64::from_be_bytes(at.try_into().ok()?);
    let mut plain = Vec::with_capacity(1 + payload.len());
    plain.push(Kind::String.tag());
    plain.extend_from_slice(payload);
    Some((plain, at))
}

/// The envelope `plain` (without an expiry) with expiry `at` (Unix milliseconds) put back:
/// the inverse of [`split_string_expiry`]. An envelope that already has one is returned as is.
pub fn join_expiry(plain: &[u8], at: u64) -> Vec<u8> {
    match plain.split_first() {
        Some((&tag, payload)) if tag & HAS_EXPIRY == 0 => {
            let mut out = Vec::with_capacity(ENVELOPE_HEADER_MAX + payload.len());
            out.push(tag | HAS_EXPIRY);
            out.extend_from_slice(&at.to_be_bytes());
            out.extend_from_slice(payload);
            out
        }
        _ => plain.to_vec(),
    }
}

/// The engine key of a user key's record.
pub fn meta_key(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + key.len());
    out.push(META);
    out.extend_from_slice(key);
    out
}

/// The common prefix of every field key of hash `key`.
pub fn field_prefix(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + key.len());
    out.push(FIELD);
    // Keys are at most 64 KiB, so the length always fits.
    out.extend_from_slice(&(key.len() as u32).to_be_bytes());
    out.extend_from_slice(key);
    out
}

/// The user key of the hash a field key belongs to (`None`: not a well-formed field key).
pub fn hash_of_field_key(field_key: &[u8]) -> Option<&[u8]> {
    let (&prefix, rest) = field_key.split_first()?;
    if prefix != FIELD {
        return None;
    }
    let (length, rest) = rest.split_at_checked(4)?;
    let length = u32::from_be_bytes(length.try_into().ok()?);
    rest.get(..usize::try_from(length).ok()?)
}

/// A string envelope without an expiry around `value` (`Record::string(value, None).encode()`
/// without the intermediate copy).
pub fn string_envelope(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + value.len());
    out.push(Kind::String.tag());
    out.extend_from_slice(value);
    out
}

/// The engine key of field `field` of hash `key`.
pub fn field_key(key: &[u8], field: &[u8]) -> Vec<u8> {
    let mut out = field_prefix(key);
    out.extend_from_slice(field);
    out
}

/// The smallest byte string greater than every string starting with `prefix` (`None`: no
/// such bound, the prefix is all `0xff`).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_round_trips() {
        for record in [
            Record::string(b"v".to_vec(), None),
            Record::string(Vec::new(), Some(1_700_000_000_000)),
            Record::hash(3, Some(7)),
            Record::hash(0, None),
        ] {
            assert_eq!(Record::decode_owned(record.encode()), Some(record.clone()));
            assert_eq!(Record::decode(&record.encode()), Some(record));
        }
        assert_eq!(Record::decode(b""), None);
        assert_eq!(Record::decode(b"\x09"), None);
        assert_eq!(Record::decode(b"\x81\x00"), None);
        for bad in [&b""[..], b"\x09", b"\x81\x00"] {
            assert_eq!(Record::decode_owned(bad.to_vec()), None);
        }
    }

    #[test]
    fn string_expiry_splits_off_and_joins_back() {
        let record = Record::string(b"payload".to_vec(), Some(1_700_000_000_123));
        let (plain, at) = split_string_expiry(&record.encode()).unwrap();
        assert_eq!(at, 1_700_000_000_123);
        assert_eq!(
            Record::decode(&plain),
            Some(Record::string(b"payload".to_vec(), None))
        );
        assert_eq!(join_expiry(&plain, at), record.encode());
        // Hashes and strings without an expiry are left alone.
        assert_eq!(
            split_string_expiry(&Record::hash(2, Some(5)).encode()),
            None
        );
        assert_eq!(
            split_string_expiry(&Record::string(b"v".to_vec(), None).encode()),
            None
        );
        let hash = Record::hash(2, Some(5)).encode();
        assert_eq!(join_expiry(&hash, 9), hash);
    }

    #[test]
    fn field_keys_of_prefix_keys_do_not_interleave() {
        let end = prefix_end(&field_prefix(b"a")).unwrap();
        assert!(field_key(b"ab", b"") >= end);
        assert!(field_key(b"a", b"\xff\xff") < end);
        assert_eq!(prefix_end(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff"), None);
    }

    #[test]
    fn a_field_key_names_its_hash() {
        assert_eq!(hash_of_field_key(&field_key(b"ab", b"f")), Some(&b"ab"[..]));
        assert_eq!(hash_of_field_key(&field_key(b"", b"")), Some(&b""[..]));
        assert_eq!(hash_of_field_key(&meta_key(b"ab")), None);
        assert_eq!(hash_of_field_key(b"h\0\0\0\x09ab"), None);
        assert_eq!(
            string_envelope(b"v"),
            Record::string(b"v".to_vec(), None).encode()
        );
    }
}
