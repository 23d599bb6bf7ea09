//! The properties block: facts about a table recorded when it is built (key range, counts,
//! sequence range, raw sizes), read once at open and kept in memory.
//!
//! The byte layout is in docs/format.md, "Properties block"; [`PROPERTIES_FIXED_BYTES`] mirrors
//! the offset of its first length-prefixed key. Its `format_version` must equal the footer's.
//!
//! Thread-safety contract: plain immutable data once decoded.
//!
//! Invariants: decoding consumes the block exactly (trailing bytes are corruption); for a
//! non-empty table both keys are valid internal keys, `smallest_key <= largest_key`,
//! `delete_count <= entry_count` and `smallest_sequence <= largest_sequence`.

use crate::coding::{self, Reader};
use crate::key::{compare_internal_keys, parse_internal_key, SequenceNumber};
use std::cmp::Ordering;

/// Bytes of the fixed part of the properties block: `format_version u32` and seven u64
/// counters, i.e. the offset of the length-prefixed smallest key. On disk: never change.
pub const PROPERTIES_FIXED_BYTES: usize = 4 + 7 * 8;

/// Facts about one table.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TableProperties {
    /// Table format version.
    pub format_version: u32,
    /// Number of entries (puts and deletes).
    pub entry_count: u64,
    /// Number of delete entries (tombstones).
    pub delete_count: u64,
    /// Smallest sequence number of any entry (0 for an empty table).
    pub smallest_sequence: SequenceNumber,
    /// Largest sequence number of any entry (0 for an empty table).
    pub largest_sequence: SequenceNumber,
    /// Sum of the internal key lengths (trailers included).
    pub raw_key_bytes: u64,
    /// Sum of the value lengths.
    pub raw_value_bytes: u64,
    /// Number of data blocks.
    pub data_block_count: u64,
    /// The smallest internal key (empty for an empty table).
    pub smallest_key: Vec<u8>,
    /// The largest internal key (empty for an empty table).
    pub largest_key: Vec<u8>,
}

impl TableProperties {
    /// The encoded properties block.
    pub fn encode(&self) -> Vec<u8> {
        let mut buffer = Vec::with_capacity(
            PROPERTIES_FIXED_BYTES + 8 + self.smallest_key.len() + self.largest_key.len(),
        );
        coding::put_u32(&mut buffer, self.format_version);
        for value in [
            self.entry_count,
            self.delete_count,
            self.smallest_sequence,
            self.largest_sequence,
            self.raw_key_bytes,
            self.raw_value_bytes,
            self.data_block_count,
        ] {
            coding::put_u64(&mut buffer, value);
        }
        debug_assert_eq!(buffer.len(), PROPERTIES_FIXED_BYTES);
        coding::put_length_prefixed(&mut buffer, &self.smallest_key);
        coding::put_length_prefixed(&mut buffer, &self.largest_key);
        buffer
    }

    /// Decodes and sanity-checks a properties block; `Err((offset in block, reason))`.
    pub fn decode(bytes: &[u8]) -> std::result::Result<TableProperties, (usize, String)> {
        let mut reader = Reader::new(bytes);
        let truncated =
            |reader: &Reader<'_>| (reader.position(), "properties block truncated".to_string());
        let format_version = reader.u32().ok_or_else(|| truncated(&reader))?;
        let mut numbers = [0u64; 7];
        for number in &mut numbers {
            *number = reader.u64().ok_or_else(|| truncated(&reader))?;
        }
        let smallest_key = reader.length_prefixed().ok_or_else(|| truncated(&reader))?;
        let largest_key = reader.length_prefixed().ok_or_else(|| truncated(&reader))?;
        if !reader.is_empty() {
            return Err((
                reader.position(),
                "trailing bytes after properties".to_string(),
            ));
        }
        let [entry_count, delete_count, smallest_sequence, largest_sequence, raw_key_bytes, raw_value_bytes, data_block_count] =
            numbers;
        let properties = TableProperties {
            format_version,
            entry_count,
            delete_count,
            smallest_sequence,
            largest_sequence,
            raw_key_bytes,
            raw_value_bytes,
            data_block_count,
            smallest_key: smallest_key.to_vec(),
            largest_key: largest_key.to_vec(),
        };
        properties.check().map_err(|reason| (0, reason))?;
        Ok(properties)
    }

    /// Checks the invariants listed in the module doc.
    fn check(&self) -> std::result::Result<(), String> {
        if self.delete_count > self.entry_count {
            return Err(format!(
                "delete count {} exceeds entry count {}",
                self.delete_count, self.entry_count
            ));
        }
        if self.entry_count == 0 {
            if !self.smallest_key.is_empty()
                || !self.largest_key.is_empty()
                || self.data_block_count != 0
            {
                return Err("empty table with a key range or data blocks".to_string());
            }
            return Ok(());
        }
        if self.data_block_count == 0 {
            return Err("non-empty table without data blocks".to_string());
        }
        if self.smallest_sequence > self.largest_sequence {
            return Err("smallest sequence exceeds largest sequence".to_string());
        }
        if parse_internal_key(&self.smallest_key).is_none()
            || parse_internal_key(&self.largest_key).is_none()
        {
            return Err("smallest or largest key is not a valid internal key".to_string());
        }
        if compare_internal_keys(&self.smallest_key, &self.largest_key) == Ordering::Greater {
            return Err("smallest key sorts after largest key".to_string());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, ValueKind};

    #[test]
    fn round_trip_and_rejects_damage() {
        let properties = TableProperties {
            format_version: 1,
            entry_count: 10,
            delete_count: 2,
            smallest_sequence: 5,
            largest_sequence: 90,
            raw_key_bytes: 200,
            raw_value_bytes: 3000,
            data_block_count: 2,
            smallest_key: internal_key(b"apple", 90, ValueKind::Put),
            largest_key: internal_key(b"pear", 5, ValueKind::Delete),
        };
        let bytes = properties.encode();
        assert_eq!(TableProperties::decode(&bytes).unwrap(), properties);
        for length in 0..bytes.len() {
            assert!(TableProperties::decode(&bytes[..length]).is_err());
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(TableProperties::decode(&longer).is_err());
        let empty = TableProperties {
            format_version: 1,
            ..TableProperties::default()
        };
        assert_eq!(TableProperties::decode(&empty.encode()).unwrap(), empty);
        let swapped = TableProperties {
            smallest_key: properties.largest_key.clone(),
            largest_key: properties.smallest_key.clone(),
            ..properties
        };
        assert!(TableProperties::decode(&swapped.encode()).is_err());
    }
}
