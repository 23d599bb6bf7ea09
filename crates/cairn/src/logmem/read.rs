//! Reading objects at locations: decoding the header, comparing or copying the key and value
//! (across block boundaries), and prefetching.
//!
//! Thread-safety contract: reads never write shared memory; the caller is pinned on its
//! epoch table from before it loaded the location until it is done with the bytes (log
//! invariant 5), so the segment cannot be reused meanwhile.
//!
//! Invariants:
//! 1. A location maps, through the block owner table, to the segment and offset it was created
//!    for (log invariant 6); a read past the segment's `used_bytes` returns `None`.

use super::object::{self, Header, MAX_HEADER_BYTES};
use super::{LogMemory, Segment};

impl LogMemory {
    /// Visits the bytes `offset..offset + length` of a segment as block-sized slices.
    pub(super) fn visit(
        &self,
        segment_index: u32,
        segment: &Segment,
        mut offset: u64,
        mut length: usize,
        mut visitor: impl FnMut(&[u8]) -> bool,
    ) -> bool {
        while length > 0 {
            let Some((pointer, room)) = self.chunk(segment_index, segment, offset) else {
                return false;
            };
            let count = room.min(length);
            // SAFETY: `count` bytes from `pointer` lie in one block of the arena (see `chunk`).
            // The caller reads only bytes of a published object (or of a sealed segment), which
            // are immutable until the segment is freed, and the caller is pinned (or owns the
            // segment), so the block is not reused while the slice lives.
            let bytes = unsafe { std::slice::from_raw_parts(pointer.cast_const(), count) };
            if !visitor(bytes) {
                return false;
            }
            offset += count as u64;
            length -= count;
        }
        true
    }

    /// The object at `location`: its segment, offset and header.
    pub(super) fn object_at(&self, location: u64) -> Option<(u32, &Segment, u64, Header)> {
        let (segment_index, offset) = self.split_location(location)?;
        let segment = self.segment(segment_index)?;
        // Fast path: the header (at most MAX_HEADER_BYTES) lies inside the first block.
        if let Some((pointer, room)) = self.chunk(segment_index, segment, offset) {
            if room >= MAX_HEADER_BYTES {
                let header = object::decode_header(|position| {
                    // SAFETY: `position < room`, so the byte lies in the same block as `pointer`
                    // (see `chunk`). The decoder asks only for header bytes of a published
                    // object, which are immutable while the caller is pinned; bytes past the
                    // header (possibly an object being written) are never read.
                    (position < room).then(|| unsafe { pointer.add(position).read() })
                })?;
                return Some((segment_index, segment, offset, header));
            }
        }
        let header = object::decode_header(|position| {
            let mut byte = None;
            self.visit(
                segment_index,
                segment,
                offset + position as u64,
                1,
                |bytes| {
                    byte = bytes.first().copied();
                    true
                },
            );
            byte
        })?;
        Some((segment_index, segment, offset, header))
    }

    /// Reads the header of the object at `location`.
    pub fn header(&self, location: u64) -> Option<Header> {
        self.object_at(location).map(|(_, _, _, header)| header)
    }

    /// Hints the processor to start loading the object at `location` (for walks over many
    /// locations, such as an index resize). Never faults, whatever the location.
    pub fn prefetch(&self, location: u64) {
        let Some((segment_index, offset)) = self.split_location(location) else {
            return;
        };
        let Some(segment) = self.segment(segment_index) else {
            return;
        };
        if let Some((pointer, _)) = self.chunk(segment_index, segment, offset) {
            crate::sync::prefetch(pointer.cast_const());
        }
    }

    /// True when the object at `location` has exactly this key.
    pub fn key_equals(&self, location: u64, key: &[u8]) -> bool {
        let Some((segment_index, segment, offset, header)) = self.object_at(location) else {
            return false;
        };
        if header.key_len != key.len() {
            return false;
        }
        let mut remaining = key;
        self.visit(
            segment_index,
            segment,
            offset + header.header_len as u64,
            key.len(),
            |bytes| match remaining.split_at_checked(bytes.len()) {
                Some((expected, rest)) if expected == bytes => {
                    remaining = rest;
                    true
                }
                _ => false,
            },
        )
    }

    /// Runs `f` on the key of the object at `location`: in place when the key lies in one block,
    /// else copied into `scratch`. `None` if there is no object there.
    pub fn with_key<R>(
        &self,
        location: u64,
        scratch: &mut Vec<u8>,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Option<R> {
        let (segment_index, segment, offset, header) = self.object_at(location)?;
        let start = offset + header.header_len as u64;
        if let Some((pointer, room)) = self.chunk(segment_index, segment, start) {
            if room >= header.key_len {
                // SAFETY: the key's `key_len` bytes lie in one block of the arena (see `chunk`);
                // they belong to a published object, immutable while the caller is pinned.
                let key =
                    unsafe { std::slice::from_raw_parts(pointer.cast_const(), header.key_len) };
                return Some(f(key));
            }
        }
        scratch.clear();
        scratch.reserve(header.key_len);
        self.visit(segment_index, segment, start, header.key_len, |bytes| {
            scratch.extend_from_slice(bytes);
            true
        })
        .then(|| f(scratch))
    }

    /// Appends the key of the object at `location` to `out`.
    pub fn read_key(&self, location: u64, out: &mut Vec<u8>) -> Option<Header> {
        let (segment_index, segment, offset, header) = self.object_at(location)?;
        out.reserve(header.key_len);
        self.visit(
            segment_index,
            segment,
            offset + header.header_len as u64,
            header.key_len,
            |bytes| {
                out.extend_from_slice(bytes);
                true
            },
        )
        .then_some(header)
    }

    /// Appends the value of the object at `location` to `out`.
    pub fn read_value(&self, location: u64, out: &mut Vec<u8>) -> Option<Header> {
        self.read_value_head(location, usize::MAX, out)
    }

    /// Appends at most the first `bytes_max` bytes of the value of the object at `location`
    /// to `out` (the rest is not read).
    pub fn read_value_head(
        &self,
        location: u64,
        bytes_max: usize,
        out: &mut Vec<u8>,
    ) -> Option<Header> {
        let (segment_index, segment, offset, header) = self.object_at(location)?;
        let length = header.value_len.min(bytes_max);
        out.reserve(length);
        self.visit(
            segment_index,
            segment,
            offset + (header.header_len + header.key_len) as u64,
            length,
            |bytes| {
                out.extend_from_slice(bytes);
                true
            },
        )
        .then_some(header)
    }
}
