//! Values with an expiry time: their stored form and the one rule that decides visibility.
//!
//! A value written with an expiry is stored as an entry of kind `ValueKind::PutWithExpiry`
//! whose stored bytes are `expiry u64 LE | value`, the expiry in milliseconds since the Unix
//! epoch (docs/format.md, "Values with an expiry"). The memory component, the WAL and the
//! `SSTables` carry the kind and the stored bytes unchanged; only the read paths, the
//! read-modify-write path and compaction look inside, through this module.
//!
//! Thread-safety contract: pure functions over bytes and the wall clock; callable from any
//! thread.
//!
//! Invariants:
//! 1. An entry of kind `PutWithExpiry` whose expiry is at or before "now" reads exactly as a
//!    tombstone: absent, and hiding every older version of its key.
//! 2. The stored bytes of a `PutWithExpiry` entry are at least `EXPIRY_BYTES` long; shorter
//!    ones (only a corrupt file can hold them) read as expired, never as a panic.

use crate::key::ValueKind;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Bytes of the expiry prefix of a stored `PutWithExpiry` value.
pub const EXPIRY_BYTES: usize = 8;

/// The longest value stored in a memtable, a table or the WAL: a user's value of
/// `crate::key::VALUE_BYTES_MAX` and, for an expiring put, its expiry prefix.
pub(crate) const STORED_VALUE_BYTES_MAX: usize = crate::key::VALUE_BYTES_MAX + EXPIRY_BYTES;

/// Checks a stored value (a user's value with its expiry prefix, if any) against
/// `STORED_VALUE_BYTES_MAX`: what reaches a table was checked as a user's value at the door.
pub(crate) fn check_stored_value(value: &[u8]) -> crate::Result<()> {
    if value.len() > STORED_VALUE_BYTES_MAX {
        return Err(crate::Error::InvalidArgument(format!(
            "stored value of {} bytes exceeds the limit of {STORED_VALUE_BYTES_MAX} bytes",
            value.len()
        )));
    }
    Ok(())
}

/// Milliseconds since the Unix epoch of `time` (0 for times before the epoch, which are thus
/// already expired; saturating far in the future).
pub fn to_millis(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |since| {
        u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
    })
}

/// The time `millis` milliseconds after the Unix epoch.
pub fn from_millis(millis: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(millis)
}

/// The current wall-clock time in milliseconds since the Unix epoch.
pub fn now_millis() -> u64 {
    to_millis(SystemTime::now())
}

/// The stored bytes of `value` expiring at `expiry_millis`.
pub fn encode(expiry_millis: u64, value: &[u8]) -> Vec<u8> {
    let mut stored = Vec::with_capacity(EXPIRY_BYTES + value.len());
    stored.extend_from_slice(&expiry_millis.to_le_bytes());
    stored.extend_from_slice(value);
    stored
}

/// What a reader at `now_millis` sees of an entry: `None` if it reads as absent (a tombstone
/// or an expired value, invariant 1), otherwise the user's value and its expiry.
pub fn visible(kind: ValueKind, stored: &[u8], now_millis: u64) -> Option<(&[u8], Option<u64>)> {
    match kind {
        ValueKind::Delete => None,
        ValueKind::Put => Some((stored, None)),
        ValueKind::PutWithExpiry => {
            let (expiry, value) = split(stored)?;
            (expiry > now_millis).then_some((value, Some(expiry)))
        }
    }
}

/// True if the entry is a value that expired at or before `now_millis`.
pub fn is_expired(kind: ValueKind, stored: &[u8], now_millis: u64) -> bool {
    kind == ValueKind::PutWithExpiry && visible(kind, stored, now_millis).is_none()
}

/// Splits stored bytes into expiry and value (None if too short: invariant 2).
fn split(stored: &[u8]) -> Option<(u64, &[u8])> {
    let prefix = stored.get(..EXPIRY_BYTES)?;
    let value = stored.get(EXPIRY_BYTES..)?;
    Some((u64::from_le_bytes(prefix.try_into().ok()?), value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiring_values_read_until_their_time_then_as_absent() {
        let stored = encode(1_000, b"v");
        assert_eq!(
            visible(ValueKind::PutWithExpiry, &stored, 999),
            Some((&b"v"[..], Some(1_000)))
        );
        assert_eq!(visible(ValueKind::PutWithExpiry, &stored, 1_000), None);
        assert!(is_expired(ValueKind::PutWithExpiry, &stored, 1_000));
        assert!(!is_expired(ValueKind::Put, b"v", u64::MAX));
        assert_eq!(visible(ValueKind::Put, b"v", 5), Some((&b"v"[..], None)));
        assert_eq!(visible(ValueKind::Delete, b"", 5), None);
        // Invariant 2: a truncated prefix reads as expired.
        assert_eq!(visible(ValueKind::PutWithExpiry, b"1234", 0), None);
    }

    #[test]
    fn times_convert_to_and_from_millis() {
        assert_eq!(to_millis(from_millis(123_456)), 123_456);
        assert_eq!(to_millis(UNIX_EPOCH - Duration::from_secs(1)), 0);
    }
}
