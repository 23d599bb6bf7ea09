//! How entries are packed into a bucket: the [`Layout`] chosen per index from the location
//! width, and the bit-level encoding of one entry (`tag | location`).
//!
//! Thread-safety contract: a `Layout` is an immutable `Copy` value; its functions are pure.
//!
//! Invariants:
//! 1. `entries × bits <= 481` (the bits after the version) and `bits = tag_bits +
//!    location_bits` with `MIN_TAG_BITS <= tag_bits <= 16`.
//! 2. `make_entry` never returns 0: the tag it stores is non-zero (hash-index invariant 1).

use super::{LAYOUTS, MAX_LOCATION_BITS, MAX_TAG_BITS, MIN_TAG_BITS, VERSION_BITS, WORDS};
use crate::error::{Error, Result};

/// How entries are packed into a bucket: chosen once per index from the location width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub(super) entries: usize,
    pub(super) entry_bits: u32,
    pub(super) tag_bits: u32,
    /// `entry_bits - tag_bits`: at least the location width asked for.
    pub(super) location_field_bits: u32,
}

pub(super) fn mask(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1 << width) - 1
    }
}

impl Layout {
    /// The densest layout for locations below `2^location_bits` that keeps at least
    /// [`MIN_TAG_BITS`] of tag; an error when locations are wider than [`MAX_LOCATION_BITS`].
    pub fn for_location_bits(location_bits: u32) -> Result<Layout> {
        if location_bits > MAX_LOCATION_BITS {
            return Err(Error::InvalidArgument(format!(
                "hash index locations of {location_bits} bits exceed the limit of {MAX_LOCATION_BITS}"
            )));
        }
        LAYOUTS
            .iter()
            .find_map(|&(entries, entry_bits)| {
                let tag_bits = entry_bits.checked_sub(location_bits)?.min(MAX_TAG_BITS);
                (tag_bits >= MIN_TAG_BITS).then_some(Layout {
                    entries,
                    entry_bits,
                    tag_bits,
                    location_field_bits: entry_bits - tag_bits,
                })
            })
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "no hash index layout holds {location_bits}-bit locations"
                ))
            })
    }

    #[cfg(test)]
    /// Entries per bucket.
    pub fn entries_per_bucket(&self) -> usize {
        self.entries
    }

    #[cfg(test)]
    /// Bits of each entry's tag.
    pub fn tag_bits(&self) -> u32 {
        self.tag_bits
    }

    /// Largest location an entry can hold.
    pub fn max_location(&self) -> u64 {
        mask(self.location_field_bits)
    }

    pub(super) fn tag_of(&self, hash: u64) -> u64 {
        let tag = hash >> (64 - self.tag_bits);
        if tag == 0 {
            1
        } else {
            tag
        }
    }

    pub(super) fn make_entry(&self, hash: u64, location: u64) -> u64 {
        debug_assert!(
            location <= self.max_location(),
            "location {location} wider than the layout"
        );
        (self.tag_of(hash) << self.location_field_bits) | (location & self.max_location())
    }

    pub(super) fn entry_tag(&self, entry: u64) -> u64 {
        entry >> self.location_field_bits
    }

    pub(super) fn entry_location(&self, entry: u64) -> u64 {
        entry & self.max_location()
    }

    /// First bit of entry `index` in the bucket's 512 bits.
    pub(super) fn bit_offset(&self, index: usize) -> usize {
        VERSION_BITS as usize + index * self.entry_bits as usize
    }

    /// Entry `index` of a bucket copied into `words`.
    pub(super) fn entry_in(&self, words: &[u64; WORDS], index: usize) -> u64 {
        let bit = self.bit_offset(index);
        let (word, shift) = (bit / 64, u32::try_from(bit % 64).unwrap_or_default());
        debug_assert!(index < self.entries && bit + self.entry_bits as usize <= 512);
        let low = words.get(word).copied().unwrap_or(0) >> shift;
        let value = if shift + self.entry_bits > 64 {
            low | (words.get(word + 1).copied().unwrap_or(0) << (64 - shift))
        } else {
            low
        };
        value & mask(self.entry_bits)
    }

    /// The words of a bucket holding `entries` (at most `self.entries`) with version 0.
    pub(super) fn pack(&self, entries: &[u64]) -> [u64; WORDS] {
        let mut words = [0u64; WORDS];
        for (index, &entry) in entries.iter().enumerate().take(self.entries) {
            let bit = self.bit_offset(index);
            let (word, shift) = (bit / 64, u32::try_from(bit % 64).unwrap_or_default());
            if let Some(slot) = words.get_mut(word) {
                *slot |= entry << shift;
            }
            if shift + self.entry_bits > 64 {
                if let Some(slot) = words.get_mut(word + 1) {
                    *slot |= entry >> (64 - shift);
                }
            }
        }
        words
    }

    /// Slots a table of `buckets` buckets has.
    pub(super) fn slots(&self, buckets: usize) -> usize {
        buckets.saturating_mul(self.entries)
    }

    /// Buckets that hold `entries` entries at load factor `load`.
    // A float-to-integer `as` saturates, so an absurd `load` yields a huge or tiny count, never
    // a wrapped one; the count is a sizing estimate either way.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    pub(super) fn buckets_for(&self, entries: usize, load: f64) -> usize {
        ((entries as f64 / (load * self.entries as f64)).ceil() as usize).max(2)
    }
}
