//! Fixed-width little-endian integer coding with bounds-checked reads.
//!
//! Every on-disk integer in cairn is fixed-width little-endian (docs/format.md). Readers return
//! `None` instead of panicking when the input is short, so decoders of untrusted bytes turn
//! truncation into a corruption error.

/// Appends a `u32`.
#[inline]
pub fn put_u32(buffer: &mut Vec<u8>, value: u32) {
    buffer.extend_from_slice(&value.to_le_bytes());
}

/// Appends a `u64`.
#[inline]
pub fn put_u64(buffer: &mut Vec<u8>, value: u64) {
    buffer.extend_from_slice(&value.to_le_bytes());
}

/// Reads a `u32` at `offset`.
#[inline]
pub fn get_u32(bytes: &[u8], offset: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        bytes.get(offset..offset.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// Reads a `u64` at `offset`.
#[inline]
pub fn get_u64(bytes: &[u8], offset: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        bytes.get(offset..offset.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// A cursor over untrusted bytes: every read is bounds-checked.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, position: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.position
    }

    /// True when every byte has been consumed.
    pub fn is_empty(&self) -> bool {
        self.position >= self.bytes.len()
    }

    /// Reads a `u8`.
    pub fn u8(&mut self) -> Option<u8> {
        let value = *self.bytes.get(self.position)?;
        self.position += 1;
        Some(value)
    }

    /// Reads a `u32`.
    pub fn u32(&mut self) -> Option<u32> {
        let value = get_u32(self.bytes, self.position)?;
        self.position += 4;
        Some(value)
    }

    /// Reads a `u64`.
    pub fn u64(&mut self) -> Option<u64> {
        let value = get_u64(self.bytes, self.position)?;
        self.position += 8;
        Some(value)
    }

    /// Reads `length` raw bytes.
    pub fn bytes(&mut self, length: usize) -> Option<&'a [u8]> {
        let end = self.position.checked_add(length)?;
        let slice = self.bytes.get(self.position..end)?;
        self.position = end;
        Some(slice)
    }

    /// Reads a `u32` length prefix and that many bytes.
    pub fn length_prefixed(&mut self) -> Option<&'a [u8]> {
        let length = usize::try_from(self.u32()?).ok()?;
        self.bytes(length)
    }
}

/// Appends a `u32` length prefix and `data`.
// Every length-prefixed field is a key, a value or a file name, all bounded far below 4 GiB
// when they were accepted (the debug assertion re-checks it in tests).
#[allow(clippy::cast_possible_truncation)]
#[inline]
pub fn put_length_prefixed(buffer: &mut Vec<u8>, data: &[u8]) {
    debug_assert!(u32::try_from(data.len()).is_ok());
    put_u32(buffer, data.len() as u32);
    buffer.extend_from_slice(data);
}

/// crc32c of `data`, masked as `LevelDB` does so that a checksum stored inside checksummed data
/// does not checksum to a fixed point.
#[inline]
pub fn masked_crc(data: &[u8]) -> u32 {
    let crc = crc32c::crc32c(data);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// Masked crc32c over two slices, as if concatenated.
#[inline]
pub fn masked_crc2(first: &[u8], second: &[u8]) -> u32 {
    let crc = crc32c::crc32c_append(crc32c::crc32c(first), second);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_never_reads_past_end() {
        let mut buffer = Vec::new();
        put_u32(&mut buffer, 7);
        put_length_prefixed(&mut buffer, b"abc");
        let mut reader = Reader::new(&buffer);
        assert_eq!(reader.u32(), Some(7));
        assert_eq!(reader.length_prefixed(), Some(&b"abc"[..]));
        assert!(reader.is_empty());
        assert_eq!(reader.u8(), None);
        let truncated = &buffer[..buffer.len() - 1];
        let mut reader = Reader::new(truncated);
        reader.u32();
        assert_eq!(reader.length_prefixed(), None);
        assert_eq!(get_u64(&buffer, usize::MAX - 2), None);
    }
}
