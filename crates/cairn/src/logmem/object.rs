//! Object encoding in the log: `varint(key_len) varint(value_len) key value`.
//!
//! The header is two LEB128 varints (1 byte each for lengths below 128), so a small object pays
//! 2–4 bytes of header. Objects are packed back to back with no alignment or padding and may
//! straddle block boundaries inside a segment; they never straddle segments.

/// Most bytes a header can take (two 32-bit varints of at most 5 bytes each).
pub const MAX_HEADER_BYTES: usize = 10;

/// Bytes of `value` as an unsigned LEB128 varint.
pub fn varint_len(mut value: u64) -> usize {
    let mut bytes = 1;
    while value >= 0x80 {
        value >>= 7;
        bytes += 1;
    }
    bytes
}

/// Header bytes for the given lengths.
pub fn header_len(key_len: usize, value_len: usize) -> usize {
    varint_len(key_len as u64) + varint_len(value_len as u64)
}

/// Total bytes the object occupies in the log.
pub fn object_len(key_len: usize, value_len: usize) -> u64 {
    (header_len(key_len, value_len) + key_len + value_len) as u64
}

/// Encodes the header into `out`, returning the used prefix length.
pub fn encode_header(key_len: usize, value_len: usize, out: &mut [u8; MAX_HEADER_BYTES]) -> usize {
    let mut position = 0;
    for mut value in [key_len as u64, value_len as u64] {
        loop {
            let byte = (value & 0x7f) as u8;
            value >>= 7;
            if let Some(slot) = out.get_mut(position) {
                *slot = if value == 0 { byte } else { byte | 0x80 };
            }
            position += 1;
            if value == 0 {
                break;
            }
        }
    }
    position.min(MAX_HEADER_BYTES)
}

/// Decoded header: lengths and the header's own size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
// `header_len` says whose length it is: the header's own, next to the key's and value's.
#[allow(clippy::struct_field_names)]
pub struct Header {
    /// Key bytes.
    pub key_len: usize,
    /// Value bytes.
    pub value_len: usize,
    /// Bytes of the header itself.
    pub header_len: usize,
}

impl Header {
    /// Bytes of the whole object.
    pub fn object_len(&self) -> u64 {
        (self.header_len + self.key_len + self.value_len) as u64
    }
}

/// Decodes a header by pulling bytes one at a time from `next_byte` (which returns `None` past
/// the readable area). Reading byte by byte never touches bytes past the header, which may belong
/// to an object another thread is still writing.
pub fn decode_header(mut next_byte: impl FnMut(usize) -> Option<u8>) -> Option<Header> {
    let mut position = 0;
    let mut lengths = [0usize; 2];
    for length in &mut lengths {
        let mut value: u64 = 0;
        let mut shift = 0;
        loop {
            let byte = next_byte(position)?;
            position += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 28 {
                return None;
            }
        }
        *length = usize::try_from(value).ok()?;
    }
    let [key_len, value_len] = lengths;
    Some(Header {
        key_len,
        value_len,
        header_len: position,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip() {
        for (key_len, value_len) in [
            (0, 0),
            (8, 70),
            (127, 128),
            (65_535, 600 * 1024),
            (1, 1 << 27),
        ] {
            let mut buffer = [0u8; MAX_HEADER_BYTES];
            let used = encode_header(key_len, value_len, &mut buffer);
            assert_eq!(used, header_len(key_len, value_len));
            let header = decode_header(|position| buffer.get(position).copied()).unwrap();
            assert_eq!(
                header,
                Header {
                    key_len,
                    value_len,
                    header_len: used
                }
            );
        }
        assert_eq!(header_len(8, 70), 2);
    }
}
